"""``loopwatch scan``: judge recorded runs (in several processes with ``-j``), print one JSON line per run or a
summary of the worst runs, write the HTML report, and fail on a verdict level with ``--fail-on``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..core._verdict import SEVERITY
from ..errors import ConfigError
from ._batch import Scanned, keep_all, scan_files
from ._common import InputErrors, json_line, run_facts, short
from ._progress import progress_bar
from ._summary import RunDigest, ScanTotals, episodes


def scan(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: InputErrors) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError("-j must be at least 1", field="jobs")
    began = time.perf_counter()
    report = _html_report(args.currency) if args.html else None
    totals = ScanTotals(top=max(args.top, 0))
    out = sys.stdout
    with progress_bar("scanning", "bytes", enabled=not args.no_progress) as bar:
        scanned: Iterator[Scanned] = scan_files(
            args.paths,
            spec,
            format=args.format,
            jobs=args.jobs,
            keep=keep_all if report is not None else _keep_none,
            on_error=errors,
            on_file=lambda path: bar.describe(short(path)),
            progress=bar,
        )
        for item in scanned:
            if args.json:
                out.write(json_line(item.report.to_json()))
            totals.add(item.digest)
            if report is not None:
                report.add_digest(item.digest, item.run)
    took = time.perf_counter() - began
    about = run_facts(policy, spec, took)
    if report is not None:
        report.write(args.html, title="loopwatch scan", preset=policy.name, about=about)
        print(f"loopwatch: wrote {args.html}", file=sys.stderr)
    if not args.json:
        _summary(totals, about, args.currency, out)
    return _fail_on(args.fail_on, totals)


def _fail_on(level: str | None, totals: ScanTotals) -> int:
    """1 when a verdict of ``level`` or stronger was found (``scan --fail-on``), else 0."""
    if level is None:
        return 0
    found = sum(n for action, n in totals.actions.items() if SEVERITY[action] >= SEVERITY[level])
    if not found:
        return 0
    print(f"loopwatch: {found} verdict(s) of {level} or stronger (--fail-on {level})", file=sys.stderr)
    return 1


def _keep_none(report: Any) -> bool:
    return False


def _html_report(currency: str = "USD") -> Any:
    from ._report import HtmlReport

    return HtmlReport(currency=currency)


def _summary(totals: ScanTotals, about: list[tuple[str, str]], currency: str, out: TextIO) -> None:
    out.write(" · ".join(f"{key} {value}" for key, value in about) + "\n")  # one line: a long path stays whole
    rows: list[tuple[str, Any]] = totals.rows(currency=currency)
    worst = totals.worst_runs()
    try:
        _rich_summary(rows, worst, currency, out)
    except ImportError:
        _plain_summary(rows, worst, currency, out)


_LISTED: int = 6


def _run_lines(digest: RunDigest) -> list[str]:
    spans = ", ".join(
        f"{e.start if e.start == e.end else f'{e.start}-{e.end}'} {'/'.join(e.patterns)} ({e.action})"
        for e in episodes(digest.verdicts)
    )
    lines = [f"  loops at steps {spans}"]
    for v in digest.verdicts[:_LISTED]:
        start = f"{v.loop_start}-" if v.loop_start is not None else ""
        lines.append(f"    [{start}{v.index}] {v.action} L{v.level} {v.pattern} x{v.count}: {v.reason}")
    if len(digest.verdicts) > _LISTED:
        lines.append(f"    ... and {len(digest.verdicts) - _LISTED} more (loopwatch explain PATH --id {digest.id})")
    return lines


def _header(digest: RunDigest, currency: str) -> str:
    cost = (
        f", {digest.loop_cost or 0.0:,.2f} of {digest.cost:,.2f} {currency} inside loops"
        if digest.cost is not None
        else ""
    )
    steps = f"{digest.loop_steps} step{'' if digest.loop_steps == 1 else 's'}"
    return f"{digest.id} ({digest.events} events, {steps} inside loops{cost})"


def _plain_summary(rows: list[tuple[str, Any]], worst: list[RunDigest], currency: str, out: TextIO) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")
    if worst:
        out.write("\nruns with loops (worst first):\n")
        for digest in worst:
            out.write(f"  {_header(digest, currency)}\n")
            out.write("\n".join(_run_lines(digest)) + "\n")


def _rich_summary(rows: list[tuple[str, Any]], worst: list[RunDigest], currency: str, out: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=out, highlight=False, soft_wrap=True)
    table = Table(title="loopwatch scan", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, str(value))
    console.print(table)
    if worst:
        console.print("\n[bold]runs with loops (worst first)[/bold]")
        for digest in worst:
            console.print(f"  [cyan]{escape(_header(digest, currency))}[/cyan]")
            for line in _run_lines(digest):
                colour = "red" if " stop " in line else ("yellow" if " nudge " in line else "magenta")
                console.print(escape(line), style=colour)
