"""Offline scans: run the guard's engine over recorded runs as if they were live."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine
from .events import Event
from .policy import Policy
from .readers import Run
from .verdict import Verdict


@dataclass
class RunReport:
    """What a scan found in one run: its non-ok verdicts (up to and including the first stop)."""

    id: str
    events: int
    verdicts: list[Verdict] = field(default_factory=list)
    source: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped(self) -> Verdict | None:
        return next((v for v in self.verdicts if v.action == "stop"), None)

    def to_json(self) -> dict[str, Any]:
        """Exactly FORMAT.md section 3: ``{"id", "events", "detections": [...]}``."""
        return {
            "id": self.id,
            "events": self.events,
            "detections": [v.detection_json() for v in self.verdicts],
        }


def scan_events(engine: Engine, events: Iterable[Event]) -> tuple[int, list[Verdict]]:
    """(number of events, non-ok verdicts) for one run; a ``stop`` ends the run as it would live."""
    session = engine.new_session()
    verdicts: list[Verdict] = []
    count = 0
    stopped = False
    for event in events:
        count += 1
        if stopped:
            continue
        verdict = engine.observe(session, event)
        if verdict.action != "ok":
            verdicts.append(verdict)
            stopped = verdict.action == "stop"
    return count, verdicts


def scan_runs(policy: Policy, runs: Iterable[Run]) -> Iterator[RunReport]:
    """A report per run, in input order."""
    engine = Engine(policy)
    for run in runs:
        count, verdicts = scan_events(engine, run.events)
        if run.indices is not None:
            verdicts = [to_records(v, run.indices) for v in verdicts]
        yield RunReport(id=run.id, events=count, verdicts=verdicts, source=run.source, meta=run.meta)


def to_records(verdict: Verdict, indices: Sequence[int]) -> Verdict:
    """``verdict`` with its event positions (``index``, ``loop_start``, evidence ``indices``) turned into the
    indices of the records the events came from (``indices[i]`` for event ``i``)."""

    def record(position: int) -> int:
        return indices[position] if 0 <= position < len(indices) else position

    evidence = verdict.evidence
    if isinstance(evidence.get("indices"), list):
        evidence = {**evidence, "indices": [record(i) if isinstance(i, int) else i for i in evidence["indices"]]}
    return dataclasses.replace(
        verdict,
        index=record(verdict.index),
        loop_start=None if verdict.loop_start is None else record(verdict.loop_start),
        evidence=evidence,
    )
