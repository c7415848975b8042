"""Offline scans: run the guard's engine over recorded runs as if they were live."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core._engine import Engine
from ..core._events import Event
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import InputError
from ..readers import ErrorHandler, Run


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
        """Exactly docs/formats.md, section 3: ``{"id", "events", "detections": [...]}``."""
        return {
            "id": self.id,
            "events": self.events,
            "detections": [v.detection_json() for v in self.verdicts],
        }


def scan_events(
    engine: Engine, events: Iterable[Event], on_error: Callable[[int, Exception], None] | None = None
) -> tuple[int, list[Verdict]]:
    """(number of events, non-ok verdicts) for one run; a ``stop`` ends the run as it would live.

    ``on_error(index, error)``: told when the rules fail on an event (a bug, not bad input: events are checked
    when made), which ends the judging of the run there; without it, the error is raised."""
    session = engine.new_session()
    verdicts: list[Verdict] = []
    count = 0
    stopped = False
    for event in events:
        count += 1
        if stopped:
            continue
        try:
            verdict = engine.observe(session, event)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(count - 1, exc)
            stopped = True
            continue
        if verdict.action != "ok":
            verdicts.append(verdict)
            stopped = verdict.action == "stop"
    return count, verdicts


def scan_runs(policy: Policy, runs: Iterable[Run], on_error: ErrorHandler | None = None) -> Iterator[RunReport]:
    """A report per run, in input order; ``on_error`` is told of a run whose judging failed (see
    :func:`scan_events`), as a bad record of its file."""
    engine = Engine(policy, replay=True)
    for run in runs:

        def failed(index: int, exc: Exception, run: Run = run) -> None:
            if on_error is not None:
                reason = f"run {run.id!r}: the rules failed on event {index} ({type(exc).__name__}: {exc})"
                on_error(InputError(reason[:500], path=run.path or "-"))

        count, verdicts = scan_events(engine, run.events, failed if on_error is not None else None)
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
