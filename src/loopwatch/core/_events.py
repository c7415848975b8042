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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Union

from ._errors import EventError
from ._event_values import (
    MAX_ARG_DEPTH,
    MAX_ARG_NODES,
    MAX_ARG_TEXT,
    MAX_ARGS_TEXT,
    MAX_MESSAGE_TEXT,
    MAX_NAME,
    MAX_TEXT,
    ROLES,
    UNREADABLE,
    Role,
    call_fields,
    common_fields,
    common_json_fields,
    cut_text,
    describe,
    flag_of,
    integer_of,
    json_int,
    json_number,
    message_fields,
    name_of,
    number_of,
    plain_args,
    plain_str,
    required_str,
    result_fields,
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
        # a field is set again only when what it keeps differs from what it was given (a plain, short str is kept)
        tool, args, call_id, thought = self.tool, self.args, self.id, self.thought
        if type(tool) is not str or len(tool) > MAX_NAME:
            set_field(self, "tool", name_of(tool, "tool"))
        plain = plain_args(args)
        if plain is not args:
            set_field(self, "args", plain)
        if call_id is not None and (type(call_id) is not str or len(call_id) > MAX_NAME):
            set_field(self, "id", name_of(call_id, "id"))
        if thought is not None and (type(thought) is not str or len(thought) > MAX_TEXT):
            set_field(self, "thought", text_of(thought, "thought"))
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
        tool, is_error, exit_code, call_id = self.tool, self.is_error, self.exit_code, self.id
        if tool is not None and (type(tool) is not str or len(tool) > MAX_NAME):
            set_field(self, "tool", name_of(tool, "tool"))
        if is_error is not None and is_error is not True and is_error is not False:
            set_field(self, "is_error", flag_of(is_error, "is_error"))
        if exit_code is not None:
            set_field(self, "exit_code", integer_of(exit_code, "exit_code", non_negative=False))
        if call_id is not None and (type(call_id) is not str or len(call_id) > MAX_NAME):
            set_field(self, "id", name_of(call_id, "id"))
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
        if role is not self.role:
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


def _tool_call(obj: Mapping[str, Any]) -> ToolCall:
    return ToolCall(*call_fields(obj))


def _tool_result(obj: Mapping[str, Any]) -> ToolResult:
    return ToolResult(*result_fields(obj))


def _message(obj: Mapping[str, Any]) -> Message:
    return Message(*message_fields(obj))


def _text_delta(obj: Mapping[str, Any]) -> TextDelta:
    return TextDelta(required_str(obj, "text"), *common_json_fields(obj))


def _usage(obj: Mapping[str, Any]) -> Usage:
    cost, input_tokens = json_number(obj, "cost"), json_int(obj, "input_tokens")
    return Usage(cost, input_tokens, json_int(obj, "output_tokens"), *common_json_fields(obj))


def _reset(obj: Mapping[str, Any]) -> Reset:
    return Reset(*common_json_fields(obj))


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
    if type(obj) is not dict and not isinstance(obj, Mapping):  # a dict first: asking the Mapping ABC costs ~80 ns
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
