"""Failures: the same error retried, failure streaks across tools, and test-fix cycles."""

from __future__ import annotations

import re
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

from .._kernels import error_lines, numbers_marked
from .._lazy_re import lazy_compile
from ..errors import ConfigError
from ..fingerprint import preview, word_hashes
from ..ladder import Ladder
from ..patterns import Pattern
from ..tools import batch_items, runs_code
from ._state import (
    Flat,
    Reader,
    fields_json,
    flag,
    flat_append,
    flat_get,
    flat_items,
    flat_json,
    flat_of,
    flat_only,
    flat_pop,
    flat_set,
    from_fields,
    integer,
    integer_tuple,
    integers,
    keys_of,
    listed,
    optional_integer,
    optional_text,
    optional_words,
    packed,
    sketch,
    sketch_json,
    table,
    text,
    texts,
    words,
    words_json,
)
from .base import (
    Detector,
    Finding,
    Step,
    argument_word_array,
    bits_similarity,
    bits_text,
    bottom_k,
    call_label,
    masked_of,
    mutates,
    polls,
    pushed,
    query_of,
    scopes_of,
    searches,
    signature_of,
)
from .progress import fruitless

_FILE_OPS: Final = lazy_compile(r"^\s*(cat|echo|sed|printf|tee|head|tail|awk)\b")
_ECHOES: Final = lazy_compile(r"^\s*(?:echo|printf)\b")
"""Commands that print what they are given: nothing back from them is the harness's doing, not a search that
found nothing (mini-swe-agent's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``)."""


_CUT_NOTE: Final = re.compile(
    r"^\W*(?:\[?truncated|<response clipped>|output truncated|\(truncated|\[output clipped)", re.I
)
"""A line that only says the output was cut (``...[truncated 8460 chars]``): it says nothing about the error."""


def error_excerpt(output: str, limit: int = 200) -> str:
    """The most telling line of an error output: the last line of its last 2,000 characters that says something
    went wrong (:func:`~loopwatch._kernels_py.error_lines`, the lines a failure is compared by), else the last
    non-empty line that is not a note that the output was cut."""
    tail = output[-2_000:]
    lines = error_lines(tail.encode("utf-8", "surrogatepass"))
    if lines:
        return preview(lines[-1].decode("utf-8", "replace").strip(), limit)
    last = None
    for raw in reversed(tail.splitlines()):
        line = raw.strip()
        if line and not _CUT_NOTE.match(line):
            last = line
            break
    return preview(last or output, limit)


def excerpt_of(step: Step) -> str:
    """:func:`error_excerpt` of a result step's output, computed once per step."""
    cached = step.excerpt
    if cached is None:
        cached = step.excerpt = error_excerpt(step.output or "")
    return str(cached)


_TRUNCATED: Final = re.compile(
    rb"\[truncated|<response clipped>|output truncated|\.\.\. ?\(truncated|\[output clipped", re.I
)
_ERROR_LINES: Final = 12
"""Error lines a sketch is made of (the last ones: where a run says what finally went wrong)."""


def error_bits(masked_output: bytes, limit: int = 32) -> int:
    """A small sketch of an error, as a folded set of 1,024 bits: the smallest hashes of the distinct words of its
    (masked) error lines.

    The lines that say something went wrong (an error, a failure, a missing file...) are what two failures must
    share to be the same failure, not the boilerplate around them (a build tool's banner, the echoed command):
    the last few such lines of the first and last 4 KB are read. An output without such a line is read whole (its
    first and last 800 bytes). The words are split and deduplicated at C speed.
    """
    text = masked_output if len(masked_output) <= 8_192 else masked_output[:4_096] + b"\n" + masked_output[-4_096:]
    lines = error_lines(text)
    if lines:
        return bottom_k(word_hashes("", b"\n".join(lines[-_ERROR_LINES:])[:1_600]), limit)
    if _TRUNCATED.search(text[-400:]) or _TRUNCATED.search(text[:400]):
        # cut before it said what went wrong: only the very same output is known to be the same failure
        return bottom_k([zlib.crc32(masked_output)], limit)
    text = text if len(text) <= 1_600 else text[:800] + b"\n" + text[-800:]
    return bottom_k(word_hashes("", text), limit)


def error_words(masked_output: bytes, limit: int = 32) -> str:
    """:func:`error_bits` as base64 text (how snapshots hold it)."""
    return bits_text(error_bits(masked_output, limit))


def error_bits_of(step: Step) -> int:
    """:func:`error_bits` of a step's masked output (a message's text), computed once per step."""
    cached = step.error_bits
    if cached is None:
        cached = step.error_bits = error_bits(masked_of(step))
    return int(cached)


def _numberless(masked_output: bytes) -> int:
    """A hash of a masked output with every number replaced by one placeholder: equal for two outputs that differ
    only in their counts (read where errors are: the whole lines of the first and last 800 bytes)."""
    text = masked_output
    if len(text) > 1_600:  # whole lines only, so that a count one digit longer does not shift the window
        head, tail = text[:800], text[-800:]
        text = head[: head.rfind(b"\n") + 1 or None] + b"\n" + tail[tail.find(b"\n") + 1 :]
    return zlib.crc32(numbers_marked(text))  # each run of digits one "#", at C speed when compiled


def _jaccard(a: int, b: int) -> float:
    """The similarity of two error sketches (:func:`error_bits`); 1.0 when they are the same."""
    return 1.0 if a == b else bits_similarity(a, b)


@dataclass(slots=True)
class Streak:
    """One tool's failures of an error-retry streak."""

    start: int
    """Where the streak began (the first failing call)."""
    classes: tuple[int, ...]
    """The sketches (:func:`error_bits`) of its errors: the first, and a second one it may alternate with."""
    n: int = 0
    idx: tuple[int, ...] = ()
    outcomes: tuple[str | None, ...] = ()
    """The distinct outcome fingerprints of its failures (the last four)."""
    switch: tuple[int, int] | None = None
    """After a switch to the second error: (failures before it, where it began)."""
    error: str = ""
    """The latest failure's excerpt (what a message quotes)."""
    shape: int | None = None
    """With ``counters``: :func:`_numberless` of the latest failure."""
    mut: bool = False
    """Did a call change something since the latest failure?"""
    action: array[int] | None = None
    """The argument words of the latest failing call."""
    variants: bool = False
    """Were the streak's calls variants of each other (other arguments)?"""
    last: int = 0
    """The step of the latest failure."""

    def counted(self) -> tuple[int, int, bool]:
        """(failures, where they began, alternating?): after a switch to a second error only the failures since,
        until the first error comes back."""
        if self.switch is not None:
            return self.n - self.switch[0], self.switch[1], False
        return self.n, self.start, len(self.classes) > 1

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "n": self.n,
            "start": self.start,
            "idx": list(self.idx),
            "classes": [sketch_json(c) for c in self.classes],
            "outcomes": list(self.outcomes),
            "switch": None if self.switch is None else list(self.switch),
            "error": self.error,
        }
        if self.shape is not None:
            data["shape"] = self.shape
        data.update(mut=self.mut, action=words_json(self.action), variants=self.variants, last=self.last)
        return data

    @classmethod
    def from_json(cls, data: object, what: str) -> Streak:
        if not isinstance(data, dict):
            raise ValueError(f"{what} must be an object, got {data!r}")
        keys_of(what, data, ("n", "start", "idx", "classes", "outcomes", "error", "mut", "last"), _STREAK_OPTIONAL)
        switch = data.get("switch")  # missing in streaks saved before second errors were kept apart
        if switch is not None and not (
            isinstance(switch, list) and len(switch) == 2 and all(type(x) is int for x in switch)
        ):
            raise ValueError(f"error_retry: a switch must be [failures before it, index], got {switch!r}")
        return cls(
            start=integer(data["start"], f"{what}: start"),
            classes=tuple(listed(data["classes"], f"{what}: classes", sketch)),
            n=integer(data["n"], f"{what}: n"),
            idx=integer_tuple(data["idx"], f"{what}: idx"),
            outcomes=tuple(listed(data["outcomes"], f"{what}: outcomes", optional_text)),
            switch=None if switch is None else (switch[0], switch[1]),
            error=text(data["error"], f"{what}: error"),
            shape=optional_integer(data.get("shape"), f"{what}: shape"),
            mut=flag(data["mut"], f"{what}: mut"),
            action=optional_words(data.get("action"), f"{what}: action"),
            variants=flag(data.get("variants", False), f"{what}: variants"),
            last=integer(data["last"], f"{what}: last"),
        )


_STREAK_OPTIONAL: Final = ("switch", "shape", "action", "variants")
"""Streak keys older snapshots may lack (``shape`` is only kept with ``counters``)."""


@dataclass(slots=True)
class ErrorRetryState:
    """An :class:`ErrorRetryDetector`'s session state: small tables by tool key (:data:`~._state.Flat`, the least
    recently used first)."""

    streaks: Flat = ()
    """Each tool's :class:`Streak`."""
    calls: tuple[Any, ...] = ()
    """Each tool's last call, in one flat tuple: tool key, the call's fingerprint, its argument words (an ``array``
    shared with the step, never changed; ``None`` for a call recorded before they were kept), tool key..."""
    change: int | None = None
    """The call awaiting its result that may change something."""

    def action(self, key: str) -> array[int] | None:
        """The argument words of the tool's last call."""
        keys = self.calls[::3]
        return self.calls[3 * keys.index(key) + 2] if key in keys else None


class ErrorRetryDetector(Detector):
    """The same action of a tool failing again and again with the same (or an equivalent) error.

    "Tool" is the tool key: for shell-like tools, the program run (``bash:python``, ``bash:cd``...). Errors
    are equivalent when their words (volatile parts such as timestamps, hex ids and temp paths ignored) overlap by
    at least ``similarity``; a streak may alternate between two such errors (a second error counts on its own
    until the first one comes back: A, B, B is two Bs after an A, A, B, A is three alternating failures). Calls
    to other tools in between do not end a streak (the agent looks around, then retries the same thing); a
    success of the same tool, a third kind of error, or ``gap`` steps without a failure of that tool do.

    The same action is a call whose argument values share at least ``variant_similarity`` of their words with the
    last failing call's (the same command, the same edit re-indented): such retries are reported from the
    second failure on (the default preset nudges at three) and are hard evidence. A *variant* (other arguments,
    another escaping, another flag) failing with an equivalent error is the agent trying things: a streak with
    variants is reported from ``variants`` failures, and never as hard evidence. An action of the tool with other
    arguments (less than half their words shared) failing in its own way starts a new streak; the very same error
    whatever the arguments (a shell refusing prose sent as a command) continues it.

    After a call that may have changed something (an edit, an install, a command line that is not a look-up or a
    wait) worked, what fails next starts afresh (the same failure after each of several changes is the rerun rule's
    business); after one that failed, only the very same failure counts.
    Reported on the result completing each retry, and (blockable) on the call that would make the
    ``threshold``-th attempt when it repeats the last failing call exactly with nothing changed in between.

    With ``counters=True`` a failure that reads like the last one except for its numbers (a build stopped with
    fewer targets left, one test more passing) is not the same failure: counts are content, and a count that
    moved says the work advanced. The streak starts afresh.
    """

    name = "error_retry"
    kinds = frozenset({"call", "result"})
    patterns = (
        Pattern(
            "error_retry",
            "{tool} has failed {failures} times in a row with the same error:\n  {error}\nRetrying will fail the "
            "same way. Read the error message and fix its cause (the command, the path, the arguments, a missing "
            "dependency), or use a different tool.",
            ladder=Ladder.of(nudge=3, block=6, stop=10),
            block_message="Refused: {tool} has failed {failures} times in a row with the same error:\n  {error}\n"
            "The call was not run. Read the error and change what caused it before calling {tool} again.",
            specificity=6,
            evidence=("tool", "call", "error"),
        ),
    )
    reset_on_user = False  # the same call failing the same way after a user reply is still a retry

    def __init__(
        self,
        *,
        threshold: int = 3,
        similarity: float = 0.5,
        gap: int = 16,
        tools: int = 4,
        variant_similarity: float = 0.9,
        variants: int = 5,
        counters: bool = False,
    ) -> None:
        self.counters = counters
        self.threshold = threshold
        self.similarity = similarity
        self.gap = gap
        self.tools = tools
        self.variant_similarity = variant_similarity
        self.variants = variants

    def new_state(self) -> ErrorRetryState:
        return ErrorRetryState()

    def dump_state(self, state: ErrorRetryState) -> dict[str, Any]:
        calls = state.calls
        return {
            "streaks": flat_json(state.streaks, Streak.to_json),
            "shapes": dict(zip(calls[::3], calls[1::3], strict=True)),
            "change": state.change,
            "actions": {
                key: action.tolist() for key, action in zip(calls[::3], calls[2::3], strict=True) if action is not None
            },
        }

    def load_state(self, data: dict[str, Any]) -> ErrorRetryState:
        keys_of("error_retry", data, ("streaks", "shapes"), ("change", "actions"))
        shapes = table(data["shapes"], "error_retry: shapes", text)
        actions = table(data.get("actions", {}), "error_retry: actions", words)
        # a tool's words are kept with its fingerprint (snapshots taken before words were kept have none): in the
        # shapes' order
        if list(actions) != [key for key in shapes if key in actions]:
            raise ValueError(f"error_retry: actions {list(actions)} do not go with the shapes {list(shapes)}")
        return ErrorRetryState(
            streaks=flat_of(table(data["streaks"], "error_retry: streaks", Streak.from_json)),
            calls=tuple(chain.from_iterable((key, shape, actions.get(key)) for key, shape in shapes.items())),
            change=optional_integer(data.get("change"), "error_retry: change"),
        )

    def observe(self, state: ErrorRetryState, step: Step) -> Finding | None:
        streaks = state.streaks
        key = step.tool_key or step.tool or "?"
        if step.kind == "call":
            # a call that may change something: a known change, or a command line (or code) that is not a look-up or
            # a wait (a `git submodule update`, a build step, a script run before the retry); a named tool is known
            # by its name
            runs_program = (step.tool_key is not None and step.tool_key != step.tool) or runs_code(step.tool or "")
            change = mutates(step) or (runs_program and not (searches(step) or polls(step)))
            state.change = step.index if change else None
            if streaks and change:
                for other_key, other in flat_items(streaks):
                    other.mut = other.mut or other_key != key
            shape = step.call_fp or ""
            calls = state.calls
            keys = calls[::3]
            same_shape = False
            if key in keys:  # the tool's last call goes last
                at = 3 * keys.index(key)
                same_shape = calls[at + 1] == shape
                calls = calls[:at] + calls[at + 3 :]
            if len(calls) >= 3 * self.tools:
                calls = calls[len(calls) - 3 * self.tools + 3 :] if self.tools > 0 else ()
            state.calls = (*calls, key, shape, argument_word_array(step)) if self.tools > 0 else ()
            streak: Streak | None = flat_get(streaks, key) if streaks else None
            if streak is None or step.index - streak.last > self.gap or streak.mut:
                return None
            if same_shape and streak.counted()[0] + 1 >= self.threshold:
                # the next attempt at a call that keeps failing the same way: say so before it runs
                return self._finding(key, streak, step, blockable=True, attempt=True)
            return None
        if step.kind != "result":
            return None
        if state.change is not None and state.change == step.call_index:
            state.change = None
            if not step.failed and streaks:
                # a change that worked: what fails next is a new attempt (the same failure after each of several
                # changes is the no_effect rule's business, not a retry)
                kept = flat_get(streaks, key)
                state.streaks = () if kept is None else (key, kept)
        if not step.failed or not (step.output or "").strip():
            if state.streaks:
                state.streaks, _ = flat_pop(state.streaks, key)
            return None
        streak = self._join(state, key, step, state.action(key))
        failures = streak.counted()[0]
        if failures < 2 or (streak.variants and failures < self.variants):
            return None
        return self._finding(key, streak, step, blockable=False)

    def _join(self, state: ErrorRetryState, key: str, step: Step, action: array[int] | None) -> Streak:
        words = error_bits_of(step)
        where = step.call_index if step.call_index is not None else step.index
        streaks, found = flat_pop(state.streaks, key)
        streak: Streak | None = found
        if streak is not None and step.index - streak.last > self.gap:
            streak = None
        variant = streak is not None and not _same_action(action, streak.action, self.variant_similarity)
        if (
            variant
            and streak is not None
            and not _same_action(action, streak.action)
            and step.outcome_fp not in streak.outcomes
        ):
            # another action of the tool failing in its own way (another class not found, another package missing):
            # not a retry. The very same error whatever the arguments (a shell refusing the same mistake) still is.
            streak = None
        shape = _numberless(masked_of(step)) if self.counters else None
        same_failure = streak is not None and step.outcome_fp in streak.outcomes
        if shape is not None and streak is not None and not same_failure and streak.shape == shape:
            # the same failure, but a count in it moved (a build with fewer targets left, one test more passing):
            # counters are content, and this one says the work advanced
            streak = None
        if streak is not None and streak.mut:
            # something was changed since the last failure: only the very same outcome is no progress
            if step.outcome_fp not in streak.outcomes:
                streak = None
        elif streak is not None:
            similarities = [_jaccard(words, c) for c in streak.classes]
            best = max(similarities, default=0.0)
            if best < self.similarity:
                if len(streak.classes) >= 2:
                    streak = None
                else:  # a second error: it counts on its own until the first one comes back
                    streak.classes = (*streak.classes, words)
                    streak.switch = (streak.n, where)
            elif similarities.index(best) == 0:
                streak.switch = None  # the first error again: the streak alternates
        if streak is None:
            streak = Streak(start=where, classes=(words,))
        streak.error = excerpt_of(step)  # the latest failure is the one to quote
        if shape is not None:
            streak.shape = shape
        streak.mut = False
        streak.action = action
        streak.variants = streak.variants or variant
        if step.outcome_fp not in streak.outcomes:
            streak.outcomes = pushed(streak.outcomes, step.outcome_fp, 4)
        streak.n += 1
        streak.last = step.index
        streak.idx = pushed(streak.idx, where, 8)
        state.streaks = flat_append(streaks, key, streak, self.tools)
        return streak

    def _finding(self, key: str, streak: Streak, step: Step, *, blockable: bool, attempt: bool = False) -> Finding:
        failures, start, alternating = streak.counted()
        n = failures + 1 if attempt else failures
        verb = f"is being retried after failing {failures} times" if attempt else f"failed {n} times in a row"
        same = "the same two alternating errors" if alternating else "the same error"
        return Finding(
            pattern="error_retry",
            count=n,
            key=f"error_retry:{key}:{streak.start}",  # one streak, one ladder, whichever error counts
            loop_start=start,
            reason=f"{_label(key)} {verb} with {same}, last: {streak.error}",
            indices=streak.idx[-failures:],
            facts={
                "tool": step.tool or key,
                "error": streak.error,
                "call": call_label(step, 120) if step.kind == "call" else step.tool,  # the attempt about to run
                "failures": failures,
            },
            blockable=blockable,
            # no change worked since the first failure, and the same attempt failed the same way each time
            hard=not streak.variants,
        )


def _label(key: str) -> str:
    """A tool key as a person reads it: ``bash:python:pytest`` is ``bash (python pytest)``."""
    tool, _, program = key.partition(":")
    return f"{tool} ({program.replace(':', ' ')})" if program else key


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


class FailureStreakDetector(Detector):
    """Consecutive failed tool results, whatever the tool (seed 002's limit, seed 003's bash cascade).

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


_TEST_COMMAND: Final = lazy_compile(
    r"\b(pytest|py\.test|unittest|nosetests|tox|go\s+test|cargo\s+(?:test|nextest)|"
    r"(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|jest|vitest|mocha|mvn\b[^\n]*\b(?:test|verify)|"
    r"gradlew?\b[^\n]*\btest|dotnet\s+test|rspec|phpunit|ctest|make\s+(?:test|check)|manage\.py\s+test|"
    r"runtests\.py|bin/test)\b"
)
_TEST_FAILED: Final = lazy_compile(
    r"\b(FAILED|FAILURES?!?|failed|ERRORS?\b|BUILD FAILURE|Tests run:.*(?:Failures|Errors): [1-9]|"
    r"test result: FAILED|AssertionError|panicked|Traceback)\b"
)


_TEST_HINTS: Final = ("test", "jest", "mocha", "spec", "verify", "check", "tox")


def is_test_command(text: str) -> bool:
    """True when a command runs a test suite (pytest, go test, cargo test, npm test, mvn test...)."""
    head = text[:400]
    return any(hint in head for hint in _TEST_HINTS) and bool(_TEST_COMMAND.search(head))


@dataclass(slots=True)
class TestFixState:
    """A :class:`TestFixDetector`'s session state."""

    sig: str | None = None
    """The error signature of the failing runs."""
    n: int = 0
    start: int | None = None
    idx: tuple[int, ...] = ()
    pending: int | None = None
    """The test run awaiting its result."""
    summary: str = ""


_TEST_FIX_READERS: Final[dict[str, Reader]] = {
    "sig": optional_text,
    "n": integer,
    "start": optional_integer,
    "idx": integer_tuple,
    "pending": optional_integer,
    "summary": text,
}


class TestFixDetector(Detector):
    """Consecutive failing test runs whose failure stays the same, whatever edits happen in between.

    Re-running tests after edits that change the failure (or make it pass) is progress and restarts the
    count. Seed 003's rethink prompt.
    """

    __test__ = False  # not a pytest test class
    name = "test_fix"
    kinds = frozenset({"call", "result"})
    patterns = (
        Pattern(
            "test_fix",
            "You've had {count} consecutive test failures. Step back and rethink:\n1. Re-read the error messages "
            "carefully\n2. Consider whether your approach is fundamentally wrong\n3. Try a DIFFERENT fix strategy "
            "instead of iterating on the same one",
            ladder=Ladder.of(nudge=3),
            specificity=5,
            evidence=("tool", "error"),
        ),
    )

    def new_state(self) -> TestFixState:
        return TestFixState()

    def dump_state(self, state: TestFixState) -> dict[str, Any]:
        return fields_json(state)

    def load_state(self, data: dict[str, Any]) -> TestFixState:
        keys_of("test_fix", data, _TEST_FIX_READERS)
        return from_fields(TestFixState, data, "test_fix", _TEST_FIX_READERS)

    def observe(self, state: TestFixState, step: Step) -> Finding | None:
        if step.kind == "call":
            command = step.command or step.tool or ""
            # is_test_command reads 400 characters: no need to copy a long command whole
            state.pending = step.index if is_test_command(f"{step.tool} {command[:400]}") else None
            return None
        if step.kind != "result" or state.pending is None or step.call_index != state.pending:
            return None
        state.pending = None
        output = step.output or ""
        if not step.failed and not _TEST_FAILED.search(output[-1500:]):  # the tests passed (or did not run)
            state.sig, state.n, state.start, state.idx = None, 0, None, ()
            return None
        if step.error_sig != state.sig:
            state.sig, state.n, state.start, state.idx = step.error_sig, 0, step.call_index, ()
            state.summary = excerpt_of(step)
        state.n += 1
        state.idx = pushed(state.idx, step.call_index if step.call_index is not None else step.index, 8)
        n = state.n
        if n < 2:
            return None
        return Finding(
            pattern="test_fix",
            count=n,
            key=f"test_fix:{state.sig}",
            loop_start=state.start,
            reason=f"the tests failed {n} times in a row with the same failure: {state.summary}",
            indices=state.idx,
            facts={"tool": step.tool, "error": state.summary},
        )


def _same_action(action: Sequence[int] | None, other: Sequence[int] | None, similarity: float = 0.5) -> bool:
    """Is a failing call the same action as the streak's last: the words of their argument values overlap by at
    least ``similarity``, or differ in two words at most among three or more shared (``--try 1`` for ``--try 0``,
    another line number)?
    Unknown (a streak saved before actions were kept, a result without its call, no arguments): yes."""
    if not action or not other:
        return True
    a, b = set(action), set(other)
    shared = len(a & b)
    return (len(a ^ b) <= 2 and shared >= 3) or shared / len(a | b) >= similarity


def error_retry(
    *,
    threshold: int = 3,
    similarity: float = 0.5,
    gap: int = 16,
    tools: int = 4,
    variant_similarity: float = 0.9,
    variants: int = 5,
    counters: bool = False,
) -> ErrorRetryDetector:
    """The error-retry detector (see :class:`ErrorRetryDetector`)."""
    return ErrorRetryDetector(
        threshold=threshold,
        similarity=similarity,
        gap=gap,
        tools=tools,
        variant_similarity=variant_similarity,
        variants=variants,
        counters=counters,
    )


def failure_streak(
    *, shell_only: bool = False, empty: bool = False, news: bool = False, similarity: float = 0.5
) -> FailureStreakDetector:
    """The consecutive-failure detector (see :class:`FailureStreakDetector`)."""
    return FailureStreakDetector(shell_only=shell_only, empty=empty, news=news, similarity=similarity)


def test_fix_cycle() -> TestFixDetector:
    """The test-fix cycle detector (see :class:`TestFixDetector`)."""
    return TestFixDetector()


@dataclass(slots=True)
class FeedbackState:
    """A :class:`FeedbackRepeatDetector`'s session state."""

    sig: str | None = None
    """The signature of the reply that keeps coming back."""
    n: int = 0
    start: int | None = None
    last_action: int | None = None
    text: str = ""
    idx: tuple[int, ...] = ()
    words: int | None = None
    """The reply's sketch (:func:`error_bits`); ``None`` until a reply is counted."""
    attempt: array[int] | None = None
    """The words of the last attempt (see :func:`_attempt_words`)."""
    variants: bool = False
    """Did the streak's attempts differ from each other?"""


class FeedbackRepeatDetector(Detector):
    """The environment (or the user) answering every attempt with the same canned complaint.

    Harnesses reply to a malformed turn with a user message ("Please always provide EXACTLY ONE
    action..."); when that same reply (digits aside) keeps coming back and the agent keeps trying, it is
    an error retry. Reported on the agent's next attempt once the same reply came ``threshold - 1`` times.

    An attempt that again writes its action out in a reply (a fenced code block) instead of making a call the
    harness could run is the same failure once more (the complaint was about the turn's form, and the form
    has not changed): it is reported from ``reply_threshold`` attempts on (``reply_threshold - 1``
    complaints before it). A call may be the fix, and a reply without code (a story told on, "continue" after
    "continue") is a conversation: they wait for ``threshold``. ``None`` (the default) treats all alike.

    Attempts that differ from each other (less than ``variant_similarity`` of their words shared: another patch
    after "the patch did not resolve the issue, try again") are the agent trying things, as an error retried with
    other arguments is: a streak of such variants is reported from ``variants`` attempts.
    """

    name = "feedback_repeat"
    kinds = frozenset({"call", "result", "message"})
    patterns = ErrorRetryDetector.patterns
    reset_on_user = False

    def __init__(
        self,
        *,
        threshold: int = 3,
        reply_threshold: int | None = None,
        similarity: float = 0.8,
        variant_similarity: float = 0.5,
        variants: int = 5,
    ) -> None:
        if threshold < 2 or (reply_threshold is not None and reply_threshold < 2) or variants < 2:
            raise ConfigError(
                f"threshold, reply_threshold and variants must be at least 2, got {threshold!r}, {reply_threshold!r}"
                f" and {variants!r}",
                field="feedback_repeat",
            )
        self.threshold = threshold
        self.reply_threshold = reply_threshold
        self.similarity = similarity
        self.variant_similarity = variant_similarity
        self.variants = variants

    def new_state(self) -> FeedbackState:
        return FeedbackState()

    def dump_state(self, state: FeedbackState) -> dict[str, Any]:
        return {
            "sig": state.sig,
            "n": state.n,
            "start": state.start,
            "last_action": state.last_action,
            "text": state.text,
            "idx": list(state.idx),
            "words": "" if state.words is None else sketch_json(state.words),
            "attempt": words_json(state.attempt),
            "variants": state.variants,
        }

    def load_state(self, data: dict[str, Any]) -> FeedbackState:
        what = "feedback_repeat"
        keys_of(what, data, ("sig", "n", "start", "last_action", "text", "idx"), ("words", "attempt", "variants"))
        said = data.get("words", "")
        return FeedbackState(
            sig=optional_text(data["sig"], f"{what}: sig"),
            n=integer(data["n"], f"{what}: n"),
            start=optional_integer(data["start"], f"{what}: start"),
            last_action=optional_integer(data["last_action"], f"{what}: last_action"),
            text=text(data["text"], f"{what}: text"),
            idx=integer_tuple(data["idx"], f"{what}: idx"),
            words=None if said == "" else sketch(said, f"{what}: words"),
            attempt=optional_words(data.get("attempt"), f"{what}: attempt"),
            variants=flag(data.get("variants", False), f"{what}: variants"),
        )

    def observe(self, state: FeedbackState, step: Step) -> Finding | None:
        if step.kind == "message" and step.role == "user":
            # the same complaint, or an equivalent one ("found 3 actions", then "found 2 actions")
            signature = signature_of(step)
            words = error_bits_of(step)
            if signature != state.sig and not (
                state.words is not None and _jaccard(words, state.words) >= self.similarity
            ):
                state.sig, state.n, state.start, state.idx = signature, 0, state.last_action, ()
                state.words, state.variants = words, False
                state.text = preview(step.text or "", 160)
            state.n += 1
            return None
        acting = step.kind == "call" or (step.kind == "message" and step.role == "assistant")
        if step.kind == "result" and not step.failed:
            state.sig, state.n, state.start, state.idx, state.words, state.variants = None, 0, None, (), None, False
        if not acting:
            return None
        state.last_action = step.index
        state.idx = pushed(state.idx, step.index, 8)
        attempt = _attempt_words(step)
        previous = state.attempt
        if (
            state.sig is not None
            and attempt is not None
            and previous is not None
            and not _same_action(attempt, previous, self.variant_similarity)
        ):
            state.variants = True
        state.attempt = attempt
        unrun = step.kind == "message" and "```" in (step.text or "")  # an action written out, not made
        threshold = self.reply_threshold if unrun and self.reply_threshold is not None else self.threshold
        if state.variants:
            threshold = max(threshold, self.variants)
        if state.sig is None or state.n + 1 < threshold:
            return None
        n = state.n + 1
        return Finding(
            pattern="error_retry",
            count=n,
            key=f"feedback:{state.sig}:{state.start}",
            loop_start=state.start,
            reason=f"attempt {n} after the same reply {state.n} times: {state.text}",
            indices=state.idx,
            facts={
                "tool": step.tool or "reply",
                "error": state.text,
                "call": step.tool or "reply",
                "failures": state.n,
            },
            blockable=step.kind == "call",
        )


def feedback_repeat(
    *,
    threshold: int = 3,
    reply_threshold: int | None = None,
    similarity: float = 0.8,
    variant_similarity: float = 0.5,
    variants: int = 5,
) -> FeedbackRepeatDetector:
    """The repeated-feedback detector (see :class:`FeedbackRepeatDetector`)."""
    return FeedbackRepeatDetector(
        threshold=threshold,
        reply_threshold=reply_threshold,
        similarity=similarity,
        variant_similarity=variant_similarity,
        variants=variants,
    )


_WORDS: Final = lazy_compile(r"[^\W_]+")
_FENCED: Final = lazy_compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)


def _attempt_words(step: Step, limit: int = 128) -> array[int] | None:
    """What an attempt does, as sorted word hashes: a call's argument values, or the code a reply writes out (its
    fenced blocks); ``None`` for a reply without code (talk, not an action to compare)."""
    if step.kind == "call":
        return argument_word_array(step)
    text = step.text or ""
    if "```" not in text:
        return None
    code = " ".join(_FENCED.findall(text[:8_000]))
    words = dict.fromkeys(_WORDS.findall(code.lower()))
    return packed(sorted({zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in list(words)[:limit]}))
