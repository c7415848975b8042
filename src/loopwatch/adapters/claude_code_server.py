"""The Claude Code hook as a long-lived local HTTP service, for Claude Code's ``http`` hook handlers.

    loopwatch hook claude-code --serve [--host 127.0.0.1] [--port 7349] [--store URL] [--preset NAME]
    loopwatch hook claude-code --install --http http://127.0.0.1:7349/loopwatch/claude-code

A command hook starts a Python process per event (about 150 ms here, most of it importing); an ``http`` hook
POSTs the same JSON to a running service and reads the same JSON back, so one hook costs a local round trip
and the decision (a few milliseconds). The service judges with :func:`loopwatch.adapters.claude_code.handle`,
in the same session store as the command hook (SQLite in the user's cache directory unless ``--store``), so
the two can be mixed and several services can share one store.

Failing open: malformed input, a request to another path, or any error while judging gets ``200 {}`` (Claude
Code goes on) and a line on stderr; with ``--fail-closed`` a ``PreToolUse`` that cannot be judged is denied.
When the service is down, Claude Code treats the failed request as a non-blocking hook error and goes on.
It listens on the loopback interface unless ``--host`` says otherwise: the hook inputs hold your prompts.

``loopwatch serve`` (the ``server`` extra) answers on the same path with the same answers (:func:`hook_answer`),
next to its JSON API and dashboard, with bearer tokens: point ``--install --http`` at it instead.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final

from .claude_code import SERVICE_PATH, answer, decode_input

if TYPE_CHECKING:
    from .._guard import Guard

__all__ = ["DEFAULT_PORT", "PATH", "HookServer", "hook_answer", "make_server", "serve"]

PATH: Final = SERVICE_PATH
"""The URL path the service answers on (``--install --http`` URLs end with it)."""
DEFAULT_PORT: Final = 7349
MAX_BODY: Final = 16 * 1024 * 1024
"""Bytes of one hook input read at most (a bigger one is not judged)."""


def hook_answer(guard: Guard, body: bytes, fail_closed: bool = False) -> dict[str, Any]:
    """The hook output for one request body (``{}`` when there is nothing to say or nothing was judged): the
    command hook's, from :func:`~loopwatch.adapters.claude_code.answer`."""
    payload = decode_input(body)
    if payload is None:
        return {}
    return answer(payload, lambda: guard, fail_closed=fail_closed) or {}


class HookServer(ThreadingHTTPServer):
    """An HTTP server holding one guard; each request is one hook event."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], guard: Guard, *, fail_closed: bool = False) -> None:
        super().__init__(address, _Handler)
        self.guard = guard
        self.fail_closed = fail_closed
        self.handled = 0
        self._count = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[0], self.server_address[1]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}{PATH}"

    def answer(self, body: bytes) -> dict[str, Any]:
        """The hook output for one request body (:func:`hook_answer`)."""
        with self._count:
            self.handled += 1
        return hook_answer(self.guard, body, self.fail_closed)


class _Handler(BaseHTTPRequestHandler):
    server: HookServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.split("?", 1)[0] != PATH or not 0 <= length <= MAX_BODY:
            self._reply(404 if self.path.split("?", 1)[0] != PATH else 413, {})
            if length <= MAX_BODY:
                self.rfile.read(length)
            return
        self._reply(200, self.server.answer(self.rfile.read(length)))

    def _reply(self, status: int, data: dict[str, Any]) -> None:
        body = json.dumps(data, ensure_ascii=True).encode("ascii")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per tool call on stderr would be noise


def make_server(guard: Guard, host: str = "127.0.0.1", port: int = DEFAULT_PORT, **options: Any) -> HookServer:
    """A :class:`HookServer` bound to ``host:port`` (``port=0``: any free port); call ``serve_forever()``."""
    return HookServer((host, port), guard, **options)


def serve(guard: Guard, host: str, port: int, *, fail_closed: bool = False) -> int:
    """Run the service until interrupted; 0 on Ctrl-C, 2 when the address cannot be bound."""
    try:
        server = make_server(guard, host, port, fail_closed=fail_closed)
    except OSError as exc:
        print(f"loopwatch: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 2
    print(f"loopwatch: Claude Code hook service on {server.url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
