"""The ``loopwatch`` command line's parser and commands. It drives; the engine, the rules and the guard never
import it.

    loopwatch scan PATH... [--format NAME] [--preset NAME] [--config FILE] [--json] [-j N] [--html FILE]
                           [--fail-on ACTION]
    loopwatch eval PATH... --labels FILE [--preset NAME] [--compare NAME...] [--sweep DET.PARAM=A:B:STEP]
                           [--loso] [--rules] [--html FILE]
    loopwatch explain PATH... [--id RUN] [--index N]
    loopwatch sessions --store URL [--reset ID | --forget ID | --swarm ID [--clear]] [--json]
    loopwatch hook claude-code [--install [--project|--user|--local] | --uninstall]   (a Claude Code hook)
    loopwatch mcp-proxy [--preset NAME] [--store URL] [--session ID] -- SERVER COMMAND...   (an MCP server's guard)
    loopwatch serve [--store URL] [--workers N] [--token-file FILE] [--host H] [--port P]   (the HTTP service)

Formats: loopwatch's own ``events`` and ``trajectory`` (docs/formats.md), and foreign traces, detected from each
file's first record unless ``--format`` forces one. The configuration is ``--config FILE``, else the nearest
``loopwatch.toml`` (or ``pyproject.toml`` with ``[tool.loopwatch]``) in the working directory or its parents,
unless ``--no-config``.

Exit status: 0 when the command ran (loops or not); 1 when ``scan --fail-on ACTION`` found a verdict at that
level or above; 2 on unusable input or configuration (the message names the file and line, or the setting);
141 when the reader of the output went away (``| head``), quietly.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TextIO

from .. import __version__
from .._cli_options import add_json_option, add_policy_options, add_store_option
from ..errors import ConfigError, InputError, LoopwatchError
from ..policy import Policy
from ..policy_spec import PolicySpec
from ..readers import FORMATS, Run, expand_paths, read_file, read_meter
from ..verdict import SEVERITY
from ._batch import Scanned, keep_all, scan_files
from ._evaluation import (
    Evaluation,
    Sweep,
    compare_json,
    compare_table,
    evaluate_policy,
    held_out_table,
    leave_one_source_out,
    rule_share_table,
    rule_shares,
    sweep_point,
    sweep_table,
)
from ._explain import explain_run, explanation_json
from ._labelfile import read_labels
from ._metrics import Label, LabelError
from ._progress import Progress, progress_bar
from ._summary import RunDigest, ScanTotals, episodes

FAIL_ON: tuple[str, ...] = ("nudge", "block", "stop")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description="Catch LLM agents stuck in loops.")
    parser.add_argument("--version", action="version", version=f"loopwatch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser("scan", help="find loops in recorded runs (event streams, trajectories, agent traces)")
    _inputs(scan)
    add_json_option(scan, "one JSON object per run (the scan output format, docs/formats.md)")
    scan.add_argument(
        "--top", type=int, default=10, metavar="N", help="how many of the worst runs to show (default: 10)"
    )
    scan.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="scan with N processes (default: 1)")
    scan.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report to FILE")
    scan.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default=None,
        metavar="ACTION",
        help="exit with status 1 when a run gets a verdict of ACTION or stronger: nudge, block or stop (for CI)",
    )
    scan.add_argument(
        "--currency", default="USD", metavar="CODE", help="the currency of the runs' costs (default: USD)"
    )
    _no_progress(scan)

    evaluate = commands.add_parser("eval", help="measure detection against labels (docs/labels.md)")
    _inputs(evaluate)
    evaluate.add_argument(
        "--labels",
        required=True,
        action="append",
        metavar="FILE",
        help="labels, one JSON object per line (repeat the option to read several files)",
    )
    add_json_option(evaluate, "the metrics as JSON")
    evaluate.add_argument("--compare", nargs="+", metavar="NAME", help="presets to put side by side")
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
    evaluate.add_argument(
        "--html", metavar="FILE", help="also write an HTML evaluation report to FILE (with a sweep: its chart)"
    )
    _no_progress(evaluate)

    explain = commands.add_parser("explain", help="show one run's steps around each detection, with the evidence")
    _inputs(explain)
    explain.add_argument(
        "--id",
        dest="run_id",
        default=None,
        metavar="RUN",
        help="the run's id, or a unique end of it (not needed when the input holds one run)",
    )
    explain.add_argument("--index", type=int, default=None, metavar="N", help="only the detection at index N")
    add_json_option(explain)
    _no_progress(explain)
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
    add_store_option(sessions, required=True, help="the store: sqlite:///path.db, redis://host:6379/0...")
    add_policy_options(sessions)
    sessions.add_argument("--reset", metavar="ID", help="reset one session's loop state (limits keep counting)")
    sessions.add_argument("--forget", metavar="ID", help="drop everything about one session")
    sessions.add_argument("--swarm", metavar="ID", help="show a swarm's shared counts (with --clear: clear them)")
    sessions.add_argument("--clear", action="store_true", help="with --swarm: clear the swarm's counts")
    add_json_option(sessions)
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
    add_policy_options(command)


def _no_progress(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--no-progress", action="store_true", help="no progress bar (default: one on a terminal, on stderr)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["hook"]:  # the hook parses its own options (the console script gets here sooner)
        from ..adapters.claude_code import main as hook_main

        return hook_main(arguments[1:])
    if arguments[:1] == ["mcp-proxy"]:  # the proxy parses its own options (its command follows --)
        from ..adapters.mcp import main as mcp_main

        return mcp_main(arguments[1:])
    if arguments[:1] == ["serve"]:  # the service parses its own options
        from ..server.run import main as serve_main

        return serve_main(arguments[1:])
    args = _parser().parse_args(arguments)
    try:
        return _run(args)
    except BrokenPipeError:  # the reader went away (| head): end quietly, as a program killed by SIGPIPE does
        _silence_stdout()
        return 141


def _run(args: argparse.Namespace) -> int:
    try:
        spec = PolicySpec.found(args.preset, args.config, args.no_config)
        policy = spec.build()
    except (LoopwatchError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    errors = _Errors()
    try:
        command: Callable[[argparse.Namespace, PolicySpec, Policy, _Errors], int] = _COMMANDS[args.command]
        code = command(args, spec, policy, errors)
    except BrokenPipeError:
        raise
    except (ConfigError, LabelError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    if errors.seen:
        return 2
    return code


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output)
        pass


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
            on_file=lambda path: bar.describe(_short(path)),
            progress=bar,
        )
        for item in scanned:
            if args.json:
                out.write(_json_line(item.report.to_json()))
            totals.add(item.digest)
            if report is not None:
                report.add_digest(item.digest, item.run)
    took = time.perf_counter() - began
    about = _about(policy, spec, took)
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


_LINE_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters JSON leaves raw that line readers (``str.splitlines``) take for line ends: written escaped."""


def _json_line(data: object) -> str:
    """One JSON Lines record: non-ASCII text kept readable, every character a line reader splits on escaped."""
    return json.dumps(data, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


def _short(path: str, width: int = 50) -> str:
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def embedder_name(policy: Policy) -> str:
    """Which embedding model the policy's rules use, or how they do without one."""
    for detector in policy.detectors:
        embedder = detector._params().get("embedder")  # what the rule's repr shows
        if embedder is not None:
            return repr(embedder)
    if any(detector.name == "rephrase" for detector in policy.detectors):
        return "none (reworded intents compared by their words)"
    return "none"


def _about(policy: Policy, spec: PolicySpec, took: float) -> list[tuple[str, str]]:
    """What ran: the preset, the embedder, the configuration file and how long it took."""
    return [
        ("preset", policy.name),
        ("embedder", embedder_name(policy)),
        ("config", spec.config or "none"),
        ("took", _duration(took)),
    ]


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


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


# -- eval ---------------------------------------------------------------------------------------------


def _eval(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    began = time.perf_counter()
    labels: dict[str, Label] = {}
    for path in args.labels:
        more = read_labels(path)
        twice = sorted(set(labels) & set(more))
        if twice:
            raise LabelError(f"{path}: run {twice[0]!r} is labelled in another labels file too", run_id=twice[0])
        labels.update(more)
    if args.loso and not args.sweep:
        raise ConfigError("--loso needs --sweep DETECTOR.PARAM=A:B:STEP", field="loso")
    sweep = Sweep.parse(args.sweep) if args.sweep else None
    names = [policy.name, *[p for p in args.compare or () if p != policy.name]]
    others = {name: PolicySpec(name).build() for name in names[1:]}  # an unknown preset fails before reading
    runs, found = _labelled_runs(args, labels, errors)
    if not runs:
        print(f"loopwatch: {_no_match_hint(found, labels)}", file=sys.stderr)
        return 2
    header = f"{len(runs)} of {len(labels)} labelled runs found"
    if len(runs) < len(labels):
        missing = [run_id for run_id in labels if run_id not in found.matched][:3]
        print(
            f"loopwatch: {header}; labels without a run: {', '.join(repr(m) for m in missing)}"
            + (" ..." if len(labels) - len(runs) > len(missing) else ""),
            file=sys.stderr,
        )
    live = not args.untruncated
    passes = _passes(args, sweep, policy, len(names))
    with progress_bar("judging", "runs", enabled=not args.no_progress, total=len(runs) * passes) as bar:
        counted = _Counted(runs, bar)
        if sweep is not None:
            return _sweep(args, sweep, policy, counted, labels, live, header)
        if args.rules:
            evaluation = evaluate_policy(policy, counted, labels, live=live)
            shares = rule_shares(evaluation, counted, labels, live=live)
            if args.json:
                print(json.dumps([share.to_json() for share in shares], indent=1))
            else:
                print(f"{header}, preset {policy.name}")
                print(rule_share_table(shares))
            return 0
        evaluations = [
            evaluate_policy(others.get(name, policy), counted, labels, live=live, exclude_patterns=_EXCLUDED)
            for name in names
        ]
    about = _about(policy, spec, time.perf_counter() - began)
    if args.html:
        _eval_html(args.html, evaluations[0], runs, labels, [], about)
    if args.json:
        data = compare_json(evaluations) if len(evaluations) > 1 else evaluations[0].report.to_json()
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    print(f"{header} ({'; '.join(f'{k} {v}' for k, v in about)})")
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


class _Found:
    """What reading the input for ``eval`` found: the runs read, and one id of a run without a label."""

    def __init__(self) -> None:
        self.read = 0
        self.matched: set[str] = set()
        self.unmatched: str | None = None


def _labelled_runs(args: argparse.Namespace, labels: dict[str, Label], errors: _Errors) -> tuple[list[Run], _Found]:
    """The input's runs that have a label, in input order, read with a progress bar over the files' bytes."""
    found = _Found()
    runs: list[Run] = []
    files = expand_paths(args.paths, errors)
    total = None if "-" in files else sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    with (
        progress_bar("reading", "bytes", enabled=not args.no_progress, total=total) as bar,
        read_meter(bar.advance),
    ):
        for path in files:
            bar.describe(_short(path))
            for run in read_file(path, format=args.format, on_error=errors):
                found.read += 1
                if run.id in labels and run.id not in found.matched:
                    found.matched.add(run.id)
                    runs.append(run)
                elif found.unmatched is None and run.id not in labels:
                    found.unmatched = run.id
    return runs, found


def _no_match_hint(found: _Found, labels: dict[str, Label]) -> str:
    """Why ``eval`` has nothing to score, with an id from each side to compare."""
    label_id = next(iter(labels), None)
    if not labels:
        return "the labels file holds no label"
    if found.read == 0:
        return f"no run was read from the input, so none of the {len(labels)} labelled runs was found"
    labelled = "the labelled run is not" if len(labels) == 1 else f"none of the {len(labels)} labelled runs is"
    return (
        f"{labelled} in the input ({found.read} runs read): the input's run ids look "
        f"like {found.unmatched!r}, the labels' like {label_id!r}; a label applies to the run whose id is the same "
        "(loopwatch scan PATH --json prints the input's ids)"
    )


def _passes(args: argparse.Namespace, sweep: Sweep | None, policy: Policy, presets: int) -> int:
    """How many times ``eval`` judges every labelled run (the progress bar's total is runs times this)."""
    if sweep is not None:
        return len(sweep.values) + (1 if args.html and not args.loso else 0)
    if args.rules:
        return 1 + len(policy.detectors)
    return presets


class _Counted(Sequence[Run]):
    """The labelled runs, advancing a progress bar by one each time a run is handed out in order (a scan)."""

    def __init__(self, runs: list[Run], bar: Progress) -> None:
        self._runs = runs
        self._bar = bar

    def __len__(self) -> int:
        return len(self._runs)

    def __getitem__(self, index: Any) -> Any:
        return self._runs[index]

    def __iter__(self) -> Iterator[Run]:
        for run in self._runs:
            yield run
            self._bar.advance()


def _sweep(
    args: argparse.Namespace,
    sweep: Sweep,
    policy: Policy,
    runs: _Counted,
    labels: dict[str, Label],
    live: bool,
    header: str,
) -> int:
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
        _eval_html(args.html, base, list(runs), labels, [(sweep, points)], None)
    if args.json:
        print(json.dumps({"sweep": args.sweep, "points": [p.to_json() for p in points]}, indent=1))
    else:
        print(sweep_table(sweep, points))
    return 0


def _eval_html(
    path: str,
    evaluation: Evaluation,
    runs: Sequence[Run],
    labels: dict[str, Label],
    sweeps: list[Any],
    about: list[tuple[str, str]] | None,
) -> None:
    from ._eval_report import write_eval_report

    write_eval_report(path, evaluation, runs, labels, sweeps=sweeps, about=about)
    print(f"loopwatch: wrote {path}", file=sys.stderr)


# -- explain ------------------------------------------------------------------------------------------


def _explain(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    files = expand_paths(args.paths, errors)
    total = None if "-" in files else sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    with (
        progress_bar("reading", "bytes", enabled=not args.no_progress, total=total) as bar,
        read_meter(bar.advance),
    ):
        runs = (run for path in files for run in read_file(path, format=args.format, on_error=errors))
        run = _the_run(args.run_id, runs)
    if run is None:
        return 2
    if args.json:
        print(json.dumps(explanation_json(policy, run, index=args.index), indent=1, ensure_ascii=False, default=str))
    else:
        print(explain_run(policy, run, index=args.index))
    return 0


def _the_run(run_id: str | None, runs: Iterator[Run]) -> Run | None:
    """The run ``explain`` is about: the one with that id (or a unique end of it), or the input's only run; None
    (said on stderr) when there is no such run or several."""
    if run_id is None:
        first = list(itertools.islice(runs, 6))
        if len(first) == 1:
            return first[0]
        what = "no run" if not first else f"{'more than 5' if len(first) > 5 else len(first)} runs"
        shown = f" ({', '.join(repr(r.id) for r in first[:5])})" if first else ""
        print(f"loopwatch: the input holds {what}{shown}: name one with --id RUN", file=sys.stderr)
        return None
    matches: list[Run] = []
    for candidate in runs:
        if candidate.id == run_id:
            return candidate
        if candidate.id.endswith(run_id):
            matches.append(candidate)
    if len(matches) == 1:
        return matches[0]
    found = "no run" if not matches else f"{len(matches)} runs ({', '.join(r.id for r in matches[:5])})"
    print(f"loopwatch: {found} with id {run_id!r}", file=sys.stderr)
    return None


# -- sessions -----------------------------------------------------------------------------------------


def _sessions(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: _Errors) -> int:
    from ..guard import Guard
    from ..stores import StoreError, store_from_url

    if args.clear and not args.swarm:
        raise ConfigError("--clear needs --swarm ID", field="clear")
    store = store_from_url(args.store)
    try:
        guard = Guard(policy=policy, store=store, on_store_error="raise", clock=None)
        target = args.reset or args.forget
        if target and target not in guard.sessions():
            print(f"loopwatch: {_unknown_session(target, guard.sessions(), args.store)}", file=sys.stderr)
            return 2
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


def _unknown_session(session: str, known: Sequence[str], store: str) -> str:
    import difflib

    close = difflib.get_close_matches(session, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no session {session!r} in {store} ({len(known)} sessions{hint}; loopwatch sessions --store URL lists them)"


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
    from ..stored import DamagedStateError

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
