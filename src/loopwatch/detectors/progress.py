"""No progress: the agent keeps doing the same kind of thing and learns nothing new.

Trivially varied look-ups that all come back empty (``find / -name jdk*``, then ``find /usr -name
java*``...), reworded searches with no match, or any call whose result the agent has already seen in
the streak: none of these are exact repeats, and none brings new information.
"""

from __future__ import annotations

import re
import zlib
from itertools import islice, repeat
from typing import Final

from .._lazy_re import lazy_compile
from ..fingerprint import preview
from ..similarity import jaccard_sets
from .base import (
    Detector,
    Finding,
    State,
    Step,
    bits_similarity,
    canonical_of,
    line_hashes,
    mutates,
    polls,
    push,
    searches,
    sketch_of,
    text_bits,
)

_NO_RESULT: Final = lazy_compile(
    r"^\s*(?:No matches found|No such file|Found 0|0 results|No results|Nothing found|not found|"
    r"\[\]|\{\}|None|null|grep: .*: No such file)",
    re.I,
)
_SEEN: Final = 8
_MIN_OUTPUT: Final = 24


_TOKEN: Final = lazy_compile(r"[^\W_]+")


def _words(text: str, limit: int = 64) -> list[int]:
    """Hashes of the first distinct words of a call's arguments (a small, JSON-able sketch)."""
    words = _TOKEN.findall(text[:600].lower())
    encoded = map(str.encode, words, repeat("utf-8"), repeat("surrogatepass"))
    return list(islice(dict.fromkeys(map(zlib.crc32, encoded)), limit))  # first-seen order, at C speed


_SKETCH: Final = 24


def output_sketch(step: Step) -> str:
    """A bottom-k sketch of the distinct lines of a result (masked, lowercased, blanks ignored)."""
    return sketch_of(line_hashes(step), _SKETCH)


def _trivial(output: str) -> bool:
    """``len(output.strip()) < _MIN_OUTPUT``, stripping only the ends of a long output: when neither its first
    nor its last 64 characters are all blank, less than 128 characters go."""
    if len(output) >= _MIN_OUTPUT + 128 and not output[:64].isspace() and not output[-64:].isspace():
        return False
    return len(output.strip()) < _MIN_OUTPUT


def _near(sketch: str, others: list[str], threshold: float) -> bool:
    """Is ``sketch`` at least ``threshold`` similar to one of ``others`` (``sketch_similarity``, decoded once)?"""
    if not others:
        return False
    x = text_bits(sketch)
    return any(bits_similarity(x, text_bits(other)) >= threshold for other in others)


def fruitless_output(output: str) -> bool:
    """An empty result or one that says nothing was found."""
    head = output[:300].strip()[:200]
    return not head or bool(_NO_RESULT.match(head))


def fruitless(step: Step) -> bool:
    """:func:`fruitless_output` of a result step's output, computed once per step (several rules ask)."""
    cached = step.extra.get("fruitless")
    if cached is None:
        cached = step.extra["fruitless"] = fruitless_output(step.output or "")
    return bool(cached)


class NoProgressDetector(Detector):
    """Consecutive calls of the same kind that bring nothing new.

    Look-ups (find, grep, ls, read, search...: they are one kind) count when they fail, come back empty,
    say nothing matched, or return a result already seen in the streak; other calls of one tool count
    when they return a (non-trivial) result already seen in the streak, exactly or nearly (``near``: the
    estimated share of words, for look-ups of lines, shared with an earlier result; digits and spacing
    aside, so a re-rendered page or a re-run with new timestamps is still "the same"). A result with new content
    ends the streak (for look-ups with ``leaky``, one finding halves a long fruitless streak instead).

    Streaks are reported from ``seen_threshold`` calls when a result repeated, from ``empty_threshold``
    when look-ups only came back empty, and from ``changed_threshold`` as pattern ``no_effect`` when
    changes (edits) were made in between and the result still did not move. Reported on the result and
    on the next call of the kind (blockable, that call counted); for repeated results already on the
    call that would reach ``seen_threshold`` when its arguments overlap the previous call's by at least
    ``similarity`` (word Jaccard).
    """

    name = "no_progress"
    kinds = frozenset({"call", "result"})
    patterns = ("no_progress", "no_effect")

    def __init__(
        self,
        *,
        seen_threshold: int = 3,
        empty_threshold: int = 5,
        changed_threshold: int = 6,
        similarity: float = 0.5,
        near: float = 0.9,
        leaky: bool = True,
    ) -> None:
        self.seen_threshold = seen_threshold
        self.empty_threshold = empty_threshold
        self.changed_threshold = changed_threshold
        self.similarity = similarity
        self.near = near
        self.leaky = leaky

    def new_state(self) -> State:
        return {
            "key": None, "n": 0, "start": None, "idx": [], "seen": [], "calls": [], "pending": None,
            "search": False, "last": "", "repeated": False, "changed": False, "words": [], "sketches": [],
        }  # fmt: skip

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind == "call":
            if polls(step):  # waits and status checks are expected to repeat: not this rule's business
                state.update(self.new_state())
                return None
            return self._call(state, step)
        if step.kind == "result" and step.call_index is not None and step.call_index == state["pending"]:
            return self._result(state, step)
        return None

    def _call(self, state: State, step: Step) -> Finding | None:
        search = searches(step)
        key = "search" if search else step.tool_key
        if key != state["key"]:
            state.update(key=key, n=0, start=None, idx=[], seen=[], calls=[], repeated=False, changed=False)
            state["sketches"] = []
        if not search and state["n"] and mutates(step):
            state["changed"] = True
        state.update(pending=step.index, search=search)
        push(state["calls"], step.index, _SEEN)
        words = _words(canonical_of(step)) if state["n"] else []
        early = state["repeated"] and not state["changed"] and state["n"] + 1 >= self.seen_threshold
        early = early and jaccard_sets(set(words), set(state["words"])) >= self.similarity
        state["words"] = words
        if self._report(state, state["n"]) or early:
            # another call of a kind that has brought nothing new for a while
            return self._finding(state, step, state["n"] + 1, step.index, blockable=True)
        return None

    def _result(self, state: State, step: Step) -> Finding | None:
        state["pending"] = None
        output = step.output or ""
        empty = state["search"] and (step.failed or fruitless(step))
        trivial = not step.failed and _trivial(output)
        seen = not (trivial or empty) and self._seen(state, step, output)
        push(state["seen"], step.outcome_fp, _SEEN)
        if not (seen or empty):
            if state["search"] and self.leaky and state["n"] >= 2:
                state["n"] //= 2  # one look-up finding something does not end a long fruitless search
                return None
            state.update(n=0, start=None, idx=[], repeated=False, changed=False)
            return None
        if state["n"] == 0:
            state["start"] = step.call_index
        state["n"] += 1
        push(state["idx"], step.call_index, 8)
        state["last"] = preview(output, 120) or "empty"
        state["repeated"] = state["repeated"] or seen
        return self._finding(state, step, state["n"], step.index) if self._report(state, state["n"]) else None

    def _seen(self, state: State, step: Step, output: str) -> bool:
        """Was this result (or nearly this result) already returned in the streak?"""
        sketch = output_sketch(step)
        exact = step.outcome_fp in state["seen"]
        near = not exact and _near(sketch, state["sketches"], self.near)
        if sketch:
            push(state["sketches"], sketch, 4)
        if (exact or near) and state["n"] == 0:
            # the call that first produced this result belongs to the loop too
            seen = state["seen"]
            first = seen.index(step.outcome_fp) if exact else len(seen) - 1
            calls = state["calls"]
            state.update(n=1, start=calls[first] if 0 <= first < len(calls) else step.call_index, idx=[])
        return exact or near

    def _report(self, state: State, n: int) -> bool:
        if state["changed"]:
            return n >= self.changed_threshold
        return n >= (self.seen_threshold if state["repeated"] else self.empty_threshold)

    def _finding(self, state: State, step: Step, n: int, index: int, *, blockable: bool = False) -> Finding:
        what = "look-ups" if state["search"] else f"{step.tool} calls"
        pattern = "no_effect" if state["changed"] else "no_progress"
        if state["changed"]:
            reason = f"{n} {what} gave the same result although things were changed in between ({state['last']})"
        else:
            reason = f"{n} {what} in a row brought nothing new (last result: {state['last']})"
        return Finding(
            pattern=pattern,
            count=n,
            key=f"{pattern}:{state['key']}:{state['start']}",
            loop_start=state["start"],
            reason=reason,
            indices=(*state["idx"], index) if blockable else tuple(state["idx"]),
            facts={"tool": step.tool, "kind": what, "result": state["last"]},
            blockable=blockable,
        )


def no_progress(
    *, seen_threshold: int = 3, empty_threshold: int = 5, changed_threshold: int = 6, similarity: float = 0.5
) -> NoProgressDetector:
    """The no-progress detector (see :class:`NoProgressDetector`)."""
    return NoProgressDetector(
        seen_threshold=seen_threshold,
        empty_threshold=empty_threshold,
        changed_threshold=changed_threshold,
        similarity=similarity,
    )
