"""The command line of ``loopwatch hook claude-code`` beyond a hook run: the options read by argparse
(``--install``, ``--uninstall``, ``--serve``, ``--status``, ``--stop``, and a hook run given options the fast reader
of :func:`loopwatch.adapters.claude_code.main` does not take). The hook command ``--install`` writes never loads
it, nor argparse.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

from ._claude_code_settings import _settings_command
from .claude_code import HOOK_PRESET, _guard, _note, _seconds

if TYPE_CHECKING:
    import argparse


def parsed_command(args_list: list[str], out: IO[str]) -> int | dict[str, Any]:
    """``loopwatch hook claude-code ARGS`` read by argparse: the exit code of what it ran (``--install``,
    ``--uninstall``, ``--serve``, ``--status``, ``--stop``, or bad arguments), or the options of a hook run."""
    try:
        args = _parser().parse_args(args_list)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
        if "--install" in args_list or "--uninstall" in args_list or code == 0:
            return code
        _note("bad hook arguments (see above); nothing judged")
        return 0  # a hook's exit 2 would block the tool call
    if args.install or args.uninstall:
        return _settings_command(args, out)
    if args.serve:
        return _serve(args)
    if args.status or args.stop:
        from .claude_code_daemon import _status_command

        return _status_command(out, stop=args.stop)
    return {
        "store": args.store,
        "preset": args.preset,
        "config": args.config,
        "fail_closed": args.fail_closed,
        "no_config": args.no_config,
    }


def _parser() -> argparse.ArgumentParser:
    import argparse

    from .._cli_options import add_policy_options, add_store_option

    parser = argparse.ArgumentParser(
        prog="loopwatch hook",
        description="Claude Code hook: judge one hook event read on stdin, or install the hooks in settings.json.",
    )
    parser.add_argument("target", nargs="?", default="claude-code", choices=("claude-code",), help="the agent")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--install", action="store_true", help="add loopwatch's hooks to a settings.json")
    action.add_argument("--uninstall", action="store_true", help="remove loopwatch's hooks from a settings.json")
    action.add_argument("--serve", action="store_true", help="run the hook as a local HTTP service (http hooks)")
    action.add_argument("--status", action="store_true", help="show the local hook servers the hook started")
    action.add_argument("--stop", action="store_true", help="stop the local hook servers (the hook starts them again)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--project", dest="scope", action="store_const", const="project", help="./.claude/settings.json (default)"
    )
    scope.add_argument("--user", dest="scope", action="store_const", const="user", help="~/.claude/settings.json")
    scope.add_argument(
        "--local", dest="scope", action="store_const", const="local", help="./.claude/settings.local.json"
    )
    add_store_option(parser, help="session store (default: $LOOPWATCH_STORE, else a SQLite file in the cache)")
    add_policy_options(parser, default_preset=HOOK_PRESET)
    parser.add_argument("--fail-closed", action="store_true", help="deny tool calls when the guard cannot judge")
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="HOST", help="--serve: the address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=7349, metavar="PORT", help="--serve: the port (default 7349)")
    service = parser.add_mutually_exclusive_group()
    service.add_argument("--http", metavar="URL", help="--install: http handlers posting to a --serve service")
    service.add_argument(
        "--relay",
        metavar="URL",
        help="--install: command hooks that hand each event to a --serve service (judged in the hook's own process "
        "when the service is down)",
    )
    service.add_argument(
        "--in-process",
        action="store_true",
        help="--install: command hooks that judge every event in their own process (no local hook server)",
    )
    parser.add_argument(
        "--idle-exit",
        type=_seconds,
        metavar="SECONDS",
        help="--install: the local hook server exits after this long without an event (default 1800)",
    )
    return parser


def _serve(args: argparse.Namespace) -> int:
    from .claude_code_server import serve

    try:
        guard = _guard(args.store, args.preset, args.config, args.fail_closed, args.no_config)
    except Exception as exc:  # a bad store, preset or configuration: one clear line
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    return serve(guard, args.host, args.port, fail_closed=args.fail_closed)
