"""An HTML report of a scan: one self-contained page (inline CSS, JavaScript and SVG; nothing is fetched).

Built while the runs stream by, so memory stays small over many files::

    report = HtmlReport()
    for run, run_report in scan_with_runs(policy, read_runs(paths)):
        report.add(run, run_report)
    report.write("report.html", preset=policy.name)

:meth:`HtmlReport.add` counts every run. It keeps the steps of the worst ``max_runs`` runs with verdicts (ranked
like the command line's summary: highest action, then number of verdicts) and of the first ``max_clean`` runs
without any, so clean runs can be opened too; the other runs cost a few counters. :meth:`HtmlReport.add_sweep`
adds a parameter sweep (recall against false alarms) drawn as a line chart.

The page is for triage: a table of the runs (full names on hover and in the run's panel, sortable columns),
filters by pattern, source, model and action, a search by run id or tool, and a timeline per run. Everything is
on one axis, the step of the user's own run (a verdict's ``index`` and ``loop_start``; ``Run.indices`` maps events
to steps when one record gave several events). A step's text can be opened in full (up to :data:`TEXT_CHARS`
characters) in the run's panel.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final, NamedTuple

from .._timeline import (
    ACTION_COLOURS,
    KIND_COLOURS,
    KIND_NAMES,
    OTHER_TOOL,
    TOOL_PALETTE,
    cut,
    describe,
)
from ..errors import ConfigError
from ..events import Event, Message, TextDelta, ToolCall, ToolResult
from ..policy import Policy
from ..readers import Run
from ..verdict import Verdict
from ._scan import RunReport, scan_runs
from ._summary import Episode, RunDigest, digest_run, episodes, source_name

__all__ = ["HtmlReport", "LabelSpan", "SweepPoint", "middle_ellipsis", "scan_with_runs"]

TEXT_CHARS: Final = 2000
"""A step's full text, opened in the run's panel, is cut to this many characters."""
NAME_CHARS: Final = 64
"""A run's name longer than this is shown with an ellipsis in its middle (in full on hover and in its panel)."""
CLEAN_STEPS: Final = 40
"""The steps of a run without a loop listed in its panel (its first ones)."""
CLEAN_TEXTS: Final = 12
"""Of those, how many keep their full text."""

LABEL_COLOURS: Final[dict[str, str]] = {"caught": "#2f9e44", "missed": "#1971c2"}
_W: Final = 1000.0  # timeline width in SVG units (stretched to the page's width)
_H: Final = 32.0


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


class _Step(NamedTuple):
    pos: int  # the event's position in the run
    record: int  # the step index in the user's run
    kind: str  # "call" or a key of KIND_COLOURS
    tool: str | None
    label: str
    failed: bool
    text: str | None  # the full text (cut at TEXT_CHARS) when it is longer than the label and may be shown


@dataclass
class _RunView:
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
    steps: list[_Step] = field(default_factory=list)
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
class _Sweep:
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


def middle_ellipsis(text: str, limit: int = NAME_CHARS) -> str:
    """``text`` cut in its middle to ``limit`` characters (the end, often the telling part, kept longer)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 5
    tail = limit - 1 - head
    return text[:head] + "…" + text[-tail:]


class HtmlReport:
    """Collects what an HTML report of a scan shows, run by run, then renders the page.

    ``max_runs``: how many of the worst runs with loops get a timeline (and keep their steps); ``max_clean``: how
    many runs without a loop are kept to be opened (the first ones); ``context``: how many steps before and
    after a loop the run's panel lists; ``max_steps``: a longer run keeps only the steps around its loops;
    ``currency``: the currency of the runs' costs.
    """

    title = "loopwatch report"
    default_show = "loops"
    """What the run filter shows at first: runs with loops (``""``: every run kept)."""

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
        self._kept: list[_RunView] = []
        self._clean: list[_RunView] = []
        self._sweeps: list[_Sweep] = []
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
        view = _RunView(
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
        self._sweeps.append(_Sweep(param, out))

    def kept_runs(self) -> list[_RunView]:
        """The runs with loops drawn on the page, worst first."""
        self._prune()
        return list(self._kept)

    def clean_runs(self) -> list[_RunView]:
        """The runs without a verdict kept on the page, in input order."""
        return list(self._clean)

    def _prune(self) -> None:
        self._kept.sort(key=_RunView.rank)
        del self._kept[self.max_runs :]
        if len(self._kept) == self.max_runs:
            self._cut = self._kept[-1].rank()

    def _keep_steps(self, view: _RunView, run: Run) -> None:
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
            view.steps.append(_Step(pos, record, kind, self._intern(tool), label, failed, text))

    def _intern(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._interned.setdefault(text, text)

    # -- rendering -----------------------------------------------------------------------------------------

    def render(
        self, title: str | None = None, preset: str | None = None, about: Sequence[tuple[str, str]] | None = None
    ) -> str:
        """The whole page, as one HTML string; ``about``: what ran (preset, embedder, time...), in its header."""
        title = title or self.title
        views = [*self.kept_runs(), *self._clean]
        tools = _tool_colours(views)
        data = {
            "runs": [self._run_json(i, v) for i, v in enumerate(views)],
            "context": self.context,
            "clean_steps": CLEAN_STEPS,
            "currency": self.currency,
            "colours": {"tools": tools, "other": OTHER_TOOL, "kinds": KIND_COLOURS, "labels": LABEL_COLOURS},
        }
        facts = list(about or ([("preset", preset)] if preset else []))
        sub = " · ".join(f"{_e(k)} <b>{_e(v)}</b>" for k, v in facts)
        parts = [
            _asset("report-head.html").replace("__TITLE__", _e(title)).replace("__CSS__", _asset("report.css")),
            '<body><header class="top"><div>',
            f"<h1>{_e(title)}</h1>",
            f'<p class="sub">{sub}{" · " if sub else ""}generated by loopwatch {_e(_version())}</p>',
            "</div></header><main>",
            self._summary_html(),
            self._sections_before_runs(views),
            self._charts_html(),
            self._sweeps_html(),
            self._runs_html(views),
            self._timelines_html(views, tools),
            "</main>",
            _DETAIL_PANEL,
            '<div id="tooltip" role="tooltip" hidden></div>',
            '<script type="application/json" id="report-data">',
            _script_json(data),
            "</script>",
            f"<script>{_asset('report.js')}</script>",
            "</body></html>\n",
        ]
        return "".join(parts)

    def write(
        self,
        path: str | os.PathLike[str],
        title: str | None = None,
        preset: str | None = None,
        about: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        """Write the page to ``path`` (UTF-8), whole or not at all: it is written beside it, then moved there."""
        page = self.render(title, preset, about)
        target = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(target))
        handle, temporary = tempfile.mkstemp(prefix=".loopwatch-", suffix=".html", dir=folder)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(page)
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def _sections_before_runs(self, views: list[_RunView]) -> str:
        """Sections a subclass adds between the summary and the charts (an evaluation's metrics)."""
        return ""

    def _filter_flags(self) -> list[tuple[str, str]]:
        """(flag, label) choices the run filter offers besides the actions (an evaluation's missed episodes...)."""
        return []

    def _summary_html(self) -> str:
        loops_share = f"{self.looping / self.runs:.0%} of runs" if self.runs else ""
        stop_share = f"{self.stopped / self.looping:.0%} of runs with loops" if self.looping else ""
        cards = [
            ("runs", f"{self.runs:,}", f"{self.events:,} events"),
            ("runs with loops", f"{self.looping:,}", loops_share),
            ("runs stopped", f"{self.stopped:,}", stop_share),
            ("verdicts", f"{self.verdicts:,}", _action_line(self.by_action)),
            ("steps inside loops", f"{self.turns:,}", "from loop start to the episode's last verdict"),
        ]
        if self.has_cost:
            share = f"{self.loop_cost / self.cost:.0%} of " if self.cost else ""
            cards.append(
                (
                    "cost inside loops",
                    _money(self.loop_cost, self.currency),
                    f"{share}{_money(self.cost, self.currency)} in all",
                )
            )
        else:
            cards.append(("cost inside loops", "—", "the records carry no cost"))
        out = ['<section id="summary" aria-label="summary"><div class="cards">']
        for name, value, note in cards:
            key = name.replace(" ", "-")
            out.append(
                f'<div class="card" data-stat="{key}"><div class="card-name">{_e(name)}</div>'
                f'<div class="card-value">{_e(value)}</div><div class="card-note">{_e(note)}</div></div>'
            )
        out.append("</div></section>")
        return "".join(out)

    def _charts_html(self) -> str:
        charts = [
            _bar_chart(
                "chart-pattern",
                "Runs with loops, by pattern",
                [(p, n, 0, f"{n} runs, {self.verdicts_by_pattern[p]} verdicts") for p, n in _top(self.by_pattern)],
                "runs",
            ),
            _bar_chart(
                "chart-source",
                "Runs with loops, by source",
                [
                    (s, self.source_loops[s], total, f"{self.source_loops[s]} of {total} runs")
                    for s, total in _top(self.source_runs)
                ],
                "runs with loops / all runs",
            ),
        ]
        if self.model_runs:
            charts.append(
                _bar_chart(
                    "chart-model",
                    "Runs with loops, by model",
                    [
                        (m, self.model_loops[m], total, f"{self.model_loops[m]} of {total} runs")
                        for m, total in _top(self.model_runs)
                    ],
                    "runs with loops / all runs",
                )
            )
        return '<section id="charts" aria-label="charts"><div class="charts">' + "".join(charts) + "</div></section>"

    def _sweeps_html(self) -> str:
        if not self._sweeps:
            return ""
        out = ['<section id="sweeps"><h2>Threshold sweeps</h2><div class="charts">']
        for i, sweep in enumerate(self._sweeps):
            out.append(_sweep_chart(i, sweep))
        out.append("</div></section>")
        return "".join(out)

    def _filters_html(self, views: Sequence[_RunView]) -> str:
        patterns = sorted({v.pattern or "?" for view in views for v in view.verdicts})
        sources = sorted({view.source for view in views if view.source})
        models = sorted({view.model for view in views if view.model})
        actions = [("loops", "runs with loops"), ("", "all runs")]
        actions += [(a, f"worst verdict: {a}") for a in ("nudge", "block", "stop")]
        actions += [("clean", "runs without a loop"), *self._filter_flags()]

        def select(name: str, everything: str, values: Sequence[str] | Sequence[tuple[str, str]]) -> str:
            options = [f'<option value="">{_e(everything)}</option>'] if everything else []
            for value in values:
                key, shown = value if isinstance(value, tuple) else (value, value)
                chosen = " selected" if name == "show" and key == self.default_show else ""
                options.append(f'<option value="{_e(key)}"{chosen}>{_e(shown)}</option>')
            return f'<label>{_e(name)} <select id="f-{name}">{"".join(options)}</select></label>'

        return (
            '<div class="filters" role="search">'
            '<label>search <input type="search" id="f-search" placeholder="run id or tool" '
            'autocomplete="off" spellcheck="false"></label>'
            f"{select('pattern', 'any pattern', patterns)}{select('source', 'any source', sources)}"
            f"{select('model', 'any model', models)}{select('show', '', actions)}"
            '<span id="f-count" aria-live="polite"></span></div>'
        )

    def _runs_html(self, views: list[_RunView]) -> str:
        out = ['<section id="runs"><h2>Runs</h2>', self._filters_html(views)]
        if not views:
            out.append('<p class="empty">No run was kept for this page.</p></section>')
            return "".join(out)
        labelled = any(v.label_verdict for v in views)
        columns = [
            ("run", "text", ""),
            ("source", "text", ""),
            ("model", "text", ""),
            ("steps", "num", "num"),
            ("verdicts", "num", "num"),
            ("worst", "num", ""),
            ("patterns", "text", ""),
            ("steps in loops", "num", "num"),
            (f"cost in loops ({self.currency})", "num", "num"),
        ]
        if labelled:
            columns.append(("label", "text", ""))
        head = "".join(
            f'<th class="{cls}" data-kind="{kind}" tabindex="0" role="columnheader" aria-sort="none">'
            f'{_e(name)}<span class="sort-mark"></span></th>'
            for name, kind, cls in columns
        )
        out.append(f'<table class="runs sortable"><thead><tr>{head}</tr></thead><tbody>')
        for i, view in enumerate(views):
            patterns = sorted({v.pattern or "?" for v in view.verdicts})
            cost = "" if view.cost is None else f"{view.loop_cost:,.4g}"
            badge = f'<span class="badge {view.action}">{view.action}</span>'
            cells = [
                f'<td class="run-id" data-v="{_e(view.id)}" title="{_e(view.id)}">{_e(middle_ellipsis(view.id))}</td>',
                f'<td class="source" data-v="{_e(view.source or "")}">{_e(view.source or "")}</td>',
                f'<td class="model" data-v="{_e(view.model or "")}">{_e(view.model or "")}</td>',
                f'<td class="num" data-v="{view.length}">{view.length:,}</td>',
                f'<td class="num" data-v="{len(view.verdicts)}">{len(view.verdicts)}</td>',
                f'<td data-v="{view.severity}">{badge}</td>',
                f'<td class="patterns" data-v="{_e(" ".join(patterns))}" title="{_e(", ".join(patterns))}">'
                f"{_e(', '.join(patterns))}</td>",
                f'<td class="num" data-v="{view.turns}">{view.turns:,}</td>',
                f'<td class="num" data-v="{view.loop_cost if view.cost is not None else -1}">{_e(cost)}</td>',
            ]
            if labelled:
                cells.append(f'<td data-v="{_e(view.label_verdict or "")}">{_e(view.label_verdict or "")}</td>')
            out.append(f'<tr class="run-row-t run-link" {_filter_attrs(i, view)} tabindex="0">{"".join(cells)}</tr>')
        out.append("</tbody></table>")
        kept_clean, clean = len(self._clean), self.clean_seen
        notes = []
        if self.looping > len(self._kept):
            notes.append(f"The {len(self._kept):,} worst of {self.looping:,} runs with loops are kept.")
        if clean > kept_clean:
            notes.append(f"{kept_clean:,} of {clean:,} runs without a loop are kept (the first ones).")
        notes.append("Click a column's name to sort; click a run to see its steps.")
        out.append(f'<p class="note" id="cap-note" data-drawn="{len(self._kept)}" data-looping="{self.looping}">')
        out.append(" ".join(_e(n) for n in notes) + "</p></section>")
        return "".join(out)

    def _timelines_html(self, views: list[_RunView], tools: dict[str, str]) -> str:
        out = ['<section id="timelines"><h2>Timelines</h2>']
        if not views:
            out.append('<p class="empty">No run had a loop.</p></section>')
            return "".join(out)
        out.append(
            '<p class="note">One row per run shown above, on the run\'s own steps (0 to its last step); '
            "click a run to see its steps around each loop.</p>"
        )
        out.append(_legend(tools, any(v.labels for v in views)))
        out.append('<div class="timelines">')
        for i, view in enumerate(views):
            out.append(_timeline_row(i, view, tools))
        out.append('<p class="empty" id="no-match" hidden>No run matches the filters.</p></div></section>')
        return "".join(out)

    def _run_json(self, i: int, view: _RunView) -> dict[str, Any]:
        verdicts = []
        steps_by_record: dict[int, list[_Step]] = {}
        for s in view.steps:
            steps_by_record.setdefault(s.record, []).append(s)
        for v in view.verdicts:
            start = v.loop_start if v.loop_start is not None else v.index
            evidence = v.evidence.get("indices")
            marked = {x for x in evidence if isinstance(x, int)} if evidence else set()
            verdicts.append(
                {
                    "index": v.index,
                    "action": v.action,
                    "pattern": v.pattern or "?",
                    "count": v.count,
                    "level": v.level,
                    "start": min(start, v.index),
                    "reason": cut(v.reason or "", 400),
                    "message": cut(v.message or "", 600),
                    "detector": (v.detector or "").split("(", 1)[0],
                    "hl": sorted(marked | _same_label(steps_by_record, v.index, start, self.context)),
                }
            )
        return {
            "i": i,
            "id": view.id,
            "source": view.source,
            "model": view.model,
            "events": view.events,
            "length": view.length,
            "turns": view.turns,
            "cost": None if view.cost is None else round(view.cost, 6),
            "loop_cost": round(view.loop_cost, 6),
            "partial": view.partial,
            "action": view.action,
            "label_verdict": view.label_verdict,
            "steps": [[s.record, s.kind, s.tool, s.label, 1 if s.failed else 0, s.text] for s in view.steps],
            "verdicts": verdicts,
            "episodes": [
                {"start": e.start, "end": e.end, "action": e.action, "patterns": e.patterns} for e in view.episodes
            ],
            "labels": [
                {
                    "start": lab.start,
                    "end": lab.end,
                    "detectable_at": lab.detectable_at,
                    "pattern": lab.pattern,
                    "caught": lab.caught,
                    "note": cut(lab.note, 400),
                }
                for lab in view.labels
            ],
        }


# -- per-run helpers ---------------------------------------------------------------------------------------------


def _filter_attrs(i: int, view: _RunView) -> str:
    """The data attributes the page's filters and search read."""
    patterns = sorted({v.pattern or "?" for v in view.verdicts})
    tools = sorted({s.tool for s in view.steps if s.tool})
    flags = " ".join(view.flags)
    return (
        f'data-run="{i}" data-id="{_e(view.id)}" data-action="{view.action}" '
        f'data-patterns="{_e(" ".join(patterns))}" data-source="{_e(view.source or "")}" '
        f'data-model="{_e(view.model or "")}" data-tools="{_e(" ".join(tools))}" data-flags="{_e(flags)}"'
    )


def _same_label(steps: Mapping[int, list[_Step]], index: int, start: int, context: int) -> set[int]:
    """Steps near a verdict whose call has the same label as the call at (or just before) its step."""
    key: str | None = None
    for record in range(index, max(index - 3, -1), -1):
        calls = [s for s in steps.get(record, ()) if s.kind == "call"]
        if calls:
            key = calls[-1].label
            break
    if key is None:
        return set()
    lo, hi = min(start, index) - context, index + context
    return {
        record
        for record, group in steps.items()
        if lo <= record <= hi and any(s.kind == "call" and s.label == key for s in group)
    }


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


# -- page pieces ---------------------------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` appears literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _asset(name: str) -> str:
    """One of the page's files, shipped as package data in ``loopwatch/cli/assets``: its head
    (``report-head.html``, with ``__TITLE__`` and ``__CSS__`` to fill), its style sheet (``report.css``) and its
    script (``report.js``), all inlined in the page (nothing is fetched).

    The script reads the page's data block (``<script type="application/json" id="report-data">``): it opens a
    run's panel (its steps around each loop and each labelled episode, a step's full text behind a click), filters
    the runs by pattern, source, model and action, searches them by run id or tool, and sorts the runs table by any
    column.
    """
    return (resources.files("loopwatch.cli") / "assets" / name).read_text(encoding="utf-8")


def _version() -> str:
    from .. import __version__

    return __version__


def _money(value: float, currency: str) -> str:
    amount = f"{value:,.2f}" if value >= 1 else f"{value:.4g}"
    return f"{amount} {currency}"


def _action_line(actions: Mapping[str, int]) -> str:
    parts = [f"{actions[a]} {a}" for a in ("stop", "block", "nudge") if actions.get(a)]
    return "worst per run: " + ", ".join(parts) if parts else ""


def _top(counter: Counter[str], limit: int = 12) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def _tool_colours(views: Sequence[_RunView]) -> dict[str, str]:
    counts: Counter[str] = Counter()
    for view in views:
        counts.update(s.tool for s in view.steps if s.kind == "call" and s.tool is not None)
    return {tool: TOOL_PALETTE[i] for i, (tool, _) in enumerate(_top(counts, len(TOOL_PALETTE)))}


def _step_colour(step: _Step, tools: Mapping[str, str]) -> str:
    if step.kind == "call":
        return tools.get(step.tool or "", OTHER_TOOL)
    return KIND_COLOURS.get(step.kind, KIND_COLOURS["system"])


def _legend(tools: Mapping[str, str], labelled: bool) -> str:
    items = [f'<span class="key"><i style="background:{c}"></i>{_e(t)}</span>' for t, c in tools.items()]
    items.append(f'<span class="key"><i style="background:{OTHER_TOOL}"></i>other tools</span>')
    kinds = [f'<span class="key"><i style="background:{KIND_COLOURS[k]}"></i>{n}</span>' for k, n in KIND_NAMES.items()]
    actions = [
        f'<span class="key"><i class="mark" style="background:{c}"></i>{a}</span>' for a, c in ACTION_COLOURS.items()
    ]
    labels = ""
    if labelled:
        labels = (
            "<div><b>labelled episodes</b>"
            f'<span class="key"><i class="lane" style="background:{LABEL_COLOURS["caught"]}"></i>caught</span>'
            f'<span class="key"><i class="lane" style="background:{LABEL_COLOURS["missed"]}"></i>missed</span></div>'
        )
    return (
        '<div class="legend" id="legend">'
        f"<div><b>tool calls</b>{''.join(items)}</div>"
        f"<div><b>other steps</b>{''.join(kinds)}</div>"
        f"<div><b>verdicts</b>{''.join(actions)}"
        f'<span class="key"><i class="shade"></i>loop episode</span></div>{labels}</div>'
    )


def _timeline_row(i: int, view: _RunView, tools: Mapping[str, str]) -> str:
    n = max(view.length, 1)
    unit = _W / n
    parts: list[str] = []
    for e in view.episodes:
        a, b = _clamp(e.start, n), _clamp(e.end, n)
        parts.append(
            f'<rect class="episode {e.action}" x="{a * unit:.2f}" y="0" width="{max((b - a + 1) * unit, 2):.2f}" '
            f'height="25" data-start="{e.start}" data-end="{e.end}">'
            f"<title>{_e(f'steps {e.start}–{e.end}: ' + ', '.join(e.patterns))}</title></rect>"
        )
    parts.extend(_step_rects(view.steps, unit, tools))
    mark_w = max(unit * 0.9, 3.0)
    for v in view.verdicts:
        x = (_clamp(v.index, n) + 0.5) * unit - mark_w / 2
        colour = ACTION_COLOURS.get(v.action, "#000")
        tip = f"step {v.index}: {v.action} {v.pattern or '?'} x{v.count}"
        parts.append(
            f'<rect class="verdict-mark {v.action}" x="{x:.2f}" y="0" width="{mark_w:.2f}" height="7" '
            f'fill="{colour}" data-index="{v.index}" data-action="{v.action}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    for lab in view.labels:
        a, b = _clamp(lab.start, n), _clamp(lab.end, n)
        state = "caught" if lab.caught else "missed"
        tip = f"labelled {lab.pattern}, steps {lab.start}–{lab.end} ({state}): {lab.note}"
        parts.append(
            f'<rect class="label-span {state}" x="{a * unit:.2f}" y="26" width="{max((b - a + 1) * unit, 2):.2f}" '
            f'height="6" fill="{LABEL_COLOURS[state]}" data-start="{lab.start}" data-end="{lab.end}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    svg = (
        f'<svg class="timeline" data-run="{i}" data-steps="{view.length}" viewBox="0 0 {_W:g} {_H:g}" '
        f'preserveAspectRatio="none" role="img" aria-label="{_e("timeline of " + view.id)}">'
        f'<rect class="track" x="0" y="11" width="{_W:g}" height="12"/>{"".join(parts)}</svg>'
    )
    partial = ' · <span title="only the steps around its loops are kept">long run</span>' if view.partial else ""
    badge = f'<span class="badge {view.action}">{view.action}</span>'
    return (
        f'<div class="run-row run-link" {_filter_attrs(i, view)} tabindex="0" role="button">'
        f'<div class="run-label"><div class="run-id" title="{_e(view.id)}">{_e(middle_ellipsis(view.id, 48))}</div>'
        f'<div class="run-meta">{badge} {view.length:,} steps · {len(view.verdicts)} verdicts{partial}</div></div>'
        f'<div class="run-track">{svg}<div class="axis"><span>step 0</span><span>step {max(view.length - 1, 0)}</span>'
        "</div></div></div>"
    )


def _clamp(record: int, n: int) -> int:
    return min(max(record, 0), n - 1)


def _step_rects(steps: Sequence[_Step], unit: float, tools: Mapping[str, str]) -> list[str]:
    """One rect per event, in its step's slot (shared by the events of one step), merged with same-coloured
    neighbours when the steps are narrow."""
    share: Counter[int] = Counter(s.record for s in steps)
    seen: Counter[int] = Counter()
    boxes: list[tuple[float, float, str, bool]] = []  # x, width, colour, small
    for s in steps:
        k, parts = seen[s.record], share[s.record]
        seen[s.record] += 1
        small = s.kind in ("result", "delta", "usage")
        boxes.append(((s.record + k / parts) * unit, unit / parts, _step_colour(s, tools), small))
    out: list[str] = []
    gap = unit > 3
    i = 0
    while i < len(boxes):
        x, width, colour, small = boxes[i]
        j = i + 1
        if not gap:
            while j < len(boxes) and boxes[j][2] == colour and abs(boxes[j][0] - (x + width)) < 1e-6:
                width += boxes[j][1]
                j += 1
        if gap:
            x, width = x + width * 0.1, width * 0.8
        height, y = (10.0, 12.0) if small else (12.0, 11.0)
        out.append(f'<rect class="step" x="{x:.2f}" y="{y:g}" width="{max(width, 0.5):.2f}" height="{height:g}" ')
        out.append(f'fill="{colour}"/>')
        i = j
    return out


def _bar_chart(chart_id: str, title: str, rows: Sequence[tuple[str, int, int, str]], unit: str) -> str:
    """Horizontal bars: (label, value, total or 0, tooltip); a total draws a light bar behind the value."""
    if not rows:
        body = '<p class="empty">Nothing to show.</p>'
        return f'<figure class="chart" id="{chart_id}"><figcaption>{_e(title)}</figcaption>{body}</figure>'
    width, label_w, row_h, pad = 560.0, 200.0, 24.0, 8.0
    bar_w = width - label_w - 70
    top = max(max(total, value) for _, value, total, _ in rows) or 1
    height = pad * 2 + row_h * len(rows)
    out = [
        f'<figure class="chart" id="{chart_id}"><figcaption>{_e(title)} <small>({_e(unit)})</small></figcaption>',
        f'<svg class="bar-chart" viewBox="0 0 {width:g} {height:g}" role="img" aria-label="{_e(title)}">',
    ]
    for k, (label, value, total, tip) in enumerate(rows):
        y = pad + k * row_h
        shown = middle_ellipsis(label, 28)
        out.append(
            f'<g class="bar" data-label="{_e(label)}" data-value="{value}"><title>{_e(label)}: {_e(tip)}</title>'
        )
        out.append(
            f'<text x="{label_w - 8:g}" y="{y + row_h / 2 + 4:g}" text-anchor="end" class="bar-label">'
            f"{_e(shown)}</text>"
        )
        if total:
            out.append(
                f'<rect x="{label_w:g}" y="{y + 4:g}" width="{bar_w * total / top:.1f}" height="{row_h - 8:g}" '
                'class="bar-total"/>'
            )
        out.append(
            f'<rect x="{label_w:g}" y="{y + 4:g}" width="{max(bar_w * value / top, 1 if value else 0):.1f}" '
            f'height="{row_h - 8:g}" class="bar-value"/>'
        )
        number = f"{value:,}" + (f" / {total:,}" if total else "")
        end = label_w + bar_w * max(value, total) / top
        out.append(f'<text x="{end + 6:.1f}" y="{y + row_h / 2 + 4:g}" class="bar-number">{number}</text></g>')
    out.append("</svg></figure>")
    return "".join(out)


def _sweep_chart(i: int, sweep: _Sweep) -> str:
    """Recall (y) against false alarms (x), one point per value, joined in order of the values."""
    width, height = 560.0, 340.0
    left, right, top, bottom = 56.0, 24.0, 20.0, 46.0
    pw, ph = width - left - right, height - top - bottom
    points = [p for p in sweep.points if math.isfinite(p.recall) and math.isfinite(p.false_alarms)]
    x_max = max([p.false_alarms for p in points] + [0.05])
    x_max = min(1.0, math.ceil(x_max * 10 + 1e-9) / 10)

    def sx(x: float) -> float:
        return left + pw * min(max(x, 0.0), x_max) / x_max

    def sy(y: float) -> float:
        return top + ph * (1 - min(max(y, 0.0), 1.0))

    title = f"Recall against false alarms: {sweep.param}"
    out = [
        f'<figure class="chart sweep" id="sweep-{i}" data-param="{_e(sweep.param)}">',
        f"<figcaption>{_e(title)}</figcaption>",
        f'<svg class="sweep-chart" viewBox="0 0 {width:g} {height:g}" role="img" aria-label="{_e(title)}">',
    ]
    for k in range(6):
        y = k / 5
        out.append(f'<line class="grid" x1="{left:g}" x2="{left + pw:g}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>')
        out.append(f'<text class="tick" x="{left - 6:g}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0%}</text>')
    for k in range(6):
        x = x_max * k / 5
        out.append(f'<line class="grid" y1="{top:g}" y2="{top + ph:g}" x1="{sx(x):.1f}" x2="{sx(x):.1f}"/>')
        out.append(f'<text class="tick" y="{top + ph + 16:g}" x="{sx(x):.1f}" text-anchor="middle">{x:.0%}</text>')
    out.append(
        f'<text class="axis-title" x="{left + pw / 2:g}" y="{height - 8:g}" text-anchor="middle">'
        "false-alarm rate (clean runs with a detection)</text>"
        f'<text class="axis-title" transform="translate(14 {top + ph / 2:g}) rotate(-90)" text-anchor="middle">'
        "episode recall</text>"
    )
    if points:
        path = " ".join(f"{sx(p.false_alarms):.1f},{sy(p.recall):.1f}" for p in points)
        out.append(f'<polyline class="sweep-line" points="{path}"/>')
    for p in points:
        x, y = sx(p.false_alarms), sy(p.recall)
        tip = f"{sweep.param}={p.value}: recall {p.recall:.1%}, false alarms {p.false_alarms:.1%}"
        out.append(
            f'<g class="sweep-point" data-value="{_e(p.value)}"><title>{_e(tip)}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4"/>'
            f'<text class="point-label" x="{x + 6:.1f}" y="{y - 6:.1f}">{_e(cut(str(p.value), 12))}</text></g>'
        )
    out.append("</svg>")
    out.append(
        '<table class="sweep-table"><thead><tr><th>value</th><th class="num">recall</th>'
        '<th class="num">false alarms</th></tr></thead><tbody>'
    )
    for p in sweep.points:
        out.append(
            f'<tr><td>{_e(p.value)}</td><td class="num">{p.recall:.1%}</td>'
            f'<td class="num">{p.false_alarms:.1%}</td></tr>'
        )
    out.append("</tbody></table></figure>")
    return "".join(out)


_DETAIL_PANEL: Final = """<aside id="detail" hidden aria-label="run detail">
<div class="detail-head"><div><div class="detail-kicker">run</div><h2 id="detail-title"></h2>
<div id="detail-meta"></div></div>
<button type="button" id="detail-close" aria-label="close">×</button></div>
<div id="detail-body"></div></aside>"""
