"""The same look-up (or run) again, with the same answer, and nothing changed since: a circuit of re-reads."""

from __future__ import annotations

from typing import Any, Final

from ..errors import ConfigError
from ..ladder import Ladder
from ..patterns import Pattern
from ..tools import runs_code
from .base import Detector, Finding, State, Step, call_label, mutates, polls, searches

_KEPT: Final = 32
"""Distinct calls remembered per session (the least recently made are forgotten first)."""

REVISIT = Pattern(
    "revisit",
    "You have made {call} {count} times now, and it answered the same each time: nothing has changed since the "
    "first time, so it will answer the same again. Work with what it told you, or take a step that changes "
    "something (an edit, a different tool, another source); if what you need is not there, say so.",
    ladder=Ladder.of(nudge=3),
    evidence=("tool", "call"),
)
"""The same look-up made again, here and there, with the same answer each time."""


class RevisitDetector(Detector):
    """A call made again that answers exactly what it answered before, with nothing changed in between.

    Consecutive repeats are the ``repeat`` rule's; this one sees the circuit: the same files read, the same
    search run, the same check repeated, with other look-ups in between (``cat a; ls; cat a; grep x; cat a``).
    Each call is remembered with its result; a call that may change something (an edit, a write, a command line
    that is not a look-up) forgets every other call, since what they answered may have changed (its own entry
    stays: the same program run, or the very same change applied, again with only look-ups in between and
    answering the same, is the same run). Waits and status checks
    are left out. Reported as ``revisit`` when a call answers the same thing for the ``threshold``-th time.
    """

    name = "revisit"
    kinds = frozenset({"call", "result"})
    patterns = (REVISIT,)

    def __init__(self, *, threshold: int = 4, kept: int = _KEPT) -> None:
        if threshold < 2:
            raise ConfigError(f"must be at least 2, got {threshold!r}", field="revisit.threshold")
        self.threshold = threshold
        self.kept = kept

    def new_state(self) -> State:
        # seen: call fingerprint -> [outcome fingerprint, times answered so, first index, indices (last 8), label]
        # since: where the circuit began (the last change): one ladder for all the calls it revisits
        # fresh: the last call answered for the first time since the last change
        return {"seen": {}, "polls": [], "since": 0, "fresh": -1}

    def load_state(self, data: dict[str, Any]) -> State:
        state = self.load_dict_state(data)
        seen = state["seen"]
        if not isinstance(seen, dict) or len(seen) > self.kept:
            raise ValueError(f"revisit: seen must be a table of at most {self.kept} calls")
        return state

    def observe(self, state: State, step: Step) -> Finding | None:
        seen: dict[str, list[Any]] = state["seen"]
        if step.kind == "call":
            if polls(step):
                state["polls"] = [*state["polls"][-7:], step.index]
                return None
            if mutates(step) or (_runs_program(step) and not searches(step)):
                for key in [k for k in seen if k != step.call_fp]:
                    del seen[key]
                state["since"] = step.index
            entry = seen.get(step.call_fp or "")
            if entry is not None and entry[1] + 1 >= self.threshold:
                entry[4] = call_label(step, 120)  # for the report, should the answer be the same again
            return None
        if step.kind != "result" or step.call_fp is None or step.call_index in state["polls"]:
            return None
        where = step.call_index if step.call_index is not None else step.index
        entry = seen.pop(step.call_fp, None)
        if entry is None or entry[0] != step.outcome_fp:
            entry = [step.outcome_fp, 0, where, [], None]
            state["fresh"] = where  # a call not made (or not answered so) since the last change
        previous = entry[3][-1] if entry[3] else None
        entry[1] += 1
        entry[3] = [*entry[3][-7:], where]
        seen[step.call_fp] = entry  # most recently made last
        while len(seen) > self.kept:
            del seen[next(iter(seen))]
        if entry[1] < self.threshold or previous is None or state["fresh"] < previous:
            # the same call right again is the repeat rule's, a round of calls all made before is the cycle rule's:
            # a circuit goes somewhere new (another file, another search) and comes back
            return None
        call = entry[4] or f"{step.tool}(...)"
        return Finding(
            pattern="revisit",
            count=entry[1],
            key=f"revisit:{state['since']}",
            loop_start=entry[2],
            reason=f"{step.tool} made {entry[1]} times with the same answer each time and nothing changed since",
            indices=tuple(entry[3]),
            facts={"tool": step.tool, "call": call},
        )


def _runs_program(step: Step) -> bool:
    return (step.tool_key is not None and step.tool_key != step.tool) or runs_code(step.tool or "")


def revisit(*, threshold: int = 4) -> RevisitDetector:
    """The revisit detector (see :class:`RevisitDetector`)."""
    return RevisitDetector(threshold=threshold)
