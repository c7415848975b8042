"""A ladder's answer to one finding: :func:`decide`, which the engine asks of every finding a rule reports.

Compiled with the engine where the package is built with a C compiler (:mod:`loopwatch._native`): a rule may report
at every event of a streak (a failure streak does, at each failure), and the nudge, block or stop that follows is
the slow tail of a guard's latencies. :class:`Decision` and :func:`decide` are re-exported by
:mod:`loopwatch.core._policy`, where ladders and policies are defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._ladder import Ladder, Rung
from ._patterns import REGISTRY
from ._session_state import LadderState
from ._verdict import SEVERITY, Action
from .detectors._base import Finding

__all__ = ["Decision", "Judged", "decide", "rung_reached", "strength"]


@dataclass(slots=True, init=False)
class Decision:
    """A ladder's answer to one finding."""

    action: Action
    level: int
    rung: Rung

    def __init__(self, action: Action, level: int, rung: Rung) -> None:
        # written out, so that mypyc compiles it (the one dataclasses writes runs as Python)
        self.action = action
        self.level = level
        self.rung = rung

    def __reduce__(self) -> tuple[type[Decision], tuple[Action, int, Rung]]:
        # copied and pickled through the constructor (a compiled class's own way makes it empty first, which a
        # written-out constructor does not allow)
        return Decision, (self.action, self.level, self.rung)


_RESTRIKE: Final = Rung(
    1, "stop", reason="{reason}; the same kind of loop again right after a warning: the warning did not help"
)


_NUDGES_KEPT: Final = 4


def decide(
    ladder: Ladder, state: LadderState, finding: Finding, index: int, *, hard_evidence: bool = False
) -> Decision | None:
    """Apply ``ladder`` to ``finding`` at event ``index``, updating the pattern's ladder ``state``.

    ``hard_evidence``: a block or a stop needs a hard finding (:attr:`Finding.hard`) and a nudge of the same
    streak given before it (and ignored); otherwise the rung is a nudge. The nudges a streak was given are kept
    in ``state.nudges`` (``(index, level)``, the last four) for the evidence of what follows.
    """
    if state.key != finding.key:
        last = state.last
        state.key, state.emitted, state.detections, state.previous, state.nudges = finding.key, 0, 0, last, ()
    state.detections += 1
    value = finding.count if ladder.metric == "count" else state.detections
    level = rung_reached(ladder.rungs, value)
    if level == 0:
        return None
    rung = ladder.rungs[level - 1]
    action: Action = rung.action
    if action == "block" and not finding.blockable:
        action = "nudge"
    if hard_evidence and action != "nudge" and not (finding.hard and state.nudges):
        action = "nudge"
    if hard_evidence and action == "stop" and not finding.stoppable:
        action = "block" if finding.blockable else "nudge"
    if action == "nudge" and level <= state.emitted and not ladder.renotify:
        return None
    state.emitted = max(state.emitted, level)
    state.last = index
    previous = state.previous
    restrike = None if hard_evidence else ladder.restrike  # a new streak is another unit: no hard evidence
    if restrike and action != "stop" and previous is not None and index - previous <= restrike:
        return Decision("stop", len(ladder.rungs) + 1, _RESTRIKE)
    if action == "nudge":
        state.nudges = (*state.nudges[1 - _NUDGES_KEPT :], (index, level))
    return Decision(action, level, rung)


def rung_reached(rungs: tuple[Rung, ...], value: int) -> int:
    """1-based index of the highest of ``rungs`` reached by ``value`` (0: none): :meth:`Ladder.level_for`, here so that
    :func:`decide` reads the rungs in compiled code."""
    level = 0
    for at, rung in enumerate(rungs, 1):
        if value >= rung.at:
            level = at
    return level


_SPECIFICITY: Final = REGISTRY.specificity


def strength(action: str, level: int, pattern: str | None, count: int) -> tuple[int, int, int, int]:
    """How strong an answer to a step is, to pick one where several rules report: the higher action, then the higher
    level, then the more specific pattern (each pattern declares its rank: an error retry says more, the error, than
    the bare repeat it also is), then the higher count."""
    return SEVERITY[action], level, _SPECIFICITY.get(pattern or "", 0), count


class Judged:
    """A rule's finding and the ladder's answer to it, with its :func:`strength`; ``nudges``: the ladder's nudges when
    it answered (what the verdict made of it lists as ignored). A plain class, so that mypyc compiles its constructor
    (a named tuple's runs as Python: ~1 us an answer)."""

    def __init__(
        self,
        rank: tuple[int, int, int, int],
        finding: Finding,
        decision: Decision,
        detector: str,
        nudges: tuple[tuple[int, int], ...],
    ) -> None:
        self.rank = rank
        self.finding = finding
        self.decision = decision
        self.detector = detector  # the repr of the rule that reported the finding
        self.nudges = nudges

    def __repr__(self) -> str:
        return f"Judged(rank={self.rank!r}, finding={self.finding!r}, decision={self.decision!r})"
