"""No progress: the agent keeps doing the same kind of thing and learns nothing new.

Trivially varied look-ups that all come back empty (``find / -name jdk*``, then ``find /usr -name
java*``...), reworded searches with no match, or any call whose result the agent has already seen in
the streak: none of these are exact repeats, and none brings new information.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

from .._checked import fraction, integer_at_least
from .._fingerprint import preview
from .._ladder import Ladder
from .._lazy_re import lazy_compile
from .._patterns import Pattern
from .._tools import same_places, same_query
from ._base import (
    Detector,
    Finding,
    Step,
    bits_similarity,
    bottom_k,
    line_hashes,
    mutates,
    polls,
    pushed,
    query_of,
    scopes_of,
    searches,
)
from ._state import (
    Reader,
    fields_json,
    flag,
    from_fields,
    integer,
    integer_tuple,
    integers,
    keys_of,
    listed,
    optional_integer,
    optional_integer_tuple,
    optional_text,
    reset,
    sketch,
    sketch_json,
    text,
    texts,
)
from ._state_pack import record_names

_NO_RESULT: Final = lazy_compile(
    r"^\s*(?:No matches found|No such file|Found 0|0 results|No results|Nothing found|not found|"
    r"\[\]|\{\}|None|null|grep: .*: No such file)",
    re.I,
)
_NO_RESULT_STARTS: Final = frozenset("NnFfGg0[{")
"""The characters a match of :data:`_NO_RESULT` starts with (re.I folds no other character to these): most outputs
start with another one and are ruled out before the expression runs."""
_SEEN: Final = 8
_MIN_OUTPUT: Final = 24


_SKETCH: Final = 24


def output_bits(step: Step) -> int:
    """A bottom-k sketch of the distinct lines of a result (masked, lowercased, blanks ignored), folded into 1,024
    bits."""
    return bottom_k(line_hashes(step), _SKETCH)


def _trivial(output: str) -> bool:
    """``len(output.strip()) < _MIN_OUTPUT``, stripping only the ends of a long output: when neither its first
    nor its last 64 characters are all blank, less than 128 characters go."""
    if len(output) >= _MIN_OUTPUT + 128 and not output[:64].isspace() and not output[-64:].isspace():
        return False
    return len(output.strip()) < _MIN_OUTPUT


def _near(sketch: int, others: tuple[int, ...], threshold: float) -> bool:
    """Is ``sketch`` at least ``threshold`` similar to one of ``others``?"""
    return any(bits_similarity(sketch, other) >= threshold for other in others)


def fruitless_output(output: str) -> bool:
    """An empty result or one that says nothing was found."""
    head = output[:300].strip()[:200]
    return not head or (head[0] in _NO_RESULT_STARTS and bool(_NO_RESULT.match(head)))


def fruitless(step: Step) -> bool:
    """:func:`fruitless_output` of a result step's output, computed once per step (several rules ask)."""
    cached = step.fruitless
    if cached is None:
        cached = step.fruitless = fruitless_output(step.output or "")
    return bool(cached)


NO_PROGRESS = Pattern(
    "no_progress",
    "Your last {count} {kind} brought nothing new (last result: {result}). Trying small variations of the "
    "same thing will not either. Step back: use what you already know, try a different kind of step, or "
    "say what you are missing.",
    ladder=Ladder.of(nudge=3),
    specificity=1,
    evidence=("tool",),
)
"""Different look-ups in a row that all bring nothing new."""


Searched = tuple[list[str], list[int], int | None]
"""A call of the streak that ran: (places, query word hashes, call index)."""
Current = tuple[list[str], list[int], list[int]]
"""The pending call: (places, query, indices of the earlier calls it searches again)."""


@dataclass(slots=True)
class NoProgressState:
    """A :class:`NoProgressDetector`'s session state."""

    key: str | None = None
    """The kind of call of the streak (``search`` for look-ups, else the tool key)."""
    n: int = 0
    start: int | None = None
    idx: tuple[int, ...] = ()
    seen: tuple[str | None, ...] = ()
    """The outcome fingerprints of the streak's results (the last 8)."""
    pending: int | None = None
    search: bool = False
    last: str = ""
    repeated: bool = False
    sketches: tuple[int, ...] = ()
    """Sketches of the streak's last results (:func:`output_bits`)."""
    searched: tuple[Searched, ...] = ()
    """The streak's recent calls that ran (the last 8)."""
    current: Current | None = None
    vain: tuple[int | None, ...] = ()
    """The latest calls that found nothing (or nothing new)."""


_FIELDS: Final = attrgetter(*record_names(NoProgressState))
_FRESH: Final = _FIELDS(NoProgressState())
"""The fields of a fresh state."""


def _searched(value: object, what: str) -> Searched:
    if not (isinstance(value, list) and len(value) == 3):
        raise ValueError(f"{what} must be [places, query, index], got {value!r}")
    return texts(value[0], what), integers(value[1], what), optional_integer(value[2], what)


def _current(value: object, what: str) -> Current | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3):
        raise ValueError(f"{what} must be [places, query, repeats], got {value!r}")
    return texts(value[0], what), integers(value[1], what), integers(value[2], what)


_REQUIRED: Final = ("key", "n", "start", "idx", "seen", "pending", "search", "last", "repeated", "sketches")
_READERS: Final[dict[str, Reader]] = {
    "key": optional_text,
    "n": integer,
    "start": optional_integer,
    "idx": integer_tuple,
    "seen": lambda value, what: tuple(listed(value, what, optional_text)),
    "pending": optional_integer,
    "search": flag,
    "last": text,
    "repeated": flag,
    "sketches": lambda value, what: tuple(listed(value, what, sketch)),
    "searched": lambda value, what: tuple(listed(value, what, _searched)),
    "current": _current,
    "vain": optional_integer_tuple,
}


class NoProgressDetector(Detector[NoProgressState]):
    """The same look-up again, in a place already searched, bringing nothing new.

    A *re-search* is a call of the same kind (look-ups: find, grep, ls, read, search...; other tools: each its
    own kind) that looks for what an earlier call of the streak looked for (the words of what it looks for
    overlap by at least ``similarity``, places and program names aside) in the same place or around or inside
    it (``find / -name java``, then ``find /opt -name java``; see :func:`loopwatch.core._tools.search_scopes`). A
    re-search that comes back empty, says nothing matched, or returns a result already seen (exactly, or
    ``near``: most of its lines shared with one, so a re-rendered page is still the same) counts, together with
    the call it repeats. Calls that look for something else, or in a distinct place (the same query over one
    file after another: a batch over distinct items), are work: they neither count nor end a streak; so is a
    narrower look-up right after one that found something (its words and more: ``Poly`` found, then its method
    ``latex`` looked for). A
    result with new content ends the streak (``leaky``: one finding halves a long fruitless streak instead);
    a change (an edit, a write) or a wait starts afresh.

    Reported from ``seen_threshold`` calls when a result repeated, from ``empty_threshold`` when the look-ups
    only came back empty, on the result; then on each further re-search before it runs (blockable, that call
    counted).
    """

    name = "no_progress"
    kinds = frozenset({"call", "result"})
    patterns = (NO_PROGRESS,)
    optional_state = frozenset({"searched", "current", "vain"})  # snapshots taken before re-searches were told apart

    def __init__(
        self,
        *,
        seen_threshold: int = 3,
        empty_threshold: int = 5,
        similarity: float = 0.5,
        near: float = 0.9,
        leaky: bool = True,
    ) -> None:
        integer_at_least(seen_threshold, 1, "no_progress.seen_threshold")
        integer_at_least(empty_threshold, 1, "no_progress.empty_threshold")
        fraction(similarity, "no_progress.similarity")
        fraction(near, "no_progress.near")
        self.seen_threshold = seen_threshold
        self.empty_threshold = empty_threshold
        self.similarity = similarity
        self.near = near
        self.leaky = leaky

    fresh_shared = True  # every change starts afresh: between a change and the next look-up there is nothing
    fresh_kinds = frozenset({"result"})  # a result is only read for the call awaiting it

    def new_state(self) -> NoProgressState:
        return NoProgressState()

    def keeps_fresh(self, step: Step) -> bool:
        # a wait or a change starts afresh (see observe)
        return step.kind != "call" or polls(step) or (not searches(step) and mutates(step))

    def is_fresh(self, state: NoProgressState) -> bool:
        return state.pending is None and state.key is None and _FIELDS(state) == _FRESH

    def dump_state(self, state: NoProgressState) -> dict[str, Any]:
        data = fields_json(state)
        data["sketches"] = [sketch_json(x) for x in state.sketches]
        data["searched"] = [list(item) for item in state.searched]
        data["current"] = None if state.current is None else list(state.current)
        return data

    def load_state(self, data: dict[str, Any]) -> NoProgressState:
        for stale in ("calls", "changed", "words", "scopes", "looking"):  # kept by an earlier release
            data.pop(stale, None)
        keys_of("no_progress", data, _REQUIRED, ("searched", "current", "vain"))
        return from_fields(NoProgressState, data, "no_progress", _READERS)

    def observe(self, state: NoProgressState, step: Step) -> Finding | None:
        if step.kind == "call":
            search = searches(step)
            if polls(step) or (not search and mutates(step)):
                # a wait or a status check is expected to repeat; a change's result shows what was written
                reset(state)
                return None
            return self._call(state, step, search)
        if step.kind == "result" and step.call_index is not None and step.call_index == state.pending:
            return self._result(state, step)
        return None

    def _call(self, state: NoProgressState, step: Step, search: bool) -> Finding | None:
        key = "search" if search else step.tool_key
        if key != state.key:
            state.key, state.n, state.start, state.idx, state.seen, state.repeated = key, 0, None, (), (), False
            state.sketches, state.searched, state.vain = (), (), ()
        places, query = scopes_of(step), query_of(step)
        repeats = self._repeats(places, query, state.searched)
        state.pending, state.search, state.current = step.index, search, (places, query, repeats)
        if repeats and self._report(state, state.n):
            # another re-search in a streak that has brought nothing new for a while
            return self._finding(state, step, state.n + 1, step.index, blockable=True)
        return None

    def _repeats(self, places: list[str], query: list[int], searched: tuple[Searched, ...]) -> list[int]:
        """The earlier calls this one searches again (the same query, :func:`~loopwatch.core._tools.same_query`, in
        the same places, :func:`~loopwatch.core._tools.same_places`), latest last."""
        return [
            index
            for other_places, other_query, index in searched
            if index is not None  # (a result is only judged with its call)
            and same_query(query, other_query, self.similarity)
            and same_places(places, other_places)
        ]

    def _result(self, state: NoProgressState, step: Step) -> Finding | None:
        state.pending = None
        places, query, repeats = state.current or ([], [], [])
        output = step.output or ""
        empty = state.search and (step.failed or fruitless(step))
        trivial = not step.failed and _trivial(output)
        seen = not (trivial or empty) and self._seen(state, step)
        state.seen = pushed(state.seen, step.outcome_fp, _SEEN)
        last = state.searched[-1] if state.searched else None  # the look-up before this one that searched somewhere
        previous = last[2] if last is not None else None
        if not step.failed:  # a call refused for its arguments searched nowhere
            state.searched = pushed(state.searched, (places, query, step.call_index), _SEEN)
        if not (seen or empty):
            if state.search and self.leaky and state.n >= 2:
                state.n //= 2  # one look-up finding something does not end a long fruitless search
                return None
            state.n, state.start, state.idx, state.repeated = 0, None, (), False
            return None
        vain = state.vain
        # a re-search counts when what it repeats found nothing either, or came right before it; a second pass over
        # items that each brought something is work, like a new search, and so is a narrower look-up in what the one
        # before it found (its words and more: the class found, then a method of it)
        narrower = last is not None and set(query) > set(last[1])
        repeated = [index for index in repeats if index in vain or (index == previous and not narrower)]
        state.vain = pushed(vain, step.call_index, _SEEN)
        if not repeated:
            return None
        if state.n == 0:  # the call it repeats belongs to the loop too
            state.n, state.start, state.idx = 1, repeated[-1], (repeated[-1],)
        state.n += 1
        state.idx = pushed(state.idx, step.call_index if step.call_index is not None else step.index, 8)
        state.last = preview(output, 120) or "empty"
        state.repeated = state.repeated or seen
        return self._finding(state, step, state.n, step.index) if self._report(state, state.n) else None

    def _seen(self, state: NoProgressState, step: Step) -> bool:
        """Was this result (or nearly this result) already returned in the streak?"""
        sketch = output_bits(step)
        exact = step.outcome_fp in state.seen
        near = not exact and _near(sketch, state.sketches, self.near)
        state.sketches = pushed(state.sketches, sketch, 4)
        return exact or near

    def _report(self, state: NoProgressState, n: int) -> bool:
        return n >= (self.seen_threshold if state.repeated else self.empty_threshold)

    def _finding(self, state: NoProgressState, step: Step, n: int, index: int, *, blockable: bool = False) -> Finding:
        what = "look-ups" if state.search else f"{step.tool} calls"
        reason = f"{n} {what} for the same thing in the same place brought nothing new (last result: {state.last})"
        return Finding(
            pattern="no_progress",
            count=n,
            key=f"no_progress:{state.key}:{state.start}",
            loop_start=state.start,
            reason=reason,
            indices=(*state.idx, index) if blockable else state.idx,
            facts={"tool": step.tool, "kind": what, "result": state.last},
            blockable=blockable,
        )


def no_progress(
    *, seen_threshold: int = 3, empty_threshold: int = 5, similarity: float = 0.5, near: float = 0.9
) -> NoProgressDetector:
    """The no-progress detector (see :class:`NoProgressDetector`)."""
    return NoProgressDetector(
        seen_threshold=seen_threshold, empty_threshold=empty_threshold, similarity=similarity, near=near
    )
