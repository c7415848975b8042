"""What a store hands the swarm rule: one call's swarm-wide count, counted by the store shared between processes.

It lives apart from the rule so that the stores, which count, and the rule, which reads, need not import each
other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SwarmTally"]


@dataclass(frozen=True)
class SwarmTally:
    """A fingerprint's swarm-wide count after one more call, counted outside the engine (by a store):
    the calls so far and the distinct workers that made them."""

    calls: int
    workers: int
