"""What is volatile in a tool's output, and the output without it.

Two results of the same call are "the same outcome" when they differ only in parts that change from run to run
whatever the agent does: timestamps and times of day, durations, UUIDs, long hexadecimal ids and addresses, very
long numbers (epoch times, nanosecond counters), process ids, shell line numbers (``bash: line 13008:``), temporary
paths and generated temp-file names, and curl's progress meter (speeds and times redrawn as a download goes: two
runs of the same download never print the same rows). Everything else is content, digits included: a counter that
moves (``1/10 replicas ready``, then ``2/10``), a date, a price, an order number, a test count.

:func:`volatile_spans` finds those parts and :func:`masked` removes them. Neither scans the text with a regular
expression that starts a match at every character (on a slow core that costs ~0.3 us per character): the text is
mapped to its *shape* with ``bytes.translate`` (digits to ``0``, ``:`` kept, and spaces and the letters units of
time start with kept apart; digits and hex letters to ``0``), the shapes are scanned for each kind's anchor, a
literal of two bytes or more that the engine or ``bytes.find`` skips to at C speed (``:00:00`` for a time, ``0u``
and ``0_u`` for a number before a unit of time, ``000000`` for a hex run), and only at an anchor a short anchored
match decides. Process ids, shell line numbers and temporary paths are looked for only where a sign of one is (a
``pid``, an ``sh:``, a ``tmp``...). The cost is linear in the text plus a few microseconds per volatile part, and
bounded: outputs longer than :data:`LIMIT` keep their head and tail (see
:func:`loopwatch.core._canonical.fold_string`).
"""

from __future__ import annotations

import re
from typing import Final

from . import _kernels
from ._canonical import digest_bytes

__all__ = ["LIMIT", "VOLATILE_KINDS", "masked", "volatile_spans"]

LIMIT: Final = 65_536
"""Characters of an output that are masked exactly (see :func:`masked` for longer ones)."""

VOLATILE_KINDS: Final = (
    "time", "duration", "uuid", "hex", "number", "address", "pid", "shell_line", "tmp", "progress"
)  # fmt: skip

_DIGITS: Final = b"0123456789"
_MIDDLE_DROPPED: Final = b"0123456789abcdefABCDEF \t\r\n\x0b\x0c"
_HEX_SHAPE: Final = bytes.maketrans(_DIGITS + b"abcdefABCDEF", b"0" * 22)
_DIGIT_OR_LETTER: Final = bytes.maketrans(_DIGITS + b"abcdefABCDEF", b"0" * 10 + b"a" * 12)
_WORD_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
"""Bytes that continue a word (``_`` does not: ``tmp_code_1f43c3d4`` ends in a hex id)."""
_LETTERS: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# Anchored matches, tried only where a shape anchor was found (never scanned over the text).
_TIME: Final = re.compile(rb"(?:\d{4}-\d\d-\d\d[T ])?\d?\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_DATE_BEFORE: Final = re.compile(rb"\d{4}-\d\d-\d\d[T ]\Z")
_NUMBER_BEFORE: Final = re.compile(rb"\d+(?:\.\d+)?\Z")
_UUID: Final = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX_RUN: Final = re.compile(rb"[0-9a-fA-F]+")
_PID: Final = re.compile(rb"(?:pid|PID|Pid|process|Process)[ =:#]{1,3}\d+")
_SHELL_LINE: Final = re.compile(rb" (?:line )?\d+:")
_TMP_PATH: Final = re.compile(rb"(?:/tmp|/var/folders|/private/var|/var/tmp)/[^\s'\":,)\]]*")
_TMP_NAME: Final = re.compile(rb"tmp(?:[a-z0-9_]{8}|\.[A-Za-z0-9]{6,})(?![A-Za-z0-9])")
"""Python's ``tempfile`` names (``tmp`` and 8 random characters) and ``mktemp``'s (``tmp.`` and 10)."""

_UNITS: Final = frozenset(
    {b"ns", b"us", b"\xc2\xb5s", b"ms", b"s", b"sec", b"secs", b"second", b"seconds", b"min", b"mins", b"minute",
     b"minutes"}
)  # fmt: skip
_UNIT_SHAPE: Final = bytes(
    48 if 48 <= c <= 57 else 95 if c == 32 else c if c in b"smunei" else 97 if 65 <= c <= 90 or 97 <= c <= 122
    else 99 if c == 0xC2 else 46
    for c in range(256)
)  # fmt: skip
"""Digits to ``0``, a space to ``_``, the lowercase letters that units of time start with (``s``, ``m``, ``u``,
``n``) and go on with (``e``, ``i``; ``s``) kept, the other ASCII letters to ``a``, the first byte of ``µ`` to ``c``,
everything else to ``.``: what :data:`_UNIT_AFTER_NUMBER` reads."""
_UNIT_AFTER_NUMBER: Final = re.compile(rb"0(_?)(?:[smunc](?![smuneia])|se|ms|us|ns|mi)")
"""Where, in :data:`_UNIT_SHAPE`, a number (and a space) is followed by what may be a unit of time: a letter a unit
starts with and no other ASCII letter, or the first two letters of a longer unit (``se``, ``ms``, ``us``, ``ns``,
``mi``; ``µ`` is two bytes, the second no letter); not ``12 src`` nor ``3 new``. The definition; it is matched only
at the few places :data:`_UNIT_AFTER_SPACE` and :data:`_UNIT_JOINED` find (matched at every digit, it would start a
match at each)."""
_UNIT: Final = re.compile(rb"(?:\xc2\xb5)?[a-z]+")
_NUMBER_SHAPE: Final = bytes(
    48 if 48 <= c <= 57 else 58 if c == 58 else 95 if c == 32 else 117 if c in b"smun" or c == 0xC2
    else c if c in b"ei" else 97 if 65 <= c <= 90 or 97 <= c <= 122 else 46
    for c in range(256)
)  # fmt: skip
"""Digits to ``0``, ``:`` kept, a space to ``_``, the letters units of time start with (``s``, ``m``, ``u``, ``n``,
the first byte of ``µ``) to ``u``, ``e`` and ``i`` kept, the other ASCII letters to ``a``, everything else to ``.``:
one shape for times (``0:00:00``) and for the numbers before a unit of time."""
_TIME_TAIL: Final = re.compile(rb":00:00")
"""The anchor of a time after its hour's last digit: a literal that starts with a rare byte, which the engine finds
faster than ``bytes.find`` finds ``0:00:00``."""
_UNIT_AFTER_SPACE: Final = re.compile(rb"0_u(?!a)")
_UNIT_JOINED: Final = re.compile(rb"0u(?!a)")
"""Where, in :data:`_NUMBER_SHAPE`, :data:`_UNIT_AFTER_NUMBER` may match (with a space, or without): every place it
matches, and a few more (``3 new``), each checked with it. A literal head of two bytes or three, so the engine does
not start a match at each digit."""
_RARE_SIGNS: Final = tuple(
    re.compile(sign)
    for sign in (rb"P(?:ID|id)", rb"var/", rb"h:(?<=sh:)", rb"pid", rb"mp(?<=tmp)", rb"cess (?<=ocess )")
)
"""What a process id, a shell line number or a temporary path needs in its text (see :func:`_rare_signs`). Each has
a literal head the engine skips to, a rarer one where there was a choice (``h:`` for ``sh:``, ``mp`` for ``tmp``,
``var/`` for ``/var/``, ``cess `` for ``process ``), faster than ``bytes.find`` finds the whole."""
_SHELLS: Final = (b"bash", b"sh", b"zsh", b"dash")
_PID_ANCHORS: Final = (b"pid", b"PID", b"Pid", b"process ", b"Process ")
_LOWER: Final = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
_TMP_PREFIXES: Final = (b"/tmp/", b"/var/folders/", b"/private/var/", b"/var/tmp/")
_RARE_EDGE: Final = 1_024
_METER: Final = b"Dload  Upload   Total   Spent    Left  Speed"
"""The end of the header curl prints above its progress meter."""
_METER_ROWS: Final = re.compile(rb"[0-9 kMGTP.:\r\n-]*")
"""What the meter's rows are made of (sizes, percentages, speeds, times and ``--:--:--``, redrawn in place)."""

Span = tuple[int, int, str]


def _word_edge(data: bytes, start: int, end: int) -> bool:
    """Is ``data[start:end]`` a whole word (no letter or digit right before or after it)?"""
    return (start == 0 or data[start - 1] not in _WORD_BYTES) and (end >= len(data) or data[end] not in _WORD_BYTES)


def _times(data: bytes, shape: bytes, spans: list[Span]) -> None:
    """Times of day (``10:20:30``, ``9:05:00.123``), with the date before them when there is one (``shape`` is
    :data:`_NUMBER_SHAPE`'s)."""
    tail = _TIME_TAIL.search(shape, 1)
    while tail is not None:
        at = tail.start() - 1
        if shape[at] != 48:  # 48: "0", no digit before the colon
            tail = _TIME_TAIL.search(shape, at + 2)
            continue
        start = at - 1 if at and shape[at - 1] == 48 else at  # a two-digit hour
        date = _DATE_BEFORE.search(data, max(0, start - 11), start)
        if date is not None:
            start = date.start()
        match = _TIME.match(data, start)
        end = match.end() if match is not None else at + 7
        if _word_edge(data, start, end):
            spans.append((start, end, "time"))
        tail = _TIME_TAIL.search(shape, end + 1)


def _durations(data: bytes, shape: bytes, spans: list[Span]) -> None:
    """A number followed by a unit of time: ``0.13s``, ``300 ms``, ``12 seconds`` (not ``12 steps``); ``shape`` is
    :data:`_NUMBER_SHAPE`'s. A unit right after its number and one after a space are looked for apart (where the last
    of each kind read ends does not depend on the other)."""
    for anchor, length in ((_UNIT_AFTER_SPACE, 3), (_UNIT_JOINED, 2)):  # (an anchor's length: digit, space, letter)
        after = 0
        found = anchor.search(shape)
        while found is not None:
            at = found.start()
            if at >= after and _UNIT_AFTER_NUMBER.match(data[at : at + 4].translate(_UNIT_SHAPE)) is not None:
                after = _duration(data, at, length, spans)
            found = anchor.search(shape, at + length)


def _duration(data: bytes, at: int, length: int, spans: list[Span]) -> int:
    """The duration whose number ends at ``at`` and whose unit starts ``length - 1`` bytes later, added to ``spans``
    when there is one; where to look for the next."""
    unit_at = at + length - 1
    end = unit_at + 1
    unit = _UNIT.match(data, unit_at)
    if unit is not None:
        end = unit.end()
        if unit.group() in _UNITS and (end >= len(data) or data[end] not in _LETTERS):
            number = _NUMBER_BEFORE.search(data, max(0, at - 24), at + 1)
            start = number.start() if number is not None else at
            if start == 0 or data[start - 1] not in _LETTERS:
                spans.append((start, end, "duration"))
    return end


def _hex_runs(data: bytes, hexes: bytes, spans: list[Span]) -> None:
    """UUIDs; addresses (``0x`` and 6+ hex characters); random-looking hex ids (6+ hex characters mixing digits and
    letters at least twice: ``8f2a91``, ``3f2a9c1d``, not ``abc123`` or a word such as ``defaced``); numbers of
    10+ digits (epoch times, nanosecond counters)."""
    at = hexes.find(b"000000")
    while at >= 0:
        in_word = at > 0 and data[at - 1] in _WORD_BYTES
        address = in_word and at >= 2 and data[at - 2 : at] in (b"0x", b"0X")  # (an "x" is a word's byte)
        if in_word and not address:  # in a word ("Traceback"): nothing to find in it
            run = _HEX_RUN.match(data, at)
            at = hexes.find(b"000000", run.end() if run is not None else at + 6)
            continue
        uuid = _UUID.match(data, at)
        if uuid is not None and _word_edge(data, at, uuid.end()):
            spans.append((at, uuid.end(), "uuid"))
            at = hexes.find(b"000000", uuid.end())
            continue
        run = _HEX_RUN.match(data, at)
        end = run.end() if run is not None else at + 6
        if address and _word_edge(data, at - 2, end):
            spans.append((at - 2, end, "address"))
        elif _word_edge(data, at, end):
            token = data[at:end]
            if token.isdigit():
                if len(token) >= 10:
                    spans.append((at, end, "number"))
            else:
                kinds = token.translate(_DIGIT_OR_LETTER)
                if kinds.count(b"0a") + kinds.count(b"a0") >= 2:
                    spans.append((at, end, "hex"))
        at = hexes.find(b"000000", end)


def _anchored(
    data: bytes, anchors: tuple[bytes, ...], pattern: re.Pattern[bytes], kind: str, spans: list[Span]
) -> None:
    for anchor in anchors:
        at = data.find(anchor)
        while at >= 0:
            match = pattern.match(data, at)
            if match is not None and (at == 0 or data[at - 1] not in _LETTERS):
                spans.append((match.start(), match.end(), kind))
                at = data.find(anchor, match.end())
            else:
                at = data.find(anchor, at + 1)


def _meters(data: bytes, spans: list[Span]) -> None:
    """curl's progress meter: the rows under its header, up to the first byte a row cannot hold (what the transfer
    printed next). Its speeds and times change from one run of the same download to the next."""
    if b"U" not in data:  # "Upload": a byte the engine finds at once, seldom in other text
        return
    at = data.find(_METER)
    while at >= 0:
        start = at + len(_METER)
        rows = _METER_ROWS.match(data, start)
        end = rows.end() if rows is not None else start
        if end > start:
            spans.append((start, end, "progress"))
        at = data.find(_METER, end)


def _shell_lines(data: bytes, spans: list[Span]) -> None:
    """``bash: line 13008:`` and dash's ``sh: 3:`` (where a shell says which line of its input failed)."""
    for shell in _SHELLS:
        at = data.find(shell + b":")
        while at >= 0:
            after = at + len(shell) + 1
            match = _SHELL_LINE.match(data, after)
            if match is not None and (at == 0 or data[at - 1] not in _LETTERS):
                spans.append((after, match.end(), "shell_line"))
            at = data.find(shell + b":", after)


def _rare_signs(edges: bytes) -> bool:
    """May ``edges`` (one edge of a text, or both joined) hold a process id, a shell line number or a temporary path?
    Each needs one of ``pid``, ``PID``, ``Pid``, ``process ``, ``Process `` (:data:`_PID_ANCHORS`), ``sh:`` (every
    shell's name ends in ``sh``), ``tmp`` or ``/var/`` (every temporary path and name holds one) in its own case
    (:func:`_rare` lowercases only to decide what to look for): a False here is what :func:`_rare` would find,
    nothing."""
    for sign in _RARE_SIGNS:  # noqa: SIM110 (a loop: any() over a generator costs more)
        if sign.search(edges) is not None:
            return True
    return False


def volatile_spans(data: bytes) -> list[Span]:
    """The volatile parts of ``data`` (UTF-8 text) as sorted, non-overlapping ``(start, end, kind)`` spans.

    Process ids, shell line numbers and temporary paths are looked for in the first and last
    :data:`_RARE_EDGE` bytes only (where servers, shells and tracebacks print them); the other kinds everywhere.
    """
    spans: list[Span] = []
    shape = data.translate(_NUMBER_SHAPE)
    if b":" in data:
        _times(data, shape, spans)
    _durations(data, shape, spans)
    _hex_runs(data, data.translate(_HEX_SHAPE), spans)
    _meters(data, spans)
    if len(data) <= 2 * _RARE_EDGE:
        if _rare_signs(data):
            _rare(data, 0, spans)
    elif _rare_signs(data[:_RARE_EDGE] + data[-_RARE_EDGE:]):
        _rare(data[:_RARE_EDGE], 0, spans)
        _rare(data[-_RARE_EDGE:], len(data) - _RARE_EDGE, spans)
    if len(spans) < 2:
        return spans
    spans.sort()
    merged = [spans[0]]
    for start, end, kind in spans[1:]:
        last_start, last_end, last_kind = merged[-1]
        if start < last_end:  # overlapping kinds (a hex id inside a temp path): one span covers both
            merged[-1] = (last_start, max(end, last_end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged


def _rare(data: bytes, offset: int, spans: list[Span]) -> None:
    """Process ids, shell line numbers and temporary paths in ``data`` (a part of the text at ``offset``)."""
    found: list[Span] = []
    lower = data.translate(_LOWER)
    if b"sh:" in lower:
        _shell_lines(data, found)
    if b"pid" in lower or b"process " in lower:
        _anchored(data, _PID_ANCHORS, _PID, "pid", found)
    if b"tmp" in lower:
        for prefix in _TMP_PREFIXES:
            if prefix in data:
                _anchored(data, (prefix,), _TMP_PATH, "tmp", found)
        _anchored(data, (b"tmp",), _TMP_NAME, "tmp", found)
    elif b"/var/" in data:
        _anchored(data, (b"/var/",), _TMP_PATH, "tmp", found)
    spans.extend((start + offset, end + offset, kind) for start, end, kind in found)


def masked(text: str) -> bytes:
    """``text`` as UTF-8 bytes with its volatile parts removed (whitespace kept). Lone surrogates are kept
    (``surrogatepass``), so any string masks.

    A text over :data:`LIMIT` characters is masked in its first and last :data:`LIMIT` / 2 characters (cut at a
    line end where there is one); the middle counts by a digest of its letters and punctuation (digits, hex
    letters and blanks dropped, at C speed), so the cost stays bounded and a change of words anywhere still shows.
    """
    if len(text) <= LIMIT:
        return _masked_bytes(text.encode("utf-8", "surrogatepass"))
    half = LIMIT // 2
    head_end = text.rfind("\n", 0, half) + 1 or half
    tail_start = text.find("\n", len(text) - half, len(text) - half // 2) + 1 or len(text) - half
    middle = text[head_end:tail_start].encode("utf-8", "surrogatepass").translate(None, _MIDDLE_DROPPED)
    return b"".join(
        (
            _masked_bytes(text[:head_end].encode("utf-8", "surrogatepass")),
            b"\n\x00",
            digest_bytes(middle).encode("ascii"),
            b"\x00\n",
            _masked_bytes(text[tail_start:].encode("utf-8", "surrogatepass")),
        )
    )


def _masked_bytes_py(data: bytes) -> bytes:
    """``data`` (UTF-8) without its :func:`volatile_spans`: the pure-Python twin of the compiled kernel (see
    :mod:`loopwatch.core._kernels`), which gives the same bytes."""
    spans = volatile_spans(data)
    if not spans:
        return data
    parts = []
    last = 0
    for start, end, _ in spans:
        parts.append(data[last:start])
        last = end
    parts.append(data[last:])
    return b"".join(parts)


_masked_bytes: Final = _kernels.masked_bytes or _masked_bytes_py
