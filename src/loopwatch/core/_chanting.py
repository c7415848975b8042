"""Chanting: one assistant message that repeats the same text over and over.

:class:`ChantTracker` is fed a whole message or its streamed deltas and reports a :class:`ChantHit` when
the message "chants" (Gemini CLI's content loop: a 50-char chunk seen 10 times close together), without
being fooled by the markdown that made Gemini CLI's detector fire on healthy replies.

How it works (pure, incremental, bounded):

* **Lines are classified** from their first characters: fenced code (```` ``` ```` / ``~~~``) is skipped
  entirely; table rows, list items, headings, blockquotes, fence lines and divider lines are not chanting
  content and they restart the prose tracking (Gemini CLI #5144, #5820, #6893). Prose and blank lines
  are the *eligible* text.
* **Checkpoints** on the eligible text: every sentence end (after ``.``, ``!`` or ``?`` followed by a
  space, and before a newline), and every ``2 * chunk_size`` characters where there is none. At a
  checkpoint the ``chunk_size`` characters before it (the chunk) are looked up in the earlier text: at a
  sentence end, in a dict of the chunks that ended earlier sentences (a repeated sentence repeats its
  end); elsewhere, with a backwards ``str.rfind`` (in C) over the last ``max_period`` characters. Normal
  prose has no match, so a 1 KB message costs a few dozen C-level calls.
* **Exact repetition** (``S S S ...``): once the chunk recurs at distance ``d``, the text is checked to be
  ``d``-periodic back to where the repetition started, and followed forward as it streams. A hit is
  reported when ``threshold`` copies of the repeated unit have been seen (the last copy may still lack
  its trailing whitespace separator). A sentence of 10..``max_period`` characters that ends a sentence
  as above is found at exactly ``threshold`` copies; any other repeated unit of period ``d`` once its
  copies span ``d + 3 * chunk_size`` characters (with the defaults: at ``threshold`` copies from 17
  characters on).
* **Repetition with gaps**: ``threshold`` occurrences of the chunk, each at most ``max_period`` after the
  previous one, with a mean distance of at most ``max_mean_distance``. Text that is itself repeated
  around two occurrences does not count in their distance (a long sentence repeated with short gaps is
  close; a phrase scattered through unrelated text is not). As in Gemini CLI (PR #18975) the texts
  between consecutive occurrences may take at most ``threshold // 2`` distinct values (whitespace
  normalized): a list of names sharing a long prefix has all-distinct gaps and is not a chant (nor is a
  sentence repeated with an ever-changing suffix such as "(attempt 7)", which looks exactly the same).
* **Repeated lines**: a markdown line (list item, table row, heading or quote) repeated ``threshold``
  times in a row, or a cycle of 2 or 3 such lines repeated ``threshold`` times, is a chant. List markers
  are ignored (``1. x``, ``2. x`` repeat). Blank and divider lines in between do not matter; a prose or
  code line breaks the run. So 20 identical ``- Checking the file...`` lines are a chant, and 30
  different items sharing a long prefix are not.
* **Guards**: a chunk without a letter or digit (dividers, ``.....``) or whose smallest period is below
  ``min_distinct_period`` (``aaaa``, ``-=-=``, ``no no no``) never counts.

Not detected: a single line chanting inside a list item or a table row (markdown lines are never chunk
searched), and units longer than ``max_period`` (the repeated-message detectors cover whole replies).

The result depends only on the concatenated text, never on how it was split into deltas. After a hit the
tracker is latched: :meth:`ChantTracker.feed` returns None until :meth:`ChantTracker.reset`, and
:attr:`ChantTracker.hit` keeps the hit. The state (:meth:`ChantTracker.to_json`) is a small JSON
document: at most ``history`` characters of eligible text (the most compact form that still allows the
C-speed searches; the chunk dict is rebuilt from it), a few integers, and CRC-32s of recent lines.

This module is the tracker, one class longer than the package's usual module on purpose: it stays in one piece
because its methods share one incremental state (the checkpoints, the period being followed and the gaps between
occurrences are updated together as a message streams) and are read in the order above. How lines are classified is
in ``_chant_lines``; the text helpers it calls (checkpoints, C-speed comparisons, the chunks that can never count)
are in ``_chant_text``."""

from __future__ import annotations

import zlib
from bisect import bisect_left
from collections import Counter
from dataclasses import asdict, dataclass
from itertools import compress, pairwise
from operator import sub
from typing import Any

from ._chant_lines import (
    _CODE,
    _COUNTED,
    _DIVIDER,
    _ELIGIBLE,
    _FENCE,
    _INERT_LINES,
    _PROSE,
    _UNDECIDED,
    _WS,
    _classify,
    _code_lines,
    _plain_lines,
)
from ._chant_text import (
    _ALNUM,
    _TEXT_CAP,
    _anchor_ends,
    _common_prefix,
    _common_suffix,
    _display,
    _live_chunk,
    _merged,
    _no_alnum_run,
    _no_anchor,
    _outside,
    _periodic_zones,
    _rotation,
)
from ._checked import integer_at_least
from ._errors import ConfigError, StateError

__all__ = ["ChantHit", "ChantTracker"]

_MAX_LINE_CYCLE = 3  # the line tracker looks for cycles of 1..3 lines
_VERSION = 1


_FEW_CHECKPOINTS = 64
"""Up to this many checkpoints in one scan, their chunks are tested one by one; past it, as zones of the text."""


@dataclass(frozen=True)
class ChantHit:
    """A chant found in the text fed to a :class:`ChantTracker`.

    ``chunk``: the repeated text (stripped, at most 120 chars). ``count``: how many times it had been
    seen when the hit was reported (at least ``threshold``). ``first_offset``: offset, in the text fed
    since the last reset, of the first character of its first occurrence. ``period``: distance in
    characters between consecutive repetitions (the repeated sentence or lines, separator included).
    """

    chunk: str
    count: int
    first_offset: int
    period: int


# ---------------------------------------------------------------------- the tracker


class ChantTracker:
    """Incremental chanting detector for one message (see the module docstring for the algorithm).

    ``chunk_size``: length of the compared chunk (Gemini CLI: 50). ``threshold``: repetitions needed
    (Gemini CLI: 10). ``max_mean_distance``: repetitions with gaps must average at most this many
    characters apart (Gemini CLI: 250). ``min_distinct_period``: a chunk whose smallest period is shorter
    (a run of one character, a ``-=-=`` divider, ``no no no``) never counts. ``max_period``: longest
    repeated unit followed (a sentence up to this length repeated ``threshold`` times is found).
    ``history``: eligible characters kept (at least ``2 * max_period + chunk_size``).
    """

    __slots__ = (
        "_anchors",
        "_buf",
        "_cand",
        "_chunk",
        "_every",
        "_fence",
        "_head",
        "_history",
        "_hit",
        "_indent",
        "_kind",
        "_lalnum",
        "_last_cp",
        "_lcrc",
        "_lfirst",
        "_line_start",
        "_lkeys",
        "_llen",
        "_lmatch",
        "_lstarts",
        "_ltext",
        "_ltexts",
        "_max_mean",
        "_max_period",
        "_min_period",
        "_offset",
        "_run_len",
        "_run_origin",
        "_scanned",
        "_threshold",
    )

    def __init__(
        self,
        *,
        chunk_size: int = 50,
        threshold: int = 10,
        max_mean_distance: int = 250,
        min_distinct_period: int = 4,
        max_period: int = 600,
        history: int = 5000,
    ) -> None:
        _check_params(chunk_size, threshold, max_mean_distance, min_distinct_period, max_period, history)
        self._chunk = chunk_size
        self._threshold = threshold
        self._max_mean = max_mean_distance
        self._min_period = min_distinct_period
        self._max_period = max_period
        self._history = history
        self._every = 2 * chunk_size  # checkpoint spacing where there is no sentence end
        self.reset()

    # ------------------------------------------------------------------ public API

    @property
    def hit(self) -> ChantHit | None:
        """The hit reported since the last reset, if any."""
        return self._hit

    def reset(self) -> None:
        """Forget everything fed so far (start of a new message)."""
        self._hit: ChantHit | None = None
        self._offset = 0
        self._clear()

    def feed(self, text: str) -> ChantHit | None:
        """Add the next piece of the message; return a hit the first time the message chants."""
        if self._hit is not None or not text:
            return None
        if self._kind == _PROSE and "\n" not in text:  # fast path: a streamed delta inside a line
            off = self._offset
            self._offset += len(text)
            return self._latch(self._append(text, off) or self._flush())
        pos, n = 0, len(text)
        while pos < n:
            hit, pos = self._step(text, pos)
            if hit is not None:
                return self._latch(hit)
        return self._latch(self._flush())

    def _latch(self, hit: ChantHit | None) -> ChantHit | None:
        """Remember a hit; the latched state does not depend on how the text was split."""
        if hit is not None:
            self._offset = 0
            self._clear()
            self._hit = hit
        return hit

    def to_json(self) -> dict[str, Any]:
        """The whole state as a JSON-serialisable dict (bounded: at most ``history`` chars of text)."""
        return {
            "v": _VERSION,
            "params": self._params(),
            "offset": self._offset,
            "line": [self._line_start, self._head, self._kind, self._fence, self._indent],
            "acc": [self._lcrc, self._llen, self._lalnum, self._ltext],
            "lines": [self._lkeys, self._lstarts, self._ltexts, self._lmatch, self._lfirst],
            "run": [self._buf, self._run_len, self._run_origin, self._last_cp, self._cand],
            "hit": None if self._hit is None else asdict(self._hit),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChantTracker:
        """Rebuild a tracker from :meth:`to_json` output (raises :class:`~loopwatch.errors.StateError`, a
        ``ValueError``, on a malformed document)."""
        try:
            return _restore(cls, data)
        except (AttributeError, KeyError, TypeError, IndexError, ValueError) as exc:
            raise StateError(f"invalid ChantTracker state: {exc!r}") from exc

    # ------------------------------------------------------------------ state

    def _params(self) -> dict[str, int]:
        return {
            "chunk_size": self._chunk,
            "threshold": self._threshold,
            "max_mean_distance": self._max_mean,
            "min_distinct_period": self._min_period,
            "max_period": self._max_period,
            "history": self._history,
        }

    def _clear(self) -> None:
        """Drop all tracking state except the offset and the latched hit."""
        self._line_start = self._offset
        self._head = ""
        self._kind = _UNDECIDED
        self._fence = ""
        self._indent = 0
        self._clear_line_acc()
        self._clear_lines()
        self._clear_run()

    def _clear_line_acc(self) -> None:
        self._lcrc, self._llen, self._lalnum, self._ltext = 0, 0, False, ""

    def _break_lines(self) -> None:
        if self._lkeys:
            self._clear_lines()

    def _clear_lines(self) -> None:
        self._lkeys: list[int] = []
        self._lstarts: list[int] = []
        self._ltexts: list[str] = []
        self._lmatch = [0] * _MAX_LINE_CYCLE
        self._lfirst = [0] * _MAX_LINE_CYCLE

    def _clear_run(self) -> None:
        self._buf = ""
        self._run_len = self._scanned = 0
        self._run_origin = 0
        self._last_cp = self._chunk - self._every
        self._cand: list[int] | None = None
        self._anchors: dict[str, int] = {}

    def _rebuild_anchors(self) -> None:
        """The chunk dict holds nothing that the buffer does not: recompute it after a restore."""
        base, size = self._run_len - len(self._buf), self._chunk
        for end in _anchor_ends(self._buf, 0, len(self._buf)):
            if end >= size:
                self._anchors[self._buf[end - size : end]] = end + base

    # ------------------------------------------------------------------ lines

    def _step(self, text: str, pos: int) -> tuple[ChantHit | None, int]:
        """Process whole plain or code lines at once when possible, else (part of) one line."""
        if self._kind == _UNDECIDED and not self._head:
            if self._fence:
                end = _code_lines(text, pos, self._fence)
                if end > pos:
                    self._offset = self._line_start = self._offset + end - pos
                    self._break_lines()
                    return None, end
            else:
                end, prose = _plain_lines(text, pos)
                if end > pos:
                    return self._plain(text[pos:end], prose), end
                inert = _INERT_LINES.match(text, pos)
                if inert is not None:
                    return self._inert(inert.end() - pos), inert.end()
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        return self._segment(text[pos:end], nl >= 0), end + 1

    def _plain(self, block: str, prose: bool) -> ChantHit | None:
        """Whole prose and blank lines."""
        off = self._offset
        self._offset = self._line_start = off + len(block)
        if prose:
            self._break_lines()
        return self._append(block, off)

    def _inert(self, length: int) -> ChantHit | None:
        """Whole markup or divider lines without a letter or a digit: the prose before them is scanned (as
        :meth:`_start_line` does for any such line), and the rest is only how far the text has gone."""
        if self._run_len:
            hit = self._flush()
            if hit is not None:
                return hit
            self._clear_run()
        self._offset = self._line_start = self._offset + length
        return None

    def _segment(self, seg: str, complete: bool) -> ChantHit | None:
        """Process part of one line (``complete``: the line's newline follows ``seg``)."""
        seg_off = self._offset
        self._offset += len(seg) + complete
        content_at = 0
        if self._kind == _UNDECIDED:
            head = self._head + seg
            kind, content_at = _classify(head, complete, self._fence)
            if kind == _UNDECIDED:
                self._head = head
                return None
            seg, seg_off, self._head = head, self._line_start, ""
            hit = self._start_line(kind, head)
            if hit is not None:
                return hit
        kind = self._kind
        hit = None
        if kind in _ELIGIBLE:
            hit = self._append(seg + "\n" if complete else seg, seg_off)
        elif kind in _COUNTED:
            self._accumulate(seg, content_at)
        if hit is None and complete:
            hit = self._end_line(kind)
        return hit

    def _start_line(self, kind: int, head: str) -> ChantHit | None:
        """A line's kind is known: apply fences and resets (the prose before markdown is scanned)."""
        self._kind = kind
        self._indent = len(head) - len(head.lstrip(_WS))
        if kind == _FENCE:
            self._fence = "" if self._fence else head.lstrip(_WS)[0]
        if kind in (_FENCE, _CODE):
            self._break_lines()
        if kind not in _ELIGIBLE and kind != _CODE and self._run_len:
            hit = self._flush()
            if hit is not None:
                return hit
            self._clear_run()
        return None

    def _accumulate(self, seg: str, content_at: int) -> None:
        """Hash a markdown line as it streams (list markers excluded)."""
        body = seg[content_at:]
        if not self._llen:
            # the blanks after a list marker are the marker's, whether they came in this piece or the last one
            body = body.lstrip(" \t")
        self._lcrc = zlib.crc32(body.encode("utf-8", "surrogatepass"), self._lcrc)
        self._llen += len(body)
        if not self._lalnum:
            self._lalnum = _ALNUM.search(seg) is not None
        if len(self._ltext) < _TEXT_CAP:
            start = self._indent if not self._ltext else 0
            self._ltext += seg[start : start + _TEXT_CAP - len(self._ltext)]

    def _end_line(self, kind: int) -> ChantHit | None:
        """The newline of the current line was seen."""
        hit = None
        if kind in _COUNTED and self._lalnum:
            hit = self._count_line((self._llen << 32) | self._lcrc, self._line_start + self._indent)
        elif kind == _PROSE:
            self._break_lines()
        self._clear_line_acc()
        self._kind, self._indent = _UNDECIDED, 0
        self._line_start = self._offset
        return hit

    def _count_line(self, key: int, start: int) -> ChantHit | None:
        """Line tracker: the same line (or cycle of 2-3 lines) ``threshold`` times in a row."""
        keys, starts, texts = self._lkeys, self._lstarts, self._ltexts
        keys.append(key)
        starts.append(start)
        texts.append(self._ltext.strip())
        del keys[: -_MAX_LINE_CYCLE - 1], starts[: -_MAX_LINE_CYCLE - 1], texts[:-_MAX_LINE_CYCLE]
        for k in range(1, _MAX_LINE_CYCLE + 1):
            if len(keys) <= k or keys[-1] != keys[-1 - k]:
                self._lmatch[k - 1] = 0
                continue
            self._lmatch[k - 1] += 1
            if self._lmatch[k - 1] == 1:
                self._lfirst[k - 1] = starts[-1 - k]
            if self._lmatch[k - 1] >= (self._threshold - 1) * k:
                return self._line_hit(k)
        return None

    def _line_hit(self, k: int) -> ChantHit:
        text = " / ".join(self._ltexts[-k:])[:_TEXT_CAP].rstrip()
        period = self._lstarts[-1] - self._lstarts[-1 - k]
        return ChantHit(text, self._lmatch[k - 1] // k + 1, self._lfirst[k - 1], period)

    # ------------------------------------------------------------------ eligible text

    def _append(self, piece: str, piece_off: int) -> ChantHit | None:
        """Add eligible text; it is scanned by :meth:`_flush` (at the latest when ``feed`` returns)."""
        if self._run_len == 0:
            self._run_origin = piece_off
        self._buf += piece
        self._run_len += len(piece)
        return self._flush() if self._run_len - self._scanned > self._history else None

    def _flush(self) -> ChantHit | None:
        """Run the checkpoints of the text appended since the last flush, then trim the buffer."""
        if self._scanned == self._run_len:
            return None
        r0, self._scanned = self._scanned, self._run_len
        hit = self._scan(r0)
        if len(self._buf) > self._history:
            self._buf = self._buf[-self._history :]
            if len(self._anchors) > self._history // 8:
                self._prune_anchors()
        return hit

    def _prune_anchors(self) -> None:
        oldest = self._run_len - self._max_period
        self._anchors = {k: p for k, p in self._anchors.items() if p >= oldest}

    def _scan(self, r0: int) -> ChantHit | None:
        """Run the checkpoints in ``[r0, run_len)`` (the hot path; buffer indices inside)."""
        buf, r1 = self._buf, self._run_len
        base = r1 - len(buf)
        a = r0 - 1 - base if r0 > base else 0
        if r1 <= self._last_cp + self._every and _no_anchor(buf, a):
            return self._advance(r1)  # a small streamed delta with no checkpoint in it
        ends, grid = self._checkpoints(r0, base)
        if ends:
            # recorded before the liveness test: a chunk that can never count is recorded too (it only ever matches
            # itself, and is tested when visited), and usual prose, all of it fresh, needs no test at all
            ends = self._record_fresh(ends, base)
        ends, grid = self._live(ends, grid)
        if ends:
            return self._visit(sorted(ends + [-g for g in grid], key=abs), base)
        return self._visit([-g for g in grid], base)

    def _checkpoints(self, r0: int, base: int) -> tuple[list[int], list[int]]:
        """New checkpoints (buffer indices): sentence ends, and a grid every ``2 * chunk_size`` chars
        without one.

        Positions depend only on the text, never on how it was split: a checkpoint ``c`` is used once
        the character at ``c`` is known (it tells whether ``c`` is a sentence end), i.e. for run
        positions in ``[r0, run_len)``.
        """
        every, end = self._every, self._run_len - base
        found = _anchor_ends(self._buf, r0 - 1 - base if r0 > base else 0, end)
        ends = found[bisect_left(found, max(r0, self._chunk) - base) :]
        last = self._last_cp - base
        grid: list[int] = []
        if ends:
            starts = [last, *ends[:-1]]
            # only the gaps longer than the grid spacing get grid points (in usual prose, none)
            for a, p in compress(zip(starts, ends, strict=True), map(every.__lt__, map(sub, ends, starts))):
                grid += range(a + every, p, every)
            last = ends[-1]
        tail = range(last + every, end, every)
        if tail:
            grid += tail
            last = tail[-1]
        self._last_cp = last + base
        return ends, grid

    def _live(self, ends: list[int], grid: list[int]) -> tuple[list[int], list[int]]:
        """The checkpoints whose chunk could count: a chunk without a letter or a digit, or with a period
        shorter than ``min_distinct_period`` (``a. a. a.``), never does (``_chunk_ok``), so those checkpoints
        are dropped before the Python loop instead of visited (a message of blank lines or short repeated
        lines is thousands of sentence ends). Following an exact repetition waits for the next checkpoint
        kept, with the same result."""
        if not ends and not grid:
            return ends, grid
        size, buf = self._chunk, self._buf
        first = max(0, min(ends[0] if ends else grid[0], grid[0] if grid else ends[0]) - size)
        if len(ends) + len(grid) <= _FEW_CHECKPOINTS:
            # a few checkpoints (usual prose: a sentence end every line or so): each chunk tested on its own, the
            # very test the zones below make for all of them at once (none for a period when the text from the
            # first chunk on is a single chunk, as there)
            periods = range(1, self._min_period if len(buf) - first > size else 1)
            return [c for c in ends if _live_chunk(buf[c - size : c], periods)], [
                c for c in grid if _live_chunk(buf[c - size : c], periods)
            ]
        runs = _no_alnum_run(size).finditer(buf, first)
        dead = [(m.start() + size, m.end()) for m in runs]  # chunks [c - size, c) inside one run
        dead += _periodic_zones(buf, first, size, self._min_period)
        if not dead:
            return ends, grid
        return _outside(ends, _merged(dead)), _outside(grid, _merged(dead))

    def _record_fresh(self, ends: list[int], base: int) -> list[int]:
        """Record the chunks ending at ``ends`` up to the first one already in ``_anchors`` (it ended an
        earlier sentence, or repeats one in this batch); return the ends left to visit (none in normal prose).

        While a repetition is being followed (``_cand`` set) nothing is recorded and every end is visited.
        Otherwise none of the recorded checkpoints can report anything, and following an exact repetition
        (:meth:`_advance`) can wait for the next visited one: the result is the same as visiting them.
        """
        if self._cand is not None:
            return ends
        buf, size, anchors = self._buf, self._chunk, self._anchors
        fresh = {buf[end - size : end]: end + base for end in ends}
        if len(fresh) == len(ends) and anchors.keys().isdisjoint(fresh):
            anchors.update(fresh)
            return []
        return ends[self._record_prefix(ends, base) :]

    def _record_prefix(self, ends: list[int], base: int) -> int:
        """Record the chunks ending at ``ends`` up to the first one already recorded; return its index."""
        buf, size, anchors = self._buf, self._chunk, self._anchors
        for i, end in enumerate(ends):
            chunk = buf[end - size : end]
            if chunk in anchors:
                return i
            anchors[chunk] = end + base
        return len(ends)

    def _visit(self, points: list[int], base: int) -> ChantHit | None:
        """Checkpoints in order: ``+bi`` at a sentence end (dict lookup), ``-bi`` on the grid."""
        buf, size, maxp, anchors = self._buf, self._chunk, self._max_period, self._anchors
        for c in points:
            if self._cand is not None:
                hit = self._advance(abs(c) + base)
                if hit is not None:
                    return hit
            if c > 0:
                bi, chunk = c, buf[c - size : c]
                prev = anchors.get(chunk)
                anchors[chunk] = c + base
                if prev is None or c + base - prev > maxp:
                    continue
                s1 = prev - size - base
            else:
                bi = -c
                s0 = bi - size
                s1 = buf.rfind(buf[s0:bi], s0 - maxp if s0 > maxp else 0, bi - 1)
                if s1 < 0:
                    continue
            hit = self._check(bi, s1, max(0, bi - self._history), base)
            if hit is not None:
                return hit
        return self._advance(self._run_len)

    def _check(self, bi: int, s1: int, lo: int, base: int) -> ChantHit | None:
        """The chunk ending at buffer index ``bi`` recurs at ``s1``: exact repetition, or with gaps?"""
        s0 = bi - self._chunk
        chunk = self._buf[s0:bi]
        if not self._chunk_ok(chunk, s0 - s1):
            return None
        if self._cand is None:
            hit = self._start_periodic(bi, s0 - s1, lo, base)
            if hit is not None:
                return hit
        return self._check_chain(chunk, [s0, s1], lo, base)

    def _chunk_ok(self, chunk: str, d: int) -> bool:
        """Guards: the chunk has a letter or digit and no period shorter than ``min_distinct_period``."""
        return d >= self._min_period and _live_chunk(chunk, range(1, self._min_period))

    # ------------------------------------------------------------------ exact repetition

    def _start_periodic(self, bi: int, d: int, lo: int, base: int) -> ChantHit | None:
        """The text is ``d``-periodic before buffer index ``bi``: measure how far back, then follow it."""
        buf = self._buf
        start = bi - d - _common_suffix(buf, bi, bi - d, bi - d - lo)
        unit = buf[start : start + d]
        w = len(unit) - len(unit.rstrip())
        if (bi - start + w) // d >= self._threshold:
            return self._periodic_hit(start + base, d, w, bi + base)
        self._cand = [start + base, d, bi + base, w]
        return None

    def _advance(self, x: int) -> ChantHit | None:
        """Follow the exact repetition being tracked up to run position ``x``."""
        if self._cand is None or self._cand[2] >= x:
            return None
        start, d, end, w = self._cand
        base = self._run_len - len(self._buf)
        good = end + _common_prefix(self._buf, end - d - base, end - base, x - end)
        fire = start + self._threshold * d - w
        if fire <= good:
            return self._periodic_hit(start, d, w, fire)
        self._cand = [start, d, x, w] if good == x else None
        return None

    def _periodic_hit(self, start: int, d: int, w: int, pos: int) -> ChantHit:
        """Hit for the ``d``-periodic text from run position ``start`` to ``pos``."""
        base = self._run_len - len(self._buf)
        u = start + max((pos - start) // d - 1, 0) * d - base  # a whole copy still in the buffer
        return self._report(self._buf[u : u + d], start, (pos - start + w) // d, d, True)

    def _report(self, unit: str, start: int, count: int, period: int, rotate: bool) -> ChantHit:
        """Hit for ``unit`` first seen at run position ``start``; ``rotate`` when it is a whole period."""
        rot = _rotation(unit) if rotate else 0
        text, lead = _display((unit + unit)[rot : rot + len(unit)] if rot else unit)
        return ChantHit(text, count, self._run_origin + start + rot + lead, period)

    # ------------------------------------------------------------------ repetition with gaps

    def _check_chain(self, chunk: str, occ: list[int], lo: int, base: int) -> ChantHit | None:
        """``threshold`` occurrences of ``chunk`` (newest first in ``occ``), close and mostly alike."""
        buf, size = self._buf, self._chunk
        while len(occ) < self._threshold:
            s = occ[-1]
            prev = buf.rfind(chunk, max(lo, s - self._max_period), s + size - 1)
            if prev < 0:
                return None
            occ.append(prev)
        gaps = {" ".join(buf[b:a].split()) for a, b in pairwise(occ)}
        if len(gaps) > self._threshold // 2 or self._mean_distance(occ, lo) > self._max_mean:
            return None
        return self._chain_hit(occ, lo, base)

    def _extent(self, older: int, newer: int, lo: int, bi: int) -> tuple[int, int]:
        """How far the match of the chunks at ``older`` and ``newer`` extends left and right."""
        size = self._chunk
        room = max(0, newer - older - size)
        left = _common_suffix(self._buf, older, newer, min(room, older - lo))
        right = _common_prefix(self._buf, older + size, newer + size, min(room - left, bi - newer - size))
        return left, right

    def _mean_distance(self, occ: list[int], lo: int) -> float:
        """Mean distance between consecutive occurrences, not counting text repeated around them."""
        bi, total = occ[0] + self._chunk, 0
        for newer, older in pairwise(occ):
            left, right = self._extent(older, newer, lo, bi)
            total += newer - older - left - right
        return total / (len(occ) - 1)

    def _chain_hit(self, occ: list[int], lo: int, base: int) -> ChantHit:
        dists = Counter(a - b for a, b in pairwise(occ))
        period = min(dists, key=lambda d: (-dists[d], d))
        left, right = self._extent(occ[-1], occ[-2], lo, occ[0] + self._chunk)
        start, first_gap = occ[-1] - left, occ[-2] - occ[-1]
        extent = self._buf[start : occ[-1] + self._chunk + right]
        whole = len(extent) >= first_gap
        return self._report(extent[:first_gap] if whole else extent, start + base, len(occ), period, whole)


# ---------------------------------------------------------------------- parameters and JSON state


def _check_params(chunk: int, threshold: int, mean: int, min_period: int, period: int, history: int) -> None:
    for name, value, low in (
        ("chunk_size", chunk, 1),
        ("threshold", threshold, 2),
        ("max_mean_distance", mean, 1),
        ("min_distinct_period", min_period, 1),
        ("max_period", period, 1),
        ("history", history, 1),
    ):
        integer_at_least(value, low, name)
    if period < chunk:
        raise ConfigError(f"must be >= chunk_size ({chunk}), got {period!r}", field="max_period")
    if history < 2 * period + chunk:
        raise ConfigError(
            f"must be >= 2 * max_period + chunk_size ({2 * period + chunk}), got {history!r}", field="history"
        )


_HIT_INTS = ("count", "first_offset", "period")


def _restore(cls: type[ChantTracker], data: dict[str, Any]) -> ChantTracker:
    if data.get("v") != _VERSION:
        raise ValueError(f"unsupported ChantTracker state version: {data.get('v')!r}")
    t = cls(**{k: _int(v) for k, v in data["params"].items()})
    line, acc, lines, run, hit = data["line"], data["acc"], data["lines"], data["run"], data["hit"]
    t._offset, t._line_start, t._kind, t._indent = (
        _int(data["offset"]),
        _int(line[0]),
        _int(line[2]),
        _int(line[4]),
    )
    t._head, t._fence = _str(line[1]), _str(line[3])
    t._lcrc, t._llen, t._lalnum, t._ltext = _int(acc[0]), _int(acc[1]), bool(acc[2]), _str(acc[3])
    t._lkeys, t._lstarts, t._ltexts = _ints(lines[0]), _ints(lines[1]), [_str(x) for x in lines[2]]
    t._lmatch, t._lfirst = _ints(lines[3]), _ints(lines[4])
    t._buf, t._run_len, t._run_origin, t._last_cp = _str(run[0]), _int(run[1]), _int(run[2]), _int(run[3])
    t._cand = None if run[4] is None else _ints(run[4])
    t._scanned = t._run_len
    t._hit = None if hit is None else ChantHit(_str(hit["chunk"]), *_ints(hit[k] for k in _HIT_INTS))
    _validate(t)
    t._rebuild_anchors()
    return t


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an int, got {value!r}")
    return value


def _ints(values: Any) -> list[int]:
    return [_int(v) for v in values]


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a str, got {value!r}")
    return value


def _validate(t: ChantTracker) -> None:
    """Reject restored states that would make the tracker index outside its buffers."""
    ok = (
        _UNDECIDED <= t._kind <= _DIVIDER
        and t._fence in ("", "`", "~")
        and len(t._buf) <= min(t._history, t._run_len)
        and len(t._lmatch) == len(t._lfirst) == _MAX_LINE_CYCLE
        and len(t._lkeys) == len(t._lstarts)
        and (t._cand is None or len(t._cand) == 4)
    )
    if not ok:
        raise ValueError("invalid ChantTracker state: inconsistent fields")
