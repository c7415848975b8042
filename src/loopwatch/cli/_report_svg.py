"""The report page's drawings, as inline SVG: a timeline per run (its steps, loop episodes, verdicts and labelled
episodes), the bar charts and a sweep's recall against false alarms."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from .._timeline import ACTION_COLOURS, KIND_COLOURS, KIND_NAMES, OTHER_TOOL, TOOL_PALETTE, cut
from ._report_data import RunView, Step, Sweep
from ._report_html import esc, filter_attrs, middle_ellipsis, top_counts

LABEL_COLOURS: Final[dict[str, str]] = {"caught": "#2f9e44", "missed": "#1971c2"}
_W: Final = 1000.0  # timeline width in SVG units (stretched to the page's width)
_H: Final = 32.0


def tool_colours(views: Sequence[RunView]) -> dict[str, str]:
    counts: Counter[str] = Counter()
    for view in views:
        counts.update(s.tool for s in view.steps if s.kind == "call" and s.tool is not None)
    return {tool: TOOL_PALETTE[i] for i, (tool, _) in enumerate(top_counts(counts, len(TOOL_PALETTE)))}


def _step_colour(step: Step, tools: Mapping[str, str]) -> str:
    if step.kind == "call":
        return tools.get(step.tool or "", OTHER_TOOL)
    return KIND_COLOURS.get(step.kind, KIND_COLOURS["system"])


def legend(tools: Mapping[str, str], labelled: bool) -> str:
    items = [f'<span class="key"><i style="background:{c}"></i>{esc(t)}</span>' for t, c in tools.items()]
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


def timeline_row(i: int, view: RunView, tools: Mapping[str, str]) -> str:
    n = max(view.length, 1)
    unit = _W / n
    parts: list[str] = []
    for e in view.episodes:
        a, b = _clamp(e.start, n), _clamp(e.end, n)
        parts.append(
            f'<rect class="episode {e.action}" x="{a * unit:.2f}" y="0" width="{max((b - a + 1) * unit, 2):.2f}" '
            f'height="25" data-start="{e.start}" data-end="{e.end}">'
            f"<title>{esc(f'steps {e.start}–{e.end}: ' + ', '.join(e.patterns))}</title></rect>"
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
            f"<title>{esc(tip)}</title></rect>"
        )
    for lab in view.labels:
        a, b = _clamp(lab.start, n), _clamp(lab.end, n)
        state = "caught" if lab.caught else "missed"
        tip = f"labelled {lab.pattern}, steps {lab.start}–{lab.end} ({state}): {lab.note}"
        parts.append(
            f'<rect class="label-span {state}" x="{a * unit:.2f}" y="26" width="{max((b - a + 1) * unit, 2):.2f}" '
            f'height="6" fill="{LABEL_COLOURS[state]}" data-start="{lab.start}" data-end="{lab.end}">'
            f"<title>{esc(tip)}</title></rect>"
        )
    svg = (
        f'<svg class="timeline" data-run="{i}" data-steps="{view.length}" viewBox="0 0 {_W:g} {_H:g}" '
        f'preserveAspectRatio="none" role="img" aria-label="{esc("timeline of " + view.id)}">'
        f'<rect class="track" x="0" y="11" width="{_W:g}" height="12"/>{"".join(parts)}</svg>'
    )
    partial = ' · <span title="only the steps around its loops are kept">long run</span>' if view.partial else ""
    badge = f'<span class="badge {view.action}">{view.action}</span>'
    return (
        f'<div class="run-row run-link" {filter_attrs(i, view)} tabindex="0" role="button">'
        f'<div class="run-label"><div class="run-id" title="{esc(view.id)}">{esc(middle_ellipsis(view.id, 48))}</div>'
        f'<div class="run-meta">{badge} {view.length:,} steps · {len(view.verdicts)} verdicts{partial}</div></div>'
        f'<div class="run-track">{svg}<div class="axis"><span>step 0</span><span>step {max(view.length - 1, 0)}</span>'
        "</div></div></div>"
    )


def _clamp(record: int, n: int) -> int:
    return min(max(record, 0), n - 1)


def _step_rects(steps: Sequence[Step], unit: float, tools: Mapping[str, str]) -> list[str]:
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


def bar_chart(chart_id: str, title: str, rows: Sequence[tuple[str, int, int, str]], unit: str) -> str:
    """Horizontal bars: (label, value, total or 0, tooltip); a total draws a light bar behind the value."""
    if not rows:
        body = '<p class="empty">Nothing to show.</p>'
        return f'<figure class="chart" id="{chart_id}"><figcaption>{esc(title)}</figcaption>{body}</figure>'
    width, label_w, row_h, pad = 560.0, 200.0, 24.0, 8.0
    bar_w = width - label_w - 70
    top = max(max(total, value) for _, value, total, _ in rows) or 1
    height = pad * 2 + row_h * len(rows)
    out = [
        f'<figure class="chart" id="{chart_id}"><figcaption>{esc(title)} <small>({esc(unit)})</small></figcaption>',
        f'<svg class="bar-chart" viewBox="0 0 {width:g} {height:g}" role="img" aria-label="{esc(title)}">',
    ]
    for k, (label, value, total, tip) in enumerate(rows):
        y = pad + k * row_h
        shown = middle_ellipsis(label, 28)
        out.append(
            f'<g class="bar" data-label="{esc(label)}" data-value="{value}"><title>{esc(label)}: {esc(tip)}</title>'
        )
        out.append(
            f'<text x="{label_w - 8:g}" y="{y + row_h / 2 + 4:g}" text-anchor="end" class="bar-label">'
            f"{esc(shown)}</text>"
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


def sweep_chart(i: int, sweep: Sweep) -> str:
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
        f'<figure class="chart sweep" id="sweep-{i}" data-param="{esc(sweep.param)}">',
        f"<figcaption>{esc(title)}</figcaption>",
        f'<svg class="sweep-chart" viewBox="0 0 {width:g} {height:g}" role="img" aria-label="{esc(title)}">',
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
            f'<g class="sweep-point" data-value="{esc(p.value)}"><title>{esc(tip)}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4"/>'
            f'<text class="point-label" x="{x + 6:.1f}" y="{y - 6:.1f}">{esc(cut(str(p.value), 12))}</text></g>'
        )
    out.append("</svg>")
    out.append(
        '<table class="sweep-table"><thead><tr><th>value</th><th class="num">recall</th>'
        '<th class="num">false alarms</th></tr></thead><tbody>'
    )
    for p in sweep.points:
        out.append(
            f'<tr><td>{esc(p.value)}</td><td class="num">{p.recall:.1%}</td>'
            f'<td class="num">{p.false_alarms:.1%}</td></tr>'
        )
    out.append("</tbody></table></figure>")
    return "".join(out)
