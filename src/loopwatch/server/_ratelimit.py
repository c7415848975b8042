"""Per-token request rate limits: a token bucket per client (``rate`` requests per second, ``burst`` above it).

Each worker process keeps its own buckets: with N workers a client gets up to N times the rate in the worst case
(the kernel spreads connections between them); give each worker ``rate / N`` for a strict total.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

__all__ = ["RateLimiter"]

_MAX_CLIENTS: Final = 10_000


class RateLimiter:
    """``allow(client)`` is ``0.0`` when a request may go ahead, else the seconds to wait before the next one."""

    def __init__(self, rate: float, burst: int = 0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = float(max(burst, 1)) if rate > 0 else 0.0
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RateLimiter(rate={self.rate}, burst={self.capacity:g})"

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def allow(self, client: str) -> float:
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.pop(client, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - then) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            if wait == 0.0:
                tokens -= 1.0
            self._buckets[client] = (tokens, now)
            while len(self._buckets) > _MAX_CLIENTS:
                self._buckets.popitem(last=False)
        return wait
