"""A guard that asks a loopwatch service (``loopwatch serve``) instead of judging in this process.

    guard = ServiceGuard("http://127.0.0.1:7350", token="...")    # then use it like any Guard
    verdict = guard.observe("run-1", ToolCall("bash", {"command": "ls"}))

The framework adapters use one when ``LOOPWATCH_SERVICE_URL`` is set (and ``LOOPWATCH_SERVICE_TOKEN`` for the
token) and no guard is given: one setting moves every agent of a deployment onto the shared service. Standard
library only (``http.client``, one kept-alive connection per thread).

When the service cannot be reached or answers with an error, ``on_store_error`` decides as for a store outage:
``"allow"`` (the default: the event gets ``ok``, logged and counted in ``stats["store_errors"]``), ``"block"``
(tool calls are refused) or ``"raise"`` (:class:`ServiceError`).
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, urlsplit

from ._guard import Guard, OnStoreError
from ._session_backend import _logger
from .core._audit import store_error_block
from .core._checked import positive_number
from .core._events import Event, ToolCall, event_to_json
from .core._policy import Policy
from .core._verdict import Verdict
from .errors import ConfigError, EventError, StateError, UnsupportedError
from .stores import StoreError

__all__ = ["SERVICE_TOKEN_ENV", "SERVICE_URL_ENV", "ServiceError", "ServiceGuard", "service_guard_from_env"]

SERVICE_URL_ENV: Final = "LOOPWATCH_SERVICE_URL"
SERVICE_TOKEN_ENV: Final = "LOOPWATCH_SERVICE_TOKEN"
_VERDICT_FIELDS: Final = ("action", "index", "pattern", "count", "level", "loop_start", "status", "message", "reason")


class ServiceError(StoreError):
    """The service could not be reached or refused a request (``status`` and ``code`` say how)."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        self.status = status
        self.code = code
        super().__init__(message)


def _verdict(data: Mapping[str, Any]) -> Verdict:
    fields = {k: data.get(k) for k in _VERDICT_FIELDS}
    return Verdict(
        action=fields["action"] or "ok",
        index=int(fields["index"] if fields["index"] is not None else -1),
        pattern=fields["pattern"],
        count=int(fields["count"] or 0),
        level=int(fields["level"] or 0),
        loop_start=fields["loop_start"],
        status=fields["status"],
        message=fields["message"] or None,
        reason=fields["reason"] or None,
        detector=data.get("detector"),
        evidence=dict(data.get("evidence") or {}),
    )


class ServiceGuard(Guard):
    """A :class:`~loopwatch.Guard` whose sessions live in a loopwatch service (see the module's text).

    ``policy`` (or ``preset``) is only the local copy adapters read (messages); the service judges with its own.
    ``agent`` and ``model`` label this process's events on the service's dashboard. ``timeout``: seconds per
    request.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        preset: str | Policy | None = None,
        timeout: float = 5.0,
        on_store_error: OnStoreError = "allow",
        agent: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(preset, on_store_error=on_store_error, clock=None)
        if not isinstance(url, str):
            raise ConfigError(f"expected an http(s) URL, got {type(url).__name__}", field="url")
        try:
            parts = urlsplit(url)
            port = parts.port  # a port that is not a number from 0 to 65535 raises here
        except ValueError as exc:
            raise ConfigError(f"not a usable URL ({exc}): {url!r}", field="url") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"expected an http(s) URL, got {url!r}", field="url")
        positive_number(timeout, "timeout")  # seconds
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self.timeout = timeout
        self.agent = agent
        self.model = model
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"ServiceGuard({self.url!r})"

    # -- HTTP ---------------------------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = kind(self._host, self._port, timeout=self.timeout)
            self._local.connection = connection
        return connection

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One API call; the decoded JSON answer, or :class:`ServiceError`."""
        data = json.dumps(body, ensure_ascii=False, default=str).encode() if body is not None else None
        for attempt in (1, 2):  # a kept-alive connection the server closed is opened again once
            connection = self._connection()
            try:
                connection.request(method, self._base + path, body=data, headers=self._headers)
                response = connection.getresponse()
                raw = response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                self._local.connection = None
                if attempt == 2 or isinstance(exc, TimeoutError):
                    raise ServiceError(f"{self.url}: {exc!r}") from exc
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise ServiceError(f"{self.url}: the answer is not JSON", status=response.status) from exc
        if response.status >= 400:
            error = answer.get("error", {}) if isinstance(answer, dict) else {}
            raise ServiceError(
                f"{self.url}{path}: {response.status} {error.get('code')}: {error.get('message')}",
                status=response.status,
                code=error.get("code"),
            )
        return answer

    def _session_path(self, session: str, tail: str = "") -> str:
        return f"/v1/sessions/{quote(session, safe='')}{tail}"

    # -- the Guard API --------------------------------------------------------------------------------

    def observe(self, session: str, event: Event | Mapping[str, Any], *, swarm: str | None = None) -> Verdict:
        body: dict[str, Any] = {"event": event if isinstance(event, Mapping) else event_to_json(event)}
        for key, value in (("swarm", swarm), ("agent", self.agent), ("model", self.model)):
            if value:
                body[key] = value
        self.stats["events"] += 1
        try:
            answer = self.request("POST", self._session_path(session, "/events"), body)
        except ServiceError as exc:
            if exc.code == "invalid_event":
                return self._skip(session, EventError(str(exc)))
            return self._unreachable(session, event, exc)
        verdict = _verdict(answer["verdict"])
        for hook in self.verdict_hooks:
            try:
                hook(session, event, verdict)
            except Exception:
                self.stats["errors"] += 1
                _logger().exception("loopwatch: verdict hook %r failed", hook)
        return verdict

    def _unreachable(self, session: str, event: Event | Mapping[str, Any], exc: ServiceError) -> Verdict:
        self.stats["store_errors"] += 1
        _logger().warning("loopwatch: the service failed on session %r: %s", session, exc)
        if self.on_store_error == "raise":
            raise exc
        is_call = isinstance(event, ToolCall) or (isinstance(event, Mapping) and event.get("type") == "tool_call")
        if self.on_store_error == "block" and is_call:
            return store_error_block(self.policy.messages, str(exc))
        return Verdict(reason=f"service error (fail open): {exc}")

    def reset(self, session: str, *, limits: bool = False) -> None:
        self.request("POST", self._session_path(session, "/reset"), {"limits": limits})

    def forget(self, session: str) -> None:
        self.request("DELETE", self._session_path(session))

    def snapshot(self, session: str) -> dict[str, Any]:
        data: dict[str, Any] = self.request("GET", self._session_path(session, "/snapshot"))
        return data

    def restore(self, data: Mapping[str, Any], session: str | None = None) -> None:
        name = session or (data.get("session") if isinstance(data, Mapping) else None)
        if not isinstance(name, str):
            raise StateError("the snapshot names no session")
        try:
            self.request("PUT", self._session_path(name, "/snapshot"), dict(data))
        except ServiceError as exc:
            if exc.code == "invalid_snapshot":
                raise StateError(str(exc)) from exc
            raise

    def sessions(self) -> list[str]:
        names: list[str] = self.request("GET", "/v1/sessions?limit=100000")["sessions"]
        return names

    def swarm_snapshot(self, swarm: str) -> dict[str, Any]:
        data: dict[str, Any] = self.request("GET", f"/v1/swarms/{quote(swarm, safe='')}")
        return data

    def clear_swarm(self, swarm: str) -> None:
        self.request("DELETE", f"/v1/swarms/{quote(swarm, safe='')}")

    def restore_swarm(self, data: Mapping[str, Any]) -> None:
        name = data.get("swarm") if isinstance(data, Mapping) else None
        if not isinstance(name, str):
            raise StateError("not a swarm snapshot: no 'swarm' name")
        try:
            self.request("PUT", f"/v1/swarms/{quote(name, safe='')}", dict(data))
        except ServiceError as exc:
            if exc.code == "invalid_snapshot":
                raise StateError(str(exc)) from exc
            raise

    def evict_idle(self, max_idle_seconds: float) -> int:
        """Not available: the service's sessions are shared with its other clients, and expire by its store's
        ``ttl``; raises :class:`~loopwatch.errors.UnsupportedError`, as a guard with a store does."""
        raise UnsupportedError(
            f"evict_idle cannot tell idle sessions of the service at {self.url}: other clients may be using them. "
            "The service's store expires them (its ttl)"
        )


def service_guard_from_env(preset: str | Policy | None = None) -> ServiceGuard | None:
    """A :class:`ServiceGuard` for ``$LOOPWATCH_SERVICE_URL`` (token: ``$LOOPWATCH_SERVICE_TOKEN``), else None."""
    url = os.environ.get(SERVICE_URL_ENV, "").strip()
    if not url:
        return None
    return ServiceGuard(url, token=os.environ.get(SERVICE_TOKEN_ENV) or None, preset=preset)
