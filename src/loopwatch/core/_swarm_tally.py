"""Swarm-wide call counts: what the session backend counts and the swarm rule reads.

A swarm's counts are kept by whoever keeps the sessions (the guard's in-process backend, or a store shared between
processes); the engine asks for one call's :class:`SwarmTally` through a :data:`SwarmCounter` when the swarm rule
is about to look at that call, and hands the rule the tally, read-only. This module lives apart from the rule and
the stores so that the stores, which count, and the rule, which reads, need not import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_SWARM_FINGERPRINTS", "MAX_SWARM_WORKERS", "SwarmCounter", "SwarmTally", "count_call"]

MAX_SWARM_FINGERPRINTS: Final = 4_096
"""Fingerprints kept per swarm (the oldest go first)."""
MAX_SWARM_WORKERS: Final = 64
"""Distinct workers kept per fingerprint (calls from more are still counted)."""


@dataclass(frozen=True, slots=True)
class SwarmTally:
    """A fingerprint's swarm-wide count after one more call: the calls so far and the distinct workers that made
    them."""

    calls: int
    workers: int


SwarmCounter = Callable[[str, str, str], SwarmTally]
"""``count(fingerprint, worker, tool)``: count one call in the session's swarm, the tally after it."""


def count_call(
    counts: dict[str, list[Any]],
    fingerprint: str,
    worker: str,
    tool: str,
    *,
    max_fingerprints: int = MAX_SWARM_FINGERPRINTS,
    max_workers: int = MAX_SWARM_WORKERS,
) -> SwarmTally:
    """Count one call in a swarm's counts kept in this process, ``{fingerprint: [calls, [workers...], tool]}``
    (the JSON form of a swarm snapshot); the tally after it. Bounded as every store bounds it."""
    entry = counts.get(fingerprint)
    if entry is None:
        if len(counts) >= max_fingerprints:
            del counts[next(iter(counts))]  # oldest first: dicts keep insertion order
        entry = counts[fingerprint] = [0, [], tool]
    entry[0] += 1
    if worker not in entry[1] and len(entry[1]) < max_workers:
        entry[1].append(worker)
    return SwarmTally(entry[0], len(entry[1]))
