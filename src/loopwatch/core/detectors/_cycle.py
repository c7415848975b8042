"""Repeated units of tool calls: A,A,A / A,B,A,B / A,B,C,A,B,C ... in O(K) work per call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from .._checked import integer_at_least
from .._errors import ConfigError
from .._ladder import Ladder
from .._patterns import Pattern
from ._base import Detector, Finding, Step, call_label, mutates, polls, pushed
from ._packed import (
    Indices,
    Packed,
    ends_with_index,
    index_at,
    index_tuple,
    indices,
    indices_json,
    indices_len,
    indices_pushed,
    packed_add,
    packed_at,
    packed_ends_blank,
    packed_len,
    packed_list,
    packed_matches,
    packed_of,
    packed_push,
    packed_with_last,
)
from ._repeat import loose_fp
from ._state import (
    Reader,
    fields_json,
    flag_tuple,
    from_fields,
    integer_tuple,
    keys_of,
    optional_text_tuple,
)


@dataclass(slots=True)
class CycleState:
    """A :class:`CycleDetector`'s session state: the last ``max_period + 1`` calls (oldest first), and per period
    ``p`` (the list index) the calls in a row equal to the call ``p`` earlier and where that began."""

    fps: Packed = b""
    """Call fingerprints (packed: :data:`~._state.Packed`)."""
    idx: Indices = b""
    tools: tuple[str | None, ...] = ()
    """Labels of the calls that repeated an earlier one (for the message)."""
    outs: Packed = b""
    """Outcome fingerprints (``""``: a change's, not compared; packed)."""
    polls: tuple[bool, ...] = ()
    match: tuple[int, ...] = ()
    starts: tuple[int, ...] = ()


def _packed(value: object, what: str) -> Packed:
    return packed_of(optional_text_tuple(value, what))


_READERS: Final[dict[str, Reader]] = {
    "fps": _packed,
    "idx": indices,
    "tools": optional_text_tuple,
    "outs": _packed,
    "polls": flag_tuple,
    "match": integer_tuple,
    "starts": integer_tuple,
}

CYCLE = Pattern(
    "cycle",
    "You are going round in a cycle: the same {period} calls have repeated {count} times without "
    "progress:\n{calls}\nRepeating the cycle will not change the outcome. Stop, look at what each step "
    "returned, and change the plan (a different step, tool or input) before continuing.",
    ladder=Ladder.of(nudge=3, block=5, stop=7),
    block_message="Refused: this call continues a cycle of {period} calls that has repeated {count} times with the "
    "same results:\n{calls}\nIt was not run. Break the cycle with a different step.",
    specificity=3,
    evidence=("tool", "call", "period"),
)
"""The same few calls in the same order again and again."""


MAX_PERIOD: Final = 64
"""The longest cycle looked for (``max_period``): a longer unit is a plan, not a loop, and every session keeps twice
that many calls."""


class CycleDetector(Detector[CycleState]):
    """Cycles of period ``min_period``..``max_period`` (at most 64), with the number of unit repetitions as count.

    For each period p a counter holds how many consecutive calls equalled the call p positions earlier;
    ``reps = 1 + matched // p`` full units. Only the smallest period explaining the tail is reported, and
    units made of one call repeated are left to the repeat detector unless ``min_period`` is 1.
    ``result_aware``: a result that differs from the result p calls earlier breaks period p (progress);
    the results of changes (edits, writes) are not compared: they show what was written, not progress.
    ``loose``: calls whose arguments differ only in digits (line numbers, offsets) count as the same call.
    ``polls_exempt``: a unit containing a wait or a status check is polling, not a cycle.
    A period is reported once two full units are seen; with ``min_period=1, max_period=3,
    result_aware=False`` this is exactly the ``call-cycles`` design: a 1-call cycle as soon as a call equals the
    previous one, a 2-call cycle when the last two calls equal the two before, a 3-call cycle when the last three equal
    the three before.
    """

    name = "cycle"
    kinds = frozenset({"call", "result"})
    patterns = (CYCLE,)

    def __init__(
        self,
        *,
        max_period: int = 6,
        min_period: int = 2,
        result_aware: bool = True,
        loose: bool = False,
        polls_exempt: bool = True,
    ) -> None:
        integer_at_least(max_period, 1, "cycle.max_period")
        integer_at_least(min_period, 1, "cycle.min_period")
        if not 1 <= min_period <= max_period:
            raise ConfigError(
                f"1 <= min_period <= max_period is required, got {min_period!r} and {max_period!r}",
                field="cycle.min_period",
            )
        if max_period > MAX_PERIOD:
            # every session keeps 2 x max_period calls, and the rule tables of that size for each period
            raise ConfigError(f"at most {MAX_PERIOD} is allowed, got {max_period!r}", field="cycle.max_period")
        self.max_period = max_period
        self.min_period = min_period
        self.result_aware = result_aware
        self.loose = loose
        self.polls_exempt = polls_exempt
        self._zeros = (0,) * (max_period + 1)
        """No period matched: the tuple every session without a repeated call shares."""
        self._no_polls = tuple((False,) * n for n in range(max_period + 2))
        self._no_labels: tuple[tuple[None, ...], ...] = tuple((None,) * n for n in range(max_period + 2))
        """No wait or status check, no label in the last n calls: the tuples the sessions share."""

    def new_state(self) -> CycleState:
        return CycleState(match=self._zeros, starts=self._zeros)

    def dump_state(self, state: CycleState) -> dict[str, Any]:
        data = fields_json(state)
        data["fps"], data["outs"] = packed_list(state.fps), packed_list(state.outs)
        data["idx"] = indices_json(state.idx)
        return data

    def load_state(self, data: dict[str, Any]) -> CycleState:
        keys_of("cycle", data, _READERS)
        state = from_fields(CycleState, data, "cycle", _READERS)
        if len(state.match) != self.max_period + 1 or len(state.starts) != self.max_period + 1:
            raise ValueError(f"cycle: the state was made for another max_period than {self.max_period}")
        return state

    def observe(self, state: CycleState, step: Step) -> Finding | None:
        if step.kind == "call":
            return self._call(state, step)
        if step.kind == "result" and self.result_aware and ends_with_index(state.idx, step.call_index):
            self._result(state, step)
        return None

    def _call(self, state: CycleState, step: Step) -> Finding | None:
        fps = state.fps
        fingerprint = loose_fp(step) if self.loose else step.call_fp
        limit = self.max_period + 1
        repeated, state.fps = packed_add(fps, fingerprint, limit)
        if not repeated:
            # Only a call that repeats one of the last calls can belong to a unit seen twice, so only such
            # calls pay for the per-period comparison, a label, and the mutation and polling checks.
            if state.match is not self._zeros and any(state.match):
                first = state.match[0]
                state.match = self._zeros if first == 0 else (first, *self._zeros[1:])
            state.idx = indices_pushed(state.idx, step.index, limit)
            tools, waits, n = state.tools, state.polls, len(state.tools)
            if n <= limit and tools is self._no_labels[n] and waits is self._no_polls[n]:  # no label, no wait
                n = n + 1 if n < limit else limit
                state.tools, state.polls = self._no_labels[n], self._no_polls[n]
            else:
                state.tools = _pushed_shared(tools, None, limit, self._no_labels)
                state.polls = _pushed_shared(waits, False, limit, self._no_polls)
            state.outs = packed_push(state.outs, None, limit)
            return None
        self._match(state, fps, fingerprint)
        match = state.match
        state.idx = indices_pushed(state.idx, step.index, limit)
        state.tools = _pushed_shared(state.tools, call_label(step, 60), limit, self._no_labels)
        # a change's own output (the file it wrote) differs every time; only look-ups and runs tell progress
        out = "" if mutates(step) else None
        state.outs = packed_push(state.outs, out, limit)
        state.polls = _pushed_shared(state.polls, self.polls_exempt and polls(step), limit, self._no_polls)
        period = self._period(match)
        if period is None or any(state.polls[-period:]):
            return None  # a unit with a wait or status check in it is polling, not a loop
        reps = 1 + match[period] // period
        return self._finding(state, step, period, reps)

    def _match(self, state: CycleState, fps: Packed, fingerprint: str | None) -> None:
        """Count, per period p, one more call equal to the call p positions earlier in ``fps`` (the calls before
        this one), or restart at 0."""
        match, starts = list(state.match), list(state.starts)
        same = packed_matches(fps, fingerprint, self.max_period)
        for p in range(1, self.max_period + 1):
            if same[p - 1]:
                if match[p] == 0:
                    starts[p] = index_at(state.idx, -p)  # the repeated region starts at the call this one repeats
                match[p] += 1
            else:
                match[p] = 0
        state.match, state.starts = tuple(match), tuple(starts)

    def _period(self, match: Sequence[int]) -> int | None:
        for p in range(self.min_period, self.max_period + 1):
            if match[p] < p:
                continue  # not even two full units yet
            if p > 1 and any(match[d] >= match[p] for d in range(1, p) if p % d == 0):
                continue  # a shorter period explains the same tail
            return p
        return None

    def _result(self, state: CycleState, step: Step) -> None:
        outs = state.outs
        if packed_ends_blank(outs):
            return
        state.outs = packed_with_last(outs, step.outcome_fp)
        match = state.match
        if match is self._zeros:
            return  # no period to break
        calls = packed_len(outs)
        broken = [
            p
            for p in range(1, self.max_period + 1)
            if match[p] and calls > p and (out := packed_at(outs, -1 - p)) and out != step.outcome_fp
        ]
        if broken:
            state.match = tuple(0 if p in broken else m for p, m in enumerate(match))

    def _finding(self, state: CycleState, step: Step, period: int, reps: int) -> Finding:
        span = min(indices_len(state.idx), state.match[period] + period)
        indices = index_tuple(state.idx)[-span:]
        start = state.starts[period]
        unit = state.tools[-period:]
        listing = "\n".join(f"  {i}. {call}" for i, call in enumerate(unit, 1))
        key = "cycle:" + ",".join(sorted(fp or "" for fp in packed_list(state.fps)[-period:]))
        return Finding(
            pattern="cycle",
            count=reps,
            key=key,
            loop_start=start,
            reason=f"the same {period}-call sequence repeated {reps} times",
            indices=indices,
            facts={"period": period, "calls": listing, "tool": step.tool, "call": unit[-1]},
            blockable=True,
            hard=True,
        )


T = TypeVar("T")


def _pushed_shared(items: tuple[T, ...], item: T, limit: int, shared: tuple[tuple[T, ...], ...]) -> tuple[T, ...]:
    """``pushed(items, item, limit)``, as the tuple of ``shared`` of its length when it is equal to it (``shared[n]``:
    ``n`` items of one value, the tuple the sessions share)."""
    n = len(items)
    if n <= limit and items is shared[n] and item == shared[-1][-1]:
        return shared[n + 1 if n < limit else limit]
    items = pushed(items, item, limit)
    return shared[len(items)] if items == shared[len(items)] else items


def cycle(
    *,
    max_period: int = 6,
    min_period: int = 2,
    result_aware: bool = True,
    loose: bool = False,
    polls_exempt: bool = True,
) -> CycleDetector:
    """The cycle detector (see :class:`CycleDetector`)."""
    return CycleDetector(
        max_period=max_period,
        min_period=min_period,
        result_aware=result_aware,
        loose=loose,
        polls_exempt=polls_exempt,
    )
