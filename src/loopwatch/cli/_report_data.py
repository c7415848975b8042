"""What a report page shows, collected while the runs stream by: counts over every run, and the steps of the runs
it keeps (the worst runs with loops, the first clean ones) on the axis of the user's own run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .._timeline import describe
from ..core._events import Event, Message, TextDelta, ToolCall, ToolResult
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError
from ..readers import Run
from ._scan import RunReport, scan_runs
from ._summary import Episode, RunDigest, digest_run, episodes, source_name

TEXT_CHARS: Final = 2000
"""A step's full text, opened in the run's panel, is cut to this many characters."""
CLEAN_STEPS: Final = 40
"""The steps of a run without a loop listed in its panel (its first ones)."""
CLEAN_TEXTS: Final = 12
"""Of those, how many keep their full text."""


@dataclass(frozen=True)
class SweepPoint:
    """One setting of a swept parameter and what it scored."""

    value: float | str
    recall: float
    false_alarms: float
    """The false-alarm rate (share of clean runs with a detection)."""


@dataclass(frozen=True)
class LabelSpan:
    """A labelled loop episode of a run (an evaluation's ground truth), drawn beside the verdicts."""

    start: int
    end: int
    detectable_at: int
    pattern: str
    caught: bool
    note: str = ""


class Step(NamedTuple):
    pos: int  # the event's position in the run
    record: int  # the step index in the user's run
    kind: str  # "call" or a key of KIND_COLOURS
    tool: str | None
    label: str
    failed: bool
    text: str | None  # the full text (cut at TEXT_CHARS) when it is longer than the label and may be shown


@dataclass
class RunView:
    """What the page keeps of one run."""

    order: int
    id: str
    source: str | None
    model: str | None
    events: int
    verdicts: list[Verdict]
    episodes: list[Episode]
    turns: int
    cost: float | None
    loop_cost: float
    steps: list[Step] = field(default_factory=list)
    length: int = 0  # steps in the user's run
    partial: bool = False  # only the steps around loops are kept
    labels: list[LabelSpan] = field(default_factory=list)
    label_verdict: str | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def severity(self) -> int:
        return max((v.severity for v in self.verdicts), default=0)

    @property
    def action(self) -> str:
        if not self.verdicts:
            return "clean"
        return max(self.verdicts, key=lambda v: v.severity).action

    def rank(self) -> tuple[int, int, str, int]:
        return (-self.severity, -len(self.verdicts), self.id, self.order)


@dataclass
class Sweep:
    param: str
    points: list[SweepPoint]


def scan_with_runs(policy: Policy, runs: Iterable[Run]) -> Iterator[tuple[Run, RunReport]]:
    """:func:`loopwatch.cli._scan.scan_runs`, with each report paired with the run it came from.

    Streams like ``scan_runs`` (which reads one run, then yields its report).
    """
    current: list[Run] = []

    def tap() -> Iterator[Run]:
        for run in runs:
            current[:] = [run]
            yield run

    for report in scan_runs(policy, tap()):
        yield current[0], report


class ReportData:
    """The counts and kept runs of a report (the options: :class:`~loopwatch.cli._report.HtmlReport`)."""

    def __init__(
        self,
        *,
        max_runs: int = 200,
        context: int = 5,
        max_steps: int = 2000,
        top: int = 20,
        max_clean: int = 200,
        currency: str = "USD",
    ) -> None:
        for name, value, low in (
            ("max_runs", max_runs, 1),
            ("context", context, 0),
            ("max_steps", max_steps, 1),
            ("top", top, 1),
            ("max_clean", max_clean, 0),
        ):
            if value < low:
                raise ConfigError(f"must be at least {low}, got {value!r}", field=name)
        self.max_runs = max_runs
        self.max_clean = max_clean
        self.context = context
        self.max_steps = max_steps
        self.top = top
        self.currency = currency
        self.runs = 0
        self.events = 0
        self.looping = 0
        self.stopped = 0
        self.verdicts = 0
        self.turns = 0
        self.loop_cost = 0.0
        self.cost = 0.0
        self.has_cost = False
        self.by_pattern: Counter[str] = Counter()
        self.verdicts_by_pattern: Counter[str] = Counter()
        self.by_action: Counter[str] = Counter()
        self.source_runs: Counter[str] = Counter()
        self.source_loops: Counter[str] = Counter()
        self.model_runs: Counter[str] = Counter()
        self.model_loops: Counter[str] = Counter()
        self.clean_seen = 0
        self._kept: list[RunView] = []
        self._clean: list[RunView] = []
        self._sweeps: list[Sweep] = []
        self._interned: dict[str, str] = {}
        self._cut: tuple[int, int, str, int] | None = None  # the rank of the last run kept at the last prune

    # -- collecting ----------------------------------------------------------------------------------------

    def add(self, run: Run, report: RunReport) -> None:
        """Count one scanned run; keep its steps if it is among the worst ``max_runs`` or first ``max_clean``."""
        self.add_digest(digest_run(run, report), run)

    def add_digest(
        self,
        digest: RunDigest,
        run: Run | None,
        *,
        labels: Sequence[LabelSpan] = (),
        label_verdict: str | None = None,
        flags: Sequence[str] = (),
    ) -> None:
        """:meth:`add` from a run's digest; ``run`` (for its steps) may be ``None``. ``labels``: the run's labelled
        episodes, drawn beside its verdicts; ``flags``: words the page's filter can select the run by."""
        self.runs += 1
        self.events += digest.events
        source = source_name(digest)
        model = digest.model
        self.source_runs[source] += 1
        if model is not None:
            self.model_runs[model] += 1
        if digest.cost is not None:
            self.has_cost = True
            self.cost += digest.cost
        view = RunView(
            order=self.runs,
            id=digest.id,
            source=source,
            model=model,
            events=digest.events,
            verdicts=list(digest.verdicts),
            episodes=episodes(digest.verdicts),
            turns=digest.loop_steps,
            cost=digest.cost,
            loop_cost=digest.loop_cost or 0.0,
            length=digest.events,
            labels=list(labels),
            label_verdict=label_verdict,
            flags=list(flags),
        )
        if not digest.verdicts:
            self.clean_seen += 1
            if len(self._clean) < self.max_clean or labels:
                if run is not None:
                    self._keep_steps(view, run)
                self._clean.append(view)
            return
        self.looping += 1
        self.source_loops[source] += 1
        if model is not None:
            self.model_loops[model] += 1
        if digest.stopped:
            self.stopped += 1
        self.verdicts += len(digest.verdicts)
        self.by_pattern.update({v.pattern or "?" for v in digest.verdicts})
        self.verdicts_by_pattern.update(v.pattern or "?" for v in digest.verdicts)
        self.by_action[view.action] += 1
        self.turns += digest.loop_steps
        self.loop_cost += digest.loop_cost or 0.0
        if self._cut is not None and view.rank() > self._cut:
            return  # cannot make the cut: keep only its counts
        if run is not None:
            self._keep_steps(view, run)
        self._kept.append(view)
        if len(self._kept) >= 2 * self.max_runs:
            self._prune()

    def add_sweep(
        self, param: str, points: Iterable[SweepPoint | tuple[float | str, float, float] | Mapping[str, Any]]
    ) -> None:
        """Add a sweep of ``param``: per value, recall and false-alarm rate (both shares, 0 to 1)."""
        out: list[SweepPoint] = []
        for point in points:
            if isinstance(point, SweepPoint):
                out.append(point)
            elif isinstance(point, Mapping):
                out.append(SweepPoint(point["value"], float(point["recall"]), float(point["false_alarms"])))
            else:
                value, recall, false_alarms = point
                out.append(SweepPoint(value, float(recall), float(false_alarms)))
        self._sweeps.append(Sweep(param, out))

    def kept_runs(self) -> list[RunView]:
        """The runs with loops drawn on the page, worst first."""
        self._prune()
        return list(self._kept)

    def clean_runs(self) -> list[RunView]:
        """The runs without a verdict kept on the page, in input order."""
        return list(self._clean)

    def _prune(self) -> None:
        self._kept.sort(key=RunView.rank)
        del self._kept[self.max_runs :]
        if len(self._kept) == self.max_runs:
            self._cut = self._kept[-1].rank()

    def _keep_steps(self, view: RunView, run: Run) -> None:
        events = run.events
        indices = run.indices
        records = [indices[p] if indices is not None and p < len(indices) else p for p in range(len(events))]
        view.length = max(records, default=-1) + 1
        spans = [(e.start, e.end) for e in view.episodes] + [(lab.start, lab.end) for lab in view.labels]
        ctx = self.context

        def near(record: int) -> bool:
            return any(a - ctx <= record <= b + ctx for a, b in spans)

        if not spans:
            texted: Callable[[int], bool] = lambda record: record < CLEAN_TEXTS  # noqa: E731
        else:
            texted = near
        partial = len(events) > self.max_steps
        view.partial = partial
        for pos, event in enumerate(events):
            record = records[pos]
            if partial and not near(record) and not (not spans and record < CLEAN_STEPS):
                continue
            kind, tool, label, failed = describe(event)
            text = _full_text(event) if texted(record) else None
            if text is not None and text == label:
                text = None
            view.steps.append(Step(pos, record, kind, self._intern(tool), label, failed, text))

    def _intern(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._interned.setdefault(text, text)


def _full_text(event: Event) -> str | None:
    """An event's whole text for the run's panel (cut at TEXT_CHARS): a call's arguments and reasoning, a
    result's output, a message's text."""
    if isinstance(event, ToolCall):
        try:
            args = json.dumps(dict(event.args), ensure_ascii=False, indent=1, default=str)
        except (TypeError, ValueError):  # pragma: no cover (args come from JSON)
            args = repr(dict(event.args))
        text = f"{event.tool} {args}"
        if event.thought:
            text = f"{event.thought}\n\n{text}"
    elif isinstance(event, ToolResult):
        text = event.output
    elif isinstance(event, (Message, TextDelta)):
        text = event.text
    else:
        return None
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS] + f"\n… ({len(text) - TEXT_CHARS:,} more characters)"
    return text
