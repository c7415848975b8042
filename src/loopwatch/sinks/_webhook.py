"""The webhook sink: records posted from a background thread, never blocking nor raising in ``emit``, each with a
delivery deadline, and what is still queued when the process exits delivered or counted."""

from __future__ import annotations

import atexit
import http.client
import json
import logging
import math
import queue
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

from ..core._checked import integer_at_least
from ..errors import ConfigError
from ..redact import Redactor
from ._common import make_redactor
from ._deadline_http import DeadlineHTTPHandler, DeadlineHTTPSHandler
from ._payloads import FORMATS, FORMATTERS, WebhookFormat
from ._records import ACTIONS, severity, severity_of

logger = logging.getLogger("loopwatch")

_BACKOFF_BASE: Final = 0.2
_BACKOFF_MAX: Final = 2.0
_RESPONSE_READ_LIMIT: Final = 64 * 1024


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


def _check_min_action(value: str | None) -> int:
    if value is None:
        return 0
    level = severity_of(value)
    if not level:
        raise ConfigError(f"must be one of {', '.join(ACTIONS)}, got {value!r}", field="min_action")
    return level


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    result = {"Content-Type": "application/json", "User-Agent": "loopwatch"}
    if headers is not None and not isinstance(headers, Mapping):
        raise ConfigError(f"must map header names to values, got {type(headers).__name__}", field="headers")
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not isinstance(value, str) or "\n" in name + value:
            raise ConfigError("header names and values must be single-line strings", field="headers")
        result[name] = value
    return result


@dataclass(frozen=True)
class _PostFailure:
    reason: str
    retryable: bool


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
        self.retries = integer_at_least(retries, 0, "retries")
        self.max_queue = integer_at_least(max_queue, 1, "max_queue")
        self.warn_every = integer_at_least(warn_every, 1, "warn_every")
        self.min_action = min_action
        self._min_severity = _check_min_action(min_action)
        self._headers = _check_headers(headers)
        self._redactor = make_redactor(redact)
        # honours the usual *_proxy variables; every connection gives up at the record's deadline
        deadline_now = partial(getattr, self, "_record_deadline")
        self._opener = urllib.request.build_opener(
            DeadlineHTTPHandler(deadline_now), DeadlineHTTPSHandler(deadline_now)
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
        if severity(record) < self._min_severity:
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
        body = json.dumps(FORMATTERS[self.format](record), ensure_ascii=True, default=repr).encode("ascii")
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
