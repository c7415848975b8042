"""A :class:`~loopwatch.cli._metrics.Report` as plain-text, aligned tables: overall, per source, per pattern."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._metrics import Metrics, PatternMetrics, Ratio, Report

_DASH: Final = "–"


def _pct(ratio: Ratio) -> str:
    rate = ratio.rate
    return _DASH if rate is None else f"{100 * rate:.1f}%"


def _pct_count(ratio: Ratio) -> str:
    return _DASH if ratio.rate is None else f"{_pct(ratio)} ({ratio.count})"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return _DASH
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}"


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Columns separated by two spaces; ``align`` holds ``l`` or ``r`` per column (default: the first column
    left-aligned, the others right-aligned)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(cells, widths, align, strict=True)
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _overall_rows(report: Report) -> list[list[str]]:
    m = report.overall
    rows = [
        [
            "episode recall",
            _pct(m.episode_recall),
            f"{m.episode_recall.count} of {m.episode_recall.total} episodes",
        ],
    ]
    if report.excluded_patterns:
        r = m.recall_excluding
        name = f"episode recall without {', '.join(report.excluded_patterns)}"
        rows.append([name, _pct(r), f"{r.count} of {r.total} episodes"])
    return [
        *rows,
        ["detection delay median", _num(m.delay_median), f"steps, over {len(m.delays)} detected episodes"],
        ["detection delay p90", _num(m.delay_p90), "steps, nearest rank"],
        ["stuck-run stop recall", _pct(m.stuck_stop_recall), _of(m.stuck_stop_recall, "stuck runs")],
        ["false alarm rate", _pct(m.false_alarm_rate), _of(m.false_alarm_rate, "clean runs")],
        [
            "stray detections /1k steps",
            _num(m.stray_per_1k),
            f"{m.stray_detections} stray detections in {m.steps} steps",
        ],
        ["false stop rate", _pct(m.false_stop_rate), _of(m.false_stop_rate, "clean + recovered runs")],
        ["resolved-run stop rate", _pct(m.resolved_stop_rate), _of(m.resolved_stop_rate, "resolved runs")],
        ["steps saved", _pct(m.steps_saved), _of(m.steps_saved, "steps of stuck runs")],
    ]


def _of(ratio: Ratio, what: str) -> str:
    return f"{ratio.count} of {ratio.total} {what}"


_SOURCE_HEADERS: Final = (
    "source",
    "runs",
    "episodes",
    "episode recall",
    "delay med",
    "delay p90",
    "stuck stop recall",
    "false alarm rate",
    "stray /1k",
    "false stop rate",
    "resolved stop rate",
    "steps saved",
)


def _source_row(name: str, m: Metrics) -> list[str]:
    return [
        name,
        str(m.runs),
        str(m.episode_recall.total),
        _pct(m.episode_recall),
        _num(m.delay_median),
        _num(m.delay_p90),
        f"{_pct(m.stuck_stop_recall)} of {m.stuck_stop_recall.total}",
        f"{_pct(m.false_alarm_rate)} of {m.false_alarm_rate.total}",
        _num(m.stray_per_1k),
        _pct_count(m.false_stop_rate),
        _pct_count(m.resolved_stop_rate),
        _pct(m.steps_saved),
    ]


def _pattern_row(m: PatternMetrics) -> list[str]:
    r = m.episode_recall
    return [m.pattern, str(r.total), str(r.count), _pct(r), _num(m.delay_median), _num(m.delay_p90)]


def format_report(report: Report) -> str:
    view = "live view (detections after a run's first stop dropped)" if report.live else "untruncated view"
    m = report.overall
    title = f"{m.runs} labelled runs, {m.steps} steps, {m.episode_recall.total} episodes; {view}"
    if report.unlabelled_runs:
        title += f"; {report.unlabelled_runs} runs without a label ignored"
    sources = [_source_row(name, sm) for name, sm in report.by_source.items()]
    patterns = [_pattern_row(pm) for pm in report.by_pattern.values()]
    pattern_headers = ("pattern", "episodes", "detected", "recall", "delay med", "delay p90")
    return "\n\n".join(
        [
            title,
            _render(("metric", "value", "detail"), _overall_rows(report), "lrl"),
            "Per source\n" + _render(_SOURCE_HEADERS, [*sources, _source_row("all", m)]),
            "Per pattern\n" + _render(pattern_headers, patterns),
        ]
    )
