"""The edge of the events: what a constructor keeps of whatever it is given (plain, bounded values), and the
limits it keeps them within. :mod:`loopwatch.core._events` documents the rules; its constructors call these."""

from __future__ import annotations

import json
import math
import operator
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard

from ._canonical import MAX_DEPTH, MAX_NODES, MAX_STRING, digest, digest_bytes, fold_string
from ._errors import EventError

if TYPE_CHECKING:
    from datetime import datetime

Role = Literal["assistant", "user", "system"]
ROLES: Final = ("assistant", "user", "system")
MAX_INT: Final = 2**63 - 1

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


def describe(value: object) -> str:
    """``<Type:repr>`` of an object that is not JSON (as call fingerprints write it); never raises."""
    try:
        text = repr(value)
        if type(text) is not str:
            text = f"<{type(value).__name__}>"
    except Exception:  # a broken __repr__ must not break the guard
        text = f"<{type(value).__name__}>"
    return f"<{type(value).__name__}:{fold_string(text, 200)}>"


def text_of(value: object, name: str, *, default: str | None = None, limit: int = MAX_TEXT) -> str:
    text = plain_str(value)
    if text is None:
        if value is None and default is not None:
            return default
        raise EventError(f"expected a string, got {type(value).__name__}", field=name)
    return text if len(text) <= limit else cut_text(text, limit)


def _opt_text(value: object, name: str) -> str | None:
    return None if value is None else text_of(value, name)


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


def number_of(value: object, name: str) -> float | int | None:
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
        raise EventError(f"expected a finite number, got {describe(value)}", field=name)
    if number < 0:
        raise EventError(f"expected a non-negative number, got {number!r}", field=name)
    return number


def integer_of(value: object, name: str, *, non_negative: bool) -> int | None:
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
    return _in_range(number, name, non_negative)


def _in_range(number: int, name: str, non_negative: bool) -> int:
    """``number`` when an event can hold it (a 64-bit signed integer, not negative when ``non_negative``)."""
    if abs(number) > MAX_INT:
        raise EventError("integer out of range", field=name)
    if non_negative and number < 0:
        raise EventError(f"expected a non-negative integer, got {number!r}", field=name)
    return number


def flag_of(value: object, name: str) -> bool | None:
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


def plain_args(value: object) -> dict[str, Any]:
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
        items = dict.items(value) if type(value) is dict else map(_pair, value.items())
        for key, item in items:
            if budget[0] <= 0:  # out of nodes: say how many entries are left out, stop reading
                out["…"] = f"{_more(value, len(out))} more"
                break
            out[_key(key)] = _plain(item, depth + 1, budget, seen)
    finally:
        seen.discard(marker)
    return out


def _pair(entry: Any) -> tuple[Any, Any]:
    """An entry of a mapping's ``items()`` as (key, value); a ``ValueError`` when it is not two values, whether this
    module runs compiled or not (unpacking it would raise another error in each)."""
    pair = tuple(entry)
    if len(pair) != 2:
        raise ValueError(f"an item of {len(pair)} values, not (key, value)")
    return pair[0], pair[1]


def _more(value: object, done: int) -> str:
    """How many entries of ``value`` are left after ``done`` (``?`` when its length cannot be read)."""
    try:
        return str(len(value) - done)  # type: ignore[arg-type]
    except Exception:
        return "?"


def _key(key: object) -> str:
    text = plain_str(key)
    return fold_string(text, 1024) if text is not None else describe(key)


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
    return describe(value)


def _first(values: Any, count: int) -> list[Any]:
    out: list[Any] = []
    for item in values:
        if len(out) >= count:
            break
        out.append(item)
    return out


_sort_key: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode


def set_field(event: object, name: str, value: object) -> None:
    object.__setattr__(event, name, value)  # the events are frozen: their constructors set plain values once


def common_fields(event: Any) -> None:
    if event.ts is not None:
        set_field(event, "ts", number_of(event.ts, "ts"))
    if event.worker is not None:
        set_field(event, "worker", name_of(event.worker, "worker"))


# -- an event's JSON form: each field read and checked, then handed to its constructor -------------------------


def json_str(obj: Mapping[str, Any], key: str) -> str | None:
    """A string field as a plain ``str`` (a subclass's own methods are never called), ``None`` when absent."""
    value = obj.get(key)
    if value is None:
        return None
    text = plain_str(value)
    if text is None:
        raise EventError(f"expected a string, got {type(value).__name__}", field=key)
    return text


def required_str(obj: Mapping[str, Any], key: str) -> str:
    """:func:`json_str` of a field that must be there."""
    text = json_str(obj, key)
    if text is None:
        raise EventError("required field is missing", field=key)
    return text


def json_number(obj: Mapping[str, Any], key: str) -> float | None:
    """A finite, non-negative number."""
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
    if number < 0:
        raise EventError(f"expected a non-negative number, got {value!r}", field=key)
    return number


def json_int(obj: Mapping[str, Any], key: str, *, non_negative: bool = True) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise EventError(f"expected an integer, got {type(value).__name__}", field=key)
    return _in_range(value if type(value) is int else int.__int__(value), key, non_negative)  # a subclass as an int


def json_bool(obj: Mapping[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise EventError(f"expected true, false or null, got {type(value).__name__}", field=key)


def common_json_fields(obj: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """An event's ``ts`` and ``worker``, in the order every event's fields end with."""
    return json_number(obj, "ts"), json_str(obj, "worker")


def call_fields(
    obj: Mapping[str, Any],
) -> tuple[str, Mapping[str, Any], str | None, str | None, float | None, str | None]:
    """A ``tool_call``'s fields in ``ToolCall``'s order."""
    args = obj.get("args")
    if args is None:
        args = {}
    elif type(args) is not dict and not isinstance(args, Mapping):  # a dict first: the ABC's check costs ~80 ns
        raise EventError(f"expected a JSON object, got {type(args).__name__}", field="args")
    tool, call_id, thought = required_str(obj, "tool"), json_str(obj, "id"), json_str(obj, "thought")
    ts, worker = common_json_fields(obj)
    return tool, args, call_id, thought, ts, worker


def result_fields(
    obj: Mapping[str, Any],
) -> tuple[str, str | None, bool | None, int | None, str | None, float | None, str | None]:
    """A ``tool_result``'s fields in ``ToolResult``'s order."""
    output = obj.get("output")
    if output is None:
        output = ""
    elif not isinstance(output, str):
        raise EventError(f"expected a string, got {type(output).__name__}", field="output")
    tool, call_id = json_str(obj, "tool"), json_str(obj, "id")
    if tool is None and call_id is None:
        raise EventError("a tool_result needs `tool` or an `id` matching an earlier call", field="tool")
    is_error, exit_code = json_bool(obj, "is_error"), json_int(obj, "exit_code", non_negative=False)
    ts, worker = common_json_fields(obj)
    return output, tool, is_error, exit_code, call_id, ts, worker


def message_fields(obj: Mapping[str, Any]) -> tuple[Role, str, float | None, str | None]:
    """A ``message``'s fields in ``Message``'s order."""
    role = required_str(obj, "role")
    if role not in ROLES:
        raise EventError(f"expected one of {', '.join(ROLES)}, got {role!r}", field="role")
    text = obj.get("text")
    if text is None:
        text = ""
    elif not isinstance(text, str):
        raise EventError(f"expected a string, got {type(text).__name__}", field="text")
    ts, worker = common_json_fields(obj)
    return role, text, ts, worker  # type: ignore[return-value]
