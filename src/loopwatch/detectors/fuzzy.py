"""Fuzzy repeats: seed 004's normalised-argument run length and seed 003's structural fingerprints."""

from __future__ import annotations

from ..canonical import digest
from ..fingerprint import exact_serialized, normalize_args_seed004, preview, primary_fingerprint
from ..similarity import jaccard_ws
from .base import Detector, Finding, State, Step, call_label, push
from .repeat import REPEAT


class BehavioralDetector(Detector):
    """Seed 004: a run of similar actions (same tool, normalised-argument Jaccard >= ``threshold``).

    Exactly the seed's ``checkSimilarity``: the run is compared against the action that started it (the
    anchor is only replaced when an action is not similar); ``window`` actions are kept (FIFO).
    """

    name = "behavioral"
    kinds = frozenset({"call"})
    patterns = (REPEAT,)

    def __init__(self, *, threshold: float = 0.75, window: int = 20) -> None:
        self.threshold = threshold
        self.window = window

    def new_state(self) -> State:
        return {"window": [], "run": 0, "anchor": None, "tool": None, "start": None}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind != "call":
            return None
        normalized = normalize_args_seed004(step.args or {})
        push(state["window"], [step.tool, normalized, step.index], self.window)
        if state["anchor"] is None:
            state.update(anchor=normalized, tool=step.tool, run=1, start=step.index)
            return None
        score = jaccard_ws(state["anchor"], normalized)
        if step.tool == state["tool"] and score >= self.threshold:
            state["run"] += 1
        else:
            state.update(anchor=normalized, tool=step.tool, run=1, start=step.index)
        if state["run"] < 2:
            return None
        return Finding(
            pattern="repeat",
            count=state["run"],
            key=f"behavioral:{state['tool']}:{state['start']}",
            loop_start=state["start"],
            reason=f"{state['run']} similar {step.tool} actions in a row (Jaccard {score:.2f})",
            indices=tuple(entry[2] for entry in state["window"][-state["run"] :]),
            facts={
                "tool": step.tool,
                "call": call_label(step, 120),
                "score": score,
            },
            blockable=True,
        )


class DoomLoopDetector(Detector):
    """Seed 003: the same fingerprint consecutively in the last ``window`` calls.

    Exact fingerprint (tool + identical serialised arguments) at ``threshold``; when that does not trigger,
    the structural fingerprint (primary keys only, ``bash:file_read:X`` for plain reads) at
    ``fuzzy_threshold``, whose count is then used in place of the exact one.
    """

    name = "doom_loop"
    kinds = frozenset({"call"})
    patterns = (REPEAT,)

    def __init__(self, *, threshold: int = 3, fuzzy_threshold: int = 4, window: int = 10) -> None:
        self.threshold = threshold
        self.fuzzy_threshold = fuzzy_threshold
        self.window = window

    def new_state(self) -> State:
        return {"exact": [], "fuzzy": [], "idx": [], "starts": {"exact": None, "fuzzy": None}}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind != "call":
            return None
        tool, args = step.tool or "", step.args or {}
        for kind, fingerprint in (("exact", exact_serialized(tool, args)), ("fuzzy", primary_fingerprint(tool, args))):
            hashed = digest(fingerprint)
            if not state[kind] or state[kind][-1] != hashed:
                state["starts"][kind] = step.index  # a new run of this fingerprint starts here
            push(state[kind], hashed, self.window)
        push(state["idx"], step.index, self.window)
        exact, fuzzy = _tail_run(state["exact"]), _tail_run(state["fuzzy"])
        if exact >= self.threshold:
            count, kind = exact, "exact"
        elif fuzzy >= self.fuzzy_threshold:
            count, kind = fuzzy, "fuzzy"
        else:
            return None
        indices = tuple(state["idx"][-count:])
        return Finding(
            pattern="repeat",
            count=count,
            key=f"doom:{kind}:{state[kind][-1]}:{state['starts'][kind]}",
            loop_start=indices[0],
            reason=f"{tool} called {count} times with the same {'arguments' if kind == 'exact' else 'primary keys'}",
            indices=indices,
            facts={"tool": tool, "call": f"{tool}({preview(args, 120)})", "match": kind},
            blockable=True,
            hard=kind == "exact",
        )


def _tail_run(items: list[str]) -> int:
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
    """Seed 004's behavioural window (see :class:`BehavioralDetector`)."""
    return BehavioralDetector(threshold=threshold, window=window)


def doom_loop(*, threshold: int = 3, fuzzy_threshold: int = 4, window: int = 10) -> DoomLoopDetector:
    """Seed 003's doom-loop fingerprints (see :class:`DoomLoopDetector`)."""
    return DoomLoopDetector(threshold=threshold, fuzzy_threshold=fuzzy_threshold, window=window)
