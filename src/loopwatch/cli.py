"""The ``loopwatch`` command line. It drives; the rules never import it.

    loopwatch scan PATH... [--format NAME] [--preset NAME] [--config FILE] [--json]

Formats: the canonical ``events`` and ``trajectory`` (FORMAT.md), and foreign traces (``openai``,
``openai-responses``, ``anthropic``, ``claude-code``, ``swe-agent``, ``mini-swe-agent``, ``openhands``,
``tau-bench``, ``otel``), detected from each file's first record unless ``--format`` forces one.

Exit status: 0 when the scan ran (loops or not), 2 on unusable input (the message names file and line).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from . import __version__
from .errors import ConfigError, InputError
from .policy import Policy
from .presets import PRESETS, preset
from .readers import FORMATS, read_runs
from .scan import RunReport, scan_runs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description="Catch LLM agents stuck in loops.")
    parser.add_argument("--version", action="version", version=f"loopwatch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    scan = commands.add_parser("scan", help="find loops in recorded runs (event streams, trajectories, agent traces)")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="files, directories, globs, or - for stdin")
    scan.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        metavar="NAME",
        help=f"input format, one of: {', '.join(FORMATS)} (default: detected per file)",
    )
    scan.add_argument("--preset", default=None, help=f"policy preset: {', '.join(PRESETS)} (default: default)")
    scan.add_argument("--config", default=None, help="a loopwatch TOML file or a pyproject.toml")
    scan.add_argument("--json", action="store_true", help="one JSON object per run (FORMAT.md section 3)")
    scan.add_argument("--top", type=int, default=10, help="how many of the worst runs to show")
    return parser


def _policy(args: argparse.Namespace) -> Policy:
    if args.config:
        from .config import load_config

        config = load_config(args.config)
        if args.preset:
            config = dataclasses.replace(config, preset=args.preset)
        return config.policy()
    return preset(args.preset or "default")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        policy = _policy(args)
    except (ConfigError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    return _scan(args, policy)


def _scan(args: argparse.Namespace, policy: Policy) -> int:
    errors: list[InputError] = []

    def on_error(error: InputError) -> None:
        errors.append(error)
        print(f"loopwatch: {error}", file=sys.stderr)

    runs = read_runs(args.paths, format=args.format, on_error=on_error)
    reports: list[RunReport] = []
    out = sys.stdout
    for report in scan_runs(policy, runs):
        if args.json:
            out.write(json.dumps(report.to_json(), ensure_ascii=False) + "\n")
        else:
            reports.append(report)
    if not args.json:
        _summary(reports, policy, out, args.top)
    return 2 if errors else 0


def _summary(reports: list[RunReport], policy: Policy, out: TextIO, top: int) -> None:
    looping = [r for r in reports if r.verdicts]
    patterns: Counter[str] = Counter()
    for report in looping:
        patterns.update({v.pattern or "?" for v in report.verdicts})
    events = sum(r.events for r in reports)
    stopped = sum(1 for r in reports if r.stopped)
    rows: list[tuple[str, Any]] = [
        ("preset", policy.name),
        ("runs", len(reports)),
        ("events", events),
        ("runs with loops", len(looping)),
        ("runs stopped", stopped),
    ]
    rows += [(f"  {pattern}", n) for pattern, n in patterns.most_common()]
    try:
        _rich_summary(rows, _worst(looping)[:top], out)
    except ImportError:
        _plain_summary(rows, _worst(looping)[:top], out)


def _episode_lines(report: RunReport) -> list[str]:
    lines = []
    for v in report.verdicts:
        start = f"{v.loop_start}-" if v.loop_start is not None else ""
        lines.append(f"    [{start}{v.index}] {v.action} L{v.level} {v.pattern} x{v.count}: {v.reason}")
    return lines


def _worst(reports: list[RunReport]) -> list[RunReport]:
    return sorted(reports, key=lambda r: (-max(v.severity for v in r.verdicts), -len(r.verdicts), r.id))


def _plain_summary(rows: list[tuple[str, Any]], looping: list[RunReport], out: TextIO) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")
    if looping:
        out.write("\nruns with loops:\n")
        for report in looping:
            out.write(f"  {report.id} ({report.events} events)\n")
            out.write("\n".join(_episode_lines(report)) + "\n")


def _rich_summary(rows: list[tuple[str, Any]], looping: list[RunReport], out: TextIO) -> None:
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
    if looping:
        console.print("\n[bold]runs with loops[/bold]")
        for report in looping:
            console.print(f"  [cyan]{escape(report.id)}[/cyan] ({report.events} events)")
            for line in _episode_lines(report):
                colour = "red" if " stop " in line else ("yellow" if " nudge " in line else "magenta")
                console.print(escape(line), style=colour)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
