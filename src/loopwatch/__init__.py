"""loopwatch: catch LLM agents stuck in loops and get them out.

Data flows one way: events -> fingerprints -> detectors -> policy (ladders, limits, presets) -> guard ->
stores and sinks. The detection core (:mod:`loopwatch.core`: the events, the rules, the policy and the engine) is
pure: no I/O, no clock, and imports nothing else of loopwatch (its error classes, shown in :mod:`loopwatch.errors`,
are its own).
"""

from __future__ import annotations

from . import _native

_native.install()  # the per-event path's compiled modules, or their source (see loopwatch._native)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names below, as mypy and editors see them; at run time each is imported on first use
    from typing import Any

    from ._guard import AsyncGuard, Guard
    from ._presets import PRESETS, preset
    from .core._engine import Engine
    from .core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, event_to_json, parse_event
    from .core._judge import JudgeAnswer, JudgeRequest, LoopJudge
    from .core._limits import Limits, max_consecutive_failures, max_cost, max_iterations, max_runtime, max_tokens
    from .core._messages import Messages
    from .core._policy import Ladder, Policy, Rung, ToolSettings
    from .core._verdict import LOOP_DETECTED, Verdict
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
    "core._engine": ("Engine",),
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
    "core._events": (
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
    "_guard": ("AsyncGuard", "Guard"),
    "core._judge": ("JudgeAnswer", "JudgeRequest", "LoopJudge"),
    "core._limits": ("Limits", "max_consecutive_failures", "max_cost", "max_iterations", "max_runtime", "max_tokens"),
    "core._messages": ("Messages",),
    "core._policy": ("Ladder", "Policy", "Rung", "ToolSettings"),
    "_presets": ("PRESETS", "preset"),
    "core._verdict": ("LOOP_DETECTED", "Verdict"),
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
