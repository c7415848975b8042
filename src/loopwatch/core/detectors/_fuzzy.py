"""Fuzzy repeats: the ``behavioral`` design's normalised-argument run length and the ``doom-loop`` design's
structural fingerprints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._canonical import digest
from .._checked import fraction, integer_at_least
from .._fingerprint import exact_serialized, normalized_args, preview, primary_fingerprint
from .._similarity import jaccard_ws
from ._base import Detector, Finding, Step, call_label, pushed
from ._repeat import REPEAT
from ._state import (
    Reader,
    fields_json,
    from_fields,
    integer,
    integer_tuple,
    keys_of,
    listed,
    optional_integer,
    optional_text,
    text_tuple,
)

Action = tuple[str | None, str, int]
"""A call as the ``behavioral`` design remembers it: (tool, normalised arguments, index)."""


def _action(value: object, what: str) -> Action:
    if not (isinstance(value, list) and len(value) == 3 and type(value[1]) is str and type(value[2]) is int):
        raise ValueError(f"{what} must be [tool, arguments, index], got {value!r}")
    return optional_text(value[0], what), value[1], value[2]


@dataclass(slots=True)
class BehavioralState:
    """A :class:`BehavioralDetector`'s session state: the last ``window`` calls and the run of similar ones."""

    window: tuple[Action, ...] = ()
    run: int = 0
    anchor: str | None = None
    """The normalised arguments of the call that started the run."""
    tool: str | None = None
    start: int | None = None


_BEHAVIORAL_READERS: Final[dict[str, Reader]] = {
    "window": lambda value, what: tuple(listed(value, what, _action)),
    "run": integer,
    "anchor": optional_text,
    "tool": optional_text,
    "start": optional_integer,
}


@dataclass(slots=True)
class DoomLoopState:
    """A :class:`DoomLoopDetector`'s session state: the last ``window`` calls' exact and structural fingerprints,
    and where the current run of each began."""

    exact: tuple[str, ...] = ()
    fuzzy: tuple[str, ...] = ()
    idx: tuple[int, ...] = ()
    exact_start: int | None = None
    fuzzy_start: int | None = None


class BehavioralDetector(Detector[BehavioralState]):
    """The ``behavioral`` design: a run of similar actions (same tool, normalised-argument Jaccard >= ``threshold``).

    Exactly the ``behavioral`` design's ``checkSimilarity``: the run is compared against the action that started it (the
    anchor is only replaced when an action is not similar); ``window`` actions are kept (FIFO).
    """

    name = "behavioral"
    kinds = frozenset({"call"})
    patterns = (REPEAT,)

    def __init__(self, *, threshold: float = 0.75, window: int = 20) -> None:
        fraction(threshold, "behavioral.threshold")
        integer_at_least(window, 1, "behavioral.window")
        self.threshold = threshold
        self.window = window

    def new_state(self) -> BehavioralState:
        return BehavioralState()

    def dump_state(self, state: BehavioralState) -> dict[str, Any]:
        data = fields_json(state)
        data["window"] = [list(entry) for entry in state.window]
        return data

    def load_state(self, data: dict[str, Any]) -> BehavioralState:
        keys_of("behavioral", data, _BEHAVIORAL_READERS)
        return from_fields(BehavioralState, data, "behavioral", _BEHAVIORAL_READERS)

    def observe(self, state: BehavioralState, step: Step) -> Finding | None:
        if step.kind != "call":
            return None
        normalized = normalized_args(step.args or {})
        state.window = pushed(state.window, (step.tool, normalized, step.index), self.window)
        if state.anchor is None:
            state.anchor, state.tool, state.run, state.start = normalized, step.tool, 1, step.index
            return None
        score = jaccard_ws(state.anchor, normalized)
        if step.tool == state.tool and score >= self.threshold:
            state.run += 1
        else:
            state.anchor, state.tool, state.run, state.start = normalized, step.tool, 1, step.index
        if state.run < 2:
            return None
        return Finding(
            pattern="repeat",
            count=state.run,
            key=f"behavioral:{state.tool}:{state.start}",
            loop_start=state.start,
            reason=f"{state.run} similar {step.tool} actions in a row (Jaccard {score:.2f})",
            indices=tuple(entry[2] for entry in state.window[-state.run :]),
            facts={
                "tool": step.tool,
                "call": call_label(step, 120),
                "score": score,
            },
            blockable=True,
        )


class DoomLoopDetector(Detector[DoomLoopState]):
    """The ``doom-loop`` design: the same fingerprint consecutively in the last ``window`` calls.

    Exact fingerprint (tool + identical serialised arguments) at ``threshold``; when that does not trigger,
    the structural fingerprint (primary keys only, ``bash:file_read:X`` for plain reads) at
    ``fuzzy_threshold``, whose count is then used in place of the exact one.
    """

    name = "doom_loop"
    kinds = frozenset({"call"})
    patterns = (REPEAT,)

    def __init__(self, *, threshold: int = 3, fuzzy_threshold: int = 4, window: int = 10) -> None:
        integer_at_least(threshold, 1, "doom_loop.threshold")
        integer_at_least(fuzzy_threshold, 1, "doom_loop.fuzzy_threshold")
        integer_at_least(window, 1, "doom_loop.window")
        self.threshold = threshold
        self.fuzzy_threshold = fuzzy_threshold
        self.window = window

    def new_state(self) -> DoomLoopState:
        return DoomLoopState()

    def dump_state(self, state: DoomLoopState) -> dict[str, Any]:
        return {
            "exact": list(state.exact),
            "fuzzy": list(state.fuzzy),
            "idx": list(state.idx),
            "starts": {"exact": state.exact_start, "fuzzy": state.fuzzy_start},
        }

    def load_state(self, data: dict[str, Any]) -> DoomLoopState:
        keys_of("doom_loop", data, ("exact", "fuzzy", "idx", "starts"))
        starts = data["starts"]
        if not isinstance(starts, dict):
            raise ValueError(f"doom_loop: starts must be an object, got {starts!r}")
        keys_of("doom_loop: starts", starts, ("exact", "fuzzy"))
        return DoomLoopState(
            exact=text_tuple(data["exact"], "doom_loop: exact"),
            fuzzy=text_tuple(data["fuzzy"], "doom_loop: fuzzy"),
            idx=integer_tuple(data["idx"], "doom_loop: idx"),
            exact_start=optional_integer(starts["exact"], "doom_loop: starts"),
            fuzzy_start=optional_integer(starts["fuzzy"], "doom_loop: starts"),
        )

    def observe(self, state: DoomLoopState, step: Step) -> Finding | None:
        if step.kind != "call":
            return None
        tool, args = step.tool or "", step.args or {}
        exact_fp, fuzzy_fp = digest(exact_serialized(tool, args)), digest(primary_fingerprint(tool, args))
        if not state.exact or state.exact[-1] != exact_fp:
            state.exact_start = step.index  # a new run of this fingerprint starts here
        state.exact = pushed(state.exact, exact_fp, self.window)
        if not state.fuzzy or state.fuzzy[-1] != fuzzy_fp:
            state.fuzzy_start = step.index
        state.fuzzy = pushed(state.fuzzy, fuzzy_fp, self.window)
        state.idx = pushed(state.idx, step.index, self.window)
        exact, fuzzy = _tail_run(state.exact), _tail_run(state.fuzzy)
        if exact >= self.threshold:
            count, kind, last, start = exact, "exact", state.exact[-1], state.exact_start
        elif fuzzy >= self.fuzzy_threshold:
            count, kind, last, start = fuzzy, "fuzzy", state.fuzzy[-1], state.fuzzy_start
        else:
            return None
        indices = state.idx[-count:]
        return Finding(
            pattern="repeat",
            count=count,
            key=f"doom:{kind}:{last}:{start}",
            loop_start=indices[0],
            reason=f"{tool} called {count} times with the same {'arguments' if kind == 'exact' else 'primary keys'}",
            indices=indices,
            facts={"tool": tool, "call": f"{tool}({preview(args, 120)})", "match": kind},
            blockable=True,
            hard=kind == "exact",
        )


def _tail_run(items: tuple[str, ...]) -> int:
    """How many items at the end of ``items`` equal the last one."""
    if not items:
        return 0
    last, run = items[-1], 0
    for item in reversed(items):
        if item != last:
            break
        run += 1
    return run


def behavioral(*, threshold: float = 0.75, window: int = 20) -> BehavioralDetector:
    """The ``behavioral`` design's window of similar actions (see :class:`BehavioralDetector`)."""
    return BehavioralDetector(threshold=threshold, window=window)


def doom_loop(*, threshold: int = 3, fuzzy_threshold: int = 4, window: int = 10) -> DoomLoopDetector:
    """The ``doom-loop`` design's repeated fingerprints (see :class:`DoomLoopDetector`)."""
    return DoomLoopDetector(threshold=threshold, fuzzy_threshold=fuzzy_threshold, window=window)
