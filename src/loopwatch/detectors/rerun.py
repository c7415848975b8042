"""Changes with no effect: the same run, re-run after each change, keeps giving the same result.

An agent edits, runs its script, edits again, runs it again. Re-running after different edits is progress
while the result moves; when the result stays exactly the same run after run (digits, ids and timestamps
aside), the changes are not reaching it: a Java fix tried out with a Python stand-in script, a print added
to a method that is never called. The edits differ every time, so no repeat or cycle rule sees it, and the
run may well succeed (an empty output), so no failure rule does either.
"""

from __future__ import annotations

from typing import Any

from ..fingerprint import preview
from .base import Detector, Finding, State, Step, mutates, polls, push, searches


class RerunDetector(Detector):
    """The same call re-run after changes with the same result each time.

    Counted per call (its fingerprint; the last ``calls`` distinct calls are kept): a run counts when its
    result equals the previous run's and something was changed (a call that mutates) in between; a re-run
    with nothing changed in between neither counts nor breaks the count (the repeat rule's business); a
    different result starts over. Reported, as pattern ``no_effect``, from ``threshold`` runs (the first
    one included) on the result of the last. Look-ups and waits are left to their own rules.
    """

    name = "rerun"
    kinds = frozenset({"call", "result"})
    patterns = ("no_effect",)

    def __init__(self, *, threshold: int = 3, calls: int = 4) -> None:
        if threshold < 2 or calls < 1:
            raise ValueError("threshold >= 2 and calls >= 1 are required")
        self.threshold = threshold
        self.calls = calls

    def new_state(self) -> State:
        # runs: call fingerprint -> [outcome fingerprint, runs counted, changed since?, indices of the runs]
        return {"runs": {}, "pending": None}

    def load_state(self, data: dict[str, Any]) -> State:
        state = super().load_state(data)
        runs, pending = state["runs"], state["pending"]
        if not isinstance(runs, dict) or not (pending is None or type(pending) is int):
            raise ValueError("rerun: runs must be an object and pending an index or null")
        for run in runs.values():
            if not (isinstance(run, list) and len(run) == 4 and type(run[1]) is int and type(run[2]) is bool):
                raise ValueError(f"rerun: a run must be [outcome, count, changed, indices], got {run!r}")
            if not (isinstance(run[3], list) and run[3] and all(type(i) is int for i in run[3])):
                raise ValueError(f"rerun: a run's indices must be a non-empty list of integers, got {run[3]!r}")
        return state

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind == "call":
            state["pending"] = None
            if mutates(step):
                for run in state["runs"].values():
                    run[2] = True
            elif not searches(step) and not polls(step):
                state["pending"] = step.index
            return None
        if step.call_index is None or step.call_index != state["pending"]:
            return None
        state["pending"] = None
        return self._result(state, step)

    def _result(self, state: State, step: Step) -> Finding | None:
        runs: dict[str, list[Any]] = state["runs"]
        key = step.call_fp or ""
        run = runs.pop(key, None)
        if run is None or run[0] != step.outcome_fp:
            run = [step.outcome_fp, 1, False, [step.call_index]]
        elif run[2]:
            run[1] += 1
            run[2] = False
            push(run[3], step.call_index, 8)
        runs[key] = run  # most recently run last
        while len(runs) > self.calls:
            del runs[next(iter(runs))]
        count: int = run[1]
        if count < self.threshold:
            return None
        what = preview(step.command, 80) if step.command else step.tool
        return Finding(
            pattern="no_effect",
            count=count,
            key=f"rerun:{key}:{run[3][0]}",
            loop_start=run[3][0],
            reason=f"{what} gave the same result {count} times although things were changed in between",
            indices=tuple(run[3]),
            facts={"tool": step.tool, "result": preview(step.output or "", 120) or "empty"},
        )


def rerun(*, threshold: int = 3, calls: int = 4) -> RerunDetector:
    """The changes-with-no-effect detector (see :class:`RerunDetector`)."""
    return RerunDetector(threshold=threshold, calls=calls)
