"""The HTML evaluation report of ``loopwatch eval --html``: the scan report's page (runs, filters, timelines, a
run's steps) with the evaluation on top of it.

- the metrics overall, per source and per labelled pattern (the definitions: docs/labels.md);
- every missed episode and every false alarm, listed, each a link to the run's steps at that place;
- each run's labelled episodes drawn on its timeline, beside the verdicts: green when caught, blue when missed;
- every labelled run is on the page, with a loop or without; the filter also selects runs with a missed episode
  and clean runs with a false alarm.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..readers import Run
from ._evaluation import Evaluation
from ._metrics import Label, Metrics, PatternMetrics, Ratio
from ._report import HtmlReport, LabelSpan, middle_ellipsis
from ._report_data import RunView
from ._report_html import esc
from ._summary import digest_run

__all__ = ["EvalReport", "write_eval_report"]


class EvalReport(HtmlReport):
    """An :class:`~loopwatch.cli._report.HtmlReport` of labelled runs with the evaluation's metrics and misses."""

    title = "loopwatch eval"
    default_show = ""

    def __init__(self, evaluation: Evaluation, labels: Mapping[str, Label], **options: Any) -> None:
        options.setdefault("max_runs", 100_000)
        options.setdefault("max_clean", 100_000)
        super().__init__(**options)
        self.evaluation = evaluation
        self.labels = labels
        self._positions: dict[str, int] = {}

    def add_runs(self, runs: Sequence[Run]) -> None:
        """Add the evaluation's runs (the ones it scanned, in its order)."""
        caught: dict[tuple[str, int], bool] = {
            (e.run_id, e.position): e.detected for e in self.evaluation.report.episodes
        }
        alarmed = {a.run_id for a in self.evaluation.report.false_alarms()}
        for run, scanned in zip(runs, self.evaluation.runs, strict=True):
            label = self.labels.get(run.id)
            spans = []
            flags = []
            if label is not None:
                flags.append(label.verdict)
                for position, episode in enumerate(label.episodes):
                    hit = caught.get((run.id, position), False)
                    spans.append(
                        LabelSpan(episode.start, episode.end, episode.detectable_at, episode.pattern, hit, episode.note)
                    )
                    if not hit and "missed" not in flags:
                        flags.append("missed")
            if run.id in alarmed:
                flags.append("alarm")
            self.add_digest(
                digest_run(run, scanned),
                run,
                labels=spans,
                label_verdict=label.verdict if label is not None else None,
                flags=flags,
            )

    def _filter_flags(self) -> list[tuple[str, str]]:
        return [
            ("missed", "runs with a missed episode"),
            ("alarm", "false alarms (clean runs with a verdict)"),
            ("stuck", "labelled stuck"),
            ("recovered", "labelled recovered"),
        ]

    def _sections_before_runs(self, views: list[RunView]) -> str:
        index = {view.id: i for i, view in enumerate(views)}
        report = self.evaluation.report
        view = "live: what a guard would have done, verdicts after a run's first stop dropped"
        if not report.live:
            view = "untruncated: every verdict kept"
        parts = [
            '<section id="quality"><h2>Quality against the labels</h2>',
            f'<p class="note">{report.overall.runs:,} labelled runs, {report.overall.steps:,} steps, '
            f"{report.overall.episode_recall.total:,} labelled episodes; {esc(view)}.</p>",
            '<div class="evalgrid">',
            _overall_table(report.overall, report.excluded_patterns),
            _pattern_table(report.by_pattern),
            "</div>",
            _source_table(report.by_source, report.overall),
            "</section>",
            self._missed_html(index),
            self._alarms_html(index),
        ]
        return "".join(parts)

    def _missed_html(self, index: Mapping[str, int]) -> str:
        items = [
            (
                outcome.run_id,
                outcome.episode.start,
                f" [{outcome.episode.start}–{outcome.episode.end}] <b>{esc(outcome.episode.pattern)}</b>"
                f"{f' ×{outcome.episode.reps}' if outcome.episode.reps else ''}: {esc(outcome.episode.note)}",
            )
            for outcome in self.evaluation.report.missed_episodes()
        ]
        return _issue_list("missed", "Missed episodes", "Every labelled episode got a verdict.", items, index)

    def _alarms_html(self, index: Mapping[str, int]) -> str:
        items = [
            (
                alarm.run_id,
                alarm.detection.index,
                f' [{alarm.detection.index}] <span class="badge {esc(alarm.detection.action)}">'
                f"{esc(alarm.detection.action)}</span> <b>{esc(alarm.detection.pattern)}</b>: "
                f"{esc(alarm.detection.reason)}",
            )
            for alarm in self.evaluation.report.false_alarms()
        ]
        return _issue_list("alarms", "False alarms", "No verdict on a run labelled clean.", items, index)


def _issue_list(
    section: str, title: str, empty: str, items: list[tuple[str, int, str]], index: Mapping[str, int]
) -> str:
    """A section listing runs' issues (run id, the step to open, the line's HTML), each a link to its run's steps
    where the run is in the page."""
    out = [f'<section id="{section}"><h2>{title} ({len(items):,})</h2>']
    if not items:
        return out[0] + f'<p class="empty">{empty}</p></section>'
    out.append('<ul class="issue-list">')
    for run_id, step, body in items:
        i = index.get(run_id)
        link = f' class="issue-link" data-run="{i}" data-step="{step}" tabindex="0"' if i is not None else ""
        out.append(
            f'<li{link} title="{esc(run_id)}"><span class="rid">{esc(middle_ellipsis(run_id))}</span>{body}</li>'
        )
    out.append("</ul></section>")
    return "".join(out)


def write_eval_report(
    path: str | os.PathLike[str],
    evaluation: Evaluation,
    runs: Sequence[Run],
    labels: Mapping[str, Label],
    *,
    sweeps: Sequence[tuple[Any, Sequence[Any]]] = (),
    about: Sequence[tuple[str, str]] | None = None,
) -> EvalReport:
    """Write the evaluation report of ``evaluation`` (over ``runs``, in its order) to ``path``, whole or not at
    all; ``sweeps``: (sweep, points) pairs drawn as recall against false alarms."""
    report = EvalReport(evaluation, labels)
    report.add_runs(runs)
    for sweep, points in sweeps:
        report.add_sweep(
            f"{sweep.detector}.{sweep.param}",
            [(p.value, p.recall or 0.0, p.false_alarms or 0.0) for p in points],
        )
    report.write(path, preset=evaluation.policy.name, about=about)
    return report


# -- metric tables ---------------------------------------------------------------------------------------------


def _pct(ratio: Ratio) -> str:
    return "–" if ratio.rate is None else f"{ratio.rate:.1%}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def _table(table_id: str, caption: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f'<th class="{"" if k == 0 else "num"}">{esc(h)}</th>' for k, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"" if k == 0 else "num"}">{esc(c)}</td>' for k, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return (
        f'<figure class="chart" id="{table_id}"><figcaption>{esc(caption)}</figcaption>'
        f'<table class="metrics"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></figure>'
    )


def _overall_table(m: Metrics, excluded: Sequence[str]) -> str:
    rows = [["episode recall", _pct(m.episode_recall), f"{m.episode_recall.count} of {m.episode_recall.total}"]]
    if excluded:
        r = m.recall_excluding
        rows.append([f"episode recall without {', '.join(excluded)}", _pct(r), f"{r.count} of {r.total}"])
    rows += [
        ["detection delay, median (steps)", _num(m.delay_median), f"{len(m.delays)} detected"],
        ["detection delay, p90 (steps)", _num(m.delay_p90), ""],
        ["stuck-run stop recall", _pct(m.stuck_stop_recall), _of(m.stuck_stop_recall)],
        ["false alarm rate (clean runs)", _pct(m.false_alarm_rate), _of(m.false_alarm_rate)],
        ["stray detections per 1,000 steps", _num(None if m.stray_per_1k is None else round(m.stray_per_1k, 2)), ""],
        ["false stop rate (clean + recovered)", _pct(m.false_stop_rate), _of(m.false_stop_rate)],
        ["resolved runs stopped", _pct(m.resolved_stop_rate), _of(m.resolved_stop_rate)],
        ["steps saved (stuck runs)", _pct(m.steps_saved), _of(m.steps_saved)],
    ]
    return _table("metrics-overall", "Overall", ("metric", "value", "of"), rows)


def _of(ratio: Ratio) -> str:
    return f"{ratio.count} of {ratio.total}"


def _pattern_table(by_pattern: Mapping[str, PatternMetrics]) -> str:
    rows = [
        [p, str(m.episode_recall.total), str(m.episode_recall.count), _pct(m.episode_recall), _num(m.delay_median)]
        for p, m in by_pattern.items()
        if m.episode_recall.total
    ]
    headers = ("labelled pattern", "episodes", "caught", "recall", "delay median")
    return _table("metrics-pattern", "Per labelled pattern", headers, rows)


def _source_table(by_source: Mapping[str, Metrics], overall: Metrics) -> str:
    def row(name: str, m: Metrics) -> list[str]:
        return [
            name,
            str(m.runs),
            str(m.episode_recall.total),
            _pct(m.episode_recall),
            _num(m.delay_median),
            _pct(m.stuck_stop_recall),
            _pct(m.false_alarm_rate),
            _pct(m.false_stop_rate),
            _pct(m.resolved_stop_rate),
        ]

    headers = (
        "source",
        "runs",
        "episodes",
        "recall",
        "delay median",
        "stuck stop recall",
        "false alarms",
        "false stops",
        "resolved stopped",
    )
    rows = [row(name, m) for name, m in by_source.items()] + [row("all", overall)]
    return _table("metrics-source", "Per source", headers, rows)
