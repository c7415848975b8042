"""The same look-up (or run) again, with the same answer, and nothing changed since: a circuit of re-reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._checked import integer_at_least
from .._ladder import Ladder
from .._patterns import Pattern
from .._tools import runs_code
from ._base import Detector, Finding, Step, call_label, mutates, polls, searches
from ._packed import (
    Indices,
    index_at,
    index_tuple,
    indices,
    indices_json,
    indices_pushed,
)
from ._state import (
    Flat,
    flat_append,
    flat_get,
    flat_json,
    flat_of,
    flat_pop,
    integer,
    integer_tuple,
    keys_of,
    optional_text,
    table,
)
from ._state_pack import pack_table, pack_with, record_maker, table_unpacker, unpack_with

_KEPT: Final = 32
"""Distinct calls remembered per session (the least recently made are forgotten first)."""

REVISIT = Pattern(
    "revisit",
    "You have made {call} {count} times now, and it answered the same every time before: nothing has changed "
    "since the first time, so it will answer the same again. Work with what it told you, or take a step that changes "
    "something (an edit, a different tool, another source); if what you need is not there, say so.",
    ladder=Ladder.of(nudge=3),
    evidence=("tool", "call"),
)
"""The same look-up made again, here and there, with the same answer each time."""


@dataclass(slots=True, init=False)
class Answered:
    """A call and how it was answered: the outcome, the times answered so, the first time, the last times (8), and
    its label once it is close to being reported."""

    outcome: str | None
    count: int
    first: int
    indices: Indices
    label: str | None

    def __init__(
        self,
        outcome: str | None,
        count: int,
        first: int,
        indices: Indices,
        label: str | None,
    ) -> None:
        # written out (init=False): mypyc compiles this one; the one dataclasses writes would run as Python
        self.outcome = outcome
        self.count = count
        self.first = first
        self.indices = indices
        self.label = label

    def to_json(self) -> list[Any]:
        return [self.outcome, self.count, self.first, indices_json(self.indices), self.label]

    @classmethod
    def from_json(cls, entry: object, what: str) -> Answered:
        if not (isinstance(entry, list) and len(entry) == 5):
            raise ValueError(f"{what} must be [outcome, count, first, indices, label], got {entry!r}")
        return cls(
            optional_text(entry[0], what),
            integer(entry[1], what),
            integer(entry[2], what),
            indices(entry[3], what),
            optional_text(entry[4], what),
        )


@dataclass(slots=True)
class RevisitState:
    """A :class:`RevisitDetector`'s session state."""

    seen: Flat = ()
    """Each call's :class:`Answered` by its fingerprint, the least recently made first (a small table,
    :data:`~._state.Flat`)."""
    polls: tuple[int, ...] = ()
    """The last waits and status checks (their results are left out)."""
    since: int = 0
    """Where the circuit began (the last change): one ladder for all the calls it revisits."""
    fresh: int = -1
    """The last call answered for the first time since the last change."""


_unpack_seen = table_unpacker(record_maker(Answered))


class RevisitDetector(Detector[RevisitState]):
    """A call made again that answers exactly what it answered before, with nothing changed in between.

    Consecutive repeats are the ``repeat`` rule's; this one sees the circuit: the same files read, the same
    search run, the same check repeated, with other look-ups in between (``cat a; ls; cat a; grep x; cat a``).
    Each call is remembered with its result; a call that may change something (an edit, a write, a command line
    that is not a look-up) forgets every other call, since what they answered may have changed (its own entry
    stays: the same program run, or the very same change applied, again with only look-ups in between and
    answering the same, is the same run). Waits and status checks are left out. Reported as ``revisit`` when a
    call is made for the ``threshold``-th time after it answered the same every time before, when the circuit went
    somewhere new (a call answered for the first time since the last change) since the call was last made; or,
    made right again, since its first answer: ``make; cat log; make; make`` is still the circuit (the repeat rule
    counts only the last two), while a call only ever made right again is the repeat rule's and a round of calls
    all made before the cycle rule's. Like the repeat rule, it reports the call as it is made: the answer it will
    get is the one it got each time.
    """

    name = "revisit"
    state_records = (Answered,)
    kinds = frozenset({"call", "result"})
    patterns = (REVISIT,)

    def __init__(self, *, threshold: int = 4, kept: int = _KEPT) -> None:
        integer_at_least(threshold, 2, "revisit.threshold")
        integer_at_least(kept, 1, "revisit.kept")
        self.threshold = threshold
        self.kept = kept

    def new_state(self) -> RevisitState:
        return RevisitState()

    def dump_state(self, state: RevisitState) -> dict[str, Any]:
        return {
            "seen": flat_json(state.seen, Answered.to_json),
            "polls": list(state.polls),
            "since": state.since,
            "fresh": state.fresh,
        }

    def pack_state(self, state: RevisitState) -> tuple[Any, ...]:
        return pack_with(state, seen=pack_table)

    def unpack_state(self, packed: Any) -> RevisitState:
        return unpack_with(RevisitState, packed, seen=_unpack_seen)

    def load_state(self, data: dict[str, Any]) -> RevisitState:
        keys_of("revisit", data, ("seen", "polls", "since", "fresh"))
        seen = data["seen"]
        if not isinstance(seen, dict) or len(seen) > self.kept:
            raise ValueError(f"revisit: seen must be a table of at most {self.kept} calls")
        return RevisitState(
            seen=flat_of(table(seen, "revisit: seen", Answered.from_json)),
            polls=integer_tuple(data["polls"], "revisit: polls"),
            since=integer(data["since"], "revisit: since"),
            fresh=integer(data["fresh"], "revisit: fresh"),
        )

    def observe(self, state: RevisitState, step: Step) -> Finding | None:
        seen = state.seen
        if step.kind == "call":
            if polls(step):
                state.polls = (*state.polls[-7:], step.index)
                return None
            if mutates(step) or (_runs_program(step) and not searches(step)):
                kept = flat_get(seen, step.call_fp)
                state.seen = seen = () if kept is None else (step.call_fp, kept)
                state.since = step.index
            entry: Answered | None = flat_get(seen, step.call_fp or "")
            if entry is None or entry.count + 1 < self.threshold:
                return None
            entry.label = call_label(step, 120)  # kept with the entry (snapshots hold it)
            previous = index_at(entry.indices, -1)
            again = seen[-2] == step.call_fp  # made right again: the last call answered was this one
            if state.fresh < previous and not (again and state.fresh > entry.first):
                return None  # a round of calls all made before (the cycle rule's), or only ever this one (repeat's)
            count = entry.count + 1
            return Finding(
                pattern="revisit",
                count=count,
                key=f"revisit:{state.since}",
                loop_start=entry.first,
                reason=f"{step.tool} made {count} times; it answered the same each time and nothing changed since",
                indices=(*index_tuple(entry.indices), step.index),
                facts={"tool": step.tool, "call": entry.label},
            )
        if step.kind != "result" or step.call_fp is None or step.call_index in state.polls:
            return None
        where = step.call_index if step.call_index is not None else step.index
        seen, entry = flat_pop(seen, step.call_fp)
        if entry is None or entry.outcome != step.outcome_fp:
            entry = Answered(step.outcome_fp, 0, where, b"", None)
            state.fresh = where  # a call not made (or not answered so) since the last change
        entry.count += 1
        entry.indices = indices_pushed(entry.indices, where, 8)
        state.seen = flat_append(seen, step.call_fp, entry, self.kept)  # most recently made last
        return None


def _runs_program(step: Step) -> bool:
    return (step.tool_key is not None and step.tool_key != step.tool) or runs_code(step.tool or "")


def revisit(*, threshold: int = 4) -> RevisitDetector:
    """The revisit detector (see :class:`RevisitDetector`)."""
    return RevisitDetector(threshold=threshold)
