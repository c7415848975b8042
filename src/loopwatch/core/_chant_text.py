"""The chanting tracker's text helpers: sentence-end checkpoints, common prefixes and suffixes compared at C speed,
the chunks that can never count (no letter or digit, a period too short), and the reported chunk.
See :mod:`loopwatch.core._chanting` for the algorithm."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from itertools import accumulate, repeat
from operator import add
from typing import Literal

from ._lazy_re import lazy_compile

_TEXT_CAP = 120  # longest reported chunk

# Sentence ends, where checkpoints go: (pattern, offset of the checkpoint in it). The checkpoint is
# after the full stop / before the newline, so "S. " and "S.\n" end the same chunk.
_ANCHORS = ((". ", 1), ("! ", 1), ("? ", 1), ("\n", 0))  # keep _no_anchor in step
_BOUNDARY = lazy_compile(r"[.!?。！？]+\s+|\n\s*")
_ALNUM = lazy_compile(r"[^\W_]")

# ---------------------------------------------------------------------- string helpers


def _anchor_ends(buf: str, a: int, b: int) -> list[int]:
    """Sorted buffer indices of the sentence-end checkpoints whose pattern lies inside ``buf[a:b]``."""
    text, out = buf[a:b], []
    for pat, at in _ANCHORS:
        if pat[0] not in text:  # a one-character search (memchr) is much faster than a failed split
            continue
        parts = text.split(pat)
        if len(parts) > 1:  # C-level: cumulative part lengths plus separators
            lengths = map(add, map(len, parts[:-1]), repeat(len(pat)))
            out += list(accumulate(lengths, initial=a + at - len(pat)))[1:]
    if len(out) > 1:
        out.sort()
    return out


def _no_anchor(buf: str, a: int) -> bool:
    """No sentence-end checkpoint in ``buf[a:]`` (a newline at ``a`` itself is one already used)."""
    tail = buf[a:]  # spelled out: this runs on every streamed delta
    return "\n" not in tail[1:] and ". " not in tail and "! " not in tail and "? " not in tail


def _common_prefix(s: str, i: int, j: int, limit: int) -> int:
    """Largest ``n <= limit`` with ``s[i:i+n] == s[j:j+n]`` (``i + limit`` and ``j + limit`` <= ``len(s)``)."""
    return _equal_run(s[i : i + limit], s[j : j + limit], "little") if limit > 0 else 0


def _common_suffix(s: str, i: int, j: int, limit: int) -> int:
    """Largest ``n <= limit`` with ``s[i-n:i] == s[j-n:j]`` (``i - limit`` and ``j - limit`` >= 0)."""
    return _equal_run(s[i - limit : i], s[j - limit : j], "big") if limit > 0 else 0


def _equal_run(a: str, b: str, order: Literal["little", "big"]) -> int:
    """How many characters two strings of the same length share at their start (``order="little"``) or at
    their end (``"big"``): the code points read as one integer each, the lowest bit where they differ (at C
    speed, in one pass)."""
    if a == b:
        return len(a)
    if a.isascii() and b.isascii():
        x, y, bits = a.encode("ascii"), b.encode("ascii"), 8
    else:
        x, y, bits = a.encode("utf-32-le", "surrogatepass"), b.encode("utf-32-le", "surrogatepass"), 32
    diff = int.from_bytes(x, order) ^ int.from_bytes(y, order)
    return ((diff & -diff).bit_length() - 1) // bits


def _rotation(unit: str) -> int:
    """Shift that makes a repeated unit start after a sentence boundary (". I will" -> "I will... .")."""
    m = _BOUNDARY.search(unit + unit)
    if m is None or m.start() >= len(unit):
        return 0
    return m.end() % len(unit)


def _display(text: str) -> tuple[str, int]:
    """The reported chunk (stripped, capped) and how many leading characters the strip removed."""
    stripped = text.lstrip()
    return stripped.rstrip()[:_TEXT_CAP].rstrip(), len(text) - len(stripped)


_NO_ALNUM_RUNS: dict[int, re.Pattern[str]] = {}


def _live_chunk(chunk: str, periods: range) -> bool:
    """Can this chunk count: it has a letter or a digit, and no period in ``periods`` (``chunk[q:] == chunk[:-q]``)?
    The same test as a checkpoint outside :func:`_no_alnum_run`'s runs and :func:`_periodic_zones`' zones."""
    # a letter or a digit (``str.isalnum`` is the pattern's ``[^\W_]``): usually at one end of the chunk
    if not (chunk[-1:].isalnum() or chunk[:1].isalnum()) and _ALNUM.search(chunk) is None:
        return False
    for q in periods:  # noqa: SIM110 - a plain loop: several times cheaper than all() over a generator here
        # a period ``q`` needs ``chunk[0] == chunk[q]``: one character compared before the slices
        if (q >= len(chunk) or chunk[0] == chunk[q]) and chunk[q:] == chunk[:-q]:
            return False
    return True


def _no_alnum_run(size: int) -> re.Pattern[str]:
    """Runs of at least ``size`` characters without a letter or a digit (``_ALNUM``'s complement)."""
    pattern = _NO_ALNUM_RUNS.get(size)
    if pattern is None:
        pattern = _NO_ALNUM_RUNS[size] = re.compile(rf"[\W_]{{{size},}}")
    return pattern


def _periodic_zones(buf: str, start: int, size: int, min_period: int) -> list[tuple[int, int]]:
    """Checkpoints ``c >= start + size`` whose chunk ``buf[c - size:c]`` has a period below ``min_period``, as
    closed intervals: where ``buf[i] == buf[i + q]`` for ``size - q`` characters in a row, found at C speed
    (the code points compared as one integer each, equal ones giving zero bytes)."""
    text = buf[start:]
    if len(text) <= size or min_period <= 1:
        return []
    wide = 1 if text.isascii() else 4
    raw = text.encode("ascii") if wide == 1 else text.encode("utf-32-le", "surrogatepass")
    whole = int.from_bytes(raw, "little")
    zones: list[tuple[int, int]] = []
    for q in range(1, min_period):
        shifted = whole >> (8 * wide * q)
        length = len(raw) - wide * q
        diff = ((whole ^ shifted) & ((1 << (8 * length)) - 1)).to_bytes(length, "little")
        for m in _zero_run(wide * (size - q)).finditer(diff):
            low, high = -(-m.start() // wide), m.end() // wide  # whole code points: buf[i] == buf[i + q] in it
            if high - low >= size - q:
                zones.append((start + low + size, start + high + q))
    return zones


def _zero_run(length: int) -> re.Pattern[bytes]:
    pattern = _ZERO_RUNS.get(length)
    if pattern is None:
        pattern = _ZERO_RUNS[length] = re.compile(b"\x00{%d,}" % length)
    return pattern


_ZERO_RUNS: dict[int, re.Pattern[bytes]] = {}


def _merged(zones: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Closed intervals sorted, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(zones):
        if out and low <= out[-1][1] + 1:
            if high > out[-1][1]:
                out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def _outside(points: list[int], zones: list[tuple[int, int]]) -> list[int]:
    """The sorted ``points`` outside every closed interval of ``zones`` (sorted, disjoint)."""
    kept: list[int] = []
    done = 0
    for low, high in zones:
        start = bisect_left(points, low, done)
        kept += points[done:start]
        done = bisect_right(points, high, start)
    kept += points[done:]
    return kept
