"""Typed per-session rule state: compact in memory, the same JSON as ever in a snapshot.

A rule keeps its session data in a small dataclass with slots (checked by ``mypy --strict``) and writes it out,
in :meth:`~loopwatch.core.detectors._base.Detector.dump_state`, as the JSON object snapshots have always held. In memory
the bulky parts are kept compact: a set of word hashes as one bytes object of 32-bit integers (not a list of int
objects), a sketch as one integer (not its base64 text). The helpers here read the JSON form back, each raising
``ValueError`` (which the engine reports as a :class:`~loopwatch.errors.StateError`) when it is malformed.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from itertools import chain
from typing import Any, Final, TypeGuard, TypeVar

from ._base import SKETCH_BITS, bits_text, text_bits, word_bytes, word_values
from ._state_pack import fields_of, record_names

T = TypeVar("T")

_INT: Final = frozenset({int})
_STR: Final = frozenset({str})
_INT_OR_NONE: Final = frozenset({int, type(None)})
_STR_OR_NONE: Final = frozenset({str, type(None)})
_BOOL: Final = frozenset({bool})


# Each checks that ``value`` is a list whose items are all of exactly the types named (listed at C speed).


def _ints(value: object) -> TypeGuard[list[int]]:
    return type(value) is list and set(map(type, value)) <= _INT


def _strs(value: object) -> TypeGuard[list[str]]:
    return type(value) is list and set(map(type, value)) <= _STR


def _ints_or_none(value: object) -> TypeGuard[list[int | None]]:
    return type(value) is list and set(map(type, value)) <= _INT_OR_NONE


def _strs_or_none(value: object) -> TypeGuard[list[str | None]]:
    return type(value) is list and set(map(type, value)) <= _STR_OR_NONE


def _bools(value: object) -> TypeGuard[list[bool]]:
    return type(value) is list and set(map(type, value)) <= _BOOL


def keys_of(name: str, data: Mapping[str, Any], required: Iterable[str], optional: Iterable[str] = ()) -> None:
    """Check a state's JSON keys: all of ``required``, and nothing but those and ``optional`` (keys added after a
    release, which older snapshots lack)."""
    need, may = set(required), set(optional)
    have = set(data)
    if not need <= have or not have <= need | may:
        raise ValueError(f"{name}: state keys {sorted(have)} != {sorted(need | may)}")


def integer(value: object, what: str) -> int:
    """``value`` if it is an integer (not a bool)."""
    if type(value) is not int:
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def optional_integer(value: object, what: str) -> int | None:
    return None if value is None else integer(value, what)


def flag(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise ValueError(f"{what} must be true or false, got {value!r}")
    return value


def text(value: object, what: str) -> str:
    if type(value) is not str:
        raise ValueError(f"{what} must be a string, got {value!r}")
    return value


def optional_text(value: object, what: str) -> str | None:
    return None if value is None else text(value, what)


def integers(value: object, what: str) -> list[int]:
    """A list of integers (a fresh list)."""
    if not _ints(value):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return list(value)


def optional_integers(value: object, what: str) -> list[int | None]:
    """A list of integers and nulls (a fresh list)."""
    if not _ints_or_none(value):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return list(value)


def integer_tuple(value: object, what: str) -> tuple[int, ...]:
    """A list of integers, as a tuple."""
    if not _ints(value):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return tuple(value)


def optional_integer_tuple(value: object, what: str) -> tuple[int | None, ...]:
    """A list of integers and nulls, as a tuple."""
    if not _ints_or_none(value):
        raise ValueError(f"{what} must be a list of integers, got {value!r}")
    return tuple(value)


def text_tuple(value: object, what: str) -> tuple[str, ...]:
    """A list of strings, as a tuple."""
    if not _strs(value):
        raise ValueError(f"{what} must be a list of strings, got {value!r}")
    return tuple(value)


def optional_text_tuple(value: object, what: str) -> tuple[str | None, ...]:
    """A list of strings and nulls, as a tuple."""
    if not _strs_or_none(value):
        raise ValueError(f"{what} must be a list of strings, got {value!r}")
    return tuple(value)


def flag_tuple(value: object, what: str) -> tuple[bool, ...]:
    """A list of true and false, as a tuple."""
    if not _bools(value):
        raise ValueError(f"{what} must be a list of true and false, got {value!r}")
    return tuple(value)


def texts(value: object, what: str) -> list[str]:
    """A list of strings (a fresh list)."""
    if not _strs(value):
        raise ValueError(f"{what} must be a list of strings, got {value!r}")
    return list(value)


def words(value: object, what: str) -> bytes:
    """Word hashes (:func:`~.base.word_bytes`) from their JSON form (a list of unsigned 32-bit integers)."""
    if _ints(value):
        try:
            return word_bytes(value)
        except OverflowError:  # negative, or more than 32 bits
            pass
    raise ValueError(f"{what} must be a list of 32-bit word hashes, got {value!r}")


def optional_words(value: object, what: str) -> bytes | None:
    return None if value is None else words(value, what)


def words_json(value: bytes | None) -> list[int] | None:
    """The JSON form of word hashes (:func:`~.base.word_bytes`)."""
    return None if value is None else word_values(value).tolist()


def sketch(value: object, what: str, bits: int = SKETCH_BITS) -> int:
    """A folded set of ``bits`` bits from its JSON form (the base64 text of :func:`~.base.bits_text`)."""
    if type(value) is not str:
        raise ValueError(f"{what} must be base64 text, got {value!r}")
    try:
        folded = text_bits(value)
    except ValueError as exc:  # binascii.Error is a ValueError
        raise ValueError(f"{what} is not base64 text: {exc}") from exc
    if folded.bit_length() > bits:
        raise ValueError(f"{what} holds at most {bits} bits")
    return folded


def sketch_json(value: int, bits: int = SKETCH_BITS) -> str:
    """The JSON form of a folded set (see :func:`sketch`)."""
    return bits_text(value, bits)


def table(value: object, what: str, item: Callable[[object, str], T]) -> dict[str, T]:
    """A JSON object whose values are read by ``item`` (its order kept)."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object, got {value!r}")
    return {text(k, what): item(v, f"{what}[{k!r}]") for k, v in value.items()}


# -- small tables ----------------------------------------------------------------------------------------------
# A rule's table of a few entries (its records per tool, per call, per channel; the least recently used first) is
# kept as one flat tuple, key, value, key, value...: a dict of even one entry takes 224 bytes, this 56 (a tuple
# holds no spare room), and an empty one is the shared ``()``. Its values may be mutable records, changed in place.

Flat = tuple[Any, ...]
"""A small table: key, value, key, value... (see above)."""


def flat_get(table: Flat, key: object) -> Any:
    """The value of ``key`` in ``table`` (``None`` if it has none)."""
    keys = table[::2]
    return table[2 * keys.index(key) + 1] if key in keys else None


def flat_put(table: Flat, key: object, value: object, limit: int | None = None) -> Flat:
    """``table`` with ``key``'s entry (moved or added) last, set to ``value``, and only its last ``limit`` entries."""
    keys = table[::2]
    if key in keys:
        at = 2 * keys.index(key)
        table = table[:at] + table[at + 2 :]
    if limit is not None and len(table) >= 2 * limit:
        if limit < 1:
            return ()
        table = table[len(table) - 2 * limit + 2 :]
    return (*table, key, value)


def flat_append(table: Flat, key: object, value: object, limit: int) -> Flat:
    """``table`` (which has no entry for ``key``) with ``key``'s entry added last, and only its last ``limit``
    entries: :func:`flat_put` after :func:`flat_pop`."""
    if len(table) >= 2 * limit:
        if limit < 1:
            return ()
        table = table[len(table) - 2 * limit + 2 :]
    return (*table, key, value)


def flat_set(table: Flat, key: object, value: object) -> Flat:
    """``table`` with ``key`` set to ``value``: in its place if it has an entry, else added last."""
    keys = table[::2]
    if key in keys:
        at = 2 * keys.index(key) + 1
        return (*table[:at], value, *table[at + 1 :])
    return (*table, key, value)


def flat_pop(table: Flat, key: object) -> tuple[Flat, Any]:
    """``table`` without ``key``'s entry, and that entry's value (``None`` if it has none)."""
    keys = table[::2]
    if key in keys:
        at = 2 * keys.index(key)
        return table[:at] + table[at + 2 :], table[at + 1]
    return table, None


def flat_only(table: Flat, keys: Container[object]) -> Flat:
    """``table`` with only the entries whose key is in ``keys``."""
    if all(map(keys.__contains__, table[::2])):
        return table
    return tuple(chain.from_iterable(entry for entry in flat_items(table) if entry[0] in keys))


def flat_keys(table: Flat) -> Flat:
    """The keys of ``table``, in order."""
    return table[::2]


def flat_values(table: Flat) -> Flat:
    """The values of ``table``, in order."""
    return table[1::2]


def flat_items(table: Flat) -> Iterator[tuple[Any, Any]]:
    """(key, value) of each entry of ``table``, in order."""
    return zip(table[::2], table[1::2], strict=True)


def flat_of(entries: Mapping[Any, Any]) -> Flat:
    """A small table of the entries of ``entries``, in its order."""
    return tuple(chain.from_iterable(entries.items()))


def flat_json(table: Flat, write: Callable[[Any], Any] | None = None) -> dict[Any, Any]:
    """The JSON object of ``table``, its values written by ``write`` (as they are without one)."""
    if write is None:
        return dict(zip(table[::2], table[1::2], strict=True))
    return {key: write(value) for key, value in zip(table[::2], table[1::2], strict=True)}


def listed(value: object, what: str, item: Callable[[object, str], T]) -> list[T]:
    """A JSON list whose items are read by ``item``."""
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list, got {value!r}")
    return [item(v, f"{what}[{i}]") for i, v in enumerate(value)]


Reader = Callable[[object, str], Any]
S = TypeVar("S")


def fields_json(state: object) -> dict[str, Any]:
    """A flat state's JSON form: its fields (a dataclass with slots), in their order, as they are (a tuple as a
    list)."""
    names = record_names(type(state))
    return {
        name: list(value) if type(value) is tuple else value
        for name, value in zip(names, fields_of(state), strict=True)
    }


def from_fields(kind: Callable[..., S], data: Mapping[str, Any], what: str, readers: Mapping[str, Reader]) -> S:
    """A flat state from its JSON form: each field read by its reader (``readers``); a field missing from ``data``
    gets its fresh value (check the keys with :func:`keys_of` first)."""
    return kind(**{name: read(data[name], f"{what}: {name}") for name, read in readers.items() if name in data})


def any_value(value: object, what: str) -> object:
    """Any JSON value, as it is."""
    return value


def optional_flag(value: object, what: str) -> bool | None:
    return None if value is None else flag(value, what)


def reset(state: object) -> None:
    """Give every field of ``state`` (a dataclass whose fields all have defaults) its fresh value."""
    type(state).__init__(state)
