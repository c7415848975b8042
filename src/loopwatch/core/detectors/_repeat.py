"""Consecutive repeats of the same call, judged by their outcomes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._checked import integer_at_least
from .._fingerprint import is_shell_tool, loose_fingerprint
from .._ladder import Ladder
from .._patterns import Pattern
from .._tools import moves_relatively
from ._base import Detector, Finding, Step, call_label, mutates, polls
from ._packed import (
    Indices,
    index_tuple,
    indices,
    indices_json,
    indices_pushed,
)
from ._state import (
    Reader,
    fields_json,
    flag,
    from_fields,
    integer,
    keys_of,
    optional_flag,
    optional_integer,
    optional_text,
)

_INDICES = 8


@dataclass(slots=True)
class RepeatState:
    """A :class:`RepeatDetector`'s session state: the streak of the same call."""

    fp: str | None = None
    """The streak's call fingerprint."""
    loose: str | None = None
    """Its fingerprint with digits ignored (with ``loose``)."""
    n: int = 0
    """Calls since the outcome last changed."""
    total: int = 0
    """Calls in the streak."""
    start: int | None = None
    first: int | None = None
    out: str | None = None
    """The outcome fingerprint the calls keep getting."""
    idx: Indices = b""
    last: int = -1
    """The streak's latest call."""
    changes: int = 0
    """How often the outcome changed."""
    change: bool = False
    """Does the latest call change something (an edit, a write)?"""
    failed: bool | None = None
    """Did every result of the streak fail (``None``: no result yet)?"""


_REQUIRED: Final = ("fp", "loose", "n", "total", "start", "first", "out", "idx", "last", "changes")
_READERS: Final[dict[str, Reader]] = {
    "fp": optional_text,
    "loose": optional_text,
    "n": integer,
    "total": integer,
    "start": optional_integer,
    "first": optional_integer,
    "out": optional_text,
    "idx": indices,
    "last": integer,
    "changes": integer,
    "change": flag,
    "failed": optional_flag,
}

REPEAT = Pattern(
    "repeat",
    "You have called {call} {count} times in a row with the same arguments and got the same result each "
    "time, so calling it again will not tell you anything new. Use the result you already have or try a "
    "different approach; if something is blocking you, say what it is.",
    ladder=Ladder.of(nudge=3, block=5, stop=10),
    block_message="Refused: {call} has already run {count} times with the same arguments and the same result. It "
    "was not run again. Change your approach (different arguments, a different tool) or explain what is blocking "
    "you.",
    specificity=2,
    evidence=("fingerprint", "tool", "call", "match"),
)
"""The same call again with nothing new (also what the doom-loop and behavioral rules report)."""
_POLLING = (
    "You have polled {call} {count} times in a row. Its output is still changing, so the job is still "
    "running: instead of polling again, do ONE blocking wait sized to how long the job should take (a "
    "single command that waits until it finishes, or a longer timeout), then check the result once."
)
POLLING = Pattern(
    "polling",
    _POLLING,
    ladder=Ladder.of(nudge=15),
    block_message=_POLLING,
    specificity=2,
    evidence=("fingerprint", "tool", "call"),
)
"""A wait or a status check again and again while its answer changes."""


def loose_fp(step: Step) -> str:
    """The step's call fingerprint with digits ignored (cached on the step)."""
    cached = step.loose_fp
    if cached is None:
        cached = loose_fingerprint(step.tool or "", step.payload or b"")
        step.loose_fp = cached
    return str(cached)


class RepeatDetector(Detector[RepeatState]):
    """The same call again and again, result-aware.

    Consecutive identical calls (same fingerprint) count as no progress while their outcomes stay the
    same or are missing: ``repeat`` is reported with the length of that run. The very same change (an edit, a
    write, a booking) applied again is never progress, whatever it answers (an editor shows the file it grew).
    For other calls, when the outcome changes the
    run restarts at the call that produced the new outcome (progress), and the calls are counted as
    ``polling``, reported separately (and nudged at a much higher count by the default ladder).
    With ``loose=True`` calls whose arguments differ only in digits (the same block pasted at other line
    numbers) and carry at least ``loose_min_chars`` characters of payload count as the same call.
    """

    name = "repeat"
    kinds = frozenset({"call", "result"})
    patterns = (REPEAT, POLLING)

    def __init__(self, *, result_aware: bool = True, loose: bool = True, loose_min_chars: int = 48) -> None:
        integer_at_least(loose_min_chars, 0, "repeat.loose_min_chars")
        self.result_aware = result_aware
        self.loose = loose
        self.loose_min_chars = loose_min_chars

    def new_state(self) -> RepeatState:
        return RepeatState()

    def dump_state(self, state: RepeatState) -> dict[str, Any]:
        data = fields_json(state)
        data["idx"] = indices_json(state.idx)
        return data

    def load_state(self, data: dict[str, Any]) -> RepeatState:
        keys_of("repeat", data, _REQUIRED, ("change", "failed"))  # snapshots taken before these were kept
        return from_fields(RepeatState, data, "repeat", _READERS)

    def observe(self, state: RepeatState, step: Step) -> Finding | None:
        if step.kind == "call":
            return self._call(state, step)
        if step.kind == "result" and self.result_aware and step.call_index == state.last:
            self._result(state, step)
        return None

    def _same(self, state: RepeatState, step: Step) -> bool:
        if step.call_fp == state.fp:
            return True
        if not self.loose or state.loose is None or len(step.payload or b"") < self.loose_min_chars:
            return False
        return loose_fp(step) == state.loose

    def _call(self, state: RepeatState, step: Step) -> Finding | None:
        if self._same(state, step):
            state.n += 1
            state.total += 1
        else:
            state.fp, state.n, state.total, state.start, state.first = step.call_fp, 1, 1, step.index, step.index
            state.out, state.idx, state.changes = None, b"", 0
            state.failed = None
            state.loose = loose_fp(step) if self.loose else None
        state.last = step.index
        # an editor's answer shows what it wrote: the same change again is no progress, whatever it answers (a call
        # recorded without its arguments is not known to be the same change: its results must tell)
        state.change = bool(step.args) and mutates(step) and not is_shell_tool(step.tool or "")
        state.idx = indices_pushed(state.idx, step.index, _INDICES)
        n, changes = state.n, state.changes
        if state.total < 2:
            return None  # the first call of a streak: nothing to report, whatever kind of call it is
        if polls(step) or moves_relatively(step.tool_key, step.command):
            # a wait or a status check: the same answer again means the job is still running (and `cd ..` again
            # goes somewhere else, silently)
            return self._finding(state, step, "polling", state.total, state.first)
        if n >= 3 or (n >= 2 and changes == 0):
            return self._finding(state, step, "repeat", n, state.start)
        if state.total >= 2 and changes:
            return self._finding(state, step, "polling", state.total, state.first)
        return None

    def _result(self, state: RepeatState, step: Step) -> None:
        state.failed = step.failed if state.failed is None else state.failed and step.failed
        if state.change:
            return
        if state.out is None:
            state.out = step.outcome_fp
        elif step.outcome_fp != state.out:
            state.out, state.n, state.start, state.changes = step.outcome_fp, 1, step.call_index, state.changes + 1

    def _finding(self, state: RepeatState, step: Step, pattern: str, count: int, start: int | None) -> Finding:
        call = call_label(step, 120)
        if pattern == "repeat":
            reason = f"{step.tool} called {count} times in a row with the same arguments and no new result"
        else:
            reason = f"{step.tool} polled {count} times in a row; its result keeps changing"
        return Finding(
            pattern=pattern,
            count=count,
            key=f"{pattern}:{state.fp}:{start}",
            loop_start=start,
            reason=reason,
            indices=index_tuple(state.idx),
            facts={"tool": step.tool, "call": call, "fingerprint": state.fp},
            blockable=True,
            hard=pattern == "repeat",
            stoppable=state.failed is not False,  # the same call failing the same way (or with no result seen)
        )


def repeat(*, result_aware: bool = True, loose: bool = True, loose_min_chars: int = 48) -> RepeatDetector:
    """The repeat detector (see :class:`RepeatDetector`)."""
    return RepeatDetector(result_aware=result_aware, loose=loose, loose_min_chars=loose_min_chars)
