"""Verdicts on OpenTelemetry spans, read back with the SDK's in-memory exporter: an in-process guard, and the
service (a real uvicorn server in this process, so that its spans reach this exporter) continuing the caller's
trace from its ``traceparent`` header."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwatch import AsyncGuard, Guard, ToolCall
from loopwatch.telemetry import SPAN_EVENT, VerdictSpans, instrument, work_context

EXPORTER = InMemorySpanExporter()


def _provider() -> TracerProvider:
    """A provider exporting to EXPORTER, built with the SDK enabled (another test module may disable it for its
    framework through OTEL_SDK_DISABLED, read when a provider is made); passed explicitly, never made global."""
    saved = os.environ.pop("OTEL_SDK_DISABLED", None)
    try:
        provider = TracerProvider()
    finally:
        if saved is not None:
            os.environ["OTEL_SDK_DISABLED"] = saved
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    return provider


PROVIDER = _provider()
TRACER = PROVIDER.get_tracer("tests")


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    EXPORTER.clear()
    yield
    EXPORTER.clear()


def _events(span: Any) -> list[dict[str, Any]]:
    return [dict(e.attributes) for e in span.events if e.name == SPAN_EVENT]


def test_each_verdict_is_a_span_event_with_genai_and_loopwatch_attributes() -> None:
    guard = Guard("default", clock=None)
    hook = instrument(guard, tracer_provider=PROVIDER)
    assert instrument(guard) is hook and guard.verdict_hooks == [hook]
    with work_context(agent="coder", model="claude-x"):
        for n in range(5):
            with TRACER.start_as_current_span(f"tool {n}"):
                guard.observe("run-7", ToolCall("bash", {"command": "ls"}, id=f"call-{n}"))
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    first = _events(spans["tool 0"])
    assert first == [
        {
            "gen_ai.conversation.id": "run-7",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "bash",
            "gen_ai.tool.call.id": "call-0",
            "gen_ai.agent.name": "coder",
            "gen_ai.request.model": "claude-x",
            "loopwatch.action": "ok",
            "loopwatch.index": 0,
        }
    ]
    assert "loopwatch.action" not in (spans["tool 0"].attributes or {})
    nudge = _events(spans["tool 2"])[0]
    assert nudge["loopwatch.action"] == "nudge" and nudge["loopwatch.pattern"] == "repeat"
    assert nudge["loopwatch.count"] == 3 and nudge["loopwatch.rule"].startswith("RepeatDetector(")
    blocked = spans["tool 4"].attributes or {}
    assert blocked["loopwatch.action"] == "block" and blocked["loopwatch.count"] == 5


def test_an_async_guard_is_instrumented_too() -> None:
    guard = AsyncGuard("default", clock=None)
    instrument(guard, tracer_provider=PROVIDER)
    with TRACER.start_as_current_span("async step"):
        asyncio.run(guard.observe("run-10", ToolCall("ls")))
    assert _events(EXPORTER.get_finished_spans()[0])[0]["loopwatch.action"] == "ok"


def test_without_a_recording_span_a_loop_gets_its_own_span() -> None:
    guard = Guard("default", clock=None)
    guard.verdict_hooks.append(VerdictSpans(tracer_provider=PROVIDER, record_ok=False))
    for _ in range(3):
        guard.observe("run-8", ToolCall("bash", {"command": "ls"}))
    spans = EXPORTER.get_finished_spans()
    assert [s.name for s in spans] == ["loopwatch nudge"]
    assert _events(spans[0])[0]["loopwatch.pattern"] == "repeat"


def test_a_failing_hook_never_reaches_the_agent() -> None:
    guard = Guard("default", clock=None)

    def broken(*args: Any) -> None:
        raise RuntimeError("exporter down")

    guard.verdict_hooks.append(broken)
    assert guard.observe("run-9", ToolCall("ls")).action == "ok"
    assert guard.stats["errors"] == 1


def test_the_service_records_verdicts_on_the_callers_trace() -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from loopwatch.server._app import create_app
    from loopwatch.server._settings import ServiceSettings, Tokens
    from redis_server import free_port

    port = free_port()
    app = create_app(ServiceSettings(port=port), tokens=Tokens(), tracer_provider=PROVIDER)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        with TRACER.start_as_current_span("agent step") as parent:
            context = parent.get_span_context()
            traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
            for _ in range(3):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                body = {
                    "event": {"type": "tool_call", "tool": "grep", "args": {"q": "x"}},
                    "agent": "a1",
                    "model": "m1",
                }
                connection.request("POST", "/v1/sessions/svc-1/events", json.dumps(body), {"traceparent": traceparent})
                assert connection.getresponse().status == 200
                connection.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    served = [s for s in EXPORTER.get_finished_spans() if s.name == "loopwatch observe"]
    assert len(served) == 3
    assert {s.context.trace_id for s in served} == {context.trace_id}
    assert {s.parent.span_id for s in served if s.parent} == {context.span_id}
    last = _events(served[-1])[0]
    assert last["loopwatch.action"] == "nudge" and last["gen_ai.agent.name"] == "a1"
    assert last["gen_ai.request.model"] == "m1" and last["gen_ai.conversation.id"] == "svc-1"
