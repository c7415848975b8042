"""The failure-streak rule: consecutive failed (or empty) tool results, whatever the tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._checked import fraction
from .._fingerprint import preview
from .._ladder import Ladder
from .._lazy_re import lazy_compile
from .._patterns import Pattern
from .._tools import batch_items
from ._base import (
    Detector,
    Finding,
    Step,
    mutates,
    polls,
    pushed,
    query_of,
    scopes_of,
)
from ._failure_text import _jaccard, error_bits_of, excerpt_of
from ._progress import fruitless
from ._state import (
    Flat,
    flag,
    flat_items,
    flat_of,
    flat_only,
    flat_pop,
    flat_set,
    integer,
    integer_tuple,
    integers,
    keys_of,
    listed,
    optional_integer,
    sketch,
    sketch_json,
    table,
    text,
    texts,
)

_FILE_OPS: Final = lazy_compile(r"^\s*(cat|echo|sed|printf|tee|head|tail|awk)\b")
_ECHOES: Final = lazy_compile(r"^\s*(?:echo|printf)\b")
"""Commands that print what they are given: nothing back from them is the harness's doing, not a search that
found nothing (mini-swe-agent's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``)."""


SearchItem = tuple[list[str], list[int]]
"""What a call looks for, and where: (places, query word hashes)."""


def _search_item(value: object, what: str) -> SearchItem:
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"{what} must be [places, query], got {value!r}")
    return texts(value[0], f"{what}: places"), integers(value[1], f"{what}: query")


def _call_index(key: str) -> int:
    if not key.isdigit():
        raise ValueError(f"failure_streak: items must be keyed by call indices, got {key!r}")
    return int(key)


@dataclass(slots=True)
class FailureStreakState:
    """A :class:`FailureStreakDetector`'s session state."""

    n: int = 0
    start: int | None = None
    idx: tuple[int, ...] = ()
    file_ops: bool = True
    last: str = ""
    quiet: tuple[int, ...] = ()
    """Calls whose result may count as empty (not a change, wait or echo), in the order made."""
    items: Flat = ()
    """What those calls look for and where (:data:`SearchItem`), by call index (a small table)."""
    item: SearchItem | None = None
    """What the last empty one looked for."""
    errors: tuple[int, ...] = ()
    """Sketches (:func:`error_bits`) of the streak's distinct errors (the last four)."""


class FailureStreakDetector(Detector[FailureStreakState]):
    """Consecutive failed tool results, whatever the tool (the ``ralph`` design's limit, the ``doom-loop``
    design's bash cascade).

    With ``empty=True`` a call that changes nothing and comes back empty, or saying nothing was found, counts
    as well: an agent whose last calls all failed or found nothing has nothing to go on, whichever tools it
    tried (an install that times out, a ``which javac`` that prints nothing, a guessed file name that is not
    there, in turns). A change (an edit, a write: silent when it works), a wait or an ``echo`` that works ends
    the streak like any result with something in it; one that fails counts as a failure.

    With ``news=True`` an error unlike every earlier error of the streak (less than ``similarity`` of its words
    shared) is news, something learned: it neither counts nor ends the streak. What counts is finding nothing and
    failing the way one already failed: a setup that meets a new error at each step is moving.

    When every failure in the streak came from a shell file operation (cat, echo, sed...), the finding
    says so (``file_ops``) so the message can point to the proper file tools.
    """

    name = "failure_streak"
    kinds = frozenset({"call", "result"})
    patterns = (
        Pattern(
            "failure_streak",
            "The last {count} tool calls all {outcome} (last: {error}). Stop and re-read what they said before the "
            "next call: it tells you what to change.",
            ladder=Ladder.of(nudge=6),
            evidence=("tool", "error"),
        ),
    )

    def __init__(self, *, shell_only: bool = False, empty: bool = False, news: bool = False, similarity: float = 0.5):
        fraction(similarity, "failure_streak.similarity")
        self.shell_only = shell_only
        self.empty = empty
        self.news = news
        self.similarity = similarity

    def new_state(self) -> FailureStreakState:
        return FailureStreakState()

    def dump_state(self, state: FailureStreakState) -> dict[str, Any]:
        return {
            "n": state.n,
            "start": state.start,
            "idx": list(state.idx),
            "file_ops": state.file_ops,
            "last": state.last,
            "quiet": list(state.quiet),
            "items": {str(index): [places, query] for index, (places, query) in flat_items(state.items)},
            "item": None if state.item is None else list(state.item),
            "errors": [sketch_json(e) for e in state.errors],
        }

    def load_state(self, data: dict[str, Any]) -> FailureStreakState:
        keys_of("failure_streak", data, ("n", "start", "idx", "file_ops", "last"), ("quiet", "items", "item", "errors"))
        quiet = data.get("quiet", [])
        if not (isinstance(quiet, list) and len(quiet) <= 8 and all(type(i) is int for i in quiet)):
            raise ValueError(f"failure_streak: quiet must be a list of at most 8 call indices, got {quiet!r}")
        items = table(data.get("items", {}), "failure_streak: items", _search_item)
        return FailureStreakState(
            n=integer(data["n"], "failure_streak: n"),
            start=optional_integer(data["start"], "failure_streak: start"),
            idx=integer_tuple(data["idx"], "failure_streak: idx"),
            file_ops=flag(data["file_ops"], "failure_streak: file_ops"),
            last=text(data["last"], "failure_streak: last"),
            quiet=tuple(quiet),
            items=flat_of({_call_index(key): item for key, item in items.items()}),
            item=None if data.get("item") is None else _search_item(data["item"], "failure_streak: item"),
            errors=tuple(listed(data.get("errors", []), "failure_streak: errors", sketch)),
        )

    def observe(self, state: FailureStreakState, step: Step) -> Finding | None:
        quiet = state.quiet
        if step.kind == "call":
            if self.empty and not (mutates(step) or polls(step) or _ECHOES.match(step.command or "")):
                # calls may run in parallel: their results come back in any order
                quiet = state.quiet = pushed(quiet, step.index, 8)
                items = flat_set(state.items, step.index, (scopes_of(step), query_of(step)))
                state.items = flat_only(items, quiet)
            return None
        if step.kind != "result":
            return None
        shell = step.tool_key is not None and step.tool_key != step.tool
        call = step.call_index if step.call_index is not None else -1  # -1: no call, never in the list
        answers_quiet = call in quiet
        if answers_quiet:
            at = quiet.index(call)
            state.quiet = quiet[:at] + quiet[at + 1 :]
        empty = not step.failed and answers_quiet and fruitless(step)
        state.items, found = flat_pop(state.items, call)
        item: SearchItem | None = found
        if not (step.failed or empty) or (self.shell_only and not shell):
            state.n, state.start, state.idx, state.file_ops, state.item, state.errors = 0, None, (), True, None, ()
            return None
        if empty:
            previous, state.item = state.item, item
            if previous is not None and item is not None and batch_items(*item, *previous):
                return None  # the same thing looked for in one place after another: a batch, not a dead end
        elif self.news:
            words = error_bits_of(step)
            errors = state.errors
            known = any(_jaccard(words, other) >= self.similarity for other in errors)
            if not known:
                state.errors = pushed(errors, words, 4)
                if state.n:
                    return None  # a new error: something learned, not one more dead end
        if state.n == 0:
            state.start = step.call_index
        state.n += 1
        state.idx = pushed(state.idx, step.call_index if step.call_index is not None else step.index, 8)
        command = step.command or ""
        state.file_ops = bool(state.file_ops and not empty and _FILE_OPS.match(command))
        state.last = f"nothing back: {preview(step.output or '', 80) or 'no output'}" if empty else excerpt_of(step)
        n = state.n
        outcome = "failed or found nothing" if self.empty else "failed"
        return Finding(
            pattern="failure_streak",
            count=n,
            key=f"failure_streak:{state.start}",
            loop_start=state.start,
            reason=f"{n} tool calls in a row {outcome} (last: {state.last})",
            indices=state.idx,
            facts={"tool": step.tool, "error": state.last, "outcome": outcome, "advice": _advice(state.file_ops)},
        )


def _advice(file_ops: bool) -> str:
    if file_ops:
        return "These are file operations: use the file tools (read_file, write_file, edit_file) instead of the shell."
    return "Read the errors before the next command: they say what to change."


def failure_streak(
    *, shell_only: bool = False, empty: bool = False, news: bool = False, similarity: float = 0.5
) -> FailureStreakDetector:
    """The consecutive-failure detector (see :class:`FailureStreakDetector`)."""
    return FailureStreakDetector(shell_only=shell_only, empty=empty, news=news, similarity=similarity)
