"""The service's ASGI application (starlette): the JSON API, the live dashboard, ``/metrics``.

    app = create_app(ServiceSettings(store="redis://127.0.0.1:6379/0"))   # or create_app(settings, guard=guard)

Every request is answered with JSON; an error is ``{"error": {"code", "message"}}`` with a stable code and its
status (:data:`~loopwatch.server.errors.CODES`), and a request refused for any reason writes nothing to state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from .._timeline import ACTION_COLOURS, KIND_COLOURS, KIND_NAMES, OTHER_TOOL, TOOL_PALETTE
from ..errors import EventError, LoopwatchError, StateError
from ..events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, event_type, parse_event
from ..guard import Guard
from ..policy_spec import PolicySpec
from ..stores import StoreError
from ..verdict import Verdict
from .board import DIMENSIONS, Board, make_note
from .errors import ApiError
from .openapi import document
from .prometheus import CONTENT_TYPE, ServiceMetrics, render
from .ratelimit import RateLimiter
from .relay import Relay, relay_url
from .settings import ServiceSettings, Tokens

__all__ = ["Service", "create_app"]

logger = logging.getLogger("loopwatch")
_EVENT_CLASSES: Final = (ToolCall, ToolResult, Message, TextDelta, Usage, Reset)
_MAX_NAME: Final = 512
_TICK: Final = 0.2
_HEARTBEAT: Final = 15.0


@dataclass(frozen=True)
class _Caller:
    """Who sent the request being judged, and what it said about the agent (for notes and audit records)."""

    client: str | None = None
    agent: str | None = None
    model: str | None = None
    swarm: str | None = None


_REPORT_COLOURS: Final = {
    "actions": ACTION_COLOURS,
    "kinds": KIND_COLOURS,
    "kind_names": KIND_NAMES,
    "tools": list(TOOL_PALETTE),
    "other_tool": OTHER_TOOL,
}
"""The HTML report's colours, so a session's timeline on the dashboard reads like the report's."""

_NOBODY: Final = _Caller()
_caller: ContextVar[_Caller] = ContextVar("loopwatch_caller", default=_NOBODY)


class _ClientTagged:
    """An audit sink that adds the calling token's name (``client``) to each record before passing it on."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def __repr__(self) -> str:
        return f"ClientTagged({self.sink!r})"

    def emit(self, record: dict[str, Any]) -> None:
        client = _caller.get().client
        self.sink.emit({**record, "client": client} if client else record)

    def close(self) -> None:
        self.sink.close()


def build_guard(settings: ServiceSettings, sinks: list[Any] | None = None) -> Guard:
    """The guard the service judges with: the configured policy, in the configured store."""
    policy = PolicySpec(settings.preset, settings.config).build()
    return Guard(
        policy=policy,
        store=settings.store,
        sinks=sinks or (),
        on_store_error="block" if settings.fail_closed else "allow",
        max_sessions=settings.max_sessions,
    )


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def _error(exc: ApiError) -> Response:
    return _json(exc.body(), exc.status, exc.headers)


def _name(value: str, what: str) -> str:
    if not value or len(value) > _MAX_NAME:
        raise ApiError("invalid_request", f"a {what} name is 1 to {_MAX_NAME} characters")
    return value


def _optional_name(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME:
        raise ApiError("invalid_request", f"{key}: a string of 1 to {_MAX_NAME} characters", field=key)
    return value


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """A verdict as the API answers it: its JSON form, and whether the event was recorded in the session."""
    data = verdict.to_json()
    data["recorded"] = verdict.index >= 0
    return data


def session_summary(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """What ``GET /v1/sessions/{id}`` says: events, stop, open streaks, the last verdict, spend."""
    state = snapshot["state"]
    last = state.get("last")
    usage = state.get("usage") or {}
    streaks = {p: ladder.get("emitted", 0) for p, ladder in (state.get("ladders") or {}).items()}
    return {
        "session": snapshot["session"],
        "swarm": snapshot.get("swarm"),
        "events": state.get("index", 0),
        "stopped": state.get("stopped") is not None,
        "stop": state.get("stopped"),
        "streaks": {p: level for p, level in streaks.items() if level},
        "last": dict(zip(("index", "action", "pattern", "level"), last, strict=True)) if last else None,
        "spend": {k: usage.get(k) for k in ("cost", "tokens", "iterations", "failures")},
    }


class Service:
    """One process's service: the guard, the board, the limits and the tokens; :meth:`app` builds the ASGI app."""

    def __init__(
        self,
        settings: ServiceSettings,
        *,
        guard: Guard | None = None,
        tokens: Tokens | None = None,
        sinks: list[Any] | None = None,
        tracer_provider: Any = None,
    ) -> None:
        self.settings = settings
        self.tokens = tokens if tokens is not None else Tokens.load(settings.token_file)
        tagged = [_ClientTagged(sink) for sink in sinks or ()]
        self.guard = guard if guard is not None else build_guard(settings, tagged)
        if guard is not None:
            guard.sinks.extend(tagged)
        self.sinks = tagged
        self.board = Board(reset_on_user=self.guard.policy.reset_on_user)
        self.metrics = ServiceMetrics.shared()
        self.limiter = RateLimiter(settings.rate, settings.burst)
        self.relay: Relay | None = None
        self.guard.listeners.append(self.metrics.record)
        self.guard.verdict_hooks.append(self._on_verdict)
        self._otel = self._telemetry(tracer_provider)

    def __repr__(self) -> str:
        return f"Service({self.guard!r}, tokens={len(self.tokens)}, relay={self.relay is not None})"

    # -- wiring -----------------------------------------------------------------------------------------

    def _telemetry(self, tracer_provider: Any) -> Any:
        """The tracer and propagator when the ``otel`` extra is installed (verdicts on the request's span);
        ``tracer_provider``: the global one unless given."""
        try:
            from opentelemetry import propagate, trace

            from ..telemetry import instrument
        except ImportError:
            return None
        instrument(self.guard, tracer_provider=tracer_provider)
        return trace.get_tracer("loopwatch.server", tracer_provider=tracer_provider), propagate

    def _on_verdict(self, session: str, event: Event | Mapping[str, Any], verdict: Verdict) -> None:
        if not isinstance(event, _EVENT_CLASSES):
            try:
                event = parse_event(event)
            except EventError:
                return
        caller = _caller.get()
        self.metrics.events.labels(type=event_type(event)).inc()
        self.metrics.verdicts.labels(action=verdict.action, pattern=verdict.pattern or "none").inc()
        if not self.settings.dashboard:
            return
        repeated = verdict.action == "stop" and self.board.stopped(session)
        note = make_note(
            session, event, verdict, agent=caller.agent, model=caller.model, swarm=caller.swarm, repeated_stop=repeated
        )
        if caller.client:
            note["client"] = caller.client
        self.board.apply(note)
        if self.relay is not None:
            self.relay.send(note)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        target = relay_url(self.settings.store) if self.settings.relay and self.settings.dashboard else None
        if target is not None:
            try:
                self.relay = Relay(target[0], target[1], self.board.apply).start()
            except ImportError:
                logger.warning("loopwatch: redis-py is missing: the dashboard shows this process's traffic only")
        try:
            yield
        finally:
            if self.relay is not None:
                self.relay.close()
            if self.guard.store is not None:
                self.guard.store.close()
            for sink in self.sinks:
                with contextlib.suppress(Exception):
                    sink.close()

    def app(self) -> Starlette:
        routes: list[BaseRoute] = [
            Route("/", lambda request: RedirectResponse("/dashboard/"), methods=["GET"]),
            Route("/v1/health", self._endpoint(self.health, auth=False), methods=["GET"]),
            Route("/v1/openapi.json", self._endpoint(self.openapi, auth=False), methods=["GET"]),
            Route("/v1/sessions", self._endpoint(self.list_sessions), methods=["GET"]),
            Route("/v1/sessions/{session}", self._endpoint(self.read_session), methods=["GET"]),
            Route("/v1/sessions/{session}", self._endpoint(self.forget_session), methods=["DELETE"]),
            Route("/v1/sessions/{session}/events", self._endpoint(self.observe), methods=["POST"]),
            Route("/v1/sessions/{session}/reset", self._endpoint(self.reset_session), methods=["POST"]),
            Route("/v1/sessions/{session}/snapshot", self._endpoint(self.snapshot), methods=["GET"]),
            Route("/v1/sessions/{session}/snapshot", self._endpoint(self.restore), methods=["PUT"]),
            Route("/v1/swarms", self._endpoint(self.list_swarms), methods=["GET"]),
            Route("/v1/swarms/{swarm}", self._endpoint(self.read_swarm), methods=["GET"]),
            Route("/v1/swarms/{swarm}", self._endpoint(self.clear_swarm), methods=["DELETE"]),
            Route("/v1/swarms/{swarm}", self._endpoint(self.restore_swarm), methods=["PUT"]),
            Route("/v1/board", self._endpoint(self.board_state), methods=["GET"]),
            Route("/v1/board/rates", self._endpoint(self.board_rates), methods=["GET"]),
            Route("/v1/board/sessions/{session}", self._endpoint(self.board_session), methods=["GET"]),
            Route("/v1/live", self._endpoint(self.live), methods=["GET"]),
            Route("/metrics", self._endpoint(self.prometheus), methods=["GET"]),
            Route("/loopwatch/claude-code", self._endpoint(self.claude_code), methods=["POST"]),
        ]
        if self.settings.dashboard:
            static = resources.files("loopwatch.server") / "static"
            routes.append(Mount("/dashboard", StaticFiles(directory=str(static), html=True), name="dashboard"))
        middleware = []
        if self.settings.cors:
            middleware.append(
                Middleware(
                    CORSMiddleware,
                    allow_origins=list(self.settings.cors),
                    allow_methods=["GET", "POST", "PUT", "DELETE"],
                    allow_headers=["Authorization", "Content-Type"],
                )
            )
        return Starlette(
            routes=routes,
            middleware=middleware,
            lifespan=self.lifespan,
            exception_handlers={HTTPException: _http_error, Exception: _internal_error},  # type: ignore[dict-item]
        )

    def _endpoint(
        self, handler: Callable[[Request], Awaitable[Response]], *, auth: bool = True
    ) -> Callable[[Request], Awaitable[Response]]:
        route = handler.__name__
        histogram = self.metrics.request_latency.labels(route=route)

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            try:
                client = self._authorize(request) if auth else None
                token = _caller.set(_Caller(client=client))
                try:
                    return await handler(request)
                finally:
                    _caller.reset(token)
            except ApiError as exc:
                self.metrics.rejected.labels(code=exc.code).inc()
                return _error(exc)
            except StoreError as exc:
                self.metrics.rejected.labels(code="store_unavailable").inc()
                return _error(ApiError("store_unavailable", f"the session store failed: {exc}"))
            finally:
                histogram.observe(time.perf_counter() - started)

        endpoint.__name__ = route
        return endpoint

    def _authorize(self, request: Request) -> str | None:
        """The calling token's name (None when the service has no tokens); raises 401 or 429."""
        client: str | None = None
        if self.tokens:
            client = self.tokens.identify(request.headers.get("authorization"))
            if client is None:
                raise ApiError(
                    "unauthorized",
                    "a valid bearer token is required (Authorization: Bearer <token>)",
                    headers={"WWW-Authenticate": 'Bearer realm="loopwatch"'},
                )
        if self.limiter.enabled:
            key = client or (request.client.host if request.client else "unknown")
            wait = self.limiter.allow(key)
            if wait > 0:
                raise ApiError(
                    "rate_limited",
                    f"too many requests: at most {self.limiter.rate:g} per second",
                    headers={"Retry-After": str(max(1, round(wait + 0.5)))},
                    retry_after=round(wait, 3),
                )
        return client

    async def _body(self, request: Request) -> Any:
        """The request's JSON body, read up to ``max_body`` bytes."""
        limit = self.settings.max_body
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise ApiError("bad_request", "Content-Length is not a number") from None
            if size > limit:
                raise ApiError("body_too_large", f"the body is {size} bytes, more than {limit}", limit=limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError("body_too_large", f"the body is more than {limit} bytes", limit=limit)
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError("malformed_json", f"the body is not JSON: {exc}") from None

    async def _object(self, request: Request) -> dict[str, Any]:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise ApiError("invalid_request", f"the body is a JSON object, not {type(body).__name__}")
        return body

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.guard.store is None and self.guard.judge is None:
            return fn(*args, **kwargs)
        return await run_in_threadpool(fn, *args, **kwargs)

    # -- the API ----------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        store = self.guard.store
        healthy = True if store is None else await run_in_threadpool(store.health)
        body = {"status": "ok" if healthy else "degraded", "version": __version__, "store": healthy}
        return _json(body, 200 if healthy else 503)

    async def openapi(self, request: Request) -> Response:
        return _json(document())

    async def observe(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        body = await self._object(request)
        single = "event" in body
        if single == ("events" in body):
            raise ApiError("invalid_request", "give either 'event' (one event) or 'events' (a list)")
        raw = [body["event"]] if single else body["events"]
        if not isinstance(raw, list):
            raise ApiError("invalid_request", "'events' is a list of events", field="events")
        if len(raw) > self.settings.max_batch:
            limit = self.settings.max_batch
            raise ApiError("batch_too_large", f"{len(raw)} events in one batch, more than {limit}", limit=limit)
        events: list[Event] = []
        for position, item in enumerate(raw):
            try:
                events.append(parse_event(item))
            except EventError as exc:
                details: dict[str, Any] = {"field": exc.field}
                if not single:
                    details["position"] = position
                raise ApiError("invalid_event", str(exc), **details) from None
        caller = _Caller(
            client=_caller.get().client,
            agent=_optional_name(body, "agent"),
            model=_optional_name(body, "model"),
            swarm=_optional_name(body, "swarm"),
        )
        headers = dict(request.headers)
        verdicts: list[Verdict] = await self._call(self._judge, session, events, caller, headers)
        if single:
            return _json({"session": session, "verdict": verdict_json(verdicts[0])})
        return _json({"session": session, "verdicts": [verdict_json(v) for v in verdicts]})

    def _judge(self, session: str, events: list[Event], caller: _Caller, headers: dict[str, str]) -> list[Verdict]:
        token = _caller.set(caller)
        try:
            with self._span(headers, session):
                verdicts = []
                for event in events:
                    started = time.perf_counter()
                    verdicts.append(self.guard.observe(session, event, swarm=caller.swarm))
                    self.metrics.event_latency.observe(time.perf_counter() - started)
                return verdicts
        finally:
            _caller.reset(token)

    @contextlib.contextmanager
    def _span(self, headers: Mapping[str, str], session: str) -> Any:
        if self._otel is None:
            yield
            return
        from ..telemetry import work_context

        tracer, propagate = self._otel
        caller = _caller.get()
        attributes = {"gen_ai.conversation.id": session}
        with (
            tracer.start_as_current_span(
                "loopwatch observe", context=propagate.extract(headers), attributes=attributes
            ),
            work_context(agent=caller.agent, model=caller.model),
        ):
            yield

    async def list_sessions(self, request: Request) -> Response:
        names = sorted(await self._call(self.guard.sessions))
        limit = _int_param(request, "limit", 1000, 1, 100_000)
        offset = _int_param(request, "offset", 0, 0, 10**9)
        return _json({"total": len(names), "sessions": names[offset : offset + limit]})

    async def read_session(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        snapshot = await self._call(self.guard.snapshot, session)
        if not snapshot["state"].get("index") and session not in await self._call(self.guard.sessions):
            raise ApiError("not_found", f"no session {session!r}")
        return _json(session_summary(snapshot))

    async def forget_session(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        await self._call(self.guard.forget, session)
        self.board.forget(session)
        self._audit("api.forget", session)
        return _json({"session": session, "forgotten": True})

    async def reset_session(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        body = await self._object(request) if await _has_body(request) else {}
        limits = body.get("limits", False)
        if not isinstance(limits, bool):
            raise ApiError("invalid_request", "'limits' is true or false", field="limits")
        await self._call(self.guard.reset, session, limits=limits)
        self.board.reset(session)
        self._audit("api.reset", session, limits=limits)
        return _json({"session": session, "reset": True, "limits": limits})

    async def snapshot(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        return _json(await self._call(self.guard.snapshot, session))

    async def restore(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        body = await self._object(request)
        try:
            self.guard.engine.load(body["state"])  # checked here: a damaged snapshot writes nothing
            await self._call(self.guard.restore, body, session)
        except StateError as exc:
            raise ApiError("invalid_snapshot", str(exc)) from None
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise ApiError("invalid_snapshot", f"not a session snapshot: {exc!r}") from None
        self._audit("api.restore", session)
        return _json({"session": session, "restored": True})

    async def list_swarms(self, request: Request) -> Response:
        def swarms() -> dict[str, int]:
            found: dict[str, int] = {}
            for name in self.guard.sessions():
                swarm = self.guard.snapshot(name).get("swarm")
                if swarm:
                    found[swarm] = found.get(swarm, 0) + 1
            return found

        found = await run_in_threadpool(swarms)
        return _json({"swarms": [{"swarm": k, "sessions": v} for k, v in sorted(found.items())]})

    async def read_swarm(self, request: Request) -> Response:
        swarm = _name(request.path_params["swarm"], "swarm")
        return _json(await self._call(self.guard.swarm_snapshot, swarm))

    async def clear_swarm(self, request: Request) -> Response:
        swarm = _name(request.path_params["swarm"], "swarm")
        await self._call(self.guard.clear_swarm, swarm)
        self._audit("api.swarm_clear", None, swarm=swarm)
        return _json({"swarm": swarm, "cleared": True})

    async def restore_swarm(self, request: Request) -> Response:
        swarm = _name(request.path_params["swarm"], "swarm")
        body = await self._object(request)
        try:
            await self._call(self.guard.restore_swarm, {**body, "swarm": swarm})
        except StateError as exc:
            raise ApiError("invalid_snapshot", str(exc)) from None
        self._audit("api.swarm_restore", None, swarm=swarm)
        return _json({"swarm": swarm, "restored": True})

    def _audit(self, name: str, session: str | None, **fields: Any) -> None:
        record = {"event": name, "ts": time.time(), "session": session, **fields}
        for sink in self.sinks:
            try:
                sink.emit(record)
            except LoopwatchError:
                logger.exception("loopwatch: audit sink %r failed on %s", sink, name)

    # -- the dashboard's data ---------------------------------------------------------------------------

    async def board_state(self, request: Request) -> Response:
        since = _int_param(request, "since", 0, 0, 2**62)
        feed = _int_param(request, "feed", 0, 0, 2**62)
        return _json(self._board_message(since, feed))

    def _board_message(self, since: int, feed: int) -> dict[str, Any]:
        summary = self.board.summary()
        return {"summary": summary, "rows": self.board.rows(since), "feed": self.board.feed(feed)}

    async def board_rates(self, request: Request) -> Response:
        dimension = request.query_params.get("dimension", "agent")
        if dimension not in DIMENSIONS:
            raise ApiError("invalid_request", f"dimension is one of {', '.join(DIMENSIONS)}", field="dimension")
        return _json(self.board.rates(dimension))

    async def board_session(self, request: Request) -> Response:
        session = _name(request.path_params["session"], "session")
        timeline = self.board.timeline(session)
        if timeline is None:
            raise ApiError("not_found", f"no recent activity of session {session!r} on the board")
        return _json({**timeline, "colours": _REPORT_COLOURS})

    async def live(self, request: Request) -> Response:
        """Server-sent events: the board's changes (rows, feed, summary) every 200 ms while there are any."""

        async def stream() -> AsyncIterator[bytes]:
            version, seq = 0, max(self.board.feed_seq - 100, 0)
            quiet = 0.0
            while True:
                summary = self.board.summary()
                if summary["version"] != version or summary["feed_seq"] != seq or quiet >= _HEARTBEAT:
                    message = self._board_message(version, seq)
                    version, seq, quiet = summary["version"], summary["feed_seq"], 0.0
                    yield b"event: board\ndata: " + json.dumps(message, default=str).encode() + b"\n\n"
                await asyncio.sleep(_TICK)
                quiet += _TICK

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def prometheus(self, request: Request) -> Response:
        return Response(render(), media_type=CONTENT_TYPE)

    async def claude_code(self, request: Request) -> Response:
        """The Claude Code ``http`` hook: the command hook's answers (``200 {}`` when nothing is to be said)."""
        from ..adapters.claude_code_server import hook_answer

        try:
            raw = await self._raw(request)
        except ApiError as exc:
            if exc.code == "body_too_large":
                raise
            return _json({})
        reply = await run_in_threadpool(hook_answer, self.guard, raw, self.settings.fail_closed)
        return _json(reply)

    async def _raw(self, request: Request) -> bytes:
        limit = self.settings.max_body
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError("body_too_large", f"the body is more than {limit} bytes", limit=limit)
            chunks.append(chunk)
        return b"".join(chunks)


async def _has_body(request: Request) -> bool:
    declared = request.headers.get("content-length")
    return declared not in (None, "0") or request.headers.get("transfer-encoding") == "chunked"


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError("invalid_request", f"{name} is a whole number", field=name) from None
    if not low <= value <= high:
        raise ApiError("invalid_request", f"{name} is from {low} to {high}", field=name)
    return value


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return _error(ApiError("not_found", f"no such endpoint: {request.method} {request.url.path}"))
    if exc.status_code == 405:
        return _error(ApiError("method_not_allowed", f"{request.method} is not allowed on {request.url.path}"))
    return _json({"error": {"code": "bad_request", "message": str(exc.detail)}}, exc.status_code)


async def _internal_error(request: Request, exc: Exception) -> Response:
    logger.exception("loopwatch: internal error answering %s %s", request.method, request.url.path)
    return _error(ApiError("internal_error", "internal error (logged by the service)"))


def create_app(
    settings: ServiceSettings | None = None,
    *,
    guard: Guard | None = None,
    tokens: Tokens | None = None,
    sinks: list[Any] | None = None,
    tracer_provider: Any = None,
) -> Starlette:
    """The ASGI app for ``settings`` (default: :meth:`ServiceSettings.from_env`, as uvicorn's workers build it);
    ``tracer_provider``: OpenTelemetry's, when not the global one."""
    settings = settings if settings is not None else ServiceSettings.from_env()
    service = Service(settings, guard=guard, tokens=tokens, sinks=sinks, tracer_provider=tracer_provider)
    return service.app()


def app_from_env() -> Starlette:
    """uvicorn's factory in each worker process (``loopwatch serve`` passes the settings in the environment)."""
    settings = ServiceSettings.from_env()
    sinks: list[Any] = []
    if settings.audit:
        from ..sinks import JsonlAuditSink

        sinks.append(JsonlAuditSink(settings.audit))
    return create_app(settings, sinks=sinks)
