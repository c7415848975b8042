"""The service's ASGI application (starlette): the JSON API, the live dashboard, ``/metrics``.

    app = create_app(ServiceSettings(store="redis://127.0.0.1:6379/0"))   # or create_app(settings, guard=guard)

Every request is answered with JSON; an error is ``{"error": {"code", "message"}}`` with a stable code and its
status (:data:`~loopwatch.server.errors.CODES`), and a request refused for any reason writes nothing to state.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from .._guard import Guard
from .._policy_spec import PolicySpec
from ..core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, event_type, parse_event
from ..core._verdict import Verdict
from ..errors import EventError, LoopwatchError, StateError
from ..stores import StoreError
from ._board import Board, make_note
from ._board_routes import BoardRoutes
from ._caller import Caller, ClientTagged, current_caller
from ._http import (
    checked_name,
    error_response,
    has_body,
    http_error,
    int_param,
    internal_error,
    json_response,
    optional_name,
    read_object,
    read_raw,
)
from ._openapi import document
from ._prometheus import CONTENT_TYPE, ServiceMetrics, render
from ._ratelimit import RateLimiter
from ._relay import Relay, relay_url
from ._settings import ServiceSettings, Tokens
from .errors import ApiError

__all__ = ["Service", "app_from_env", "create_app"]

logger = logging.getLogger("loopwatch")
_EVENT_CLASSES: Final = (ToolCall, ToolResult, Message, TextDelta, Usage, Reset)


def _build_guard(settings: ServiceSettings, sinks: list[Any] | None = None) -> Guard:
    """The guard the service judges with: the configured policy, in the configured store."""
    policy = PolicySpec(settings.preset, settings.config).build()
    return Guard(
        policy=policy,
        store=settings.store,
        sinks=sinks or (),
        on_store_error="block" if settings.fail_closed else "allow",
        max_sessions=settings.max_sessions,
    )


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    """A verdict as the API answers it: its JSON form, and whether the event was recorded in the session."""
    data = verdict.to_json()
    data["recorded"] = verdict.index >= 0
    return data


def _session_summary(snapshot: Mapping[str, Any]) -> dict[str, Any]:
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
        tagged = [ClientTagged(sink) for sink in sinks or ()]
        self.guard = guard if guard is not None else _build_guard(settings, tagged)
        if guard is not None:
            guard.sinks.extend(tagged)
        self.sinks = tagged
        self.board = Board(reset_on_user=self.guard.policy.reset_on_user)
        self.board_routes = BoardRoutes(self.board)
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
        caller = current_caller.get()
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
            Route("/v1/board", self._endpoint(self.board_routes.board_state), methods=["GET"]),
            Route("/v1/board/rates", self._endpoint(self.board_routes.board_rates), methods=["GET"]),
            Route("/v1/board/sessions/{session}", self._endpoint(self.board_routes.board_session), methods=["GET"]),
            Route("/v1/live", self._endpoint(self.board_routes.live), methods=["GET"]),
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
            exception_handlers={HTTPException: http_error, Exception: internal_error},  # type: ignore[dict-item]
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
                token = current_caller.set(Caller(client=client))
                try:
                    return await handler(request)
                finally:
                    current_caller.reset(token)
            except ApiError as exc:
                self.metrics.rejected.labels(code=exc.code).inc()
                return error_response(exc)
            except StoreError as exc:
                self.metrics.rejected.labels(code="store_unavailable").inc()
                return error_response(ApiError("store_unavailable", f"the session store failed: {exc}"))
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

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.guard.store is None and self.guard.judge is None:
            return fn(*args, **kwargs)
        return await run_in_threadpool(fn, *args, **kwargs)

    # -- the API ----------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        store = self.guard.store
        healthy = True if store is None else await run_in_threadpool(store.health)
        body = {"status": "ok" if healthy else "degraded", "version": __version__, "store": healthy}
        return json_response(body, 200 if healthy else 503)

    async def openapi(self, request: Request) -> Response:
        return json_response(document())

    async def observe(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        body = await read_object(request, self.settings.max_body)
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
        caller = Caller(
            client=current_caller.get().client,
            agent=optional_name(body, "agent"),
            model=optional_name(body, "model"),
            swarm=optional_name(body, "swarm"),
        )
        headers = dict(request.headers)
        verdicts: list[Verdict] = await self._call(self._judge, session, events, caller, headers)
        if single:
            return json_response({"session": session, "verdict": _verdict_json(verdicts[0])})
        return json_response({"session": session, "verdicts": [_verdict_json(v) for v in verdicts]})

    def _judge(self, session: str, events: list[Event], caller: Caller, headers: dict[str, str]) -> list[Verdict]:
        token = current_caller.set(caller)
        try:
            with self._span(headers, session):
                verdicts = []
                for event in events:
                    started = time.perf_counter()
                    verdicts.append(self.guard.observe(session, event, swarm=caller.swarm))
                    self.metrics.event_latency.observe(time.perf_counter() - started)
                return verdicts
        finally:
            current_caller.reset(token)

    @contextlib.contextmanager
    def _span(self, headers: Mapping[str, str], session: str) -> Any:
        if self._otel is None:
            yield
            return
        from ..telemetry import work_context

        tracer, propagate = self._otel
        caller = current_caller.get()
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
        limit = int_param(request, "limit", 1000, 1, 100_000)
        offset = int_param(request, "offset", 0, 0, 10**9)
        return json_response({"total": len(names), "sessions": names[offset : offset + limit]})

    async def read_session(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        snapshot = await self._call(self.guard.snapshot, session)
        if not snapshot["state"].get("index") and session not in await self._call(self.guard.sessions):
            raise ApiError("not_found", f"no session {session!r}")
        return json_response(_session_summary(snapshot))

    async def forget_session(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        await self._call(self.guard.forget, session)
        self.board.forget(session)
        self._audit("api.forget", session)
        return json_response({"session": session, "forgotten": True})

    async def reset_session(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        body = await read_object(request, self.settings.max_body) if await has_body(request) else {}
        limits = body.get("limits", False)
        if not isinstance(limits, bool):
            raise ApiError("invalid_request", "'limits' is true or false", field="limits")
        await self._call(self.guard.reset, session, limits=limits)
        self.board.reset(session)
        self._audit("api.reset", session, limits=limits)
        return json_response({"session": session, "reset": True, "limits": limits})

    async def snapshot(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        return json_response(await self._call(self.guard.snapshot, session))

    async def restore(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        body = await read_object(request, self.settings.max_body)
        try:
            self.guard.engine.load(body["state"])  # checked here: a damaged snapshot writes nothing
            await self._call(self.guard.restore, body, session)
        except StateError as exc:
            raise ApiError("invalid_snapshot", str(exc)) from None
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise ApiError("invalid_snapshot", f"not a session snapshot: {exc!r}") from None
        self._audit("api.restore", session)
        return json_response({"session": session, "restored": True})

    async def list_swarms(self, request: Request) -> Response:
        def swarms() -> dict[str, int]:
            found: dict[str, int] = {}
            for name in self.guard.sessions():
                swarm = self.guard.snapshot(name).get("swarm")
                if swarm:
                    found[swarm] = found.get(swarm, 0) + 1
            return found

        found = await run_in_threadpool(swarms)
        return json_response({"swarms": [{"swarm": k, "sessions": v} for k, v in sorted(found.items())]})

    async def read_swarm(self, request: Request) -> Response:
        swarm = checked_name(request.path_params["swarm"], "swarm")
        return json_response(await self._call(self.guard.swarm_snapshot, swarm))

    async def clear_swarm(self, request: Request) -> Response:
        swarm = checked_name(request.path_params["swarm"], "swarm")
        await self._call(self.guard.clear_swarm, swarm)
        self._audit("api.swarm_clear", None, swarm=swarm)
        return json_response({"swarm": swarm, "cleared": True})

    async def restore_swarm(self, request: Request) -> Response:
        swarm = checked_name(request.path_params["swarm"], "swarm")
        body = await read_object(request, self.settings.max_body)
        try:
            await self._call(self.guard.restore_swarm, {**body, "swarm": swarm})
        except StateError as exc:
            raise ApiError("invalid_snapshot", str(exc)) from None
        self._audit("api.swarm_restore", None, swarm=swarm)
        return json_response({"swarm": swarm, "restored": True})

    def _audit(self, name: str, session: str | None, **fields: Any) -> None:
        record = {"event": name, "ts": time.time(), "session": session, **fields}
        for sink in self.sinks:
            try:
                sink.emit(record)
            except LoopwatchError:
                logger.exception("loopwatch: audit sink %r failed on %s", sink, name)

    async def prometheus(self, request: Request) -> Response:
        return Response(render(), media_type=CONTENT_TYPE)

    async def claude_code(self, request: Request) -> Response:
        """The Claude Code ``http`` hook: the command hook's answers (``200 {}`` when nothing is to be said)."""
        from ..adapters.claude_code_server import hook_answer

        try:
            raw = await read_raw(request, self.settings.max_body)
        except ApiError as exc:
            if exc.code == "body_too_large":
                raise
            return json_response({})
        reply = await run_in_threadpool(hook_answer, self.guard, raw, self.settings.fail_closed)
        return json_response(reply)


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
