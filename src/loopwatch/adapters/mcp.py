"""MCP servers over stdio: ``loopwatch mcp-proxy`` (or ``python -m loopwatch.adapters.mcp``).

    loopwatch mcp-proxy [--preset NAME] [--config FILE] [--store URL] [--session ID] [--audit FILE] -- SERVER COMMAND...

The proxy starts the MCP server ``SERVER COMMAND...`` as its child and stands between it and the MCP client
(Claude Code, Claude Desktop, an agent framework) on the stdio transport: newline-delimited JSON-RPC 2.0
messages. Everything passes through byte for byte (``initialize``, notifications, progress, cancellations,
pings, lists of tools, resources and prompts, requests from the server to the client such as sampling, roots
and elicitation, the client's answers to them, lines that are not JSON) except ``tools/call``:

- a ``tools/call`` request is ``ToolCall(name, arguments, id=ID)`` for the guard before it goes to the server
  (``ID``: the JSON-RPC id, with a prefix unique to the proxy process);
- the server's answer is ``ToolResult(TEXT, tool=name, is_error=result.isError, id=ID)``, ``TEXT`` being the
  text of the result's ``content`` (``structuredContent`` as JSON when there is no content); a JSON-RPC error
  answer is ``ToolResult(error.message, is_error=True)``. A retry carrying ``inputResponses`` /
  ``requestState`` (protocol 2026-07-28) continues the call it retries: it is not a new call; an
  ``input_required`` answer and a task handle (``{"task": ...}``, protocol 2025-11-25) are not results: a
  task's result is taken from the client's ``tasks/result`` request for it.

What the verdicts become (the server cannot stop the host, so a stop only refuses calls):

- ``block`` on a call: the call does not reach the server; the client gets, for that request, the result
  ``{"content": [{"type": "text", "text": MESSAGE}], "isError": true, "resultType": "complete"}`` and the
  model reads MESSAGE as the tool's answer;
- ``stop``: the call is refused the same way with the stop text (the verdict's message, then
  ``[loopwatch: LOOP_DETECTED (PATTERN)] ...``, or a limit's own status); the session stays stopped, so every
  further ``tools/call`` through the proxy is refused with that text, until the proxy ends (memory store) or
  ``loopwatch sessions --store URL --reset ID`` (a store that outlives it);
- ``nudge`` (on the call or on its result), and a ``block`` or ``stop`` on a result (the call already ran):
  the message is appended to the result as one more ``{"type": "text"}`` item of ``content``
  (``structuredContent`` and ``isError`` are kept), so the model reads it with the tool's answer. A message
  that cannot ride on its own result (the answer was a JSON-RPC error) goes on the next result.

Every verdict other than ``ok`` is a line on stderr (the MCP client's server log), and a record of the
``--audit`` JSONL file. A summary line (calls, refusals, nudges, malformed lines) is written when the proxy
ends.

Sessions: ``--session ID`` (default ``mcp-proxy``), in ``--store URL`` (default ``memory://``: the session
ends with the proxy; with ``sqlite:///PATH`` or ``redis://...`` it outlives the proxy and is shared by every
proxy given the same store and session). Policy: ``--preset NAME`` (default ``default``), ``--config FILE``
(a ``loopwatch.toml`` or ``pyproject.toml``).

Robustness:

- a line that is not JSON, not an object (or batch of objects), or not JSON-RPC is passed through unchanged
  (counted, and noted on stderr); a batch (a JSON array, protocol 2025-03-26) is judged item by item: refused
  calls are answered in a batch of their own and the rest goes on as a batch;
- the child's stderr is the proxy's stderr; the proxy exits with the child's exit code (``128 + N`` when a
  signal ``N`` ended it), 127 when the command cannot be found, 126 when it cannot be run, 2 on a bad option,
  preset, configuration or store;
- when the client closes the proxy's stdin, the child's stdin is closed; a child that does not exit within
  :data:`GRACE` seconds gets SIGTERM, then SIGKILL (the MCP stdio shutdown sequence). SIGTERM or SIGINT to the
  proxy is passed to the child;
- when the child dies (or closes its stdout), every request still waiting for it, and any that arrives
  afterwards, is answered with the JSON-RPC error ``-32000`` ("the MCP server exited ..."), then the proxy
  exits;
- the guard never breaks the relay: an internal or store error lets the call through unjudged (noted).

Standard library only; threads, one per direction.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import TYPE_CHECKING

from ._mcp_messages import _PREVIEW, DEFAULT_SESSION, SERVER_GONE, McpProxy, _note, refusal_text, result_text, stop_text
from ._mcp_messages import PREFIX as PREFIX
from ._mcp_relay import GRACE, run_proxy

if TYPE_CHECKING:
    import argparse

    from .._guard import Guard
    from ._mcp_relay import _Relay

__all__ = [
    "DEFAULT_SESSION",
    "GRACE",
    "SERVER_GONE",
    "McpProxy",
    "main",
    "refusal_text",
    "result_text",
    "run_proxy",
    "stop_text",
]


# -- command line -------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    import argparse

    from .._cli_options import add_audit_option, add_policy_options, add_store_option

    parser = argparse.ArgumentParser(
        prog="loopwatch mcp-proxy",
        description="Front an MCP server (stdio): refuse looping tool calls, add nudges to tool results.",
        usage="%(prog)s [--preset NAME] [--config FILE] [--store URL] [--session ID] [--audit FILE] "
        "-- SERVER COMMAND...",
    )
    add_policy_options(parser)
    add_store_option(parser, help="session store (default: memory://, gone with the proxy)")
    parser.add_argument("--session", metavar="ID", default=DEFAULT_SESSION, help="the guard's session id")
    add_audit_option(parser)
    parser.add_argument("command", nargs="...", metavar="SERVER COMMAND", help="the MCP server to run")
    return parser


def _build_guard(args: argparse.Namespace) -> Guard:
    from .._guard import Guard
    from .._policy_spec import PolicySpec

    policy = PolicySpec.found(args.preset, args.config, args.no_config).build()
    sinks = []
    if args.audit:
        from ..sinks import JsonlAuditSink

        sinks.append(JsonlAuditSink(args.audit))
    return Guard(policy=policy, store=args.store or None, sinks=sinks, max_sessions=64)


def main(argv: list[str] | None = None) -> int:
    """``loopwatch mcp-proxy [options] -- SERVER COMMAND...`` (``argv``: the arguments after ``mcp-proxy``)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    head, command = arguments, []
    if "--" in arguments:
        cut = arguments.index("--")
        head, command = arguments[:cut], arguments[cut + 1 :]
    parser = _parser()
    try:
        args = parser.parse_args(head)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    command = [*args.command, *command]
    if not command:
        parser.print_usage(sys.stderr)
        _note("give the MCP server's command after --")
        return 2
    try:
        guard = _build_guard(args)
    except Exception as exc:  # ConfigError, a bad store URL, an unwritable audit file: one clear line
        _note(str(exc))
        return 2
    proxy = McpProxy(guard, args.session)
    where = args.store or "memory://"
    shown = " ".join(command)
    shown = shown if len(shown) <= _PREVIEW else shown[: _PREVIEW - 1] + "…"
    _note(f"guarding {shown} (preset {guard.policy.name}, session {args.session}, store {where})")

    def handle(relay: _Relay) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for name in ("SIGTERM", "SIGINT", "SIGHUP"):
            number = getattr(signal, name, None)
            if number is not None:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(number, lambda signum, frame: relay.terminate())

    try:
        return run_proxy(command, proxy, on_start=handle)
    finally:
        for sink in guard.sinks:
            with contextlib.suppress(Exception):
                sink.close()
        if guard.store is not None:
            with contextlib.suppress(Exception):
                guard.store.close()


if __name__ == "__main__":
    sys.exit(main())
