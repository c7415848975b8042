"""Compact sequences a rule keeps in its state: fingerprints packed 8 bytes each, step indices packed 4 bytes each.

Both fall back to a tuple for what cannot be packed (only a snapshot could bring such a value), and both read and
write the JSON form snapshots have always held (see :mod:`._state` for the readers of the other values).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable
from typing import Final

from ._base import WORD_CODE, pushed
from ._state import integer_tuple

# -- packed fingerprints ---------------------------------------------------------------------------------------
# A short sequence of fingerprints (16 hex digits each, or null, or "" where a rule marks something) is kept as one
# bytes object, 8 bytes an entry: 8 bytes where a string takes 65. A sequence that holds anything else (text a
# snapshot brought that is not 16 lowercase hex digits, or one of the two marks' own bytes) is kept as a tuple.

Packed = bytes | tuple[str | None, ...]
"""A short sequence of fingerprints (see above)."""

_NULL: Final = bytes(8)
_BLANK: Final = b"\xff" * 8
_NULL_HEX: Final = _NULL.hex()
_BLANK_HEX: Final = _BLANK.hex()


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
    """The fingerprints of a packed sequence, in order (its JSON form): one hex text cut in 16-character entries, the
    entries that stand for ``None`` and ``""`` put back when the text holds them."""
    if isinstance(sequence, tuple):
        return list(sequence)
    text = sequence.hex()
    entries: list[str | None] = [text[at : at + 16] for at in range(0, len(text), 16)]
    if _NULL_HEX in text or _BLANK_HEX in text:
        return [None if entry == _NULL_HEX else "" if entry == _BLANK_HEX else entry for entry in entries]
    return entries


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
