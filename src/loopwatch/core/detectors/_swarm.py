"""Swarm-wide repeats (the ``doom-loop`` design's global doom loop): the same call counted across every worker."""

from __future__ import annotations

from typing import Any

from .._checked import integer_at_least
from .._ladder import Ladder
from .._patterns import Pattern
from .._swarm_tally import SwarmTally as SwarmTally
from ._base import Detector, Finding, Step, call_label
from ._state import keys_of

_SWARM = (
    "GLOBAL DOOM LOOP: {count} calls to {tool} across {workers} workers. The entire swarm is stuck on this "
    "approach.\n1. Try a fundamentally different strategy\n2. Do NOT retry the same tool/parameters\n"
    "3. Consider whether the task goal itself needs re-evaluation"
)
SWARM_REPEAT = Pattern(
    "swarm_repeat",
    _SWARM,
    ladder=Ladder.of(nudge=10),
    block_message=_SWARM,
    evidence=("tool", "call", "workers"),
)
"""The same call made again and again across the workers of a swarm."""


class SwarmDetector(Detector[None]):
    """``threshold``+ calls with the same fingerprint from ``min_workers``+ workers of one swarm.

    It only reads: the session backend (the guard's sessions in this process, or a store shared between
    processes) counts the call, and the engine hands the count to the rule as ``step.swarm``, a
    :class:`SwarmTally`; sessions without a swarm are never reported.
    """

    name = "swarm"
    kinds = frozenset({"call"})
    patterns = (SWARM_REPEAT,)
    reset_on_user = False

    def __init__(self, *, threshold: int = 10, min_workers: int = 2) -> None:
        integer_at_least(threshold, 1, "swarm.threshold")
        integer_at_least(min_workers, 1, "swarm.min_workers")
        self.threshold = threshold
        self.min_workers = min_workers

    def new_state(self) -> None:
        return None  # the backend keeps the counts: nothing per session (``{}`` in a snapshot)

    def dump_state(self, state: None) -> dict[str, Any]:
        return {}

    def load_state(self, data: dict[str, Any]) -> None:
        keys_of("swarm", data, ())

    def observe(self, state: None, step: Step) -> Finding | None:
        tally = step.swarm
        if tally is None or step.kind != "call":
            return None
        calls, workers = tally.calls, tally.workers
        if calls < self.threshold or workers < self.min_workers:
            return None
        return Finding(
            pattern="swarm_repeat",
            count=calls,
            key=f"swarm:{step.call_fp}",
            loop_start=None,
            reason=f"{calls} calls to {step.tool} with the same arguments across {workers} workers",
            facts={
                "tool": step.tool,
                "workers": workers,
                "call": call_label(step, 120),
            },
            blockable=True,
        )


def swarm(*, threshold: int = 10, min_workers: int = 2) -> SwarmDetector:
    """The swarm-wide repeat detector (see :class:`SwarmDetector`)."""
    return SwarmDetector(threshold=threshold, min_workers=min_workers)
