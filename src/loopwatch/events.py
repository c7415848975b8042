"""Typed, immutable events: what an agent does, as loopwatch sees it (FORMAT.md section 1)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Union

from .errors import EventError

Role = Literal["assistant", "user", "system"]
ROLES: Final = ("assistant", "user", "system")
_MAX_INT: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The agent asks to run ``tool`` with ``args``; ``id`` is never part of a fingerprint."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    thought: str | None = None
    ts: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned; ``tool`` may be omitted when ``id`` matches an earlier call."""

    output: str = ""
    tool: str | None = None
    is_error: bool | None = None
    exit_code: int | None = None
    id: str | None = None
    ts: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """A whole message from the assistant, the user or the system."""

    role: Role
    text: str
    ts: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A streamed chunk of the assistant message being generated."""

    text: str
    ts: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Spend attributed to the session (budget limits)."""

    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ts: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class Reset:
    """Clears the session's loop state; limits keep counting."""

    ts: float | None = None
    worker: str | None = None


Event = Union[ToolCall, ToolResult, Message, TextDelta, Usage, Reset]  # noqa: UP007 (a runtime alias on 3.10)

EVENT_TYPES: Final[dict[str, type]] = {
    "tool_call": ToolCall,
    "tool_result": ToolResult,
    "message": Message,
    "text_delta": TextDelta,
    "usage": Usage,
    "reset": Reset,
}
TYPE_NAMES: Final[dict[type, str]] = {v: k for k, v in EVENT_TYPES.items()}


def event_type(event: Event) -> str:
    """The FORMAT.md name of an event's type (``tool_call``, ``message``, ...)."""
    return TYPE_NAMES[type(event)]


def _opt_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise EventError(f"expected a string, got {type(value).__name__}", field=key)


def _req_str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if value is None:
        raise EventError("required field is missing", field=key)
    if not isinstance(value, str):
        raise EventError(f"expected a string, got {type(value).__name__}", field=key)
    return value


def _opt_number(obj: Mapping[str, Any], key: str, *, non_negative: bool = True) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EventError(f"expected a number, got {type(value).__name__}", field=key)
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float (JSON allows any number of digits)
        raise EventError("number out of range", field=key) from None
    if not math.isfinite(number):
        raise EventError(f"expected a finite number, got {number!r}", field=key)
    if non_negative and number < 0:
        raise EventError(f"expected a non-negative number, got {value!r}", field=key)
    return number


def _opt_int(obj: Mapping[str, Any], key: str, *, non_negative: bool = True) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise EventError(f"expected an integer, got {type(value).__name__}", field=key)
    if abs(value) > _MAX_INT:
        raise EventError("integer out of range", field=key)
    if non_negative and value < 0:
        raise EventError(f"expected a non-negative integer, got {value!r}", field=key)
    return value


def _opt_bool(obj: Mapping[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise EventError(f"expected true, false or null, got {type(value).__name__}", field=key)


def _common(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"ts": _opt_number(obj, "ts"), "worker": _opt_str(obj, "worker")}


def _tool_call(obj: Mapping[str, Any]) -> ToolCall:
    args = obj.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, Mapping):
        raise EventError(f"expected a JSON object, got {type(args).__name__}", field="args")
    return ToolCall(
        tool=_req_str(obj, "tool"),
        args=args,
        id=_opt_str(obj, "id"),
        thought=_opt_str(obj, "thought"),
        **_common(obj),
    )


def _tool_result(obj: Mapping[str, Any]) -> ToolResult:
    output = obj.get("output")
    if output is None:
        output = ""
    elif not isinstance(output, str):
        raise EventError(f"expected a string, got {type(output).__name__}", field="output")
    tool, call_id = _opt_str(obj, "tool"), _opt_str(obj, "id")
    if tool is None and call_id is None:
        raise EventError("a tool_result needs `tool` or an `id` matching an earlier call", field="tool")
    return ToolResult(
        output=output,
        tool=tool,
        is_error=_opt_bool(obj, "is_error"),
        exit_code=_opt_int(obj, "exit_code", non_negative=False),
        id=call_id,
        **_common(obj),
    )


def _message(obj: Mapping[str, Any]) -> Message:
    role = _req_str(obj, "role")
    if role not in ROLES:
        raise EventError(f"expected one of {', '.join(ROLES)}, got {role!r}", field="role")
    text = obj.get("text")
    if text is None:
        text = ""
    elif not isinstance(text, str):
        raise EventError(f"expected a string, got {type(text).__name__}", field="text")
    return Message(role=role, text=text, **_common(obj))  # type: ignore[arg-type]


def _text_delta(obj: Mapping[str, Any]) -> TextDelta:
    return TextDelta(text=_req_str(obj, "text"), **_common(obj))


def _usage(obj: Mapping[str, Any]) -> Usage:
    return Usage(
        cost=_opt_number(obj, "cost"),
        input_tokens=_opt_int(obj, "input_tokens"),
        output_tokens=_opt_int(obj, "output_tokens"),
        **_common(obj),
    )


def _reset(obj: Mapping[str, Any]) -> Reset:
    return Reset(**_common(obj))


_PARSERS: Final[dict[str, Callable[[Mapping[str, Any]], Event]]] = {
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "message": _message,
    "text_delta": _text_delta,
    "usage": _usage,
    "reset": _reset,
}


def parse_event(obj: object) -> Event:
    """Build a typed event from its JSON form; raises :class:`EventError` naming the bad field."""
    if not isinstance(obj, Mapping):
        raise EventError(f"an event is a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind is None:
        raise EventError("required field is missing", field="type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise EventError(f"unknown event type {kind!r} (expected one of {', '.join(_PARSERS)})", field="type")
    return parser(obj)


def session_of(obj: Mapping[str, Any]) -> str:
    """The session an event's JSON form belongs to (``"default"`` when absent)."""
    session = obj.get("session", "default")
    if session is None:
        return "default"
    if not isinstance(session, str):
        raise EventError(f"expected a string, got {type(session).__name__}", field="session")
    return session


def event_to_json(event: Event, session: str | None = None) -> dict[str, Any]:
    """The JSON form of an event (the inverse of :func:`parse_event`), omitting empty fields."""
    out: dict[str, Any] = {"type": event_type(event)}
    if session is not None:
        out["session"] = session
    for name in event.__dataclass_fields__:
        value = getattr(event, name)
        if value is not None:
            out[name] = dict(value) if name == "args" else value
    return out
