"""The error-retry rule: the same action of a tool failing again and again with the same error."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

from .._checked import fraction, integer_at_least
from .._kernels import shared_words
from .._ladder import Ladder
from .._patterns import Pattern
from .._tools import runs_code
from ._base import (
    Detector,
    Finding,
    Step,
    call_label,
    masked_of,
    mutates,
    numberless_argument_words,
    polls,
    pushed,
    searches,
)
from ._failure_text import _jaccard, _numberless, error_bits_of, excerpt_of
from ._state import (
    Flat,
    flag,
    flat_append,
    flat_get,
    flat_items,
    flat_json,
    flat_of,
    flat_pop,
    integer,
    integer_tuple,
    keys_of,
    listed,
    optional_integer,
    optional_text,
    optional_words,
    sketch,
    sketch_json,
    table,
    text,
    words,
    words_json,
)
from ._state_pack import pack_table, pack_with, record_maker, table_unpacker, unpack_with


@dataclass(slots=True, init=False)
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
    action: bytes | None = None
    """The argument words, numbers aside, of the latest failing call (:func:`~._base.numberless_argument_words`)."""
    variants: bool = False
    """Were the streak's calls variants of each other (other arguments)?"""
    last: int = 0
    """The step of the latest failure."""

    def __init__(
        self,
        start: int,
        classes: tuple[int, ...],
        n: int = 0,
        idx: tuple[int, ...] = (),
        outcomes: tuple[str | None, ...] = (),
        switch: tuple[int, int] | None = None,
        error: str = "",
        shape: int | None = None,
        mut: bool = False,
        action: bytes | None = None,
        variants: bool = False,
        last: int = 0,
    ) -> None:
        # written out (init=False): mypyc compiles this one; the one dataclasses writes would run as Python
        self.start = start
        self.classes = classes
        self.n = n
        self.idx = idx
        self.outcomes = outcomes
        self.switch = switch
        self.error = error
        self.shape = shape
        self.mut = mut
        self.action = action
        self.variants = variants
        self.last = last

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
    """Each tool's last call, in one flat tuple: tool key, the call's fingerprint, its argument words numbers aside
    (:func:`~._base.numberless_argument_words`, shared with the step; ``None`` for a call recorded before they were
    kept), tool key..."""
    change: int | None = None
    """The call awaiting its result that may change something."""
    failed: str | None = None
    """The tool key of the latest result, when it failed (``None`` after a success)."""

    def action(self, key: str) -> bytes | None:
        """The argument words (numbers aside) of the tool's last call."""
        keys = self.calls[::3]
        return self.calls[3 * keys.index(key) + 2] if key in keys else None


_unpack_streaks = table_unpacker(record_maker(Streak))


class ErrorRetryDetector(Detector[ErrorRetryState]):
    """The same action of a tool failing again and again with the same (or an equivalent) error.

    "Tool" is the tool key: for shell-like tools, the program run (``bash:python``, ``bash:cd``...). Errors
    are equivalent when their words (volatile parts such as timestamps, hex ids and temp paths ignored) overlap by
    at least ``similarity``; the same action retried may alternate between two such errors (a second error counts on
    its own until the first one comes back: A, B, B is two Bs after an A, A, B, A is three alternating failures),
    while another action answered with another error starts afresh (what changed had an effect). Calls
    to other tools in between do not end a streak (the agent looks around, then retries the same thing); a
    success of the same tool, a third kind of error, or ``gap`` steps without a failure of that tool do. The same
    action failing the same way right after a failure recorded under another tool name (a harness that names the
    tool after the command's first word: ``from ...``, then ``1:1 from ...``) continues that tool's streak.

    The same action is a call whose argument values share at least ``variant_similarity`` of their words with the
    last failing call's, numbers aside (the same command, the same edit re-indented or at other line numbers, the
    same download with ``--retry 2`` for ``--retry 1``): such retries are reported from the second failure on (the
    default preset nudges at three) and are hard evidence. A *variant* (other arguments,
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
    state_records = (Streak,)
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
        integer_at_least(threshold, 1, "error_retry.threshold")
        fraction(similarity, "error_retry.similarity")
        integer_at_least(gap, 1, "error_retry.gap")
        integer_at_least(tools, 0, "error_retry.tools")
        fraction(variant_similarity, "error_retry.variant_similarity")
        integer_at_least(variants, 1, "error_retry.variants")
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
        data: dict[str, Any] = {
            "streaks": flat_json(state.streaks, Streak.to_json),
            "shapes": dict(zip(calls[::3], calls[1::3], strict=True)),
            "change": state.change,
            "actions": {
                key: words_json(action)
                for key, action in zip(calls[::3], calls[2::3], strict=True)
                if action is not None
            },
        }
        if state.failed is not None:  # written only when set: a snapshot taken before it was kept writes back the same
            data["failed"] = state.failed
        return data

    def load_state(self, data: dict[str, Any]) -> ErrorRetryState:
        keys_of("error_retry", data, ("streaks", "shapes"), ("change", "actions", "failed"))
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
            failed=optional_text(data.get("failed"), "error_retry: failed"),
        )

    def pack_state(self, state: ErrorRetryState) -> tuple[Any, ...]:
        return pack_with(state, streaks=pack_table)

    def unpack_state(self, packed: Any) -> ErrorRetryState:
        return unpack_with(ErrorRetryState, packed, streaks=_unpack_streaks)

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
            state.calls = (*calls, key, shape, numberless_argument_words(step)) if self.tools > 0 else ()
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
            state.failed = None
            if state.streaks:
                state.streaks, _ = flat_pop(state.streaks, key)
            return None
        streak = self._join(state, key, step, state.action(key))
        state.failed = key
        failures = streak.counted()[0]
        if failures < 2 or (streak.variants and failures < self.variants):
            return None
        return self._finding(key, streak, step, blockable=False)

    def _join(self, state: ErrorRetryState, key: str, step: Step, action: bytes | None) -> Streak:
        words = error_bits_of(step)
        where = step.call_index if step.call_index is not None else step.index
        streaks, found = flat_pop(state.streaks, key)
        if found is None and state.failed is not None and state.failed != key:
            # the same action failing the same way right after, under another tool name (a harness that names the
            # tool after the command's first word: `from ...`, then `1:1 from ...`): the same retry
            other: Streak | None = flat_get(streaks, state.failed)
            if other is not None and _renamed_retry(action, other, step, words, self.similarity):
                streaks, found = flat_pop(streaks, state.failed)
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
                if len(streak.classes) >= 2 or variant:
                    # a third kind of error; or another action answered with another error: the change had an
                    # effect, so this is a new attempt, not the streak alternating
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


def _renamed_retry(action: bytes | None, other: Streak, step: Step, words: int, similarity: float) -> bool:
    """Is a failure of one tool the same retry as the latest failure, of another tool: the same action (known on
    both sides: see :func:`_same_action`) failing with the same or an equivalent error?"""
    if not action or not other.action or not _same_action(action, other.action):
        return False
    return step.outcome_fp in other.outcomes or max(_jaccard(words, c) for c in other.classes) >= similarity


def _label(key: str) -> str:
    """A tool key as a person reads it: ``bash:python:pytest`` is ``bash (python pytest)``."""
    tool, _, program = key.partition(":")
    return f"{tool} ({program.replace(':', ' ')})" if program else key


def _same_action(action: bytes | None, other: bytes | None, similarity: float = 0.5) -> bool:
    """Is a failing call the same action as the streak's last: the words of their argument values, numbers aside
    (:func:`~._base.numberless_argument_words`: ``--try 1`` for ``--try 0``, another line number), overlap by at
    least ``similarity``? Another word (another flag, package, crate or test name) is another attempt once the
    overlap falls below it.
    Unknown (a streak saved before actions were kept, a result without its call, no arguments or numbers only):
    yes."""
    if not action or not other:
        return True
    shared, in_a, in_b = shared_words(action, other)
    return shared / (in_a + in_b - shared) >= similarity


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
