"""The detection core: events, their features, the rules, the policy and the engine.

Data flows one way through it: an event (:class:`ToolCall`, :class:`ToolResult`, :class:`Message`...) becomes a
step with its features computed once; the rules (:mod:`loopwatch.core.detectors`) read the step and their own
state and report findings; the policy's ladders turn a finding's count into an action, the limits into a stop;
the :class:`Engine` returns the :class:`Verdict` and its audit records. The core is pure: no I/O, no clock, no
thread, and it imports nothing else of loopwatch (its error classes are its own: :mod:`loopwatch.errors`, their
public home, draws the tree). The guard, the stores, the sinks, the trace formats, the adapters, the service and the
command line are built on it; none of them is imported here (a test checks the arrows).

The names below are the core's public surface; its modules (``loopwatch.core._name``) are the implementation.
``import loopwatch.core`` loads none of them: a name's module is imported on first use.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names below, as mypy and editors see them; at run time each is imported on first use
    from typing import Any

    from ._chanting import ChantHit, ChantTracker
    from ._engine import Engine, Evaluation
    from ._events import (
        EVENT_TYPES,
        Event,
        Message,
        Reset,
        Role,
        TextDelta,
        ToolCall,
        ToolResult,
        Usage,
        event_to_json,
        parse_event,
    )
    from ._judge import JudgeAnswer, JudgeRequest, LoopJudge
    from ._ladder import Ladder, Rung
    from ._limits import Limits, max_consecutive_failures, max_cost, max_iterations, max_runtime, max_tokens
    from ._messages import Messages
    from ._patterns import REGISTRY, Pattern, Registry
    from ._policy import Decision, Policy, Retired, ToolSettings
    from ._verdict import ACTIONS, LOOP_DETECTED, Action, Verdict

__all__ = [
    "ACTIONS",
    "EVENT_TYPES",
    "LOOP_DETECTED",
    "REGISTRY",
    "Action",
    "ChantHit",
    "ChantTracker",
    "Decision",
    "Engine",
    "Evaluation",
    "Event",
    "JudgeAnswer",
    "JudgeRequest",
    "Ladder",
    "Limits",
    "LoopJudge",
    "Message",
    "Messages",
    "Pattern",
    "Policy",
    "Registry",
    "Reset",
    "Retired",
    "Role",
    "Rung",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "ToolSettings",
    "Usage",
    "Verdict",
    "event_to_json",
    "max_consecutive_failures",
    "max_cost",
    "max_iterations",
    "max_runtime",
    "max_tokens",
    "parse_event",
]

_MODULES: dict[str, tuple[str, ...]] = {
    "_chanting": ("ChantHit", "ChantTracker"),
    "_engine": ("Engine", "Evaluation"),
    "_events": (
        "EVENT_TYPES",
        "Event",
        "Message",
        "Reset",
        "Role",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "Usage",
        "event_to_json",
        "parse_event",
    ),
    "_judge": ("JudgeAnswer", "JudgeRequest", "LoopJudge"),
    "_ladder": ("Ladder", "Rung"),
    "_limits": ("Limits", "max_consecutive_failures", "max_cost", "max_iterations", "max_runtime", "max_tokens"),
    "_messages": ("Messages",),
    "_patterns": ("REGISTRY", "Pattern", "Registry"),
    "_policy": ("Decision", "Policy", "Retired", "ToolSettings"),
    "_verdict": ("ACTIONS", "LOOP_DETECTED", "Action", "Verdict"),
}
_HOME: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwatch.core' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
