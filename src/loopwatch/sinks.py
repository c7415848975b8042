"""Audit sinks: where loopwatch sends its audit records (nudges, blocks, stops, terminations).

Every sink has ``emit(record)`` and ``close()`` (:class:`Sink`). Records are plain JSON-ready dicts;
each sink works on its own redacted, bounded copy (:class:`~loopwatch.redact.Redactor`), so a sink
never sees, nor changes, another sink's record.

* :class:`JsonlAuditSink` appends one JSON line per record to a file, synchronously, and raises
  :class:`AuditWriteError` when a record cannot be written: audit records are never silently dropped.
* :class:`WebhookSink` posts records (raw JSON, Slack or Discord messages) from a background thread
  and never blocks nor raises in ``emit``: records that do not fit its bounded queue are dropped and
  counted, failed posts are counted and logged on the ``loopwatch`` logger. Each record has a delivery
  deadline (a server that trickles its answer cannot hold the thread), and a process that exits without
  closing its sinks still delivers what is queued (within ``exit_timeout``) and counts what it could not.
* :class:`CallbackSink` hands records to a function and counts (and logs) its exceptions.
* :class:`MemorySink` keeps records in a list.
"""

from __future__ import annotations

import atexit
import http.client
import io
import json
import logging
import math
import os
import queue
import socket
import stat
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

from .errors import ConfigError, LoopwatchError
from .redact import Redactor

__all__ = [
    "ACTIONS",
    "FORMATS",
    "AuditWriteError",
    "CallbackSink",
    "JsonlAuditSink",
    "MemorySink",
    "Sink",
    "WebhookFormat",
    "WebhookSink",
    "action_of",
    "summarize",
]

logger = logging.getLogger("loopwatch")

WebhookFormat = Literal["json", "slack", "discord"]
FORMATS: Final[tuple[str, ...]] = ("json", "slack", "discord")

#: Actions in increasing severity; ``min_action`` of :class:`WebhookSink` takes one of them.
ACTIONS: Final[tuple[str, ...]] = ("warning", "nudge", "block", "stop", "terminated")
_SEVERITY: Final[Mapping[str, int]] = {
    "warning": 1,
    "warn": 1,
    "nudge": 2,
    "block": 3,
    "stop": 4,
    "terminate": 5,
    "terminated": 5,
}

_YELLOW, _ORANGE, _RED, _GREY = 0xF1C40F, 0xE67E22, 0xE74C3C, 0x95A5A6
_COLORS: Final[Mapping[int, int]] = {1: _YELLOW, 2: _YELLOW, 3: _ORANGE, 4: _RED, 5: _RED}

_SLACK_TEXT_LIMIT: Final = 3000  # a section block's text
_DISCORD_CONTENT_LIMIT: Final = 2000
_DISCORD_TITLE_LIMIT: Final = 256
_DISCORD_DESCRIPTION_LIMIT: Final = 4000  # 4096 allowed; the whole embed must stay under 6000
_DISCORD_FIELD_LIMIT: Final = 200  # 1024 allowed; see above
_REASON_LIMIT: Final = 1500

_BACKOFF_BASE: Final = 0.2
_BACKOFF_MAX: Final = 2.0
_RESPONSE_READ_LIMIT: Final = 64 * 1024


class AuditWriteError(LoopwatchError):
    """An audit record could not be written (disk full, read-only file system, closed sink...)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message if path is None else f"{path}: {message}")


@runtime_checkable
class Sink(Protocol):
    """Receives audit records."""

    def emit(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def _make_redactor(redact: bool | Redactor) -> Redactor:
    if isinstance(redact, Redactor):
        return redact
    if not isinstance(redact, bool):
        raise ConfigError(f"must be a bool or a Redactor, got {redact!r}", field="redact")
    return Redactor(enabled=redact)


def _redact_repr(redactor: Redactor) -> str:
    """``True``/``False`` for the default configuration, the whole redactor otherwise."""
    default = Redactor(enabled=redactor.enabled)
    if (redactor.extra_keys, redactor.max_depth, redactor.max_string) == (
        (),
        default.max_depth,
        default.max_string,
    ):
        return repr(redactor.enabled)
    return repr(redactor)


# --------------------------------------------------------------------------------------------- JSONL


class JsonlAuditSink:
    """Append one JSON line per record to ``path``; the record is on disk when ``emit`` returns.

    The file (and its parent directories) is created if needed, readable by its owner only. With
    ``fsync=True`` (the default) every record is flushed to stable storage. Any failure raises
    :class:`AuditWriteError`, from the constructor or from ``emit``; ``emit`` after ``close`` too.
    Safe to share between threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, redact: bool | Redactor = True, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = bool(fsync)
        self._redactor = _make_redactor(redact)
        self._lock = threading.Lock()
        self._records_written = 0
        self._closed = False
        self._line_broken = False  # a failed write left half a line in the file
        self._fd = self._open()
        self._sync = self.fsync and stat.S_ISREG(os.fstat(self._fd).st_mode)  # pipes, ttys can't fsync

    @property
    def records_written(self) -> int:
        """How many records were written (and synced) so far."""
        return self._records_written

    @property
    def closed(self) -> bool:
        return self._closed

    def emit(self, record: Mapping[str, Any]) -> None:
        """Write ``record`` (redacted); raise :class:`AuditWriteError` if it is not written."""
        line = self._encode(record)
        with self._lock:
            if self._closed:
                raise AuditWriteError("audit sink is closed", path=str(self.path))
            self._write(line)
            self._records_written += 1

    def close(self) -> None:
        """Close the file; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                os.close(self._fd)
            except OSError as exc:
                raise AuditWriteError(f"cannot close audit log: {exc}", path=str(self.path)) from exc

    def __enter__(self) -> JsonlAuditSink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return (
            f"JsonlAuditSink(path={str(self.path)!r}, fsync={self.fsync}, "
            f"redact={_redact_repr(self._redactor)}, records_written={self._records_written}{state})"
        )

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            return os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise AuditWriteError(f"cannot open audit log: {exc}", path=str(self.path)) from exc

    def _encode(self, record: Mapping[str, Any]) -> bytes:
        try:
            text = json.dumps(self._redactor(record), ensure_ascii=True, allow_nan=False, default=repr)
        except (TypeError, ValueError) as exc:
            raise AuditWriteError(f"cannot serialise audit record: {exc}", path=str(self.path)) from exc
        return (text + "\n").encode("ascii")

    def _write(self, line: bytes) -> None:
        data = memoryview(b"\n" + line if self._line_broken else line)
        try:
            while data:
                written = os.write(self._fd, data)
                if written <= 0:
                    raise OSError("write returned no progress")
                self._line_broken = True
                data = data[written:]
            self._line_broken = False
            if self._sync:
                os.fsync(self._fd)
        except OSError as exc:
            raise AuditWriteError(f"cannot write audit record: {exc}", path=str(self.path)) from exc


# ------------------------------------------------------------------------------------ callback, memory


class CallbackSink:
    """Call ``callback(record)`` with a redacted copy; its exceptions are counted and logged, never raised."""

    def __init__(self, callback: Callable[[dict[str, Any]], object], *, redact: bool | Redactor = True) -> None:
        if not callable(callback):
            raise ConfigError(f"must be callable, got {callback!r}", field="callback")
        self.callback = callback
        self._redactor = _make_redactor(redact)
        self._lock = threading.Lock()
        self._errors = 0

    @property
    def errors(self) -> int:
        """How many times the callback raised."""
        return self._errors

    def emit(self, record: Mapping[str, Any]) -> None:
        try:
            self.callback(self._redactor(record))
        except Exception:
            with self._lock:
                self._errors += 1
            logger.warning("audit callback %s raised; record not delivered", _name_of(self.callback), exc_info=True)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"CallbackSink(callback={_name_of(self.callback)}, errors={self._errors})"


def _name_of(function: Callable[..., object]) -> str:
    return str(getattr(function, "__qualname__", None) or repr(function))


class MemorySink:
    """Keep (copies of) the records in :attr:`records`; not redacted unless ``redact=True``."""

    def __init__(self, *, redact: bool | Redactor = False) -> None:
        self.records: list[dict[str, Any]] = []
        self.closed = False
        self._redactor = _make_redactor(redact)
        self._lock = threading.Lock()

    def emit(self, record: Mapping[str, Any]) -> None:
        copy = self._redactor(record)
        with self._lock:
            self.records.append(copy)

    def close(self) -> None:
        self.closed = True

    def clear(self) -> None:
        with self._lock:
            self.records.clear()

    def events(self) -> list[str]:
        """The ``event`` of each record, in order."""
        return [str(record.get("event")) for record in self.records]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(list(self.records))

    def __repr__(self) -> str:
        return f"MemorySink(records={len(self.records)})"


# -------------------------------------------------------------------------------------------- webhook


def _severity_of(word: object) -> int:
    if not isinstance(word, str):
        return 0
    return _SEVERITY.get(word.rsplit(".", 1)[-1].lower(), 0)


def _severity(record: Mapping[str, Any]) -> int:
    return max(_severity_of(record.get("action")), _severity_of(record.get("event")))


def action_of(record: Mapping[str, Any]) -> str | None:
    """The record's action as one of :data:`ACTIONS` (``"loop.stop"`` -> ``"stop"``), or ``None``."""
    severity = _severity(record)
    return ACTIONS[severity - 1] if severity else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=repr)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(record: Mapping[str, Any]) -> str:
    """One line for humans: ``loopwatch stop: session s1, repeat x3 - <reason>``."""
    kind = _text(record.get("action")) or _text(record.get("event")) or "event"
    line = f"loopwatch {kind}: session {_text(record.get('session')) or '?'}"
    if record.get("pattern"):
        line += f", {_text(record['pattern'])}"
        if record.get("count") is not None:
            line += f" x{_text(record['count'])}"
    reason = _text(record.get("reason")) or _text(record.get("message"))
    if reason:
        line += f" - {_truncate(reason, _REASON_LIMIT)}"
    return _one_line(line)


def _facts(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    names = ("session", "pattern", "action", "count", "event", "worker")
    return [(name, _one_line(_text(record.get(name)))) for name in names if record.get(name) is not None]


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_payload(record: Mapping[str, Any]) -> dict[str, Any]:
    lines = [f"*{name.capitalize()}:* {_slack_escape(_truncate(value, 200))}" for name, value in _facts(record)]
    reason = _text(record.get("reason")) or _text(record.get("message"))
    if reason:
        lines.append(f"*Reason:* {_slack_escape(_truncate(reason, _REASON_LIMIT))}")
    section = _truncate("\n".join(lines) or _slack_escape(summarize(record)), _SLACK_TEXT_LIMIT)
    return {
        "text": _truncate(_slack_escape(summarize(record)), _SLACK_TEXT_LIMIT),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": section}}],
    }


def _iso_time(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def _discord_payload(record: Mapping[str, Any]) -> dict[str, Any]:
    kind = _text(record.get("action")) or _text(record.get("event")) or "event"
    reason = _text(record.get("reason")) or _text(record.get("message")) or summarize(record)
    embed: dict[str, Any] = {
        "title": _truncate(_one_line(f"loopwatch {kind}"), _DISCORD_TITLE_LIMIT),
        "description": _truncate(reason, _DISCORD_DESCRIPTION_LIMIT),
        "color": _COLORS.get(_severity(record), _GREY),
        "fields": [
            {"name": name, "value": _truncate(value, _DISCORD_FIELD_LIMIT) or "-", "inline": True}
            for name, value in _facts(record)
        ],
    }
    timestamp = _iso_time(record.get("ts"))
    if timestamp is not None:
        embed["timestamp"] = timestamp
    return {
        "content": _truncate(summarize(record), _DISCORD_CONTENT_LIMIT),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},  # never ping @everyone from record text
    }


def _json_payload(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record


_FORMATTERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]] = {
    "json": _json_payload,
    "slack": _slack_payload,
    "discord": _discord_payload,
}


def _elide_url(url: str) -> str:
    """``https://hooks.slack.com/services/T0/B0/secret`` -> ``https://hooks.slack.com/...``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host += f":{parts.port}"
    tail = "/..." if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{tail}"


def _check_url(url: str) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"must be a string, got {type(url).__name__}", field="url")
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        valid = False
    if not valid:
        raise ConfigError("must be an http:// or https:// URL with a host", field="url")
    return url


def _check_format(value: str) -> str:
    if value not in FORMATS:
        raise ConfigError(f"must be one of {', '.join(FORMATS)}, got {value!r}", field="format")
    return value


def _check_timeout(value: float, field: str = "timeout") -> float:
    valid = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not valid or value <= 0:
        raise ConfigError(f"must be a positive number of seconds, got {value!r}", field=field)
    return float(value)


def _check_int(value: int, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    return value


def _check_min_action(value: str | None) -> int:
    if value is None:
        return 0
    severity = _severity_of(value)
    if not severity:
        raise ConfigError(f"must be one of {', '.join(ACTIONS)}, got {value!r}", field="min_action")
    return severity


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    result = {"Content-Type": "application/json", "User-Agent": "loopwatch"}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not isinstance(value, str) or "\n" in name + value:
            raise ConfigError("header names and values must be single-line strings", field="headers")
        result[name] = value
    return result


@dataclass(frozen=True)
class _PostFailure:
    reason: str
    retryable: bool


class _DeadlineSocket:
    """A connected socket whose every send and receive waits at most its time-out and, in all, until one
    deadline: a server that sends its answer a byte at a time cannot hold a post past the deadline."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._timeout: float | None = sock.gettimeout()

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the delivery deadline passed")
        self._sock.settimeout(left if self._timeout is None else min(left, self._timeout))

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        received: int = self._sock.recv_into(buffer, nbytes, flags)
        return received

    def recv(self, size: int, flags: int = 0) -> bytes:
        self._arm()
        data: bytes = self._sock.recv(size, flags)
        return data

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm()
        self._sock.sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._arm()
        sent: int = self._sock.send(data, flags)
        return sent

    def makefile(self, mode: str = "r", buffering: int | None = None, **_: Any) -> Any:
        raw = socket.SocketIO(self, "rb" if "r" in mode else "wb")  # type: ignore[arg-type]
        return io.BufferedReader(raw) if "r" in mode else io.BufferedWriter(raw)

    def _decref_socketios(self) -> None:
        """Called by the file ``makefile`` gives when it closes (the socket itself is closed by its owner)."""

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = _within(self._deadline, self.timeout)
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = _within(self._deadline, self.timeout)
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


def _within(deadline: float, timeout: Any) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the delivery deadline passed")
    return left if not isinstance(timeout, (int, float)) else min(float(timeout), left)


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """Opens connections that give up at the deadline ``deadline()`` returns (the record being posted)."""

    def __init__(self, deadline: Callable[[], float]) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_DeadlineHTTPConnection, deadline=self._deadline()), req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Callable[[], float]) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = partial(_DeadlineHTTPSConnection, deadline=self._deadline())
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]


_OPEN_SINKS: weakref.WeakSet[WebhookSink] = weakref.WeakSet()


@atexit.register
def _deliver_at_exit() -> None:
    """A process ending without closing its webhook sinks: what is queued is delivered (within each sink's
    ``exit_timeout``), what is not is counted as dropped and logged."""
    for sink in list(_OPEN_SINKS):
        try:
            sink.close(timeout=sink.exit_timeout)
        except Exception:  # pragma: no cover - never fail the interpreter's exit
            logger.exception("webhook: closing at exit failed")


class WebhookSink:
    """POST records to ``url`` from a background thread; ``emit`` never blocks and never raises.

    ``format``: ``"json"`` (the redacted record), ``"slack"`` (``text`` + a mrkdwn section block) or
    ``"discord"`` (``content`` + an embed coloured by action). ``min_action="stop"`` posts only stops
    and terminations (order: warning, nudge, block, stop, terminated); other records are ``skipped``.
    At most ``max_queue`` records wait; more are ``dropped``. A post that fails (connection error,
    timeout, HTTP 5xx or 429) is tried again up to ``retries`` times after a short backoff; HTTP 4xx
    is not retried. ``timeout`` bounds each network wait, ``deadline`` a record's delivery in all (every
    try and backoff): a server that answers a byte at a time fails the record at its deadline instead of
    holding the thread. Records that could not be delivered are counted in ``failed``.
    Call :meth:`close` (or use ``with``) to deliver what is queued and stop the thread; a process that exits
    without doing so closes the sink at exit, waiting at most ``exit_timeout`` seconds, and what is still
    queued then is counted in ``dropped`` and logged.
    """

    def __init__(
        self,
        url: str,
        *,
        format: WebhookFormat = "json",
        timeout: float = 5.0,
        deadline: float = 15.0,
        retries: int = 1,
        max_queue: int = 1000,
        min_action: str | None = None,
        redact: bool | Redactor = True,
        headers: Mapping[str, str] | None = None,
        warn_every: int = 100,
        exit_timeout: float = 5.0,
    ) -> None:
        self.url = _check_url(url)
        self.format: str = _check_format(format)
        self.timeout = _check_timeout(timeout)
        self.deadline = _check_timeout(deadline, "deadline")
        self.exit_timeout = _check_timeout(exit_timeout, "exit_timeout")
        self._record_deadline = 0.0  # when the record being posted gives up (set by the worker)
        self.retries = _check_int(retries, "retries", 0)
        self.max_queue = _check_int(max_queue, "max_queue", 1)
        self.warn_every = _check_int(warn_every, "warn_every", 1)
        self.min_action = min_action
        self._min_severity = _check_min_action(min_action)
        self._headers = _check_headers(headers)
        self._redactor = _make_redactor(redact)
        # honours the usual *_proxy variables; every connection gives up at the record's deadline
        deadline_now = partial(getattr, self, "_record_deadline")
        self._opener = urllib.request.build_opener(
            _DeadlineHTTPHandler(deadline_now), _DeadlineHTTPSHandler(deadline_now)
        )
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=self.max_queue)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._abandon = threading.Event()
        self._closed = False
        self._pending = self._sent = self._failed = self._dropped = self._skipped = 0
        self._thread = threading.Thread(target=self._run, name="loopwatch-webhook", daemon=True)
        self._thread.start()
        _OPEN_SINKS.add(self)

    # counters -----------------------------------------------------------------------------------

    @property
    def sent(self) -> int:
        """Records delivered (HTTP 2xx)."""
        return self._sent

    @property
    def failed(self) -> int:
        """Records not delivered after all tries."""
        return self._failed

    @property
    def dropped(self) -> int:
        """Records thrown away: queue full, sink closed, or still queued when ``close`` timed out."""
        return self._dropped

    @property
    def skipped(self) -> int:
        """Records below ``min_action``."""
        return self._skipped

    @property
    def pending(self) -> int:
        """Records queued or being posted."""
        return self._pending

    # public API ---------------------------------------------------------------------------------

    def emit(self, record: Mapping[str, Any]) -> None:
        """Queue ``record`` for posting; returns at once."""
        if _severity(record) < self._min_severity:
            with self._lock:
                self._skipped += 1
            return
        copy = self._redactor(record)  # snapshot now: the caller may change the record afterwards
        with self._lock:
            if not self._closed:
                try:
                    self._queue.put_nowait(copy)
                    self._pending += 1
                    return
                except queue.Full:
                    pass
            self._dropped += 1
            dropped, closed = self._dropped, self._closed
        if dropped == 1 or dropped % self.warn_every == 0:
            why = "sink is closed" if closed else f"queue is full ({self.max_queue})"
            logger.warning("webhook %s: audit record dropped, %s; %d dropped so far", self._where, why, dropped)

    def flush(self, timeout: float | None = 5.0) -> bool:
        """Wait until every queued record was posted (or failed); ``False`` if ``timeout`` ran out."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued (waiting at most ``timeout`` seconds), then stop the thread. Records still
        queued when the time is up are counted in ``dropped`` (and logged), never lost silently."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN_SINKS.discard(self)
        deadline = time.monotonic() + timeout
        if self.flush(timeout):
            self._queue.put_nowait(None)  # empty queue: nothing is added once closed
        else:
            self._abandon.set()
            left = self._drop_queued()
            logger.warning(
                "webhook %s: closed with %d audit records undelivered (counted as dropped)",
                self._where,
                left + self._pending,
            )
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _drop_queued(self) -> int:
        """Take what is still queued off the queue, counted as dropped; how many."""
        dropped = 0
        while True:
            try:
                record = self._queue.get_nowait()
            except queue.Empty:
                break
            if record is None:
                continue
            dropped += 1
        with self._idle:
            self._pending -= dropped
            self._dropped += dropped
            self._idle.notify_all()
        return dropped

    def __enter__(self) -> WebhookSink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        extra = f", min_action={self.min_action!r}" if self.min_action is not None else ""
        return f"WebhookSink(url={self._where!r}, format={self.format!r}{extra})"

    # worker -------------------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return _elide_url(self.url)

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                return
            self._handle(record)
            if self._abandon.is_set() and self._queue.empty():
                return

    def _handle(self, record: dict[str, Any]) -> None:
        outcome = "dropped"
        try:
            if not self._abandon.is_set():
                outcome = "sent" if self._deliver(record) else "failed"
        except Exception:  # the worker must survive anything
            logger.exception("webhook %s: unexpected error while posting an audit record", self._where)
            outcome = "failed"
        with self._idle:
            self._pending -= 1
            if outcome == "sent":
                self._sent += 1
            elif outcome == "failed":
                self._failed += 1
            else:
                self._dropped += 1
            self._idle.notify_all()

    def _deliver(self, record: dict[str, Any]) -> bool:
        body = json.dumps(_FORMATTERS[self.format](record), ensure_ascii=True, default=repr).encode("ascii")
        failure: _PostFailure | None = None
        self._record_deadline = time.monotonic() + self.deadline
        for attempt in range(self.retries + 1):
            pause = min(_BACKOFF_BASE * 2 ** (attempt - 1), _BACKOFF_MAX) if attempt else 0.0
            if attempt and time.monotonic() + pause >= self._record_deadline:
                failure = _PostFailure(f"{failure.reason if failure else 'failed'}; deadline reached", False)
                break
            if attempt and self._abandon.wait(pause):
                break
            failure = self._post(body)
            if failure is None:
                return True
            if not failure.retryable:
                break
        reason = failure.reason if failure is not None else "sink closed"
        logger.warning("webhook %s: audit record not delivered: %s", self._where, reason)
        return False

    def _post(self, body: bytes) -> _PostFailure | None:
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                response.read(_RESPONSE_READ_LIMIT)
        except urllib.error.HTTPError as exc:
            exc.close()
            return _PostFailure(f"HTTP {exc.code}", retryable=exc.code >= 500 or exc.code == 429)
        except urllib.error.URLError as exc:
            return _PostFailure(_describe(exc.reason), retryable=True)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            return _PostFailure(_describe(exc), retryable=True)
        return None


def _describe(error: object) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)
