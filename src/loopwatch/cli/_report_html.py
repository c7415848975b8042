"""Small pieces of the report page: escaping, the data block, the page's files (package data), numbers in words,
a run's name cut in its middle, the attributes the page's filters read, the run panel's frame."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Mapping
from importlib import resources
from typing import Any, Final

from ._report_data import RunView

NAME_CHARS: Final = 64
"""A run's name longer than this is shown with an ellipsis in its middle (in full on hover and in its panel)."""


def middle_ellipsis(text: str, limit: int = NAME_CHARS) -> str:
    """``text`` cut in its middle to ``limit`` characters (the end, often the telling part, kept longer)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 5
    tail = limit - 1 - head
    return text[:head] + "…" + text[-tail:]


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` appears literally."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def asset(name: str) -> str:
    """One of the page's files, shipped as package data in ``loopwatch/cli/assets``: its head
    (``report-head.html``, with ``__TITLE__`` and ``__CSS__`` to fill), its style sheet (``report.css``) and its
    script (``report.js``), all inlined in the page (nothing is fetched).

    The script reads the page's data block (``<script type="application/json" id="report-data">``): it opens a
    run's panel (its steps around each loop and each labelled episode, a step's full text behind a click), filters
    the runs by pattern, source, model and action, searches them by run id or tool, and sorts the runs table by any
    column.
    """
    return (resources.files("loopwatch.cli") / "assets" / name).read_text(encoding="utf-8")


def version() -> str:
    from .. import __version__

    return __version__


def money(value: float, currency: str) -> str:
    amount = f"{value:,.2f}" if value >= 1 else f"{value:.4g}"
    return f"{amount} {currency}"


def action_line(actions: Mapping[str, int]) -> str:
    parts = [f"{actions[a]} {a}" for a in ("stop", "block", "nudge") if actions.get(a)]
    return "worst per run: " + ", ".join(parts) if parts else ""


def top_counts(counter: Counter[str], limit: int = 12) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def filter_attrs(i: int, view: RunView) -> str:
    """The data attributes the page's filters and search read."""
    patterns = sorted({v.pattern or "?" for v in view.verdicts})
    tools = sorted({s.tool for s in view.steps if s.tool})
    flags = " ".join(view.flags)
    return (
        f'data-run="{i}" data-id="{esc(view.id)}" data-action="{view.action}" '
        f'data-patterns="{esc(" ".join(patterns))}" data-source="{esc(view.source or "")}" '
        f'data-model="{esc(view.model or "")}" data-tools="{esc(" ".join(tools))}" data-flags="{esc(flags)}"'
    )


DETAIL_PANEL: Final = """<aside id="detail" hidden aria-label="run detail">
<div class="detail-head"><div><div class="detail-kicker">run</div><h2 id="detail-title"></h2>
<div id="detail-meta"></div></div>
<button type="button" id="detail-close" aria-label="close">×</button></div>
<div id="detail-body"></div></aside>"""
