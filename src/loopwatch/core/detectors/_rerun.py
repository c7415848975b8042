"""Changes with no effect: the same run, re-run after each change, keeps giving the same result.

An agent edits, runs its script, edits again, runs it again. Re-running after different edits is progress
while the result moves; when the result stays exactly the same run after run (digits, ids and timestamps
aside), the changes are not reaching it: a Java fix tried out with a Python stand-in script, a print added
to a method that is never called. The edits differ every time, so no repeat or cycle rule sees it, and the
run may well succeed (an empty output), so no failure rule does either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._checked import integer_at_least
from .._fingerprint import preview
from .._ladder import Ladder
from .._patterns import Pattern
from .._tools import batch_items, runs_code, same_words, scope_overlaps, search_scopes
from ._base import (
    Detector,
    Finding,
    Step,
    argument_word_bytes,
    mutates,
    polls,
    pushed,
    scopes_of,
    searches,
)
from ._state import (
    Flat,
    flag,
    flat_append,
    flat_items,
    flat_json,
    flat_of,
    flat_only,
    flat_pop,
    flat_values,
    keys_of,
    optional_integer,
    optional_integer_tuple,
    optional_text,
    table,
    text,
    texts,
    words,
    words_json,
)
from ._state_pack import pack_record, pack_table, pack_with, record_maker, table_unpacker, unpack_with


@dataclass(slots=True, init=False)
class Run:
    """A call run again and again: its outcome, the runs counted, whether a change worked since the last one, where
    the count began, the last runs, and the paths the run names (``None`` in runs saved before they were kept)."""

    outcome: str | None
    count: int
    changed: bool
    first: int | None
    indices: tuple[int | None, ...]
    targets: tuple[str, ...] | None = None

    def __init__(
        self,
        outcome: str | None,
        count: int,
        changed: bool,
        first: int | None,
        indices: tuple[int | None, ...],
        targets: tuple[str, ...] | None = None,
    ) -> None:
        # written out (init=False): mypyc compiles this one; the one dataclasses writes would run as Python (~0.7 us
        # a failed run's result)
        self.outcome = outcome
        self.count = count
        self.changed = changed
        self.first = first
        self.indices = indices
        self.targets = targets

    def to_json(self) -> list[Any]:
        data: list[Any] = [self.outcome, self.count, self.changed, self.first, list(self.indices)]
        if self.targets is not None:
            data.append(list(self.targets))
        return data

    @classmethod
    def from_json(cls, run: object) -> Run:
        # runs saved before their targets were kept have five fields
        if not (isinstance(run, list) and len(run) in (5, 6) and type(run[1]) is int and type(run[2]) is bool):
            raise ValueError(f"rerun: a run must be [outcome, count, changed, first, indices, paths], got {run!r}")
        if type(run[3]) is not int or not isinstance(run[4], list) or not all(type(i) is int for i in run[4]):
            raise ValueError(f"rerun: a run's first index and indices must be integers, got {run[3:5]!r}")
        if len(run) == 6 and not (isinstance(run[5], list) and all(isinstance(t, str) for t in run[5])):
            raise ValueError(f"rerun: a run's targets must be a list of paths, got {run[5]!r}")
        outcome = optional_text(run[0], "rerun: a run's outcome")
        return cls(outcome, run[1], run[2], run[3], tuple(run[4]), tuple(run[5]) if len(run) == 6 else None)


@dataclass(slots=True, init=False)
class Version:
    """The last version of an action (a tool key): its outcome, the versions counted, its argument words and
    places, where the count began, the last versions."""

    outcome: str | None
    count: int
    words: bytes
    places: list[str]
    first: int | None
    indices: tuple[int | None, ...]

    def __init__(
        self,
        outcome: str | None,
        count: int,
        words: bytes,
        places: list[str],
        first: int | None,
        indices: tuple[int | None, ...],
    ) -> None:
        # written out (init=False), as Run's
        self.outcome = outcome
        self.count = count
        self.words = words
        self.places = places
        self.first = first
        self.indices = indices

    def to_json(self) -> list[Any]:
        return [self.outcome, self.count, words_json(self.words), self.places, self.first, list(self.indices)]

    @classmethod
    def from_json(cls, version: object, what: str) -> Version:
        if not (isinstance(version, list) and len(version) == 6 and type(version[1]) is int):
            raise ValueError(
                f"rerun: a version must be [outcome, count, words, places, first, indices], got {version!r}"
            )
        return cls(
            optional_text(version[0], what),
            version[1],
            words(version[2], what),
            texts(version[3], what),
            optional_integer(version[4], what),
            optional_integer_tuple(version[5], what),
        )


@dataclass(slots=True, init=False)
class Pending:
    """The call awaiting its result: does it change something? If not, its argument words and places."""

    index: int
    changes: bool
    words: bytes | None = None
    places: list[str] | None = None

    def __init__(
        self,
        index: int,
        changes: bool,
        words: bytes | None = None,
        places: list[str] | None = None,
    ) -> None:
        # written out (init=False): mypyc compiles this one; the one dataclasses writes would run as Python
        self.index = index
        self.changes = changes
        self.words = words
        self.places = places

    def look_json(self) -> list[Any]:
        return [] if self.words is None else [words_json(self.words), self.places]

    @classmethod
    def from_json(cls, pending: list[Any]) -> Pending:
        if len(pending) == 2:
            return cls(pending[0], flag(pending[1], "rerun: pending"))
        return cls(
            pending[0],
            flag(pending[1], "rerun: pending"),
            words(pending[2], "rerun: pending words"),
            texts(pending[3], "rerun: pending places"),
        )


@dataclass(slots=True)
class RerunState:
    """A :class:`RerunDetector`'s session state: runs by call fingerprint and versions by tool key (small tables,
    :data:`~._state.Flat`, the least recently used first), and the call awaiting its result."""

    runs: Flat = ()
    pending: Pending | None = None
    versions: Flat = ()


_unpack_runs = table_unpacker(record_maker(Run))
_unpack_versions = table_unpacker(record_maker(Version))


class RerunDetector(Detector[RerunState]):
    """The same call re-run after changes, failing the same way or printing nothing each time.

    Counted per call (its fingerprint; the last ``calls`` distinct calls are kept): a run counts when its
    result equals the previous run's, that result failed or is empty, and a change (a call that mutates)
    worked in between; a re-run with nothing changed in between neither counts nor breaks the count (the
    repeat rule's business); a different result starts over, and so does a look at what the run runs (the
    script or test file it names): that is the investigation the sameness calls for. A run that succeeds with
    something to say (a green test suite, a linter's "All checks passed!") never counts: re-checking after
    each step of a refactor is how healthy work looks. Reported, as pattern ``no_effect``, from ``threshold``
    runs (the first one included) on the result of the last. Look-ups and waits are left to their own rules.
    Such runs sometimes end with a correct change: the default preset nudges them (once, from the fifth
    round) and never blocks or stops them.
    """

    name = "rerun"
    state_records = (Run, Version, Pending)
    kinds = frozenset({"call", "result"})
    patterns = (
        Pattern(
            "no_effect",
            "{tool} has returned the same result {count} times although you changed things in between ({result}). "
            "Your changes are probably not reaching what runs. Before the next change, check what the run actually "
            "executes: an installed copy instead of the file you edit (pip show, python -c 'import m; "
            "print(m.__file__)'), another import path, a stale cache or build (rebuild, reinstall, clear "
            "__pycache__), or a script that never calls the code you change.",
            ladder=Ladder.of(nudge=5),
            specificity=4,
            evidence=("tool",),
        ),
    )
    reset_on_user = False  # a reply does not make the changes reach what runs: the same output is still the same

    def __init__(self, *, threshold: int = 3, calls: int = 4) -> None:
        integer_at_least(threshold, 2, "rerun.threshold")
        integer_at_least(calls, 1, "rerun.calls")
        self.threshold = threshold
        self.calls = calls

    def new_state(self) -> RerunState:
        return RerunState()

    def dump_state(self, state: RerunState) -> dict[str, Any]:
        pending = state.pending
        return {
            "runs": flat_json(state.runs, Run.to_json),
            "pending": None if pending is None else [pending.index, pending.changes, *pending.look_json()],
            "versions": flat_json(state.versions, Version.to_json),
        }

    def pack_state(self, state: RerunState) -> tuple[Any, ...]:
        return pack_with(state, runs=pack_table, pending=pack_record, versions=pack_table)

    def unpack_state(self, packed: Any) -> RerunState:
        return unpack_with(
            RerunState, packed, runs=_unpack_runs, pending=record_maker(Pending), versions=_unpack_versions
        )

    def load_state(self, data: dict[str, Any]) -> RerunState:
        keys_of("rerun", data, ("runs", "pending"), ("versions",))  # snapshots taken before versions were counted
        runs, pending = data["runs"], data["pending"]
        if not isinstance(runs, dict):
            raise ValueError("rerun: runs must be an object")
        if pending is not None and not (
            isinstance(pending, list) and len(pending) in (2, 4) and type(pending[0]) is int
        ):
            raise ValueError(f"rerun: pending must be [index, changes?, words, places] or null, got {pending!r}")
        return RerunState(
            runs=flat_of({text(key, "rerun: runs"): Run.from_json(run) for key, run in runs.items()}),
            pending=None if pending is None else Pending.from_json(pending),
            versions=flat_of(table(data.get("versions", {}), "rerun: versions", Version.from_json)),
        )

    def observe(self, state: RerunState, step: Step) -> Finding | None:
        if step.kind == "call":
            changes = mutates(step)
            if searches(step) and state.runs:
                self._investigated(state, step)
            counted = changes or not (searches(step) or polls(step))
            if counted and not changes:
                places = [p for p in scopes_of(step) if p not in ".."]
                state.pending = Pending(step.index, False, argument_word_bytes(step), places)
            else:
                state.pending = Pending(step.index, changes) if counted else None
            return None
        pending = state.pending
        if pending is None or step.call_index != pending.index:
            return None
        state.pending = None
        if pending.changes:
            if not step.failed:  # a change that worked: the next runs may show its effect
                for run in flat_values(state.runs):
                    run.changed = True
            return None
        versions = (
            self._versions(state, step, pending.words, pending.places)
            if pending.words is not None and pending.places is not None
            else None
        )
        return self._result(state, step) or versions

    def _investigated(self, state: RerunState, step: Step) -> None:
        """A look at what a run runs (the script or test file it names) is the investigation its sameness called for:
        that run's count starts over."""
        places = scopes_of(step)
        if not places:
            return
        runs = state.runs
        kept = [key for key, run in flat_items(runs) if not _overlaps(places, run.targets or ())]
        if 2 * len(kept) < len(runs):  # a run was investigated
            state.runs = flat_only(runs, kept)

    def _versions(self, state: RerunState, step: Step, words: bytes, places: list[str]) -> Finding | None:
        """Another version of the same action (its arguments changed, most of their words kept: a rewritten script,
        a re-escaped filter) giving the very same result as the last: the change did not reach what matters. A
        version that looks at other files than the last (one input after another) is a batch, not a version."""
        key = step.tool_key or step.tool or ""
        versions, found = flat_pop(state.versions, key)
        version: Version | None = found
        same = version is not None and version.outcome == step.outcome_fp
        if same and version is not None and words != version.words:
            other = version.words
            # a rewritten piece of code that prints the very same thing again (not nothing: a cell that assigns
            # prints nothing whatever it does) is another version of it, however many of its words changed
            rewritten = runs_code(step.tool or "") and len((step.output or "").strip()) >= 16
            alike = (rewritten or same_words(words, other)) and not batch_items(places, [], version.places, [])
            if alike:
                version.count += 1
                version.indices = pushed(version.indices, step.call_index, 8)
            else:
                same = False
        if not same or version is None:
            version = Version(step.outcome_fp, 1, words, places, step.call_index, (step.call_index,))
        version.words, version.places = words, places
        state.versions = flat_append(versions, key, version, self.calls)
        count = version.count
        if count < self.threshold:
            return None
        return Finding(
            pattern="no_effect",
            count=count,
            key=f"versions:{key}:{version.first}",
            loop_start=version.first,
            reason=f"{count} versions of the {step.tool} call in a row gave the very same result",
            indices=tuple(i for i in version.indices if i is not None),
            facts={"tool": step.tool, "result": preview(step.output or "", 120) or "empty"},
        )

    def _result(self, state: RerunState, step: Step) -> Finding | None:
        key = step.call_fp or ""
        runs, found = flat_pop(state.runs, key)
        state.runs = runs
        run: Run | None = found
        output = step.output
        if not step.failed and output and not output.isspace():
            return None  # a run that worked and said something ends the count: not this rule's business
        if run is None or run.outcome != step.outcome_fp:
            targets = [p for p in search_scopes(step.tool or "", {}, step.command) if p not in (".", "..", "~")]
            run = Run(step.outcome_fp, 1, False, step.call_index, (step.call_index,), tuple(targets))
        elif run.changed:
            run.count += 1
            run.changed = False
            run.indices = pushed(run.indices, step.call_index, 8)
        state.runs = flat_append(runs, key, run, self.calls)  # most recently run last
        count = run.count
        if count < self.threshold:
            return None
        what = preview(step.command, 80) if step.command else step.tool
        return Finding(
            pattern="no_effect",
            count=count,
            key=f"rerun:{key}:{run.first}",
            loop_start=run.first,
            reason=f"{what} gave the same result {count} times although changes worked in between",
            indices=tuple(i for i in run.indices if i is not None),
            facts={"tool": step.tool, "result": preview(step.output or "", 120) or "empty"},
        )


def _overlaps(places: list[str], targets: tuple[str, ...]) -> bool:
    """Does one of ``places`` overlap one of ``targets`` (:func:`~loopwatch.core._tools.scope_overlaps`)?"""
    return any(scope_overlaps(a, b) for a in places for b in targets)


def rerun(*, threshold: int = 3, calls: int = 4) -> RerunDetector:
    """The changes-with-no-effect detector (see :class:`RerunDetector`)."""
    return RerunDetector(threshold=threshold, calls=calls)
