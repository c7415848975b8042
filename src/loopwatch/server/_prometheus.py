"""The service's Prometheus metrics, written by the standard client library (``prometheus-client``).

With several worker processes (``--workers N``) each worker writes its samples into a shared directory
(``PROMETHEUS_MULTIPROC_DIR``, set by ``loopwatch serve``) and ``/metrics`` adds them up, whichever worker
answers the scrape.
"""

from __future__ import annotations

import os
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "ServiceMetrics", "render"]

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
_LATENCY_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class ServiceMetrics:
    """The counters and histograms, registered once per process."""

    _instance: ServiceMetrics | None = None

    def __init__(self) -> None:
        self.events = Counter("loopwatch_events", "Events observed, by event type", ["type"])
        self.verdicts = Counter(
            "loopwatch_verdicts", "Verdicts given, by action and loop pattern", ["action", "pattern"]
        )
        self.rejected = Counter("loopwatch_rejected_requests", "Requests refused, by error code", ["code"])
        self.store_errors = Counter("loopwatch_store_errors", "Store failures met while judging an event")
        self.judge_calls = Counter("loopwatch_judge_calls", "Calls to the loop judge, by outcome", ["outcome"])
        self.request_latency = Histogram(
            "loopwatch_request_seconds",
            "Time to answer an API request, by route",
            ["route"],
            buckets=_LATENCY_BUCKETS,
        )
        self.event_latency = Histogram(
            "loopwatch_event_seconds", "Time to judge one event (store round trips included)", buckets=_LATENCY_BUCKETS
        )

    @classmethod
    def shared(cls) -> ServiceMetrics:
        """The process's metrics (the client library's registry accepts each name once)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def record(self, record: dict[str, Any]) -> None:
        """A guard listener: store errors and judge calls, from the guard's own records."""
        name = record.get("event")
        if name == "store.error":
            self.store_errors.inc()
        elif name == "judge.verdict":
            self.judge_calls.labels(outcome="answered").inc()
        elif name == "judge.error":
            self.judge_calls.labels(outcome="failed").inc()


def render() -> bytes:
    """The metrics page: this process's, or every worker's when they share a multiprocess directory."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return bytes(generate_latest(registry))
    from prometheus_client import REGISTRY

    return bytes(generate_latest(REGISTRY))
