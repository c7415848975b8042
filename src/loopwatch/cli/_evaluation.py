"""Detection quality on labelled runs: one preset, presets side by side, or one threshold swept.

This drives the engine over recorded runs (as :mod:`loopwatch.cli._scan` does) and hands the verdicts to
:func:`loopwatch.cli._metrics.evaluate` (see the docs' labels page). Runs without a label are read and skipped
without being scanned; labels without a run are counted by the report.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._config_rules import parameters_of, rebuilt
from ..core._policy import Policy
from ..core.detectors._base import Detector
from ..errors import ConfigError
from ..readers import Run
from ._metrics import Detection, Label, Metrics, Report, RunOutcome, evaluate, resolved_from_labels, source_from_id
from ._scan import RunReport, scan_runs


@dataclass(frozen=True)
class Evaluation:
    """A preset's :class:`~loopwatch.cli._metrics.Report` and the scan reports of the labelled runs behind it."""

    policy: Policy
    report: Report
    runs: tuple[RunReport, ...]
    outcomes: tuple[RunOutcome, ...] = ()
    labels: Mapping[str, Label] | None = None
    live: bool = True

    def on(self, sources: Collection[str], *, keep: bool = True) -> Report:
        """The metrics of these runs restricted to ``sources`` (``keep=False``: to every other source), without
        scanning again."""
        chosen = [o for o in self.outcomes if (o.source in sources) == keep]
        return evaluate(chosen, self.labels or {}, live=self.live)


def run_outcome(run: Run, report: RunReport) -> RunOutcome:
    """What the metrics need from one scanned run: its length in records, task outcome and detections."""
    steps = (max(run.indices) + 1 if run.indices else 0) if run.indices is not None else len(run.events)
    source = source_from_id(run.id) if "/" in run.id else (run.source or source_from_id(run.id))
    resolved = resolved_from_labels(run.meta.get("labels"))
    detections = tuple(Detection.from_json(v.detection_json()) for v in report.verdicts)
    return RunOutcome(run.id, source, steps, resolved, detections)


def labelled_runs(runs: Iterable[Run], labels: Mapping[str, Label]) -> list[Run]:
    """The runs that have a label, in input order (the others are never scanned)."""
    return [run for run in runs if run.id in labels]


def evaluate_policy(
    policy: Policy,
    runs: Sequence[Run],
    labels: Mapping[str, Label],
    *,
    live: bool = True,
    exclude_patterns: Sequence[str] = (),
) -> Evaluation:
    """Scan ``runs`` (already restricted to labelled ones) with ``policy`` and score the verdicts."""
    reports = tuple(scan_runs(policy, runs))
    outcomes = tuple(run_outcome(run, report) for run, report in zip(runs, reports, strict=True))
    report = evaluate(outcomes, labels, live=live, exclude_patterns=exclude_patterns)
    return Evaluation(policy, report, reports, outcomes, labels, live)


# -- side by side -------------------------------------------------------------------------------------

_COMPARED: Final = (
    ("episode recall", lambda m: m.episode_recall),
    ("recall excl. rephrase", lambda m: m.recall_excluding),
    ("delay median", None),
    ("false alarms (clean)", lambda m: m.false_alarm_rate),
    ("false stops", lambda m: m.false_stop_rate),
    ("resolved runs stopped", lambda m: m.resolved_stop_rate),
    ("stuck-run stop recall", lambda m: m.stuck_stop_recall),
)


def _cell(metrics: Metrics, name: str) -> str:
    if name == "delay median":
        value = metrics.delay_median
        return "-" if value is None else f"{value:g}"
    getter = dict(_COMPARED)[name]
    assert getter is not None
    ratio = getter(metrics)
    rate = ratio.rate
    return "-" if rate is None else f"{rate:.1%} ({ratio.count}/{ratio.total})"


def compare_table(evaluations: Sequence[Evaluation]) -> str:
    """Presets side by side: overall, then per source (plain aligned text)."""
    names = [e.policy.name for e in evaluations]
    blocks = [_table("overall", names, [e.report.overall for e in evaluations])]
    sources = sorted({s for e in evaluations for s in e.report.by_source})
    for source in sources:
        per = [e.report.by_source.get(source) for e in evaluations]
        if all(m is not None for m in per):
            blocks.append(_table(source, names, [m for m in per if m is not None]))
    return "\n\n".join(blocks)


def _table(title: str, names: Sequence[str], metrics: Sequence[Metrics]) -> str:
    rows = [[f"{title} ({metrics[0].runs} runs)", *names]]
    rows += [[name, *(_cell(m, name) for m in metrics)] for name, _ in _COMPARED]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(_align(i, cell, w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _align(column: int, cell: str, width: int) -> str:
    return cell.ljust(width) if column == 0 else cell.rjust(width)


def compare_json(evaluations: Sequence[Evaluation]) -> dict[str, Any]:
    return {e.policy.name: e.report.to_json() for e in evaluations}


# -- sweeps -------------------------------------------------------------------------------------------

_SWEEP: Final = re.compile(r"^(?P<detector>[\w-]+)\.(?P<param>\w+)=(?P<start>[^:]+):(?P<stop>[^:]+):(?P<step>[^:]+)$")
_MAX_POINTS: Final = 200


@dataclass(frozen=True)
class Sweep:
    """``detector.param=start:stop:step``: the values a detector parameter takes (both ends included)."""

    detector: str
    param: str
    values: tuple[float, ...]

    @classmethod
    def parse(cls, text: str) -> Sweep:
        match = _SWEEP.match(text.strip())
        if match is None:
            raise ConfigError(f"expected detector.param=start:stop:step, got {text!r}", field="sweep")
        try:
            start, stop, step = (float(match[k]) for k in ("start", "stop", "step"))
        except ValueError as exc:
            raise ConfigError(f"start, stop and step must be numbers: {text!r}", field="sweep") from exc
        if step <= 0 or stop < start:
            raise ConfigError("the step must be positive and stop must not be below start", field="sweep")
        count = round((stop - start) / step) + 1
        if count > _MAX_POINTS:
            raise ConfigError(f"{count} values: at most {_MAX_POINTS} per sweep", field="sweep")
        integral = all(float(match[k]).is_integer() for k in ("start", "stop", "step"))
        values = tuple(round(start + i * step, 10) for i in range(count))
        if integral:
            values = tuple(float(int(v)) for v in values)
        return cls(match["detector"], match["param"], values)

    def policies(self, policy: Policy) -> list[tuple[float, Policy]]:
        """One policy per value, the named detector's parameter set to it (the rest unchanged)."""
        position = [i for i, d in enumerate(policy.detectors) if d.name == self.detector]
        if not position:
            known = ", ".join(sorted({d.name for d in policy.detectors}))
            raise ConfigError(
                f"preset {policy.name!r} has no detector {self.detector!r} (it has: {known})", field="sweep"
            )
        index = position[0]
        detector = policy.detectors[index]
        # what the rule's constructor takes (its repr may show a derived setting too, and may not show a parameter
        # it folded into another): the rule is rebuilt as a configuration file's [detectors] table rebuilds it
        accepted = parameters_of(type(detector))
        if self.param not in accepted:
            raise ConfigError(
                f"{self.detector} has no parameter {self.param!r} (it has: {', '.join(sorted(accepted))})",
                field="sweep",
            )
        out = []
        for value in self.values:
            current = detector._params().get(self.param, accepted[self.param].default)
            typed: Any = int(value) if isinstance(current, int) and not isinstance(current, bool) else value
            changed = _rebuilt(detector, {self.param: typed})
            detectors = (*policy.detectors[:index], changed, *policy.detectors[index + 1 :])
            out.append((value, policy.replace(detectors=detectors, name=f"{policy.name}[{self.param}={value:g}]")))
        return out


def _rebuilt(detector: Detector[Any], changes: Mapping[str, Any]) -> Detector[Any]:
    try:
        return rebuilt(detector, changes)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{detector.name}: {exc}", field="sweep") from exc


@dataclass(frozen=True)
class SweepPoint:
    value: float
    recall: float | None
    false_alarms: float | None
    false_stops: float | None
    delay_median: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "episode_recall": self.recall,
            "false_alarm_rate": self.false_alarms,
            "false_stop_rate": self.false_stops,
            "delay_median": self.delay_median,
        }


def sweep_point(value: float, evaluation: Evaluation) -> SweepPoint:
    overall = evaluation.report.overall
    return SweepPoint(
        value,
        overall.episode_recall.rate,
        overall.false_alarm_rate.rate,
        overall.false_stop_rate.rate,
        overall.delay_median,
    )


def sweep_table(sweep: Sweep, points: Sequence[SweepPoint]) -> str:
    """One row per value: recall, false alarms, false stops, median delay."""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    rows = [[f"{sweep.detector}.{sweep.param}", "episode recall", "false alarms", "false stops", "delay median"]]
    for p in points:
        delay = "-" if p.delay_median is None else f"{p.delay_median:g}"
        rows.append([f"{p.value:g}", pct(p.recall), pct(p.false_alarms), pct(p.false_stops), delay])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- leave one source out --------------------------------------------------------------------------------

MAX_FALSE_ALARMS: Final = 0.025
"""The false-alarm rate a threshold is chosen under (the share of clean runs with any detection)."""
MIN_CLEAN_RUNS: Final = 50
"""A source with at least this many clean runs is held to the false-alarm budget on its own too: a value that stays
within it overall by flagging one source's healthy runs is not within it."""


def _preference(
    metrics: Metrics, max_false_alarms: float, sources: Mapping[str, Metrics] | None = None
) -> tuple[bool, float, float]:
    """How good a threshold's metrics are: within the false-alarm budget first (overall, and on each of
    ``sources`` with :data:`MIN_CLEAN_RUNS` clean runs or more); then, within it, recall before fewer alarms, and
    outside it, fewer alarms before recall."""
    alarms = metrics.false_alarm_rate.rate or 0.0
    recall = metrics.episode_recall.rate or 0.0
    each = (m.false_alarm_rate for m in (sources or {}).values())
    if alarms <= max_false_alarms and all(
        (r.rate or 0.0) <= max_false_alarms for r in each if r.total >= MIN_CLEAN_RUNS
    ):
        return (True, recall, -alarms)
    return (False, -alarms, recall)


def choose(
    points: Sequence[tuple[float, Metrics]],
    max_false_alarms: float = MAX_FALSE_ALARMS,
    by_source: Mapping[float, Mapping[str, Metrics]] | None = None,
) -> tuple[float, Metrics]:
    """The value whose metrics are best: the highest episode recall among the values within the false-alarm
    budget (the fewest false alarms when none is), ties to the fewer alarms, then to the earlier value.
    ``by_source``: each value's metrics per source, for the budget each large source is held to on its own."""
    sources = by_source or {}

    def preference(point: tuple[float, Metrics]) -> tuple[bool, float, float]:
        return _preference(point[1], max_false_alarms, sources.get(point[0]))

    best = points[0]
    for point in points[1:]:
        if preference(point) > preference(best):
            best = point
    return best


@dataclass(frozen=True)
class HeldOut:
    """One source left out of a sweep: the value chosen on the other sources, and how it does on this one."""

    source: str
    value: float
    metrics: Metrics
    """The held-out source's metrics at ``value``."""
    best_here: float
    """The value that would have been chosen on this source alone (for comparison)."""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "value": self.value, "best_here": self.best_here, **self.metrics.to_json()}


def leave_one_source_out(
    points: Sequence[tuple[float, Evaluation]], max_false_alarms: float = MAX_FALSE_ALARMS
) -> tuple[float, list[HeldOut]]:
    """(the value chosen on all the sources, and per source the value chosen on the others with its metrics on the
    source left out): the figures that say whether a threshold holds on sources it was not chosen on."""
    every = {value: e.report.by_source for value, e in points}
    overall = choose([(value, e.report.overall) for value, e in points], max_false_alarms, every)[0]
    sources = sorted({source for _, e in points for source in e.report.by_source})
    held: list[HeldOut] = []
    for source in sources:
        rest = {value: e.on([source], keep=False) for value, e in points}
        others = [(value, report.overall) for value, report in rest.items()]
        value = choose(others, max_false_alarms, {v: report.by_source for v, report in rest.items()})[0]
        here = [(v, e.report.by_source[source]) for v, e in points if source in e.report.by_source]
        metrics = next(e.report.by_source[source] for v, e in points if v == value)
        held.append(HeldOut(source, value, metrics, choose(here, max_false_alarms)[0]))
    return overall, held


def held_out_table(name: str, overall: float, held: Sequence[HeldOut]) -> str:
    """The leave-one-source-out figures as aligned text."""

    def pct(ratio: Any) -> str:
        return "-" if ratio.rate is None else f"{ratio.rate:.1%} ({ratio.count}/{ratio.total})"

    rows = [[f"left out ({name} chosen on the rest)", "value", "best there", "recall", "false alarms", "false stops"]]
    for h in held:
        m = h.metrics
        rows.append([h.source, f"{h.value:g}", f"{h.best_here:g}", pct(m.episode_recall), pct(m.false_alarm_rate),
                     pct(m.false_stop_rate)])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{name}: {overall:g} chosen on all the sources"]
    lines += ["  ".join(_align(i, c, w) for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(2, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


# -- what each rule brings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleShare:
    """What one rule of a policy brings on its own: per source, the labelled episodes only it catches and the clean
    runs only it raises an alarm on (measured by running the policy without it)."""

    rule: str
    catches: Mapping[str, int]
    alarms: Mapping[str, int]

    @property
    def useless(self) -> bool:
        """Catches nothing on its own anywhere, but raises alarms: a rule to take out of the policy."""
        return not any(self.catches.values()) and any(self.alarms.values())

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "catches": dict(self.catches), "alarms": dict(self.alarms), "useless": self.useless}


def _caught(evaluation: Evaluation) -> tuple[set[tuple[str, int, int]], set[str]]:
    detected = {(e.run_id, e.episode.start, e.episode.end) for e in evaluation.report.episodes if e.detected}
    alarmed = {a.run_id for a in evaluation.report.alarms}
    return detected, alarmed


def rule_shares(
    evaluation: Evaluation, runs: Sequence[Run], labels: Mapping[str, Label], *, live: bool = True
) -> list[RuleShare]:
    """:class:`RuleShare` of every rule of ``evaluation``'s policy (one scan of the policy without each rule)."""
    policy = evaluation.policy
    detected, alarmed = _caught(evaluation)
    sources = sorted(evaluation.report.by_source)
    shares = []
    for i, rule in enumerate(policy.detectors):
        without = policy.replace(detectors=policy.detectors[:i] + policy.detectors[i + 1 :], name=f"-{rule.name}")
        still_detected, still_alarmed = _caught(evaluate_policy(without, runs, labels, live=live))
        catches = dict.fromkeys(sources, 0)
        for run_id, _, _ in detected - still_detected:
            catches[source_from_id(run_id)] = catches.get(source_from_id(run_id), 0) + 1
        alarms = dict.fromkeys(sources, 0)
        for run_id in alarmed - still_alarmed:
            alarms[source_from_id(run_id)] = alarms.get(source_from_id(run_id), 0) + 1
        shares.append(RuleShare(rule.name, catches, alarms))
    return shares


def rule_share_table(shares: Sequence[RuleShare]) -> str:
    """Per rule and source, ``episodes only it catches / clean runs only it alarms``."""
    sources = sorted({s for share in shares for s in share.catches})
    rows = [["rule (only it: catches / alarms)", *sources, "all"]]
    for share in shares:
        cells = [f"{share.catches.get(s, 0)} / {share.alarms.get(s, 0)}" for s in sources]
        total = f"{sum(share.catches.values())} / {sum(share.alarms.values())}"
        rows.append([share.rule + ("  (catches nothing alone)" if share.useless else ""), *cells, total])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(_align(i, c, w) for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
