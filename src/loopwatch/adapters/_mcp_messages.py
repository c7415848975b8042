"""What the MCP proxy does with each line, in each direction (:class:`McpProxy`): which JSON-RPC messages it judges
(``tools/call``, and the ``tasks/result`` of a task a call started), what a verdict becomes on the wire (a refusal
result, a message added to a result, an error answer once the server is gone), and everything else passed on as
it is. No processes and no threads of its own (:mod:`._mcp_relay` runs them); see :mod:`loopwatch.adapters.mcp`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..core._events import Event, ToolCall, ToolResult
from ..core._verdict import LOOP_DETECTED, Verdict

if TYPE_CHECKING:
    from .._guard import Guard

DEFAULT_SESSION: Final = "mcp-proxy"
SERVER_GONE: Final = -32000
"""The JSON-RPC error code of the requests the server left unanswered when it exited."""
PREFIX: Final = "loopwatch mcp-proxy"
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
