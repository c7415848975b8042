"""Typed per-session rule state: compact in memory, the same JSON as ever in a snapshot.

A rule keeps its session data in a small dataclass with slots (checked by ``mypy --strict``) and writes it out,
in :meth:`~loopwatch.core.detectors._base.Detector.dump_state`, as the JSON object snapshots have always held. In memory
the bulky parts are kept compact: a set of word hashes as one bytes object of 32-bit integers (not a list of int
objects), a sketch as one integer (not its base64 text). The helpers here read the JSON form back, each raising
``ValueError`` (which the engine reports as a :class:`~loopwatch.errors.StateError`) when it is malformed.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from itertools import chain
from operator import attrgetter
from typing import Any, Final, TypeGuard, TypeVar

from ._base import SKETCH_BITS, WORD_CODE, bits_text, pushed, text_bits, word_bytes, word_values

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


_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[object], tuple[Any, ...]]]] = {}
"""Per state class: its field names, and a getter of all their values at once."""


def fields_json(state: object) -> dict[str, Any]:
    """A flat state's JSON form: its fields (a dataclass with slots), in their order, as they are (a tuple as a
    list)."""
    kind = type(state)
    known = _FIELDS.get(kind)
    if known is None:
        names: tuple[str, ...] = tuple(kind.__slots__)  # type: ignore[attr-defined]
        getter = attrgetter(*names) if len(names) > 1 else lambda x: (getattr(x, names[0]),)
        known = _FIELDS[kind] = (names, getter)
    names, values = known
    return {
        name: list(value) if type(value) is tuple else value for name, value in zip(names, values(state), strict=True)
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


# -- packed fingerprints ---------------------------------------------------------------------------------------
# A short sequence of fingerprints (16 hex digits each, or null, or "" where a rule marks something) is kept as one
# bytes object, 8 bytes an entry: 8 bytes where a string takes 65. A sequence that holds anything else (text a
# snapshot brought that is not 16 lowercase hex digits, or one of the two marks' own bytes) is kept as a tuple.

Packed = bytes | tuple[str | None, ...]
"""A short sequence of fingerprints (see above)."""

_NULL: Final = bytes(8)
_BLANK: Final = b"\xff" * 8


def packed_entry(fingerprint: str | None) -> bytes | None:
    """The 8 bytes of ``fingerprint`` in a packed sequence (``None`` when it cannot be packed)."""
    if fingerprint is None:
        return _NULL
    try:
        entry = bytes.fromhex(fingerprint)
    except ValueError:
        return None
    if len(entry) == 8 and entry != _NULL and entry != _BLANK and entry.hex() == fingerprint:  # written back as is
        return entry
    return _BLANK if fingerprint == "" else None


def _unpacked_entry(entry: bytes) -> str | None:
    return None if entry == _NULL else "" if entry == _BLANK else entry.hex()


def packed_of(fingerprints: Iterable[str | None]) -> Packed:
    """``fingerprints`` packed (a tuple of them if they cannot all be)."""
    items = tuple(fingerprints)
    entries = [entry for entry in map(packed_entry, items) if entry is not None]
    return b"".join(entries) if len(entries) == len(items) else items


def packed_list(sequence: Packed) -> list[str | None]:
    """The fingerprints of a packed sequence, in order (its JSON form)."""
    if isinstance(sequence, tuple):
        return list(sequence)
    return [_unpacked_entry(sequence[at : at + 8]) for at in range(0, len(sequence), 8)]


def packed_len(sequence: Packed) -> int:
    """How many fingerprints a packed sequence holds."""
    return len(sequence) if isinstance(sequence, tuple) else len(sequence) >> 3


def packed_at(sequence: Packed, index: int) -> str | None:
    """The fingerprint at ``index`` (negative: from the end) of a packed sequence; ``IndexError`` past its ends."""
    if isinstance(sequence, tuple):
        return sequence[index]
    count = len(sequence) >> 3
    if not -count <= index < count:
        raise IndexError("packed fingerprint index out of range")
    at = 8 * (index % count)
    return _unpacked_entry(sequence[at : at + 8])


def packed_matches(sequence: Packed, fingerprint: str | None, count: int) -> list[bool]:
    """For p from 1 to ``count``: is the p-th fingerprint from the end of a packed sequence ``fingerprint`` (no, past
    its start)?"""
    if isinstance(sequence, tuple):
        n = len(sequence)
        return [n >= p and sequence[-p] == fingerprint for p in range(1, count + 1)]
    entry = packed_entry(fingerprint)
    end = len(sequence)
    return [
        entry is not None and end >= 8 * p and sequence[end - 8 * p : end - 8 * p + 8] == entry
        for p in range(1, count + 1)
    ]


def _pushed_list(sequence: Packed, fingerprint: str | None, limit: int) -> tuple[str | None, ...]:
    items = tuple(packed_list(sequence))
    return (*items[len(items) - limit + 1 :], fingerprint) if len(items) >= limit else (*items, fingerprint)


def packed_add(sequence: Packed, fingerprint: str | None, limit: int) -> tuple[bool, Packed]:
    """Is ``fingerprint`` in a packed sequence, and the sequence with it added last, keeping its last ``limit``
    entries."""
    entry = packed_entry(fingerprint)
    if entry is None or isinstance(sequence, tuple):
        return fingerprint in packed_list(sequence), _pushed_list(sequence, fingerprint, limit)
    at = sequence.find(entry)
    while at > 0 and at & 7:  # found across two entries: look on
        at = sequence.find(entry, at + 1)
    if len(sequence) >= 8 * limit:
        sequence = sequence[len(sequence) - 8 * limit + 8 :]
    return at >= 0, sequence + entry


def packed_push(sequence: Packed, fingerprint: str | None, limit: int) -> Packed:
    """A packed sequence with ``fingerprint`` added last, keeping its last ``limit`` entries."""
    entry = _NULL if fingerprint is None else packed_entry(fingerprint)
    if entry is None or isinstance(sequence, tuple):
        return _pushed_list(sequence, fingerprint, limit)
    if len(sequence) >= 8 * limit:
        sequence = sequence[len(sequence) - 8 * limit + 8 :]
    return sequence + entry


def packed_ends_blank(sequence: Packed) -> bool:
    """Is the last entry of a (non-empty) packed sequence ``""``?"""
    return sequence[-1] == "" if isinstance(sequence, tuple) else sequence[-8:] == _BLANK


def packed_with_last(sequence: Packed, fingerprint: str | None) -> Packed:
    """A (non-empty) packed sequence with its last fingerprint replaced by ``fingerprint``."""
    entry = packed_entry(fingerprint)
    if entry is None or isinstance(sequence, tuple):
        return (*packed_list(sequence)[:-1], fingerprint)
    return sequence[:-8] + entry


# -- packed indices --------------------------------------------------------------------------------------------
# The last few step indices a rule keeps (the calls of a streak, the last turns...) are packed 4 bytes each in one
# bytes object: a tuple takes 8 bytes an entry, and each index past 256 is an object of 28 bytes more. An index that
# does not fit in 32 bits (or is negative: only a snapshot could bring one) keeps them in a tuple.

Indices = bytes | tuple[int, ...]
"""A rule's last few step indices (see above); ``b""`` (or ``()``) for none."""

_INDEX: Final = struct.Struct("=I")
_INDEX_LIMIT: Final = 1 << 32
_pack_index: Final = _INDEX.pack


def indices_of(values: Iterable[int]) -> Indices:
    """``values`` (step indices) packed (a tuple of them when one does not fit)."""
    items = tuple(values)
    if all(0 <= value < _INDEX_LIMIT for value in items):
        return array(WORD_CODE, items).tobytes()
    return items


def indices(value: object, what: str) -> Indices:
    """Step indices from their JSON form (a list of integers)."""
    return indices_of(integer_tuple(value, what))


def index_tuple(items: Indices) -> tuple[int, ...]:
    """The indices of ``items``, in order."""
    return items if isinstance(items, tuple) else tuple(array(WORD_CODE, items))


def indices_json(items: Indices) -> list[int]:
    """The JSON form of ``items``."""
    return list(items) if isinstance(items, tuple) else array(WORD_CODE, items).tolist()


def indices_len(items: Indices) -> int:
    """How many indices ``items`` holds."""
    return len(items) if isinstance(items, tuple) else len(items) >> 2


def index_at(items: Indices, at: int) -> int:
    """The index at position ``at`` (negative: from the end) of ``items``; ``IndexError`` past its ends."""
    if isinstance(items, tuple):
        return items[at]
    count = len(items) >> 2
    if not -count <= at < count:
        raise IndexError("index position out of range")
    value: int = _INDEX.unpack_from(items, 4 * (at % count))[0]
    return value


def indices_pushed(items: Indices, index: int, limit: int) -> Indices:
    """``items`` and ``index`` after them, keeping at most ``limit`` (:func:`~.base.pushed` for indices)."""
    if type(items) is bytes and 0 <= index < _INDEX_LIMIT:
        n = len(items)
        return (items if n < 4 * limit else items[n - 4 * limit + 4 :]) + _pack_index(index)
    return pushed(index_tuple(items), index, limit)


def ends_with_index(items: Indices, index: int | None) -> bool:
    """Is ``index`` the last index of ``items``?"""
    if type(items) is bytes:
        return index is not None and 0 <= index < _INDEX_LIMIT and items.endswith(_pack_index(index))
    return bool(items) and items[-1] == index
