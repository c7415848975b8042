"""The ``loopwatch`` command line. It drives; the rules never import it.

    loopwatch scan PATH... [--format NAME] [--preset NAME] [--config FILE] [--json] [-j N] [--html FILE]
    loopwatch eval PATH... --labels FILE [--preset NAME] [--compare PRESET...] [--sweep DET.PARAM=A:B:STEP]
    loopwatch explain PATH... --id RUN [--index N]
    loopwatch sessions --store URL [--reset ID | --forget ID | --swarm ID [--clear]] [--json]
    loopwatch hook claude-code [--install [--project|--user|--local] | --uninstall]   (a Claude Code hook)
    loopwatch mcp-proxy [--preset NAME] [--store URL] [--session ID] -- SERVER COMMAND...   (an MCP server's guard)
    loopwatch serve [--store URL] [--workers N] [--token-file FILE] [--host H] [--port P]   (the HTTP service)

Formats: the canonical ``events`` and ``trajectory`` (FORMAT.md), and foreign traces (``openai``,
``openai-responses``, ``anthropic``, ``claude-code``, ``swe-agent``, ``mini-swe-agent``, ``openhands``,
``tau-bench``, ``otel``), detected from each file's first record unless ``--format`` forces one.

Exit status: 0 when the command ran (loops or not), 2 on unusable input or configuration (the message
names the file and line, or the field).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from . import __version__
from .batch import PolicySpec, Scanned, scan_files, with_loops
from .errors import ConfigError, InputError, LoopwatchError
from .evaluation import (
    Evaluation,
    Sweep,
    compare_json,
    compare_table,
    evaluate_policy,
    held_out_table,
    labelled_runs,
    leave_one_source_out,
    rule_share_table,
    rule_shares,
    sweep_point,
    sweep_table,
)
from .explain import explain_run, explanation_json
from .metrics import Label, LabelError, parse_labels
from .policy import Policy
from .presets import PRESETS
from .readers import FORMATS, Run, read_runs
from .summary import RunDigest, ScanTotals, episodes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description="Catch LLM agents stuck in loops.")
    parser.add_argument("--version", action="version", version=f"loopwatch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    scan = commands.add_parser("scan", help="find loops in recorded runs (event streams, trajectories, agent traces)")
    _inputs(scan)
    scan.add_argument("--json", action="store_true", help="one JSON object per run (FORMAT.md section 3)")
    scan.add_argument("--top", type=int, default=10, help="how many of the worst runs to show (default: 10)")
    scan.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="scan with N processes (default: 1)")
    scan.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report to FILE")
    scan.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")

    evaluate = commands.add_parser("eval", help="measure detection against labels (FORMAT.md sections 4 and 5)")
    _inputs(evaluate)
    evaluate.add_argument(
        "--labels",
        required=True,
        action="append",
        metavar="FILE",
        help="labels, one JSON object per line (repeat the option to read several files)",
    )
    evaluate.add_argument("--json", action="store_true", help="the metrics as JSON")
    evaluate.add_argument("--compare", nargs="+", metavar="PRESET", help="presets to put side by side")
    evaluate.add_argument(
        "--sweep", metavar="DETECTOR.PARAM=A:B:STEP", help="vary one detector parameter from A to B by STEP"
    )
    evaluate.add_argument(
        "--loso",
        action="store_true",
        help="with --sweep: for each source, the value chosen on the other sources and its metrics on the one left out",
    )
    evaluate.add_argument(
        "--rules",
        action="store_true",
        help="per rule and source, the episodes only it catches and the clean runs only it alarms (one scan per rule)",
    )
    evaluate.add_argument("--untruncated", action="store_true", help="keep verdicts after a stop")
    evaluate.add_argument("--html", metavar="FILE", help="also write an HTML report (with the sweep's chart)")

    explain = commands.add_parser("explain", help="show one run's steps around each detection, with the evidence")
    _inputs(explain)
    explain.add_argument("--id", required=True, dest="run_id", metavar="RUN", help="the run's id (or a unique end)")
    explain.add_argument("--index", type=int, default=None, metavar="N", help="only the detection at index N")
    explain.add_argument("--json", action="store_true", help="as JSON")
    commands.add_parser(
        "hook",
        add_help=False,
        help="Claude Code hook: loopwatch hook claude-code [--install [--project|--user|--local] | --uninstall] "
        "[--store URL] [--preset NAME] [--config FILE] [--fail-closed]",
    )
    commands.add_parser(
        "mcp-proxy",
        add_help=False,
        help="front an MCP server (stdio) and refuse looping tool calls: loopwatch mcp-proxy [--preset NAME] "
        "[--config FILE] [--store URL] [--session ID] [--audit FILE] -- SERVER COMMAND...",
    )
    commands.add_parser(
        "serve",
        add_help=False,
        help="run the guard as an HTTP service with a live dashboard (extra 'server'): loopwatch serve "
        "[--store URL] [--workers N] [--token-file FILE] [--host H] [--port P] (loopwatch serve --help)",
    )
    sessions = commands.add_parser("sessions", help="list, reset or clear the sessions and swarms kept in a store")
    sessions.add_argument("--store", required=True, metavar="URL", help="sqlite:///path.db, redis://host:6379/0...")
    sessions.add_argument("--preset", default=None, help="the preset the guards use (default: default)")
    sessions.add_argument("--config", default=None, help="a loopwatch TOML file or a pyproject.toml")
    sessions.add_argument("--reset", metavar="ID", help="reset one session's loop state (limits keep counting)")
    sessions.add_argument("--forget", metavar="ID", help="drop everything about one session")
    sessions.add_argument("--swarm", metavar="ID", help="show a swarm's shared counts (with --clear: clear them)")
    sessions.add_argument("--clear", action="store_true", help="with --swarm: clear the swarm's counts")
    sessions.add_argument("--json", action="store_true", help="as JSON")
    return parser


def _inputs(command: argparse.ArgumentParser) -> None:
    command.add_argument("paths", nargs="+", metavar="PATH", help="files, directories, globs, or - for stdin")
    command.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        metavar="NAME",
        help=f"input format, one of: {', '.join(FORMATS)} (default: detected per file)",
    )
    command.add_argument("--preset", default=None, help=f"policy preset: {', '.join(PRESETS)} (default: default)")
    command.add_argument("--config", default=None, help="a loopwatch TOML file or a pyproject.toml")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["hook"]:  # the hook parses its own options (the console script gets here sooner)
        from .adapters.claude_code import main as hook_main

        return hook_main(arguments[1:])
    if arguments[:1] == ["mcp-proxy"]:  # the proxy parses its own options (its command follows --)
        from .adapters.mcp import main as mcp_main

        return mcp_main(arguments[1:])
    if arguments[:1] == ["serve"]:  # the service parses its own options
        from .server.run import main as serve_main

        return serve_main(arguments[1:])
    args = _parser().parse_args(arguments)
    spec = PolicySpec(args.preset, args.config)
    try:
        policy = spec.build()
    except (LoopwatchError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    errors = _Errors()
    try:
        command: Callable[[argparse.Namespace, PolicySpec, Policy, _Errors], int] = _COMMANDS[args.command]
        code = command(args, spec, policy, errors)
    except (ConfigError, LabelError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    return 2 if errors.seen or code else 0


class _Errors:
    """Bad input, reported on stderr as it is found and counted (the exit status says some input was bad)."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, error: InputError) -> None:
        self.seen += 1
        print(f"loopwatch: {error}", file=sys.stderr)


# -- scan ---------------------------------------------------------------------------------------------


def _scan(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    if args.jobs < 1:
        raise ConfigError("-j must be at least 1", field="jobs")
    report = _html_report() if args.html else None
    totals = ScanTotals(top=max(args.top, 0))
    out = sys.stdout
    with _progress(len(args.paths), enabled=not args.no_progress) as advance:
        scanned: Iterator[Scanned] = scan_files(
            args.paths,
            spec,
            format=args.format,
            jobs=args.jobs,
            keep=with_loops if report is not None else _keep_none,
            on_error=errors,
            on_file=advance,
        )
        for item in scanned:
            if args.json:
                out.write(json.dumps(item.report.to_json(), ensure_ascii=False) + "\n")
            totals.add(item.digest)
            if report is not None:
                report.add_digest(item.digest, item.run)
    if report is not None:
        report.write(args.html, title="loopwatch scan", preset=policy.name)
        print(f"loopwatch: wrote {args.html}", file=sys.stderr)
    if not args.json:
        _summary(totals, policy, out)
    return 0


def _keep_none(report: Any) -> bool:
    return False


def _html_report() -> Any:
    from .report import HtmlReport

    return HtmlReport()


@contextmanager
def _progress(paths: int, *, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr (rich, on a terminal only), advanced once per file."""
    if not enabled or not sys.stderr.isatty():
        yield lambda path: None
        return
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        yield lambda path: None
        return
    columns = (
        TextColumn("scanning"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("", total=None)

        def advance(path: str) -> None:
            bar.update(task, advance=1, description=path[-60:])

        yield advance


def _summary(totals: ScanTotals, policy: Policy, out: TextIO) -> None:
    rows = totals.rows(policy.name)
    worst = totals.worst_runs()
    try:
        _rich_summary(rows, worst, out)
    except ImportError:
        _plain_summary(rows, worst, out)


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


def _header(digest: RunDigest) -> str:
    cost = f", ${digest.loop_cost:,.2f} of ${digest.cost:,.2f} inside loops" if digest.cost is not None else ""
    steps = f"{digest.loop_steps} step{'' if digest.loop_steps == 1 else 's'}"
    return f"{digest.id} ({digest.events} events, {steps} inside loops{cost})"


def _plain_summary(rows: list[tuple[str, Any]], worst: list[RunDigest], out: TextIO) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")
    if worst:
        out.write("\nruns with loops (worst first):\n")
        for digest in worst:
            out.write(f"  {_header(digest)}\n")
            out.write("\n".join(_run_lines(digest)) + "\n")


def _rich_summary(rows: list[tuple[str, Any]], worst: list[RunDigest], out: TextIO) -> None:
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
            console.print(f"  [cyan]{escape(_header(digest))}[/cyan]")
            for line in _run_lines(digest):
                colour = "red" if " stop " in line else ("yellow" if " nudge " in line else "magenta")
                console.print(escape(line), style=colour)


# -- eval ---------------------------------------------------------------------------------------------


def _eval(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    labels: dict[str, Label] = {}
    for path in args.labels:
        with open(path, encoding="utf-8") as handle:
            more = parse_labels(handle)
        twice = sorted(set(labels) & set(more))
        if twice:
            raise LabelError(f"{path}: run {twice[0]!r} is labelled in another labels file too", run_id=twice[0])
        labels.update(more)
    runs = labelled_runs(read_runs(args.paths, format=args.format, on_error=errors), labels)
    live = not args.untruncated
    if args.loso and not args.sweep:
        raise ConfigError("--loso needs --sweep DETECTOR.PARAM=A:B:STEP", field="loso")
    if args.sweep:
        return _sweep(args, policy, runs, labels, live)
    if args.rules:
        evaluation = evaluate_policy(policy, runs, labels, live=live)
        shares = rule_shares(evaluation, runs, labels, live=live)
        if args.json:
            print(json.dumps([share.to_json() for share in shares], indent=1))
        else:
            print(f"{len(runs)} labelled runs ({len(labels)} labels), preset {policy.name}")
            print(rule_share_table(shares))
        return 0
    names = [policy.name, *[p for p in args.compare or () if p != policy.name]]
    evaluations = [
        evaluate_policy(
            policy if name == policy.name else PolicySpec(name).build(),
            runs,
            labels,
            live=live,
            exclude_patterns=_EXCLUDED,
        )
        for name in names
    ]
    if args.html:
        _eval_html(args.html, evaluations[0], runs, [])
    if args.json:
        data = compare_json(evaluations) if len(evaluations) > 1 else evaluations[0].report.to_json()
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    print(f"{len(runs)} labelled runs ({len(labels)} labels)")
    if len(evaluations) > 1:
        print(compare_table(evaluations))
        return 0
    report = evaluations[0].report
    print(report.format_table())
    missed = report.missed_episodes()
    if missed:
        print(f"\nmissed episodes ({len(missed)}): run [start-end] pattern xreps: note")
    for outcome in missed:
        ep = outcome.episode
        print(f"  {outcome.run_id} [{ep.start}-{ep.end}] {ep.pattern} x{ep.reps}: {ep.note}")
    alarms = report.false_alarms()
    if alarms:
        print(f"\nfalse alarms ({len(alarms)}): run [index] action pattern: reason")
    for alarm in alarms:
        d = alarm.detection
        print(f"  {alarm.run_id} [{d.index}] {d.action} {d.pattern}: {d.reason}")
    return 0


_EXCLUDED = ("rephrase",)  # semantic loops: also reported without them (no lexical rule can catch them)


def _sweep(args: argparse.Namespace, policy: Policy, runs: list[Run], labels: Any, live: bool) -> int:
    sweep = Sweep.parse(args.sweep)
    evaluations = [
        (value, evaluate_policy(changed, runs, labels, live=live)) for value, changed in sweep.policies(policy)
    ]
    points = [sweep_point(value, evaluation) for value, evaluation in evaluations]
    if args.loso:
        overall, held = leave_one_source_out(evaluations)
        if args.json:
            print(
                json.dumps({"sweep": args.sweep, "chosen": overall, "held_out": [h.to_json() for h in held]}, indent=1)
            )
        else:
            print(sweep_table(sweep, points))
            print()
            print(held_out_table(f"{sweep.detector}.{sweep.param}", overall, held))
        return 0
    if args.html:
        base = evaluate_policy(policy, runs, labels, live=live)
        _eval_html(args.html, base, runs, [(sweep, points)])
    if args.json:
        print(json.dumps({"sweep": args.sweep, "points": [p.to_json() for p in points]}, indent=1))
    else:
        print(sweep_table(sweep, points))
    return 0


def _eval_html(path: str, evaluation: Evaluation, runs: list[Run], sweeps: list[Any]) -> None:
    report = _html_report()
    for run, scanned in zip(runs, evaluation.runs, strict=True):
        report.add(run, scanned)
    for sweep, points in sweeps:
        report.add_sweep(
            f"{sweep.detector}.{sweep.param}",
            [(p.value, p.recall or 0.0, p.false_alarms or 0.0) for p in points],
        )
    report.write(path, title="loopwatch eval", preset=evaluation.policy.name)
    print(f"loopwatch: wrote {path}", file=sys.stderr)


# -- explain ------------------------------------------------------------------------------------------


def _explain(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    matches = []
    for run in read_runs(args.paths, format=args.format, on_error=errors):
        if run.id == args.run_id:
            matches = [run]
            break
        if run.id.endswith(args.run_id):
            matches.append(run)
    if len(matches) != 1:
        found = "no run" if not matches else f"{len(matches)} runs ({', '.join(r.id for r in matches[:5])})"
        print(f"loopwatch: {found} with id {args.run_id!r}", file=sys.stderr)
        return 2
    run = matches[0]
    if args.json:
        print(json.dumps(explanation_json(policy, run, index=args.index), indent=1, ensure_ascii=False, default=str))
    else:
        print(explain_run(policy, run, index=args.index))
    return 0


# -- sessions -----------------------------------------------------------------------------------------


def _sessions(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    from .guard import Guard
    from .stores import StoreError, store_from_url

    if args.clear and not args.swarm:
        raise ConfigError("--clear needs --swarm ID", field="clear")
    store = store_from_url(args.store)
    try:
        guard = Guard(policy=policy, store=store, on_store_error="raise", clock=None)
        if args.reset:
            guard.reset(args.reset)
            print(f"reset {args.reset}")
        elif args.forget:
            guard.forget(args.forget)
            print(f"forgot {args.forget}")
        elif args.swarm:
            return _swarm(guard, args)
        else:
            _list_sessions(guard, args.json)
        return 0
    except StoreError as exc:  # unreachable, locked, not a store: one line, not a traceback
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()


def _swarm(guard: Any, args: argparse.Namespace) -> int:
    if args.clear:
        guard.clear_swarm(args.swarm)
        print(f"cleared swarm {args.swarm}")
        return 0
    counts = guard.swarm_snapshot(args.swarm)["counts"]
    if args.json:
        print(json.dumps({"swarm": args.swarm, "counts": counts}, indent=1))
        return 0
    print(f"swarm {args.swarm}: {len(counts)} fingerprints")
    for fingerprint, (calls, workers, tool) in sorted(counts.items(), key=lambda kv: -kv[1][0])[:50]:
        print(f"  {calls:>5} calls  {len(workers):>3} workers  {tool}  #{fingerprint[:8]}")
    return 0


def _list_sessions(guard: Any, as_json: bool) -> None:
    from .stored import DamagedStateError

    rows: list[dict[str, Any]] = []
    for name in sorted(guard.sessions()):
        try:
            state = guard.snapshot(name)["state"]
        except DamagedStateError as exc:  # listed as such: --forget ID (or the next event, failing open) clears it
            rows.append({"session": name, "damaged": exc.reason})
            continue
        streaks = {p: ladder.get("emitted", 0) for p, ladder in (state.get("ladders") or {}).items()}
        last = state.get("last")
        rows.append(
            {
                "session": name,
                "events": state["index"],
                "stopped": state.get("stopped") is not None,
                "streaks": {p: level for p, level in streaks.items() if level},
                "last": dict(zip(("index", "action", "pattern", "level"), last, strict=True)) if last else None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{len(rows)} sessions")
    for row in rows:
        if "damaged" in row:
            print(f"  {row['session']}  DAMAGED: {row['damaged']} (loopwatch sessions --forget ID clears it)")
            continue
        last = row["last"]
        said = f"last {last['action']} {last['pattern']} L{last['level']} at {last['index']}" if last else "no verdict"
        open_streaks = ", ".join(f"{p} L{level}" for p, level in row["streaks"].items()) or "no streak"
        stopped = "  STOPPED" if row["stopped"] else ""
        print(f"  {row['session']}  {row['events']} events  {open_streaks}  {said}{stopped}")


_COMMANDS: dict[str, Callable[[argparse.Namespace, PolicySpec, Policy, _Errors], int]] = {
    "scan": _scan,
    "eval": _eval,
    "explain": _explain,
    "sessions": _sessions,
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
