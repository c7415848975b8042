"""An HTML report of a scan: one self-contained page (inline CSS, JavaScript and SVG; nothing is fetched).

Built while the runs stream by, so memory stays small over many files::

    report = HtmlReport()
    for run, run_report in scan_with_runs(policy, read_runs(paths)):
        report.add(run, run_report)
    report.write("report.html", preset=policy.name)

:meth:`HtmlReport.add` counts every run, but keeps steps only for runs with verdicts, and only for the worst
``max_runs`` of them (ranked like the command line's summary: highest action, then number of verdicts). A run
without verdicts costs a few counters. :meth:`HtmlReport.add_sweep` adds a parameter sweep (recall against false
alarms) drawn as a line chart.

Indices: a verdict's ``index`` and ``loop_start`` are step indices of the user's run (``Run.indices`` maps events
to them when one record gave several events). The page's timelines have one mark per event; the step indices are
shown beside them.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage
from .policy import Policy
from .readers import Run
from .scan import RunReport, scan_runs
from .summary import Episode, RunDigest, digest_run, episodes, source_name
from .verdict import Verdict

__all__ = ["HtmlReport", "SweepPoint", "scan_with_runs"]

LABEL_CHARS: Final = 80
"""A step's label is cut to this many characters."""

ACTION_COLOURS: Final[dict[str, str]] = {"nudge": "#e0a106", "block": "#e8590c", "stop": "#c92a2a"}
KIND_COLOURS: Final[dict[str, str]] = {
    "result": "#ced4da",
    "error": "#fa5252",
    "assistant": "#b197fc",
    "user": "#74c0fc",
    "system": "#adb5bd",
    "delta": "#e5dbff",
    "usage": "#ffe066",
    "reset": "#212529",
}
KIND_NAMES: Final[dict[str, str]] = {
    "result": "tool result",
    "error": "failed result",
    "assistant": "assistant message",
    "user": "user message",
    "system": "system message",
    "delta": "text delta",
    "usage": "usage",
    "reset": "reset",
}
TOOL_PALETTE: Final[tuple[str, ...]] = (
    "#1c7ed6",
    "#37b24d",
    "#f76707",
    "#7048e8",
    "#0ca678",
    "#d6336c",
    "#f59f00",
    "#1098ad",
    "#845ef7",
    "#5c940d",
)
OTHER_TOOL: Final = "#495057"

_W: Final = 1000.0  # timeline width in SVG units (stretched to the page's width)
_H: Final = 30.0


@dataclass(frozen=True)
class SweepPoint:
    """One setting of a swept parameter and what it scored."""

    value: float | str
    recall: float
    false_alarms: float
    """The false-alarm rate (share of clean runs with a detection)."""


class _Step(NamedTuple):
    pos: int  # the event's position in the run
    record: int  # the step index in the user's run
    kind: str  # "call" or a key of KIND_COLOURS
    tool: str | None
    label: str
    failed: bool


@dataclass
class _RunView:
    """What the page keeps of one run with verdicts."""

    order: int
    id: str
    source: str | None
    model: str | None
    events: int
    verdicts: list[Verdict]
    episodes: list[Episode]
    turns: int
    cost: float
    steps: list[_Step] = field(default_factory=list)
    partial: bool = False  # only the steps around loops are kept

    @property
    def severity(self) -> int:
        return max(v.severity for v in self.verdicts)

    @property
    def action(self) -> str:
        return max(self.verdicts, key=lambda v: v.severity).action

    def rank(self) -> tuple[int, int, str, int]:
        return (-self.severity, -len(self.verdicts), self.id, self.order)


@dataclass
class _Sweep:
    param: str
    points: list[SweepPoint]


def scan_with_runs(policy: Policy, runs: Iterable[Run]) -> Iterator[tuple[Run, RunReport]]:
    """:func:`loopwatch.scan.scan_runs`, with each report paired with the run it came from.

    Streams like ``scan_runs`` (which reads one run, then yields its report).
    """
    current: list[Run] = []

    def tap() -> Iterator[Run]:
        for run in runs:
            current[:] = [run]
            yield run

    for report in scan_runs(policy, tap()):
        yield current[0], report


class HtmlReport:
    """Collects what an HTML report of a scan shows, run by run, then renders the page.

    ``max_runs``: how many of the worst runs with loops get a timeline (and keep their steps);
    ``context``: how many steps before and after a loop the detail panel lists;
    ``max_steps``: a longer run keeps only the steps around its loops.
    """

    def __init__(self, *, max_runs: int = 200, context: int = 5, max_steps: int = 2000, top: int = 20) -> None:
        if max_runs < 1 or context < 0 or max_steps < 1 or top < 1:
            raise ValueError("max_runs, max_steps and top must be positive, context not negative")
        self.max_runs = max_runs
        self.context = context
        self.max_steps = max_steps
        self.top = top
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
        self._kept: list[_RunView] = []
        self._sweeps: list[_Sweep] = []
        self._interned: dict[str, str] = {}
        self._cut: tuple[int, int, str, int] | None = None  # the rank of the last run kept at the last prune

    # -- collecting ----------------------------------------------------------------------------------------

    def add(self, run: Run, report: RunReport) -> None:
        """Count one scanned run; keep its steps if it has verdicts and is among the worst ``max_runs``."""
        self.add_digest(digest_run(run, report), run)

    def add_digest(self, digest: RunDigest, run: Run | None) -> None:
        """:meth:`add` from a run's digest; ``run`` (for its steps) may be ``None`` when it has no verdicts."""
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
        if not digest.verdicts:
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
        self.by_action[max(digest.verdicts, key=lambda v: v.severity).action] += 1
        self.turns += digest.loop_steps
        self.loop_cost += digest.loop_cost or 0.0
        view = _RunView(
            order=self.runs,
            id=digest.id,
            source=source,
            model=model,
            events=digest.events,
            verdicts=list(digest.verdicts),
            episodes=episodes(digest.verdicts),
            turns=digest.loop_steps,
            cost=digest.loop_cost or 0.0,
        )
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
        """The runs drawn on the page, worst first."""
        self._prune()
        return list(self._kept)

    def _prune(self) -> None:
        self._kept.sort(key=_RunView.rank)
        del self._kept[self.max_runs :]
        if len(self._kept) == self.max_runs:
            self._cut = self._kept[-1].rank()

    def _keep_steps(self, view: _RunView, run: Run) -> None:
        events = run.events
        indices = run.indices
        wanted: Callable[[int], bool] | None = None
        if len(events) > self.max_steps:
            view.partial = True
            spans = _event_spans(view.episodes, indices, len(events))
            ctx = self.context
            wanted = lambda pos: any(a - ctx <= pos <= b + ctx for a, b in spans)  # noqa: E731
        for pos, event in enumerate(events):
            if wanted is not None and not wanted(pos):
                continue
            record = indices[pos] if indices is not None and pos < len(indices) else pos
            kind, tool, label, failed = _describe(event)
            view.steps.append(_Step(pos, record, kind, self._intern(tool), label, failed))

    def _intern(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._interned.setdefault(text, text)

    # -- rendering -----------------------------------------------------------------------------------------

    def render(self, title: str = "loopwatch report", preset: str | None = None) -> str:
        """The whole page, as one HTML string."""
        views = self.kept_runs()
        tools = _tool_colours(views)
        data = {
            "runs": [self._run_json(i, v) for i, v in enumerate(views)],
            "context": self.context,
            "colours": {"tools": tools, "other": OTHER_TOOL, "kinds": KIND_COLOURS},
        }
        parts = [
            _HEAD.replace("__TITLE__", _e(title)).replace("__CSS__", _CSS),
            '<body><header class="top"><div>',
            f"<h1>{_e(title)}</h1>",
            '<p class="sub">',
            f"preset <b>{_e(preset)}</b> · " if preset else "",
            f"generated by loopwatch {_e(_version())}</p></div></header><main>",
            self._summary_html(),
            self._charts_html(),
            self._sweeps_html(),
            self._worst_html(views),
            self._timelines_html(views, tools),
            "</main>",
            _DETAIL_PANEL,
            '<div id="tooltip" role="tooltip" hidden></div>',
            '<script type="application/json" id="report-data">',
            _script_json(data),
            "</script>",
            f"<script>{_JS}</script>",
            "</body></html>\n",
        ]
        return "".join(parts)

    def write(self, path: str | os.PathLike[str], title: str = "loopwatch report", preset: str | None = None) -> None:
        """Write the page to ``path`` (UTF-8)."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.render(title, preset))

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
            cards.append(("cost inside loops", _money(self.loop_cost), f"{share}{_money(self.cost)} in all"))
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

    def _worst_html(self, views: list[_RunView]) -> str:
        out = ['<section id="worst"><h2>Worst runs</h2>']
        if not views:
            out.append('<p class="empty">No loops found.</p></section>')
            return "".join(out)
        out.append(
            '<table class="worst"><thead><tr><th>#</th><th>run</th><th>source</th><th class="num">events</th>'
            '<th>worst</th><th class="num">verdicts</th><th>loop spans</th></tr></thead><tbody>'
        )
        for i, view in enumerate(views[: self.top]):
            spans = " ".join(
                f'<span class="span-chip {e.action}" title="{_e(", ".join(e.patterns))}">'
                f"{e.start}–{e.end} {_e(', '.join(e.patterns))}</span>"
                for e in view.episodes
            )
            out.append(
                f'<tr class="worst-row run-link" data-run="{i}" tabindex="0">'
                f'<td class="num">{i + 1}</td><td class="run-id" title="{_e(view.id)}">{_e(view.id)}</td>'
                f'<td class="source" title="{_e(view.source or "")}">{_e(view.source or "")}</td>'
                f'<td class="num">{view.events:,}</td>'
                f'<td><span class="badge {view.action}">{view.action}</span></td>'
                f'<td class="num">{len(view.verdicts)}</td><td>{spans}</td></tr>'
            )
        out.append("</tbody></table>")
        if self.looping > self.top:
            out.append(
                f'<p class="note">The {min(self.top, len(views))} worst of {self.looping:,} runs with loops.</p>'
            )
        out.append("</section>")
        return "".join(out)

    def _timelines_html(self, views: list[_RunView], tools: dict[str, str]) -> str:
        out = ['<section id="timelines"><h2>Timelines</h2>']
        if not views:
            out.append('<p class="empty">No run had a loop.</p></section>')
            return "".join(out)
        capped = self.looping > len(views)
        note = (
            f"The {len(views):,} worst of {self.looping:,} runs with loops are drawn."
            if capped
            else f"All {self.looping:,} runs with loops are drawn, worst first."
        )
        out.append(f'<p class="note" id="cap-note" data-drawn="{len(views)}" data-looping="{self.looping}">{note} ')
        out.append("Click a run to see its steps around each loop.</p>")
        out.append(_legend(tools))
        out.append('<div class="timelines">')
        for i, view in enumerate(views):
            out.append(_timeline_row(i, view, tools))
        out.append("</div></section>")
        return "".join(out)

    def _run_json(self, i: int, view: _RunView) -> dict[str, Any]:
        positions = _Positions(view.steps, view.events)
        verdicts = []
        for v in view.verdicts:
            pos = positions.last(v.index)
            start = positions.first(v.loop_start) if v.loop_start is not None else pos
            evidence = v.evidence.get("indices")
            marked = sorted({positions.last(x) for x in evidence if isinstance(x, int)}) if evidence else []
            verdicts.append(
                {
                    "pos": pos,
                    "index": v.index,
                    "action": v.action,
                    "pattern": v.pattern or "?",
                    "count": v.count,
                    "level": v.level,
                    "start": start,
                    "loop_start": v.loop_start,
                    "reason": _cut(v.reason or "", 240),
                    "detector": (v.detector or "").split("(", 1)[0],
                    "hl": sorted(set(marked) | _same_label(view.steps, pos, start, self.context)),
                }
            )
        return {
            "i": i,
            "id": view.id,
            "source": view.source,
            "model": view.model,
            "events": view.events,
            "turns": view.turns,
            "cost": round(view.cost, 6),
            "partial": view.partial,
            "action": view.action,
            "steps": [[s.pos, s.record, s.kind, s.tool, s.label, 1 if s.failed else 0] for s in view.steps],
            "verdicts": verdicts,
            "episodes": [
                {
                    "start": positions.first(e.start),
                    "end": positions.last(e.end),
                    "from": e.start,
                    "to": e.end,
                    "action": e.action,
                    "patterns": e.patterns,
                }
                for e in view.episodes
            ],
        }


# -- per-run helpers ---------------------------------------------------------------------------------------------


def _event_spans(episodes: Sequence[Episode], indices: Sequence[int] | None, n: int) -> list[tuple[int, int]]:
    """The episodes as event positions (their records' first to last event)."""
    if indices is None:
        return [(e.start, e.end) for e in episodes]
    out = []
    for e in episodes:
        positions = [p for p, r in enumerate(indices[:n]) if e.start <= r <= e.end]
        if positions:
            out.append((positions[0], positions[-1]))
    return out


class _Positions:
    """Step index (record) -> event position, from a run's kept steps."""

    def __init__(self, steps: Sequence[_Step], events: int) -> None:
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._identity = all(s.pos == s.record for s in steps)
        self._n = max(events, 1)
        for s in steps:
            self._first.setdefault(s.record, s.pos)
            self._last[s.record] = s.pos

    def first(self, record: int) -> int:
        return self._clamp(record if self._identity else self._first.get(record, record))

    def last(self, record: int) -> int:
        return self._clamp(record if self._identity else self._last.get(record, record))

    def _clamp(self, pos: int) -> int:
        return min(max(pos, 0), self._n - 1)


def _same_label(steps: Sequence[_Step], pos: int, start: int, context: int) -> set[int]:
    """Positions near a verdict of calls with the same label as the call at (or just before) its position."""
    by_pos = {s.pos: s for s in steps}
    key: str | None = None
    for p in range(pos, max(pos - 3, -1), -1):
        step = by_pos.get(p)
        if step is not None and step.kind == "call":
            key = step.label
            break
    if key is None:
        return set()
    lo, hi = min(start, pos) - context, pos + context
    return {s.pos for s in steps if lo <= s.pos <= hi and s.kind == "call" and s.label == key}


def _describe(event: Event) -> tuple[str, str | None, str, bool]:
    """(kind, tool, label, failed) of one event."""
    if isinstance(event, ToolCall):
        args = _args_text(event.args)
        label = args if args.split(" ", 1)[0] == event.tool else f"{event.tool} {args}".strip()
        return "call", event.tool, _cut(label), False
    if isinstance(event, ToolResult):
        failed = event.is_error is True or (event.exit_code is not None and event.exit_code != 0)
        text = _flat(event.output) or ("(error)" if failed else "(no output)")
        return ("error" if failed else "result"), event.tool, _cut("→ " + text), failed
    if isinstance(event, Message):
        return event.role, None, _cut(_flat(event.text) or "(empty)"), False
    if isinstance(event, TextDelta):
        return "delta", None, _cut(_flat(event.text)), False
    if isinstance(event, Usage):
        bits = []
        if event.cost is not None:
            bits.append(f"cost {event.cost:g}")
        if event.input_tokens is not None:
            bits.append(f"{event.input_tokens} in")
        if event.output_tokens is not None:
            bits.append(f"{event.output_tokens} out")
        return "usage", None, _cut("usage " + ", ".join(bits)), False
    if isinstance(event, Reset):
        return "reset", None, "reset", False
    return "system", None, _cut(type(event).__name__), False  # pragma: no cover (every event type is above)


def _args_text(args: Mapping[str, Any]) -> str:
    if not args:
        return ""
    strings = [v for v in args.values() if isinstance(v, str)]
    if len(args) == 1 and strings:
        return _flat(strings[0])
    command = args.get("command")
    if isinstance(command, str):
        return _flat(command)
    try:
        return _flat(json.dumps(dict(args), ensure_ascii=False, separators=(",", ":"), default=str))
    except (TypeError, ValueError):  # pragma: no cover (args come from JSON)
        return _flat(repr(dict(args)))


def _flat(text: str) -> str:
    """Whitespace collapsed; at most a few hundred characters looked at."""
    return " ".join(text[: LABEL_CHARS * 4].split())


def _cut(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _version() -> str:
    from . import __version__

    return __version__


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 else f"{value:.4g}"


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


def _legend(tools: Mapping[str, str]) -> str:
    items = [f'<span class="key"><i style="background:{c}"></i>{_e(t)}</span>' for t, c in tools.items()]
    items.append(f'<span class="key"><i style="background:{OTHER_TOOL}"></i>other tools</span>')
    kinds = [f'<span class="key"><i style="background:{KIND_COLOURS[k]}"></i>{n}</span>' for k, n in KIND_NAMES.items()]
    actions = [
        f'<span class="key"><i class="mark" style="background:{c}"></i>{a}</span>' for a, c in ACTION_COLOURS.items()
    ]
    return (
        '<div class="legend" id="legend">'
        f"<div><b>tool calls</b>{''.join(items)}</div>"
        f"<div><b>other steps</b>{''.join(kinds)}</div>"
        f"<div><b>verdicts</b>{''.join(actions)}"
        '<span class="key"><i class="shade"></i>loop episode</span></div></div>'
    )


def _timeline_row(i: int, view: _RunView, tools: Mapping[str, str]) -> str:
    n = max(view.events, 1)
    unit = _W / n
    parts: list[str] = []
    positions = _Positions(view.steps, view.events)
    for e in view.episodes:
        a, b = positions.first(e.start), positions.last(e.end)
        parts.append(
            f'<rect class="episode {e.action}" x="{a * unit:.2f}" y="0" width="{max((b - a + 1) * unit, 2):.2f}" '
            f'height="{_H:g}" data-start="{e.start}" data-end="{e.end}">'
            f"<title>{_e(f'steps {e.start}–{e.end}: ' + ', '.join(e.patterns))}</title></rect>"
        )
    parts.extend(_step_rects(view.steps, unit, tools))
    mark_w = max(unit * 0.9, 3.0)
    for v in view.verdicts:
        pos = positions.last(v.index)
        x = (pos + 0.5) * unit - mark_w / 2
        colour = ACTION_COLOURS.get(v.action, "#000")
        tip = f"step {v.index}: {v.action} {v.pattern or '?'} x{v.count}"
        parts.append(
            f'<rect class="verdict-mark {v.action}" x="{x:.2f}" y="0" width="{mark_w:.2f}" height="7" '
            f'fill="{colour}" data-index="{v.index}" data-action="{v.action}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    svg = (
        f'<svg class="timeline" data-run="{i}" data-events="{view.events}" viewBox="0 0 {_W:g} {_H:g}" '
        f'preserveAspectRatio="none" role="img" aria-label="{_e("timeline of " + view.id)}">'
        f'<rect class="track" x="0" y="11" width="{_W:g}" height="12"/>{"".join(parts)}</svg>'
    )
    partial = ' · <span title="only the steps around its loops are kept">long run</span>' if view.partial else ""
    return (
        f'<div class="run-row run-link" data-run="{i}" data-id="{_e(view.id)}" tabindex="0" role="button">'
        f'<div class="run-label"><div class="run-id" title="{_e(view.id)}">{_e(view.id)}</div>'
        f'<div class="run-meta"><span class="badge {view.action}">{view.action}</span> '
        f"{view.events:,} events · {len(view.verdicts)} verdicts{partial}</div></div>"
        f'<div class="run-track">{svg}<div class="axis"><span>0</span><span>{view.events - 1}</span></div></div></div>'
    )


def _step_rects(steps: Sequence[_Step], unit: float, tools: Mapping[str, str]) -> list[str]:
    """One rect per step, or per run of same-coloured neighbours when the steps are narrow."""
    out: list[str] = []
    gap = unit > 3
    i = 0
    while i < len(steps):
        colour = _step_colour(steps[i], tools)
        j = i + 1
        if not gap:
            while j < len(steps) and steps[j].pos == steps[j - 1].pos + 1 and _step_colour(steps[j], tools) == colour:
                j += 1
        x = steps[i].pos * unit
        width = (steps[j - 1].pos - steps[i].pos + 1) * unit
        if gap:
            x, width = x + unit * 0.1, width * 0.8
        height, y = (10.0, 12.0) if steps[i].kind in ("result", "delta", "usage") else (12.0, 11.0)
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
        shown = _cut(label, 28)
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
            f'<text class="point-label" x="{x + 6:.1f}" y="{y - 6:.1f}">{_e(_cut(str(p.value), 12))}</text></g>'
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


_HEAD: Final = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<title>__TITLE__</title>
<style>__CSS__</style></head>
"""

_DETAIL_PANEL: Final = """<aside id="detail" hidden aria-label="run detail">
<div class="detail-head"><div><div class="detail-kicker">run</div><h2 id="detail-title"></h2>
<div id="detail-meta"></div></div>
<button type="button" id="detail-close" aria-label="close">×</button></div>
<div id="detail-body"></div></aside>"""

_CSS: Final = """
:root{--fg:#212529;--muted:#6c757d;--line:#dee2e6;--bg:#f8f9fa;--card:#fff;--accent:#1c7ed6;
--nudge:#e0a106;--block:#e8590c;--stop:#c92a2a}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
header.top{background:#1f2937;color:#f8f9fa;padding:18px 32px}
header.top h1{margin:0;font-size:22px;font-weight:650;letter-spacing:.2px}
header.top .sub{margin:4px 0 0;color:#ced4da;font-size:13px}
main{padding:20px 32px 48px;max-width:1500px;margin:0 auto}
h2{font-size:17px;margin:28px 0 10px;font-weight:650}
section{margin-bottom:8px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px}
.card-name{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.6px}
.card-value{font-size:26px;font-weight:700;margin-top:2px;font-variant-numeric:tabular-nums}
.card-note{color:var(--muted);font-size:12px;min-height:1.2em}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px;margin-top:14px}
.chart{margin:0;background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.chart figcaption{font-weight:650;margin-bottom:6px}
.chart figcaption small{color:var(--muted);font-weight:400}
.chart svg{width:100%;height:auto;display:block}
.bar-label,.bar-number,.tick,.point-label,.axis-title{font-size:12px;fill:#343a40}
.bar-number,.tick{fill:var(--muted)}
.bar-total{fill:#e9ecef}.bar-value{fill:var(--accent)}
.bar:hover .bar-value{fill:#1864ab}
.grid{stroke:#e9ecef;stroke-width:1}
.sweep-line{fill:none;stroke:var(--accent);stroke-width:2}
.sweep-point circle{fill:#fff;stroke:var(--accent);stroke-width:2}
.chart.sweep{display:grid;grid-template-columns:minmax(0,560px) minmax(220px,1fr);gap:8px 20px;align-items:start}
.chart.sweep figcaption{grid-column:1/-1}
.sweep-table{margin-top:8px}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:10px;
overflow:hidden}
th,td{padding:6px 10px;border-bottom:1px solid #f1f3f5;text-align:left;vertical-align:top}
th{background:#f1f3f5;font-size:12px;color:#495057;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.worst td.source{max-width:260px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;color:#495057}
.worst td.run-id{max-width:380px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.run-link{cursor:pointer}
.run-link:hover{background:#f1f8ff}
.run-link:focus{outline:2px solid var(--accent);outline-offset:-2px}
.run-link.selected{background:#e7f5ff}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:11px;font-weight:700;color:#fff;
text-transform:uppercase;letter-spacing:.4px;line-height:18px}
.badge.nudge{background:var(--nudge)}.badge.block{background:var(--block)}.badge.stop{background:var(--stop)}
.span-chip{display:inline-block;margin:1px 4px 1px 0;padding:0 6px;border-radius:4px;font-size:12px;
background:#fff4e6;border:1px solid #ffd8a8;white-space:nowrap}
.span-chip.stop{background:#fff5f5;border-color:#ffc9c9}.span-chip.nudge{background:#fff9db;border-color:#ffec99}
.note{color:var(--muted);margin:4px 0 10px}
.empty{color:var(--muted);font-style:italic}
.legend{display:flex;flex-wrap:wrap;gap:6px 22px;background:var(--card);border:1px solid var(--line);
border-radius:10px;padding:8px 14px;margin-bottom:10px;font-size:12px}
.legend b{margin-right:8px;color:#495057}
.key{display:inline-flex;align-items:center;margin-right:10px;white-space:nowrap}
.key i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px}
.key i.mark{width:6px;height:12px;border-radius:1px}
.key i.shade{background:rgba(232,89,12,.22);width:18px}
.timelines{background:var(--card);border:1px solid var(--line);border-radius:10px}
.run-row{display:grid;grid-template-columns:300px 1fr;gap:14px;padding:8px 14px;border-bottom:1px solid #f1f3f5;
align-items:center}
.run-row:last-child{border-bottom:0}
.run-label{min-width:0}
.run-row .run-id{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.run-meta{color:var(--muted);font-size:12px}
.run-track{min-width:0}
svg.timeline{width:100%;height:30px;display:block}
.timeline .track{fill:#f1f3f5}
.timeline .episode{fill:rgba(232,89,12,.18)}
.timeline .episode.stop{fill:rgba(201,42,42,.16)}
.timeline .episode.nudge{fill:rgba(224,161,6,.2)}
.axis{display:flex;justify-content:space-between;color:#adb5bd;font-size:10px;line-height:1}
#detail{position:fixed;top:0;right:0;bottom:0;width:min(680px,94vw);background:#fff;border-left:1px solid var(--line);
box-shadow:-8px 0 24px rgba(0,0,0,.12);overflow:auto;z-index:10;padding:0 0 24px}
#detail[hidden]{display:none}
.detail-head{position:sticky;top:0;background:#fff;display:flex;justify-content:space-between;gap:10px;
padding:14px 18px 10px;border-bottom:1px solid var(--line);z-index:1}
.detail-kicker{color:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.6px}
#detail h2{margin:0;font-size:14px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
word-break:break-all}
#detail-meta{color:var(--muted);font-size:12px;margin-top:2px}
#detail-close{border:0;background:#f1f3f5;border-radius:6px;font-size:20px;width:32px;height:32px;cursor:pointer;
flex:none}
#detail-body{padding:4px 18px}
.episode-block{margin-top:14px}
.episode-block h3{font-size:13px;margin:0 0 6px}
.verdict-list{margin:0 0 8px;padding:0;list-style:none;font-size:12px}
.verdict-list li{margin:2px 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.kind{white-space:nowrap;max-width:130px;overflow:hidden;text-overflow:ellipsis}
table.steps .badge{font-size:9px;line-height:14px;margin-right:6px;vertical-align:1px}
table.steps{font-size:12px}
table.steps td{padding:3px 8px;border-bottom:1px solid #f1f3f5}
table.steps td.lbl{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
table.steps tr.in-loop td{background:#fff9f2}
table.steps tr.hl td{background:#ffe8cc}
table.steps tr.hl td.lbl{font-weight:700}
table.steps tr.at-verdict td:first-child{box-shadow:inset 3px 0 0 var(--block)}
table.steps tr.gap td{color:var(--muted);text-align:center;font-style:italic}
.dot{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:5px;vertical-align:-1px}
#tooltip{position:fixed;pointer-events:none;background:#212529;color:#fff;font-size:12px;padding:4px 8px;
border-radius:5px;max-width:520px;z-index:20;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
@media (max-width:900px){.run-row{grid-template-columns:1fr}main{padding:16px}}
"""

_JS: Final = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var panel = document.getElementById("detail");
  var body = document.getElementById("detail-body");
  var tooltip = document.getElementById("tooltip");
  var colours = data.colours;
  var SEVERITY = {nudge: 1, block: 2, stop: 3};

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function stepMap(run) {
    var map = new Map();
    run.steps.forEach(function (s) { map.set(s[0], s); });
    return map;
  }

  function select(i) {
    document.querySelectorAll(".run-link.selected").forEach(function (n) { n.classList.remove("selected"); });
    document.querySelectorAll('.run-link[data-run="' + i + '"]').forEach(function (n) { n.classList.add("selected"); });
  }

  function show(i) {
    var run = data.runs[i];
    if (!run) return;
    select(i);
    document.getElementById("detail-title").textContent = run.id;
    var meta = [run.events + " events", run.verdicts.length + " verdicts", run.turns + " steps inside loops"];
    if (run.source) meta.unshift(run.source);
    if (run.model) meta.push("model " + run.model);
    if (run.cost) meta.push("cost in loops " + run.cost);
    document.getElementById("detail-meta").textContent = meta.join(" · ");
    body.textContent = "";
    if (run.partial) body.appendChild(el("p", "note", "A long run: only the steps around its loops were kept."));
    var steps = stepMap(run);
    run.episodes.forEach(function (ep, k) {
      var block = el("div", "episode-block");
      block.setAttribute("data-episode", String(k));
      block.appendChild(el("h3", "", "Loop " + (k + 1) + ": steps " + ep.from + "–" + ep.to + " · " +
        ep.patterns.join(", ")));
      var list = el("ul", "verdict-list");
      var hl = new Set();
      var at = new Map();
      run.verdicts.forEach(function (v) {
        if (v.pos < ep.start || v.pos > ep.end) return;
        v.hl.forEach(function (p) { hl.add(p); });
        if (!at.has(v.pos) || SEVERITY[v.action] > SEVERITY[at.get(v.pos).action]) at.set(v.pos, v);
        var li = el("li");
        var badge = el("span", "badge " + v.action, v.action);
        li.appendChild(badge);
        var text = " step " + v.index + " · " + v.pattern + " ×" + v.count + " · level " + v.level +
          (v.detector ? " · " + v.detector : "") + " — " + v.reason;
        li.appendChild(document.createTextNode(text));
        li.title = v.action + text;
        list.appendChild(li);
      });
      block.appendChild(list);
      var table = el("table", "steps");
      var head = el("tr");
      ["step", "kind", "what"].forEach(function (h) { head.appendChild(el("th", "", h)); });
      var thead = el("thead"); thead.appendChild(head); table.appendChild(thead);
      var tbody = el("tbody");
      var lo = Math.max(0, ep.start - data.context), hi = Math.min(run.events - 1, ep.end + data.context);
      var rows = [];
      for (var p = lo; p <= hi; p++) if (steps.has(p)) rows.push(p);
      var limit = 80;
      var cut = rows.length > limit ? [rows.slice(0, limit / 2), rows.slice(rows.length - limit / 2)] : [rows];
      cut.forEach(function (part, n) {
        if (n > 0) {
          var gap = el("tr", "gap");
          var td = el("td", "", "… " + (rows.length - limit) + " steps …");
          td.colSpan = 3; gap.appendChild(td); tbody.appendChild(gap);
        }
        part.forEach(function (p) {
          var s = steps.get(p);
          var tr = el("tr", "step-row");
          tr.setAttribute("data-pos", String(p));
          if (p >= ep.start && p <= ep.end) tr.classList.add("in-loop");
          if (hl.has(p)) tr.classList.add("hl");
          if (at.has(p)) { tr.classList.add("at-verdict"); tr.title = at.get(p).action + ": " + at.get(p).reason; }
          tr.appendChild(el("td", "num", s[1]));
          var kind = el("td", "kind");
          kind.title = s[2] === "call" ? (s[3] || "call") : s[2];
          var dot = el("span", "dot");
          dot.style.background = colourOf(s);
          kind.appendChild(dot);
          kind.appendChild(document.createTextNode(s[2] === "call" ? (s[3] || "call") : s[2]));
          tr.appendChild(kind);
          var what = el("td", "lbl");
          if (at.has(p)) what.appendChild(el("span", "badge " + at.get(p).action, at.get(p).action));
          what.appendChild(document.createTextNode(s[4]));
          tr.appendChild(what);
          tbody.appendChild(tr);
        });
      });
      table.appendChild(tbody);
      block.appendChild(table);
      body.appendChild(block);
    });
    panel.hidden = false;
    panel.scrollTop = 0;
  }

  function colourOf(step) {
    if (step[2] === "call") {
      return Object.prototype.hasOwnProperty.call(colours.tools, step[3]) ? colours.tools[step[3]] : colours.other;
    }
    return colours.kinds[step[2]] || colours.kinds.system;
  }

  document.querySelectorAll(".run-link").forEach(function (node) {
    node.addEventListener("click", function () { show(Number(node.getAttribute("data-run"))); });
    node.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); show(Number(node.getAttribute("data-run"))); }
    });
  });
  document.getElementById("detail-close").addEventListener("click", function () { panel.hidden = true; });
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") panel.hidden = true; });

  document.querySelectorAll("svg.timeline").forEach(function (svg) {
    var run = data.runs[Number(svg.getAttribute("data-run"))];
    var steps = stepMap(run);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var pos = Math.floor((ev.clientX - box.left) / box.width * Math.max(run.events, 1));
      var s = steps.get(pos);
      if (!s) { tooltip.hidden = true; return; }
      tooltip.textContent = "step " + s[1] + " · " + s[4];
      tooltip.hidden = false;
      tooltip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 540) + "px";
      tooltip.style.top = (ev.clientY + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { tooltip.hidden = true; });
  });
})();
"""
