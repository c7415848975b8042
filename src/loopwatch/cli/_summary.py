"""What a scan found, in totals: runs with loops, by pattern, source and model, steps and cost inside loops.

:func:`digest_run` keeps what the summaries need from one scanned run (a few numbers and its non-ok
verdicts, never its events), so totals over thousands of runs stay small, and digests can be made in
worker processes and sent back cheaply. :class:`ScanTotals` adds digests up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core._events import Usage
from ..core._verdict import SEVERITY, Verdict
from ..readers import Run
from ._scan import RunReport


def model_of(meta: Mapping[str, Any]) -> str | None:
    """The model a run's records name: ``meta["model"]``, ``labels.model`` or ``labels.meta.model``."""
    labels = meta.get("labels")
    places: list[Any] = [meta, labels]
    if isinstance(labels, Mapping):
        places.append(labels.get("meta"))
    for place in places:
        if isinstance(place, Mapping):
            model = place.get("model")
            if isinstance(model, str) and model:
                return model
    return None


@dataclass
class Episode:
    """Record indices ``start..end`` (inclusive) inside a loop: verdict spans merged where they touch."""

    start: int
    end: int
    action: str
    patterns: list[str]
    verdicts: int

    @property
    def steps(self) -> int:
        return self.end - self.start + 1


def episodes(verdicts: Iterable[Verdict]) -> list[Episode]:
    """A run's loop episodes: each verdict spans ``[loop_start, index]``; overlapping or touching spans merge."""
    spans = sorted(
        ((min(v.loop_start, v.index) if v.loop_start is not None else v.index), v.index, i, v)
        for i, v in enumerate(verdicts)
    )
    out: list[Episode] = []
    for start, end, _, verdict in spans:
        pattern = verdict.pattern or "?"
        if out and start <= out[-1].end + 1:
            last = out[-1]
            last.end = max(last.end, end)
            last.verdicts += 1
            if SEVERITY[verdict.action] > SEVERITY[last.action]:
                last.action = verdict.action
            if pattern not in last.patterns:
                last.patterns.append(pattern)
        else:
            out.append(Episode(start, end, verdict.action, [pattern], 1))
    return out


def costs(run: Run) -> list[tuple[int, float]]:
    """(record index, cost) of each usage event of ``run`` that carries a cost."""
    out = []
    indices = run.indices
    for position, event in enumerate(run.events):
        if isinstance(event, Usage) and event.cost is not None:
            record = indices[position] if indices is not None and position < len(indices) else position
            out.append((record, event.cost))
    return out


@dataclass
class RunDigest:
    """One scanned run, as the summaries see it."""

    id: str
    source: str | None
    model: str | None
    events: int
    verdicts: list[Verdict]
    loop_steps: int = 0
    cost: float | None = None
    loop_cost: float | None = None

    @property
    def stopped(self) -> bool:
        return any(v.action == "stop" for v in self.verdicts)

    @property
    def severity(self) -> int:
        return max((SEVERITY[v.action] for v in self.verdicts), default=0)


def digest_run(run: Run, report: RunReport) -> RunDigest:
    """The digest of ``run`` and its scan ``report``."""
    spans = episodes(report.verdicts)
    spent = costs(run)
    cost = loop_cost = None
    if spent:
        cost = sum(c for _, c in spent)
        loop_cost = sum(c for record, c in spent if any(e.start <= record <= e.end for e in spans))
    return RunDigest(
        id=run.id,
        source=run.source,
        model=model_of(run.meta),
        events=report.events,
        verdicts=list(report.verdicts),
        loop_steps=sum(e.steps for e in spans),
        cost=cost,
        loop_cost=loop_cost,
    )


def source_name(digest: RunDigest) -> str:
    """A short name for where a run came from: its source when that is a name (a format, a dataset), else
    its id's prefix before ``/`` (corpus ids such as ``swe_agent_java/...``), else ``(unknown)``."""
    source = digest.source
    if source and len(source) <= 32:
        return source
    if "/" in digest.id:
        return digest.id.split("/", 1)[0]
    return source[:40] if source else "(unknown)"


@dataclass
class ScanTotals:
    """Totals over digests: add runs one by one with :meth:`add`; the worst runs are kept, up to ``top``."""

    top: int = 10
    runs: int = 0
    events: int = 0
    looping: int = 0
    stopped: int = 0
    loop_steps: int = 0
    cost: float = 0.0
    loop_cost: float = 0.0
    priced_runs: int = 0
    patterns: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    sources: dict[str, list[int]] = field(default_factory=dict)
    models: dict[str, list[int]] = field(default_factory=dict)
    worst: list[RunDigest] = field(default_factory=list)

    def add(self, digest: RunDigest) -> None:
        self.runs += 1
        self.events += digest.events
        looping = bool(digest.verdicts)
        self.looping += looping
        self.stopped += digest.stopped
        self.loop_steps += digest.loop_steps
        if digest.cost is not None:
            self.priced_runs += 1
            self.cost += digest.cost
            self.loop_cost += digest.loop_cost or 0.0
        self.patterns.update({v.pattern or "?" for v in digest.verdicts})
        self.actions.update(v.action for v in digest.verdicts)
        _tally(self.sources, source_name(digest), looping)
        if digest.model:
            _tally(self.models, digest.model, looping)
        if looping:
            self._keep_worst(digest)

    def _keep_worst(self, digest: RunDigest) -> None:
        self.worst.append(digest)
        if len(self.worst) > 2 * self.top + 16:  # trim now and then: sorting each time would cost more
            self.worst = worst_first(self.worst)[: self.top]

    def worst_runs(self) -> list[RunDigest]:
        return worst_first(self.worst)[: self.top]

    def rows(self, preset: str | None = None, *, currency: str = "USD") -> list[tuple[str, Any]]:
        """(label, value) lines of the summary table (the preset's first, when given)."""
        rows: list[tuple[str, Any]] = [("preset", preset)] if preset is not None else []
        rows += [
            ("runs", self.runs),
            ("events", self.events),
            ("runs with loops", f"{self.looping} ({_share(self.looping, self.runs)})"),
            ("runs stopped", self.stopped),
            ("steps inside loops", self.loop_steps),
        ]
        if self.priced_runs:
            rows.append(("cost inside loops", f"{self.loop_cost:,.2f} of {self.cost:,.2f} {currency}"))
        rows += [(f"  {pattern}", n) for pattern, n in self.patterns.most_common()]
        if len(self.sources) > 1 or self.models:
            rows += [(f"source {name}", _runs_cell(counts)) for name, counts in sorted(self.sources.items())]
        rows += [(f"model {name}", _runs_cell(counts)) for name, counts in sorted(self.models.items())]
        return rows


def _tally(table: dict[str, list[int]], key: str, looping: bool) -> None:
    counts = table.setdefault(key, [0, 0])
    counts[0] += 1
    counts[1] += looping


def _runs_cell(counts: Sequence[int]) -> str:
    return f"{counts[1]} of {counts[0]} runs loop"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def worst_first(digests: Iterable[RunDigest]) -> list[RunDigest]:
    """Runs ranked: the strongest action first, then the most verdicts, then the most steps in loops."""
    return sorted(digests, key=lambda d: (-d.severity, -len(d.verdicts), -d.loop_steps, d.id))


def run_digests(runs: Iterable[tuple[Run, RunReport]]) -> Iterable[RunDigest]:
    for run, report in runs:
        yield digest_run(run, report)
