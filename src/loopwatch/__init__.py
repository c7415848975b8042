"""loopwatch: catch LLM agents stuck in loops and get them out.

Data flows one way: events -> fingerprints -> detectors -> policy (ladders, limits, presets) -> guard ->
stores and sinks. The detection core (:mod:`loopwatch.engine` and below) is pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from .limits import Limits, max_consecutive_failures, max_cost, max_iterations, max_runtime, max_tokens
from .messages import Messages
from .policy import Ladder, Policy, Rung, ToolSettings
from .presets import PRESETS, preset
from .verdict import LOOP_DETECTED, Verdict

if TYPE_CHECKING:
    from .judge import JudgeAnswer, JudgeRequest, LoopJudge

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


_LAZY = frozenset({"JudgeAnswer", "JudgeRequest", "LoopJudge"})


def __getattr__(name: str) -> Any:
    """The LLM judge's names, imported on first use (a hook process never needs them)."""
    if name in _LAZY:
        from . import judge

        return getattr(judge, name)
    raise AttributeError(f"module 'loopwatch' has no attribute {name!r}")
