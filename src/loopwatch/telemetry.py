"""Verdicts on OpenTelemetry spans (the ``otel`` extra: ``pip install 'loopwatch[otel]'``).

    from loopwatch.telemetry import instrument
    instrument(guard)                       # every verdict of this guard, on the current span

Each verdict becomes a span event named ``loopwatch.verdict`` on the span current where ``observe`` runs (the
agent's tool-call or LLM span, when the framework traces), with the GenAI semantic conventions' attributes
(``gen_ai.conversation.id`` = the session, ``gen_ai.operation.name``, ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, and ``gen_ai.agent.name`` / ``gen_ai.request.model`` when known) and loopwatch's own:
``loopwatch.action``, ``loopwatch.pattern``, ``loopwatch.count``, ``loopwatch.rule`` (the rule that fired),
``loopwatch.level`` and ``loopwatch.index``. A nudge, block or stop also sets the ``loopwatch.*`` attributes on
the span itself (the strongest verdict wins), so spans can be filtered by them. When no span is recording, a
nudge, block or stop gets a short span of its own (``loopwatch <action>``) so that it is never lost; ``ok``
verdicts are then left out.

Only the OpenTelemetry API is used: the application (or ``opentelemetry-instrument``) configures the SDK and its
exporter; without one, every call is a no-op. The service (``loopwatch serve``) instruments its guard when the
extra is installed and records the agent and model named in each request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

from ._guard import AsyncGuard, Guard
from .core._events import Event, Message, ToolCall, ToolResult
from .core._verdict import SEVERITY, Verdict
from .errors import ConfigError, MissingExtraError

__all__ = ["SPAN_EVENT", "VerdictSpans", "instrument", "verdict_attributes", "work_context"]

SPAN_EVENT: Final = "loopwatch.verdict"
_SCOPE: Final = "loopwatch"
_context: ContextVar[Mapping[str, str] | None] = ContextVar("loopwatch_telemetry_context", default=None)


def _trace() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover (the test extra installs it)
        raise MissingExtraError("opentelemetry-api", "otel") from exc
    return trace


@contextlib.contextmanager
def work_context(*, agent: str | None = None, model: str | None = None) -> Iterator[None]:
    """Inside the block, verdicts also carry ``gen_ai.agent.name`` and ``gen_ai.request.model``."""
    values = {k: v for k, v in (("gen_ai.agent.name", agent), ("gen_ai.request.model", model)) if v}
    token = _context.set(values or None)
    try:
        yield
    finally:
        _context.reset(token)


def _operation(event: Event | Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(gen_ai.operation.name, tool name, tool call id) of an event or its JSON form."""
    if isinstance(event, (ToolCall, ToolResult)):
        return "execute_tool", event.tool, event.id
    if isinstance(event, Message):
        return "chat", None, None
    if isinstance(event, Mapping):
        kind = event.get("type")
        tool, call = event.get("tool"), event.get("id")
        if kind in ("tool_call", "tool_result"):
            return "execute_tool", tool if isinstance(tool, str) else None, call if isinstance(call, str) else None
        return ("chat" if kind == "message" else None), None, None
    return None, None, None


def verdict_attributes(session: str, event: Event | Mapping[str, Any], verdict: Verdict) -> dict[str, Any]:
    """The attributes a verdict is recorded with (GenAI conventions plus ``loopwatch.*``)."""
    operation, tool, call = _operation(event)
    attributes: dict[str, Any] = {"gen_ai.conversation.id": session}
    if operation:
        attributes["gen_ai.operation.name"] = operation
    if tool:
        attributes["gen_ai.tool.name"] = tool
    if call:
        attributes["gen_ai.tool.call.id"] = call
    extra = _context.get()
    if extra:
        attributes.update(extra)
    attributes["loopwatch.action"] = verdict.action
    attributes["loopwatch.index"] = verdict.index
    if verdict.pattern:
        attributes["loopwatch.pattern"] = verdict.pattern
        attributes["loopwatch.count"] = verdict.count
        attributes["loopwatch.level"] = verdict.level
    if verdict.detector:
        attributes["loopwatch.rule"] = verdict.detector
    if verdict.status:
        attributes["loopwatch.status"] = verdict.status
    return attributes


class VerdictSpans:
    """A guard's verdict hook that records each verdict on the current span (see the module's text).

    ``tracer_provider``: where standalone spans come from (default: the global one). ``record_ok``: record ``ok``
    verdicts as span events too (default); ``False`` keeps only nudges, blocks and stops.
    """

    def __init__(self, *, tracer_provider: Any = None, record_ok: bool = True) -> None:
        if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
            kind = type(tracer_provider).__name__
            raise ConfigError(f"must be a TracerProvider (get_tracer()), got {kind}", field="tracer_provider")
        trace = _trace()
        self._trace = trace
        self.record_ok = record_ok
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)

    def __repr__(self) -> str:
        return f"VerdictSpans(record_ok={self.record_ok})"

    def __call__(self, session: str, event: Event | Mapping[str, Any], verdict: Verdict) -> None:
        if verdict.ok and not self.record_ok:
            return
        span = self._trace.get_current_span()
        recording = span.is_recording()
        if not recording and verdict.ok:
            return
        attributes = verdict_attributes(session, event, verdict)
        if not recording:
            with self._tracer.start_as_current_span(f"loopwatch {verdict.action}", attributes=attributes) as own:
                own.add_event(SPAN_EVENT, attributes)
            return
        span.add_event(SPAN_EVENT, attributes)
        if not verdict.ok and _stronger_than_recorded(span, verdict):
            span.set_attributes({k: v for k, v in attributes.items() if k.startswith("loopwatch.")})


def _stronger_than_recorded(span: Any, verdict: Verdict) -> bool:
    """Whether ``verdict`` is at least as strong as the ``loopwatch.action`` already on the span."""
    recorded = getattr(span, "attributes", None) or {}
    before = recorded.get("loopwatch.action") if isinstance(recorded, Mapping) else None
    return not isinstance(before, str) or SEVERITY.get(before, 0) <= verdict.severity


def instrument(guard: Guard | AsyncGuard, **options: Any) -> VerdictSpans:
    """Record ``guard``'s verdicts (a :class:`Guard` or an :class:`AsyncGuard`) on OpenTelemetry spans; returns
    the hook (``guard.verdict_hooks`` holds it). Instrumenting a guard twice adds nothing: the existing hook is
    returned. ``options``: :class:`VerdictSpans`'s."""
    if isinstance(guard, AsyncGuard):
        guard = guard._guard
    for hook in guard.verdict_hooks:
        if isinstance(hook, VerdictSpans):
            return hook
    hook = VerdictSpans(**options)
    guard.verdict_hooks.append(hook)
    return hook
