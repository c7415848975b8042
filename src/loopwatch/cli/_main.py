"""The ``loopwatch`` command line's parser and commands. It drives; the engine, the rules and the guard never
import it.

    loopwatch scan PATH... [--format NAME] [--preset NAME] [--config FILE] [--json] [-j N] [--html FILE]
                           [--fail-on ACTION]
    loopwatch eval PATH... --labels FILE [--preset NAME] [--compare NAME...] [--sweep DET.PARAM=A:B:STEP]
                           [--loso] [--rules] [--html FILE]
    loopwatch explain PATH... [--id RUN] [--index N]
    loopwatch sessions --store URL [--reset ID | --forget ID | --swarm ID [--clear]] [--json]
    loopwatch hook claude-code [--install [--project|--user|--local] | --uninstall | --status | --stop]
                                                   (a Claude Code hook and its local server)
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
import importlib
import os
import sys
from collections.abc import Sequence

from .. import __version__
from .._cli_options import add_json_option, add_policy_options, add_store_option
from .._policy_spec import PolicySpec
from ..errors import ConfigError, LoopwatchError
from ..readers import FORMATS
from ._common import FAIL_ON, Command, InputErrors
from ._eval_inputs import LabelError


def version_line() -> str:
    """``loopwatch VERSION (...)``: and which compiled parts run here (the text kernels; the engine, the rules and the
    step features, which mypyc compiles), or that it all runs as pure Python."""
    from .. import _native
    from ..core import _kernels

    parts = [
        name
        for name, on in (("text kernels", _kernels.COMPILED), ("engine, rules and step features", _native.compiled()))
        if on
    ]
    return f"loopwatch {__version__} ({'compiled: ' + ', '.join(parts) if parts else 'pure Python'})"


class _Version(argparse.Action):
    """``--version``: the line of :func:`version_line`, worked out only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_line())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description="Catch LLM agents stuck in loops.")
    parser.add_argument("--version", action=_Version, help="show the version and whether its compiled parts run")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser("scan", help="find loops in recorded runs (event streams, trajectories, agent traces)")
    _inputs(scan)
    add_json_option(scan, "one JSON object per run (the scan output format, docs/formats.md)")
    scan.add_argument(
        "--top", type=int, default=10, metavar="N", help="how many of the worst runs to show (default: 10)"
    )
    scan.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="scan with N processes (default: one per CPU for an input of at least 4 MB, else 1)",
    )
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
        help="Claude Code hook: loopwatch hook claude-code [--install [--project|--user|--local] | --uninstall | "
        "--status | --stop] [--store URL] [--preset NAME] [--config FILE] [--fail-closed]",
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
        from ..server._run import main as serve_main

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
    errors = InputErrors()
    try:
        module, name = _COMMANDS[args.command]  # imported for the command run: a scan never loads eval's modules
        command: Command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
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


_COMMANDS: dict[str, tuple[str, str]] = {
    "scan": ("_scan_command", "scan"),
    "eval": ("_eval_command", "evaluate"),
    "explain": ("_explain_command", "explain"),
    "sessions": ("_sessions_command", "sessions"),
}
"""Each command's module and function."""
