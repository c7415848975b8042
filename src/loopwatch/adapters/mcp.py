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
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Final

from ..events import Event, ToolCall, ToolResult
from ..verdict import LOOP_DETECTED, Verdict

if TYPE_CHECKING:
    import argparse

    from ..guard import Guard

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

DEFAULT_SESSION: Final = "mcp-proxy"
GRACE: Final = 5.0
"""Seconds the child has to exit after its stdin closes (then SIGTERM, and as long again before SIGKILL)."""
SERVER_GONE: Final = -32000
"""The JSON-RPC error code of the requests the server left unanswered when it exited."""
PREFIX: Final = "loopwatch mcp-proxy"
_CHUNK: Final = 65536
_PREVIEW: Final = 120
_NOTED_MALFORMED: Final = 20  # malformed lines noted on stderr one by one; the rest only counted
_OUR_METHODS: Final = frozenset({"tools/call", "tasks/result"})

Key = tuple[str, Any]


def _key(message_id: object) -> Key | None:
    """A hashable key for a JSON-RPC id (``1`` and ``"1"`` differ); None for ids that cannot be one."""
    if isinstance(message_id, bool) or not isinstance(message_id, (str, int, float)):
        return None
    return (type(message_id).__name__, message_id)


def _note(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed: nothing more to do
        print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


def _compact(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _preview(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


# -- verdicts -> text ---------------------------------------------------------------------------------


def stop_text(verdict: Verdict) -> str:
    """The result text of a call refused by a stop: the message for the model, then the status."""
    status = verdict.status or LOOP_DETECTED
    pattern = f" ({verdict.pattern})" if verdict.pattern else ""
    message = verdict.message or verdict.reason or "This run is stuck in a loop."
    return (
        f"{message}\n[loopwatch: {status}{pattern}] Every further tool call through this MCP server will be "
        "refused: stop calling tools and report to the user."
    )


def refusal_text(verdict: Verdict) -> str:
    """The result text of a call the guard refused (``block`` or ``stop``)."""
    if verdict.action == "stop":
        return stop_text(verdict)
    return verdict.message or verdict.reason or f"loopwatch refused this call ({verdict.pattern or 'loop'})."


def result_text(result: Mapping[str, Any]) -> str:
    """A ``CallToolResult`` as the text the guard compares: the text of its content items (other items as
    compact JSON), or its ``structuredContent`` as JSON when it has no content."""
    content = result.get("content")
    parts: list[str] = []
    if isinstance(content, list):
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, Mapping) and isinstance(item.get("resource"), Mapping):
                resource = item["resource"]
                text = resource.get("text")
                parts.append(text if isinstance(text, str) else _compact(resource))
            else:
                parts.append(_compact(item))
    if not parts and result.get("structuredContent") is not None:
        return _compact(result["structuredContent"])
    return "\n".join(parts)


# -- the message logic --------------------------------------------------------------------------------


@dataclass
class _Waiting:
    """A client request forwarded to the server and not answered yet."""

    method: str
    tool: str | None = None  # a judged tools/call (or the tasks/result of one): its result is observed
    call_id: str | None = None
    nudges: list[str] = field(default_factory=list)


class McpProxy:
    """What the proxy does with each line, in each direction; no processes (:func:`run_proxy` runs them).

    :meth:`from_client` takes one line the client wrote and says what goes to the server and what goes
    straight back to the client; :meth:`from_server` takes one line of the server and gives the line the client
    gets; :meth:`server_gone` answers the requests the server will never answer. Safe to call from one thread
    per direction.
    """

    def __init__(
        self,
        guard: Guard,
        session: str = DEFAULT_SESSION,
        *,
        swarm: str | None = None,
        note: Callable[[str], None] = _note,
    ) -> None:
        self.guard = guard
        self.session = session
        self.swarm = swarm
        self.note = note
        self.stats = {"calls": 0, "refused": 0, "nudged": 0, "malformed": 0, "unjudged": 0, "server_gone": 0}
        self._tag = secrets.token_hex(3)
        self._waiting: dict[Key, _Waiting] = {}
        self._tasks: dict[str, _Waiting] = {}  # task id -> the call that started it (protocol 2025-11-25)
        self._carried: list[str] = []  # messages waiting for a result to ride on
        self._gone: str | None = None
        self._lock = threading.Lock()

    # -- client -> server -----------------------------------------------------------------------------

    def from_client(self, line: bytes) -> tuple[bytes | None, bytes | None]:
        """``(to the server, to the client)`` for one line from the client (each None when nothing goes)."""
        parsed = self._parse(line, "client")
        if parsed is None:
            return line, None
        if isinstance(parsed, list):
            return self._client_batch(line, parsed)
        forward, answer = self._client_message(parsed)
        return (line if forward else None), (_line(answer) if answer is not None else None)

    def _client_batch(self, line: bytes, batch: list[Any]) -> tuple[bytes | None, bytes | None]:
        forwarded: list[Any] = []
        answers: list[dict[str, Any]] = []
        for item in batch:
            forward, answer = self._client_message(item) if isinstance(item, dict) else (True, None)
            if forward:
                forwarded.append(item)
            if answer is not None:
                answers.append(answer)
        if not answers:
            return line, None
        out = _line(forwarded, ending=_ending(line)) if forwarded else None
        return out, _line(answers)

    def _client_message(self, message: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        """Whether to forward ``message`` to the server, and the answer to send the client instead (or too)."""
        method = message.get("method")
        if not isinstance(method, str):
            return True, None  # the client's answer to a server request, or not JSON-RPC: as it is
        key = _key(message.get("id")) if "id" in message else None
        if key is None:
            if method == "notifications/cancelled":
                self._cancelled(message.get("params"))
            return True, None
        with self._lock:
            gone = self._gone
        if gone is not None:
            return False, _error(message["id"], gone)
        waiting = _Waiting(method)
        params = message.get("params")
        if method in _OUR_METHODS and isinstance(params, Mapping):
            refused = self._judge(method, message["id"], params, waiting)
            if refused is not None:
                return False, refused
        with self._lock:
            if self._gone is not None:
                return False, _error(message["id"], self._gone)
            self._waiting[key] = waiting
        return True, None

    def _judge(
        self, method: str, request_id: object, params: Mapping[str, Any], waiting: _Waiting
    ) -> dict[str, Any] | None:
        """Fill ``waiting`` for a ``tools/call`` (or ``tasks/result``); the refusal to answer, if refused."""
        if method == "tasks/result":
            task = params.get("taskId")
            with self._lock:
                started = self._tasks.pop(task, None) if isinstance(task, str) else None
            if started is not None:
                waiting.tool, waiting.call_id, waiting.nudges = started.tool, started.call_id, started.nudges
            return None
        name = params.get("name")
        if not isinstance(name, str) or not name:
            return None  # the server answers the malformed call
        waiting.tool = name
        waiting.call_id = f"{self._tag}-{request_id}"
        if params.get("inputResponses") is not None or params.get("requestState") is not None:
            return None  # the retry of a call already judged
        args = params.get("arguments")
        if args is None:
            args = {}
        elif not isinstance(args, Mapping):
            args = {"input": args}
        self.stats["calls"] += 1
        verdict = self._observe(ToolCall(name, args, id=waiting.call_id))
        if verdict.action in ("block", "stop"):
            self.stats["refused"] += 1
            self._log(verdict, f"refused {name}")
            return _refusal(request_id, refusal_text(verdict))
        if verdict.action == "nudge":
            self._log(verdict, f"nudge on {name}")
            waiting.nudges.append(verdict.message or verdict.reason or "")
        return None

    def _cancelled(self, params: object) -> None:
        """The client gave up a request: the server need not answer it (its result, if any, is not observed)."""
        if isinstance(params, Mapping):
            key = _key(params.get("requestId"))
            with self._lock:
                waiting = self._waiting.pop(key, None) if key is not None else None
                if waiting is not None and waiting.nudges:
                    self._carried.extend(waiting.nudges)

    # -- server -> client -----------------------------------------------------------------------------

    def from_server(self, line: bytes) -> bytes:
        """The line the client gets for one line from the server (``line`` itself unless a message was added)."""
        parsed = self._parse(line, "server")
        if parsed is None:
            return line
        if isinstance(parsed, list):
            changed = [self._server_message(item) if isinstance(item, dict) else False for item in parsed]
            return _line(parsed, ending=_ending(line)) if any(changed) else line
        return _line(parsed, ending=_ending(line)) if self._server_message(parsed) else line

    def _server_message(self, message: dict[str, Any]) -> bool:
        """Observe a response to a client request; True when ``message`` was changed (a message added)."""
        if "method" in message or ("result" not in message and "error" not in message):
            return False  # a request or notification of the server: as it is
        key = _key(message.get("id"))
        with self._lock:
            waiting = self._waiting.pop(key, None) if key is not None else None
        if waiting is None or waiting.tool is None:
            return False
        result = message.get("result")
        if "error" in message or not isinstance(result, dict):
            error = message.get("error")
            text = error.get("message") if isinstance(error, Mapping) else None
            failure = ToolResult(str(text or _compact(error)), tool=waiting.tool, is_error=True, id=waiting.call_id)
            messages = [*waiting.nudges, *self._after(waiting, failure)]
            with self._lock:  # no content to add them to: they go on the next result
                self._carried.extend(messages)
            return False
        if isinstance(result.get("task"), Mapping) and isinstance(result["task"].get("taskId"), str):
            with self._lock:  # a task handle: the result comes with tasks/result
                self._tasks[result["task"]["taskId"]] = waiting
            return False
        if not isinstance(result.get("content"), list) or result.get("resultType", "complete") != "complete":
            with self._lock:  # input_required (or unknown): the call goes on with the client's retry
                self._carried.extend(waiting.nudges)
            return False
        failed = result.get("isError") is True
        event = ToolResult(result_text(result), tool=waiting.tool, is_error=failed, id=waiting.call_id)
        messages = [*waiting.nudges, *self._after(waiting, event)]
        with self._lock:
            messages = [*self._carried, *messages]
            self._carried.clear()
        unique = [m for i, m in enumerate(messages) if m and m not in messages[:i]]
        if not unique:
            return False
        self.stats["nudged"] += 1
        result["content"] = [*result["content"], *({"type": "text", "text": m} for m in unique)]
        return True

    def _after(self, waiting: _Waiting, event: ToolResult) -> list[str]:
        """Observe a call's result; the messages to add to it."""
        verdict = self._observe(event)
        if verdict.action == "ok":
            return []
        self._log(verdict, f"{verdict.action} on the result of {waiting.tool}")
        if verdict.action == "stop":
            return [stop_text(verdict)]
        return [verdict.message or verdict.reason or ""]

    # -- the server is gone ---------------------------------------------------------------------------

    def server_gone(self, why: str) -> bytes | None:
        """Error answers (one line each) to every request the server did not answer; from now on requests are
        answered with the same error at once. None when nothing was waiting."""
        with self._lock:
            self._gone = why
            waiting = list(self._waiting)
            self._waiting.clear()
        self.stats["server_gone"] += len(waiting)
        if not waiting:
            return None
        return b"".join(_line(_error(value, why)) for _, value in waiting)

    # -- helpers --------------------------------------------------------------------------------------

    def _parse(self, line: bytes, side: str) -> dict[str, Any] | list[Any] | None:
        """The message (or batch) on ``line``; None for a blank line or one that is not JSON-RPC."""
        if not line.strip():
            return None
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) or (isinstance(parsed, list) and parsed):
            return parsed
        self.stats["malformed"] += 1
        if self.stats["malformed"] <= _NOTED_MALFORMED:
            self.note(f"passed on a line from the {side} that is not a JSON-RPC message: {_preview(line)}")
        return None

    def _observe(self, event: Event) -> Verdict:
        try:
            return self.guard.observe(self.session, event, swarm=self.swarm)
        except Exception as exc:  # never break the relay: the call goes ahead unjudged
            self.stats["unjudged"] += 1
            self.note(f"could not judge {type(event).__name__} ({exc}); let through")
            return Verdict()

    def _log(self, verdict: Verdict, what: str) -> None:
        status = f" {verdict.status}" if verdict.action == "stop" else ""
        self.note(f"{what}:{status} {verdict.pattern} x{verdict.count}: {verdict.reason or verdict.message}")

    def summary(self) -> str:
        s = self.stats
        return (
            f"{s['calls']} tool calls judged, {s['refused']} refused, {s['nudged']} results with a message added, "
            f"{s['malformed']} lines that are not JSON-RPC passed on, {s['unjudged']} let through unjudged"
        )


def _ending(line: bytes) -> bytes:
    return b"\r\n" if line.endswith(b"\r\n") else b"\n"


def _line(message: object, *, ending: bytes = b"\n") -> bytes:
    """One message as a line of compact JSON (UTF-8; ASCII escapes when a string holds a lone surrogate)."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + ending
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii") + ending


def _refusal(request_id: object, text: str) -> dict[str, Any]:
    result = {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: object, why: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": SERVER_GONE, "message": why}}


# -- processes ----------------------------------------------------------------------------------------


def _reader(stream: IO[bytes]) -> Callable[[int], bytes]:
    """A read function that returns what is there (up to n bytes), b"" at the end. A real file descriptor is
    read with ``os.read``: no Python-level lock is held by a thread blocked in it when the proxy exits."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        read1 = getattr(stream, "read1", None)
        return read1 if callable(read1) else stream.read
    return lambda n: os.read(fd, n)


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``stream`` with their line ending (the last one without, when the stream ends mid-line)."""
    read = _reader(stream)
    parts: list[bytes] = []
    while True:
        try:
            chunk = read(_CHUNK)
        except OSError:
            break
        if not chunk:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start : end + 1])
            yield b"".join(parts)
            parts.clear()
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts:
        yield b"".join(parts)


class _Writer:
    """Writes whole messages to a stream from several threads; gives up quietly once the reader is gone."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._lock = threading.Lock()
        self.broken = False

    def write(self, data: bytes) -> bool:
        with self._lock:
            if self.broken:
                return False
            try:
                if self._fd is not None:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(self._fd, view) :]
                else:
                    self._stream.write(data)
                    self._stream.flush()
            except (OSError, ValueError):
                self.broken = True
                return False
            return True

    def close(self) -> None:
        with self._lock:
            self.broken = True
            with contextlib.suppress(OSError, ValueError):
                self._stream.close()


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


class _Relay:
    """One run of the proxy: the child, a thread per direction, and the shutdown sequence."""

    def __init__(self, proxy: McpProxy, stdin: IO[bytes], stdout: IO[bytes], grace: float) -> None:
        self.proxy = proxy
        self.stdin = stdin
        self.out = _Writer(stdout)
        self.grace = grace
        self.wake = threading.Event()
        self.client_closed = threading.Event()
        self.server_closed = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        self.to_child: _Writer | None = None

    def start(self, command: list[str], on_start: Callable[[_Relay], None] | None = None) -> None:
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert self.child.stdin is not None
        self.to_child = _Writer(self.child.stdin)
        if on_start is not None:  # before any message goes through
            on_start(self)
        threading.Thread(target=self._from_client, name="mcp-proxy-client", daemon=True).start()
        threading.Thread(target=self._from_server, name="mcp-proxy-server", daemon=True).start()

    def _from_client(self) -> None:
        assert self.to_child is not None
        try:
            for line in _lines(self.stdin):
                try:
                    forward, answer = self.proxy.from_client(line)
                except Exception as exc:  # a bug must not cut the client off: pass the line on
                    self.proxy.note(f"internal error on a client line ({exc!r}); passed on")
                    forward, answer = line, None
                if answer is not None:
                    self.out.write(answer)
                if forward is not None:
                    self.to_child.write(forward)  # a dead child: server_gone answers what waits
        finally:
            self.to_child.close()
            self.client_closed.set()
            self.wake.set()

    def _from_server(self) -> None:
        assert self.child is not None and self.child.stdout is not None
        try:
            for line in _lines(self.child.stdout):
                try:
                    out = self.proxy.from_server(line)
                except Exception as exc:
                    self.proxy.note(f"internal error on a server line ({exc!r}); passed on")
                    out = line
                self.out.write(out)
        finally:
            self.server_closed.set()
            self.wake.set()

    def terminate(self) -> None:
        """Pass a termination request on to the child (from a signal handler: no locks taken)."""
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(OSError):
                self.child.terminate()

    def _reap(self) -> int:
        """Wait for the child; SIGTERM after the grace period, SIGKILL after another one."""
        assert self.child is not None
        for step in (None, self.child.terminate, self.child.kill):
            if step is not None:
                with contextlib.suppress(OSError):
                    step()
            try:
                return self.child.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                continue
        return self.child.wait()

    def run(self) -> int:
        self.wake.wait()
        # the client went away (the child's stdin is closed), or the child closed its stdout
        code = self._reap()
        self.server_closed.wait(self.grace)  # what the child wrote before it exited reaches the client first
        answers = self.proxy.server_gone(f"the MCP server exited (exit code {code}) before answering")
        if answers is not None:
            self.out.write(answers)
        return _exit_code(code)


def run_proxy(
    command: list[str],
    proxy: McpProxy,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    grace: float = GRACE,
    on_start: Callable[[_Relay], None] | None = None,
) -> int:
    """Run the MCP server ``command`` behind ``proxy`` until the client or the server ends; the exit code."""
    relay = _Relay(proxy, stdin if stdin is not None else sys.stdin.buffer, stdout or sys.stdout.buffer, grace)
    try:
        relay.start(command, on_start)
    except FileNotFoundError as exc:
        proxy.note(f"cannot start the MCP server {command[0]!r}: {exc.strerror or exc}")
        return 127
    except OSError as exc:
        proxy.note(f"cannot start the MCP server {command[0]!r}: {exc.strerror or exc}")
        return 126
    try:
        return relay.run()
    finally:
        proxy.note(proxy.summary())


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
    from ..guard import Guard
    from ..policy_spec import PolicySpec

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
