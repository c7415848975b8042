"""Swarm-wide repeats (seed 003's global doom loop): the same call counted across every worker."""

from __future__ import annotations

from typing import Any

from ..ladder import Ladder
from ..patterns import Pattern
from ..swarm_tally import SwarmTally as SwarmTally
from .base import Detector, Finding, State, Step, call_label

SwarmState = dict[str, Any]
_MAX_FINGERPRINTS = 4_096
_MAX_WORKERS = 64


def new_swarm_state() -> SwarmState:
    """Shared counts of one swarm: ``{"counts": {fingerprint: [calls, [workers...], tool]}}``."""
    return {"counts": {}}


def record_swarm_call(swarm: SwarmState, fingerprint: str, worker: str, tool: str) -> tuple[int, int]:
    """Count one call; returns (calls of this fingerprint, distinct workers that made them)."""
    counts: dict[str, list[Any]] = swarm["counts"]
    entry = counts.get(fingerprint)
    if entry is None:
        if len(counts) >= _MAX_FINGERPRINTS:
            del counts[next(iter(counts))]  # oldest first: dicts keep insertion order
        entry = counts[fingerprint] = [0, [], tool]
    entry[0] += 1
    if worker not in entry[1] and len(entry[1]) < _MAX_WORKERS:
        entry[1].append(worker)
    return entry[0], len(entry[1])


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


class SwarmDetector(Detector):
    """``threshold``+ calls with the same fingerprint from ``min_workers``+ workers of one swarm.

    The engine passes, in ``step.extra["swarm"]`` for sessions that belong to a swarm, either the swarm's
    shared counts (a dict, counted here: one process) or a :class:`SwarmTally` for this call, already
    counted by a store shared between processes; sessions without a swarm are never reported.
    """

    name = "swarm"
    kinds = frozenset({"call"})
    patterns = (SWARM_REPEAT,)
    reset_on_user = False

    def __init__(self, *, threshold: int = 10, min_workers: int = 2) -> None:
        self.threshold = threshold
        self.min_workers = min_workers

    def new_state(self) -> State:
        return {}

    def observe(self, state: State, step: Step) -> Finding | None:
        swarm = step.extra.get("swarm")
        if step.kind != "call" or swarm is None or step.call_fp is None:
            return None
        if isinstance(swarm, SwarmTally):
            calls, workers = swarm.calls, swarm.workers
        else:
            calls, workers = record_swarm_call(swarm, step.call_fp, step.worker or "default", step.tool or "")
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
