"""loopwatch: catch LLM agents stuck in loops and get them out.

Data flows one way: events -> fingerprints -> detectors -> policy (ladders, limits, presets) -> guard ->
stores and sinks. The detection core (:mod:`loopwatch.engine` and below) is pure: no I/O, no clock.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names below, as mypy and editors see them; at run time each is imported on first use
    from typing import Any

    from .engine import Engine
    from .errors import (
        ConfigError,
        EventError,
        InputError,
        LoopStopped,
        LoopwatchError,
        MissingExtraError,
        StateError,
        UnknownPresetError,
    )
    from .events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, event_to_json, parse_event
    from .guard import AsyncGuard, Guard
    from .judge import JudgeAnswer, JudgeRequest, LoopJudge
    from .limits import Limits, max_consecutive_failures, max_cost, max_iterations, max_runtime, max_tokens
    from .messages import Messages
    from .policy import Ladder, Policy, Rung, ToolSettings
    from .presets import PRESETS, preset
    from .verdict import LOOP_DETECTED, Verdict

__version__ = "0.1.0"

__all__ = [
    "LOOP_DETECTED",
    "PRESETS",
    "AsyncGuard",
    "ConfigError",
    "Engine",
    "Event",
    "EventError",
    "Guard",
    "InputError",
    "JudgeAnswer",
    "JudgeRequest",
    "Ladder",
    "Limits",
    "LoopJudge",
    "LoopStopped",
    "LoopwatchError",
    "Message",
    "Messages",
    "MissingExtraError",
    "Policy",
    "Reset",
    "Rung",
    "StateError",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "ToolSettings",
    "UnknownPresetError",
    "Usage",
    "Verdict",
    "__version__",
    "event_to_json",
    "max_consecutive_failures",
    "max_cost",
    "max_iterations",
    "max_runtime",
    "max_tokens",
    "parse_event",
    "preset",
]

_MODULES: dict[str, tuple[str, ...]] = {
    "engine": ("Engine",),
    "errors": (
        "ConfigError",
        "EventError",
        "InputError",
        "LoopStopped",
        "LoopwatchError",
        "MissingExtraError",
        "StateError",
        "UnknownPresetError",
    ),
    "events": (
        "Event",
        "Message",
        "Reset",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "Usage",
        "event_to_json",
        "parse_event",
    ),
    "guard": ("AsyncGuard", "Guard"),
    "judge": ("JudgeAnswer", "JudgeRequest", "LoopJudge"),
    "limits": ("Limits", "max_consecutive_failures", "max_cost", "max_iterations", "max_runtime", "max_tokens"),
    "messages": ("Messages",),
    "policy": ("Ladder", "Policy", "Rung", "ToolSettings"),
    "presets": ("PRESETS", "preset"),
    "verdict": ("LOOP_DETECTED", "Verdict"),
}
_HOME: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}
"""Where each public name lives. ``import loopwatch`` loads none of these modules: a name's module is imported on
first use (``loopwatch.Guard``, ``from loopwatch import Guard``), so a program that needs only the events, or a
hook process that needs only its own path, does not pay for the rest."""


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwatch' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
