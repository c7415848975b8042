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

import json
import math
import operator
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard, Union

from .canonical import MAX_DEPTH, MAX_NODES, MAX_STRING, digest, digest_bytes, fold_string
from .errors import EventError

if TYPE_CHECKING:
    from datetime import datetime

Role = Literal["assistant", "user", "system"]
ROLES: Final = ("assistant", "user", "system")
_MAX_INT: Final = 2**63 - 1

MAX_TEXT: Final = 65_536
"""Characters of a result's output or a call's reasoning an event keeps: a longer one keeps its first and last
halves of that around a line saying how many characters were cut."""
MAX_MESSAGE_TEXT: Final = 16_384
"""Characters of a message or a streamed chunk an event keeps, cut the same way (about 4,000 tokens: the
rules that read a reply line by line stay within a few tens of milliseconds whatever it holds; a chant
runs to the end of a reply, which is kept)."""
MAX_ARG_TEXT: Final = MAX_STRING
"""Characters of one string inside a call's arguments: a longer one keeps its head, its length, a digest of
its middle and its tail (as call fingerprints do)."""
MAX_ARGS_TEXT: Final = 262_144
"""Characters of all the strings of a call's arguments together: past it, a string keeps only its length and a
digest (the arguments' words stay bounded however many strings they hold)."""
MAX_ARG_NODES: Final = MAX_NODES
"""Values copied from a call's arguments; past it the rest is summarised."""
MAX_ARG_DEPTH: Final = MAX_DEPTH
"""Levels of nesting copied from a call's arguments; deeper values become ``"<deep>"``."""
MAX_NAME: Final = 1_024
"""Characters of a tool name, a call id, a worker or a session name: a longer one keeps its head and a
digest of the whole (so two long names stay apart)."""
_MAX_INT_BITS: Final = 13_000  # as call fingerprints: longer ints have no str() in Python


# -- the edge: plain, bounded values ----------------------------------------------------------------------


def cut_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` when it has at most ``limit`` characters, else its head and tail around a note of the cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def plain_str(value: object) -> str | None:
    """``value`` as a plain ``str`` (a subclass's own methods are not called), ``None`` when it is no string."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    return None


def _describe(value: object) -> str:
    """``<Type:repr>`` of an object that is not JSON (as call fingerprints write it); never raises."""
    try:
        text = repr(value)
        if type(text) is not str:
            text = f"<{type(value).__name__}>"
    except Exception:  # a broken __repr__ must not break the guard
        text = f"<{type(value).__name__}>"
    return f"<{type(value).__name__}:{fold_string(text, 200)}>"


def _text(value: object, name: str, *, default: str | None = None, limit: int = MAX_TEXT) -> str:
    text = plain_str(value)
    if text is None:
        if value is None and default is not None:
            return default
        raise EventError(f"expected a string, got {type(value).__name__}", field=name)
    return text if len(text) <= limit else cut_text(text, limit)


def _opt_text(value: object, name: str) -> str | None:
    return None if value is None else _text(value, name)


def name_of(value: object, name: str) -> str:
    """An id or a name as a plain, bounded ``str``: a string as it is, an int or a ``uuid.UUID`` as its text."""
    text = plain_str(value)
    if text is None:
        if isinstance(value, bool) or value is None:
            raise EventError(f"expected a string, got {type(value).__name__}", field=name)
        try:
            text = str(value)
            if type(text) is not str:
                raise TypeError("__str__ returned a non-string")
        except Exception as exc:
            shown = f"{type(value).__name__} ({type(exc).__name__})"
            raise EventError(f"expected a string, got {shown}", field=name) from None
    if len(text) > MAX_NAME:
        text = f"{text[: MAX_NAME - 20]}…#{digest(text)}"
    return text


def _opt_name(value: object, name: str) -> str | None:
    return None if value is None else name_of(value, name)


def _is_datetime(value: object) -> TypeGuard[datetime]:
    """Is ``value`` a ``datetime``? Asked without importing the module (a hook process never needs it): no
    ``datetime`` can exist before it is imported."""
    module = sys.modules.get("datetime")
    return module is not None and isinstance(value, module.datetime)


def _number(value: object, name: str) -> float | int | None:
    """A finite, non-negative number (a ``datetime`` for ``ts``: its seconds since the epoch)."""
    if value is None:
        return None
    kind = type(value)
    if kind is float or kind is int:
        number: float | int = value  # type: ignore[assignment]
    elif isinstance(value, (bool, str)):
        raise EventError(f"expected a number, got {type(value).__name__}", field=name)
    elif name == "ts" and _is_datetime(value):
        try:
            number = value.timestamp()
        except (OverflowError, OSError, ValueError) as exc:
            raise EventError(f"a time the clock cannot hold ({exc})", field=name) from None
    else:
        try:  # int and float subclasses, Decimal, Fraction, numpy scalars: their value as a float
            number = float.__float__(value) if isinstance(value, float) else float(value)  # type: ignore[arg-type]
        except Exception:
            raise EventError(f"expected a number, got {type(value).__name__}", field=name) from None
    try:
        finite = math.isfinite(number)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise EventError(f"expected a finite number, got {_describe(value)}", field=name)
    if number < 0:
        raise EventError(f"expected a non-negative number, got {number!r}", field=name)
    return number


def _integer(value: object, name: str, *, non_negative: bool) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        number = value
    elif isinstance(value, int) and not isinstance(value, bool):
        number = int.__int__(value)
    elif not isinstance(value, (bool, float, str)) and hasattr(type(value), "__index__"):
        try:  # numpy's integers and other exact integer types
            number = operator.index(value)  # type: ignore[arg-type]
        except Exception:
            raise EventError(f"expected an integer, got {type(value).__name__}", field=name) from None
    else:
        raise EventError(f"expected an integer, got {type(value).__name__}", field=name)
    if abs(number) > _MAX_INT:
        raise EventError("integer out of range", field=name)
    if non_negative and number < 0:
        raise EventError(f"expected a non-negative integer, got {number!r}", field=name)
    return number


def _flag(value: object, name: str) -> bool | None:
    if value is None or value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise EventError(f"expected true, false or null, got {type(value).__name__}", field=name)


_SCALARS: Final = (type(None), bool, float)


def _flat(args: dict[Any, Any]) -> bool:
    """Plain arguments that need no copy: at most 64 string keys, short strings, small ints, floats, bools."""
    if len(args) > 64:
        return False
    room = MAX_ARGS_TEXT
    for key, value in args.items():
        if type(key) is not str or len(key) > MAX_NAME:
            return False
        kind = type(value)
        if kind is str:
            room -= len(value)
            if len(value) > MAX_ARG_TEXT or room < 0:
                return False
        elif kind is int:
            if value.bit_length() > _MAX_INT_BITS:
                return False
        elif kind not in _SCALARS:
            return False
    return True


UNREADABLE: Final = "<unreadable>"
"""The only key of the arguments of a call whose mapping raised when read (its type and error are the value)."""


def _args(value: object) -> dict[str, Any]:
    """A call's arguments as a plain, bounded dict (the same canonical JSON as the original's)."""
    if value is None:
        return {}
    if type(value) is dict and _flat(value):
        return value
    if not isinstance(value, Mapping):
        raise EventError(f"expected a mapping, got {type(value).__name__}", field="args")
    try:
        return _plain_mapping(value, 0, [MAX_ARG_NODES, MAX_ARGS_TEXT], set())
    except Exception as exc:  # a mapping whose own methods raise: described, not read
        return {UNREADABLE: f"<{type(value).__name__}: {type(exc).__name__}>"}


def _plain_mapping(value: Mapping[Any, Any], depth: int, budget: list[int], seen: set[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    marker = id(value)
    seen.add(marker)
    try:
        items = dict.items(value) if type(value) is dict else value.items()
        for key, item in items:
            if budget[0] <= 0:  # out of nodes: say how many entries are left out, stop reading
                out["…"] = f"{_more(value, len(out))} more"
                break
            out[_key(key)] = _plain(item, depth + 1, budget, seen)
    finally:
        seen.discard(marker)
    return out


def _more(value: object, done: int) -> str:
    """How many entries of ``value`` are left after ``done`` (``?`` when its length cannot be read)."""
    try:
        return str(len(value) - done)  # type: ignore[arg-type]
    except Exception:
        return "?"


def _key(key: object) -> str:
    text = plain_str(key)
    return fold_string(text, 1024) if text is not None else _describe(key)


def _plain(value: Any, depth: int, budget: list[int], seen: set[int]) -> Any:
    """One argument value as plain JSON data (what the call's canonical JSON holds for it)."""
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    kind = type(value)
    if value is None or kind is bool or kind is float:
        return value
    if kind is str:
        return _arg_text(value, budget)
    if isinstance(value, int) and kind is not bool:
        number = value if kind is int else int.__int__(value)
        bits = number.bit_length()
        if bits <= _MAX_INT_BITS:
            return number
        raw = number.to_bytes(bits // 8 + 1, "little", signed=True)  # too long for str(): digest it
        return f"<int {bits} bits #{digest_bytes(raw)}>"
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return _arg_text(str.__str__(value), budget)
    try:
        return _container(value, depth, budget, seen)
    except Exception:  # a nested object whose own methods raise: described, not read
        return f"<{type(value).__name__}: unreadable>"


def _arg_text(text: str, budget: list[int]) -> str:
    """A string of the arguments: folded past :data:`MAX_ARG_TEXT`; past :data:`MAX_ARGS_TEXT` characters in
    all, only its length and a digest are kept."""
    if len(text) > MAX_ARG_TEXT:
        text = fold_string(text, MAX_ARG_TEXT)
    budget[1] -= len(text)
    if budget[1] < 0 and len(text) > 64:
        return f"<{len(text)} chars #{digest(text)}>"
    return text


def _container(value: Any, depth: int, budget: list[int], seen: set[int]) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return f"<bytes {len(raw)} #{digest_bytes(raw)}>"
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        if depth >= MAX_ARG_DEPTH:
            return "<deep>"
        if id(value) in seen:
            return "<cycle>"
    if isinstance(value, Mapping):
        return _plain_mapping(value, depth, budget, seen)
    if isinstance(value, (list, tuple)):
        marker = id(value)
        seen.add(marker)
        try:
            items: list[Any] = []
            for item in value:
                if budget[0] <= 0:
                    items.append(f"…{_more(value, len(items))} more")
                    break
                items.append(_plain(item, depth + 1, budget, seen))
            return items
        finally:
            seen.discard(marker)
    if isinstance(value, (set, frozenset)):
        members = [_plain(item, depth + 1, budget, seen) for item in _first(value, 1000)]
        return {"<set>": sorted(members, key=_sort_key)}  # as call fingerprints: a set has no order
    return _describe(value)


def _first(values: Any, count: int) -> list[Any]:
    out: list[Any] = []
    for item in values:
        if len(out) >= count:
            break
        out.append(item)
    return out


_sort_key: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode


def _set(event: object, name: str, value: object) -> None:
    object.__setattr__(event, name, value)  # the events are frozen: their constructors set plain values once


def _common_fields(event: Any) -> None:
    if event.ts is not None:
        _set(event, "ts", _number(event.ts, "ts"))
    if event.worker is not None:
        _set(event, "worker", name_of(event.worker, "worker"))


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
            _set(self, "tool", name_of(self.tool, "tool"))
        _set(self, "args", _args(self.args))
        if self.id is not None:
            _set(self, "id", name_of(self.id, "id"))
        if self.thought is not None:
            _set(self, "thought", _text(self.thought, "thought"))
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


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
            _set(self, "output", _text(self.output, "output", default=""))
        if self.tool is not None:
            _set(self, "tool", name_of(self.tool, "tool"))
        if self.is_error is not None:
            _set(self, "is_error", _flag(self.is_error, "is_error"))
        if self.exit_code is not None:
            _set(self, "exit_code", _integer(self.exit_code, "exit_code", non_negative=False))
        if self.id is not None:
            _set(self, "id", name_of(self.id, "id"))
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


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
        _set(self, "role", role)
        if type(self.text) is not str or len(self.text) > MAX_MESSAGE_TEXT:
            _set(self, "text", _text(self.text, "text", default="", limit=MAX_MESSAGE_TEXT))
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A streamed chunk of the assistant message being generated."""

    text: str
    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if type(self.text) is not str or len(self.text) > MAX_MESSAGE_TEXT:
            _set(self, "text", _text(self.text, "text", limit=MAX_MESSAGE_TEXT))
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


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
            _set(self, "cost", _number(self.cost, "cost"))
        if self.input_tokens is not None:
            _set(self, "input_tokens", _integer(self.input_tokens, "input_tokens", non_negative=True))
        if self.output_tokens is not None:
            _set(self, "output_tokens", _integer(self.output_tokens, "output_tokens", non_negative=True))
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


@dataclass(frozen=True, slots=True)
class Reset:
    """Clears the session's loop state; limits keep counting."""

    ts: float | None = None
    worker: str | None = None

    def __post_init__(self) -> None:
        if self.ts is not None or self.worker is not None:
            _common_fields(self)


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
        shown = name if name is not None else _describe(kind)
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
