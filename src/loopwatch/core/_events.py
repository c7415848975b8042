"""Typed, immutable events: what an agent does, as loopwatch sees it (docs/formats.md, section 1).

The constructors are the edge between the agent's objects and the rules: whatever they are given, an event
holds plain, bounded values. Subclasses of ``str``, ``int``, ``float`` and of mappings become the plain
types (their own methods are never called); a ``datetime`` time stamp becomes seconds since the epoch; ids
and worker names that are not strings (a ``uuid.UUID``, an int) become their text; arguments are copied into
plain dicts and lists with at most :data:`MAX_ARG_TEXT` characters per string (:data:`MAX_ARGS_TEXT` in
all), :data:`MAX_ARG_NODES` values and :data:`MAX_ARG_DEPTH` levels (objects that are not JSON become a
short description, as in call fingerprints); a text longer than :data:`MAX_TEXT` (a message:
:data:`MAX_MESSAGE_TEXT`) keeps its head and its tail around a note of what was cut. Parts of the arguments
whose own methods raise when read are described instead (a whole mapping that cannot be read becomes
``{"<unreadable>": "<Type: Error>"}``): the agent goes on and the call is still judged. A value of the wrong
kind (a time stamp that is not a number, arguments that are not a mapping, an unknown role) is refused with
an :class:`~loopwatch.errors.EventError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Union

from ._errors import EventError
from ._event_values import (
    MAX_ARG_DEPTH,
    MAX_ARG_NODES,
    MAX_ARG_TEXT,
    MAX_ARGS_TEXT,
    MAX_INT,
    MAX_MESSAGE_TEXT,
    MAX_NAME,
    MAX_TEXT,
    ROLES,
    UNREADABLE,
    Role,
    common_fields,
    cut_text,
    describe,
    flag_of,
    integer_of,
    name_of,
    number_of,
    plain_args,
    plain_str,
    set_field,
    text_of,
)

__all__ = [
    "EVENT_TYPES",
    "MAX_ARGS_TEXT",
    "MAX_ARG_DEPTH",
    "MAX_ARG_NODES",
    "MAX_ARG_TEXT",
    "MAX_MESSAGE_TEXT",
    "MAX_NAME",
    "MAX_TEXT",
    "ROLES",
    "UNREADABLE",
    "Event",
    "Message",
    "Reset",
    "Role",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "Usage",
    "cut_text",
    "event_to_json",
    "event_type",
    "name_of",
    "parse_event",
    "plain_str",
    "session_of",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The agent asks to run ``tool`` with ``args``; ``id`` is never part of a fingerprint."""

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    thought: str | None = None
    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if type(self.tool) is not str or len(self.tool) > MAX_NAME:
            set_field(self, "tool", name_of(self.tool, "tool"))
        set_field(self, "args", plain_args(self.args))
        if self.id is not None:
            set_field(self, "id", name_of(self.id, "id"))
        if self.thought is not None:
            set_field(self, "thought", text_of(self.thought, "thought"))
        if self.ts is not None or self.worker is not None:
            common_fields(self)


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

    def __post_init__(self) -> None:
        if type(self.output) is not str or len(self.output) > MAX_TEXT:
            set_field(self, "output", text_of(self.output, "output", default=""))
        if self.tool is not None:
            set_field(self, "tool", name_of(self.tool, "tool"))
        if self.is_error is not None:
            set_field(self, "is_error", flag_of(self.is_error, "is_error"))
        if self.exit_code is not None:
            set_field(self, "exit_code", integer_of(self.exit_code, "exit_code", non_negative=False))
        if self.id is not None:
            set_field(self, "id", name_of(self.id, "id"))
        if self.ts is not None or self.worker is not None:
            common_fields(self)


@dataclass(frozen=True, slots=True)
class Message:
    """A whole message from the assistant, the user or the system."""

    role: Role
    text: str
    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        role = plain_str(self.role)
        if role not in ROLES:
            shown = role if role is not None else type(self.role).__name__
            raise EventError(f"expected one of {', '.join(ROLES)}, got {shown!r}", field="role")
        set_field(self, "role", role)
        if type(self.text) is not str or len(self.text) > MAX_MESSAGE_TEXT:
            set_field(self, "text", text_of(self.text, "text", default="", limit=MAX_MESSAGE_TEXT))
        if self.ts is not None or self.worker is not None:
            common_fields(self)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A streamed chunk of the assistant message being generated."""

    text: str
    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if type(self.text) is not str or len(self.text) > MAX_MESSAGE_TEXT:
            set_field(self, "text", text_of(self.text, "text", limit=MAX_MESSAGE_TEXT))
        if self.ts is not None or self.worker is not None:
            common_fields(self)


@dataclass(frozen=True, slots=True)
class Usage:
    """Spend attributed to the session (budget limits)."""

    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if self.cost is not None:
            set_field(self, "cost", number_of(self.cost, "cost"))
        if self.input_tokens is not None:
            set_field(self, "input_tokens", integer_of(self.input_tokens, "input_tokens", non_negative=True))
        if self.output_tokens is not None:
            set_field(self, "output_tokens", integer_of(self.output_tokens, "output_tokens", non_negative=True))
        if self.ts is not None or self.worker is not None:
            common_fields(self)


@dataclass(frozen=True, slots=True)
class Reset:
    """Clears the session's loop state; limits keep counting."""

    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if self.ts is not None or self.worker is not None:
            common_fields(self)


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
    """The name of an event's type in the event format (docs/formats.md) (``tool_call``, ``message``, ...)."""
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
    if abs(value) > MAX_INT:
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
    try:
        return _parse(obj)
    except EventError:
        raise
    except Exception as exc:  # a mapping whose own methods raise (an in-process object, not JSON)
        raise EventError(f"the event could not be read ({type(exc).__name__})") from None


def _parse(obj: Mapping[str, Any]) -> Event:
    kind = obj.get("type")
    if kind is None:
        raise EventError("required field is missing", field="type")
    name = plain_str(kind)
    parser = _PARSERS.get(name) if name is not None else None
    if parser is None:
        shown = name if name is not None else describe(kind)
        raise EventError(f"unknown event type {shown!r} (expected one of {', '.join(_PARSERS)})", field="type")
    return parser(obj)


def session_of(obj: Mapping[str, Any]) -> str:
    """The session an event's JSON form belongs to (``"default"`` when absent)."""
    try:
        session = obj.get("session", "default")
    except Exception as exc:
        raise EventError(f"the event could not be read ({type(exc).__name__})") from None
    if session is None:
        return "default"
    if not isinstance(session, str):
        raise EventError(f"expected a string, got {type(session).__name__}", field="session")
    return name_of(session, "session")


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
