"""OpenTelemetry GenAI spans exported as OTLP JSON (``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``).

A file is one OTLP JSON document or JSON Lines with one export request per line (the collector's file
exporter). Spans are grouped into runs by trace (the run id is the trace's ``gen_ai.conversation.id`` when a
span of the trace has one, so the traces of one conversation make one run; else the ``traceId``) and ordered by
``startTimeUnixNano``; record ``i`` of a run is its ``i``-th span in that order.

Following the GenAI semantic conventions: an ``execute_tool`` span (``gen_ai.operation.name``, or a span with
``gen_ai.tool.name``) is a call (``gen_ai.tool.name``, args from ``gen_ai.tool.call.arguments``, id from
``gen_ai.tool.call.id``) followed by its result (``gen_ai.tool.call.result``; an error when the span's status is
ERROR or ``error.type`` is set, the status message standing in for a missing result). A ``chat`` (or
``text_completion``, ``generate_content``) span gives the user's message when its last input message
(``gen_ai.input.messages``) is the user's, its token usage (``gen_ai.usage.input_tokens`` / ``output_tokens``)
and the model's text (``gen_ai.output.messages``): a message, or the thought of the call it asked for. Other
spans (``invoke_agent``, HTTP, ...) give no event; a trace without GenAI spans gives no run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..errors import InputError
from ._common import count, mapping, tool_args
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final = ("otel",)

_CHAT: Final = frozenset({"chat", "text_completion", "generate_content"})
_STATUS_ERROR: Final = (2, "STATUS_CODE_ERROR", "ERROR")


def _key(obj: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def sniff(first: Any, path: str) -> str | None:
    """``otel`` for an OTLP JSON trace export (``resourceSpans``), or a list of them."""
    doc = first[0] if isinstance(first, list) and first else first
    ok = isinstance(doc, Mapping) and isinstance(_key(doc, "resourceSpans", "resource_spans"), list)
    return NAMES[0] if ok else None


@dataclass
class _Span:
    trace: str
    order: int
    name: str
    start: int
    end: int | None
    attrs: dict[str, Any]
    error: bool | None
    status_message: str
    exception: str | None = None
    events: list[Event] = field(default_factory=list)


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per conversation (or trace), in order of first appearance; a bad span ends the file."""
    spans: list[_Span] = []
    for lineno, record in records:
        try:
            for doc in record if isinstance(record, list) else [record]:
                _collect(doc, spans)
        except ValueError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
    yield from _runs(name, spans, path)


def _collect(doc: Any, out: list[_Span]) -> None:
    if not isinstance(doc, Mapping):
        raise ValueError(f"an OTLP export is a JSON object, got {type(doc).__name__}")
    resources = _key(doc, "resourceSpans", "resource_spans")
    if not isinstance(resources, list):
        raise ValueError("resourceSpans: expected a list")
    for r, resource in enumerate(resources):
        if not isinstance(resource, Mapping):
            raise ValueError(f"resourceSpans[{r}]: expected a JSON object")
        scopes = _key(resource, "scopeSpans", "scope_spans", "instrumentationLibrarySpans") or []
        if not isinstance(scopes, list):
            raise ValueError(f"resourceSpans[{r}].scopeSpans: expected a list")
        for s, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, Mapping) else None
            if not isinstance(spans, list):
                raise ValueError(f"resourceSpans[{r}].scopeSpans[{s}].spans: expected a list")
            for k, span in enumerate(spans):
                try:
                    out.append(_span(span, len(out)))
                except ValueError as exc:
                    raise ValueError(f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}]: {exc}") from None


def _span(span: Any, order: int) -> _Span:
    if not isinstance(span, Mapping):
        raise ValueError(f"a span is a JSON object, got {type(span).__name__}")
    trace = _key(span, "traceId", "trace_id")
    if not isinstance(trace, str) or not trace:
        raise ValueError("traceId: expected a non-empty string")
    status = mapping(span.get("status"))
    code = status.get("code")
    message = status.get("message")
    exception = None
    events = span.get("events")
    for event in events if isinstance(events, list) else ():
        if isinstance(event, Mapping) and event.get("name") == "exception":
            text = _attributes(event.get("attributes")).get("exception.message")
            exception = text if isinstance(text, str) else exception
    name = span.get("name")
    return _Span(
        trace=trace,
        order=order,
        name=name if isinstance(name, str) else "",
        start=_nanos(_key(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano") or 0,
        end=_nanos(_key(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
        attrs=_attributes(span.get("attributes")),
        error=True if code in _STATUS_ERROR else (False if code in (1, "STATUS_CODE_OK", "OK") else None),
        status_message=message if isinstance(message, str) else "",
        exception=exception,
    )


def _nanos(value: Any, field_name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{field_name}: expected a non-negative integer, got {value!r}")


def _attributes(value: Any) -> dict[str, Any]:
    """OTLP ``[{"key", "value": AnyValue}]`` (or an already flat object) as a plain dict."""
    if isinstance(value, Mapping):
        return {str(k): _any(v) for k, v in value.items()}
    out: dict[str, Any] = {}
    for item in value if isinstance(value, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            out[item["key"]] = _any(item.get("value"))
    return out


_SCALARS: Final = {
    "stringValue": str,
    "string_value": str,
    "boolValue": bool,
    "bool_value": bool,
    "intValue": int,
    "int_value": int,
    "doubleValue": float,
    "double_value": float,
    "bytesValue": str,
    "bytes_value": str,
}


def _any(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain value (a value that is not one is returned as is)."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return value
    kind, inner = next(iter(value.items()))
    if kind in _SCALARS:
        try:
            return _SCALARS[kind](inner) if inner is not None else None
        except (TypeError, ValueError):
            return inner
    if kind in ("arrayValue", "array_value"):
        items = inner.get("values") if isinstance(inner, Mapping) else None
        return [_any(v) for v in items] if isinstance(items, list) else []
    if kind in ("kvlistValue", "kvlist_value"):
        items = inner.get("values") if isinstance(inner, Mapping) else None
        return _attributes(items)
    return value


def _runs(name: str, spans: list[_Span], path: str) -> Iterator[Run]:
    conversation: dict[str, str] = {}
    for span in spans:
        conv = span.attrs.get("gen_ai.conversation.id")
        if isinstance(conv, str) and conv and span.trace not in conversation:
            conversation[span.trace] = conv
    groups: dict[str, list[_Span]] = {}
    for span in spans:
        groups.setdefault(conversation.get(span.trace, span.trace), []).append(span)
    for run_id, members in groups.items():
        members.sort(key=lambda s: (s.start, s.order))
        thoughts: dict[str, str] = {}
        run = Run(id=run_id, source=name, path=path, indices=[])
        assert run.indices is not None
        for index, span in enumerate(members):
            events = _span_events(span, thoughts)
            run.events.extend(events)
            run.indices.extend([index] * len(events))
        if run.events:
            yield run


def _span_events(span: _Span, thoughts: dict[str, str]) -> list[Event]:
    attrs = span.attrs
    operation = attrs.get("gen_ai.operation.name")
    operation = operation if isinstance(operation, str) else None
    start = span.start / 1e9 if span.start else None
    end = span.end / 1e9 if span.end else start
    if operation == "execute_tool" or (operation is None and isinstance(attrs.get("gen_ai.tool.name"), str)):
        tool = attrs.get("gen_ai.tool.name")
        if not isinstance(tool, str) or not tool:
            tool = span.name.removeprefix("execute_tool").strip() or "tool"
        call_id = attrs.get("gen_ai.tool.call.id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        failed = span.error is True or attrs.get("error.type") is not None
        result = attrs.get("gen_ai.tool.call.result")
        if result is None:
            output = (span.status_message or span.exception or str(attrs.get("error.type") or "")) if failed else ""
        else:
            output = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        thought = thoughts.pop(call_id, None) if call_id else None
        return [
            ToolCall(
                tool=tool,
                args=tool_args(attrs.get("gen_ai.tool.call.arguments")),
                id=call_id,
                thought=thought,
                ts=start,
            ),
            ToolResult(output=output, tool=tool, is_error=failed, id=call_id, ts=end),
        ]
    if operation not in _CHAT:
        return []
    events: list[Event] = []
    inputs = _messages(attrs.get("gen_ai.input.messages"))
    if inputs and inputs[-1].get("role") == "user":
        events.append(Message(role="user", text=_text(inputs[-1]), ts=start))
    tokens_in = count(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens")))
    tokens_out = count(attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens")))
    if tokens_in is not None or tokens_out is not None:
        events.append(Usage(input_tokens=tokens_in, output_tokens=tokens_out, ts=end))
    for message in _messages(attrs.get("gen_ai.output.messages")):
        text = _text(message)
        parts = message.get("parts")
        parts = parts if isinstance(parts, list) else []
        calls = [p.get("id") for p in parts if isinstance(p, Mapping) and p.get("type") == "tool_call"]
        if calls:
            if text and isinstance(calls[0], str):
                thoughts[calls[0]] = text
        elif text:
            events.append(Message(role="assistant", text=text, ts=end))
    return events


def _messages(value: Any) -> list[Mapping[str, Any]]:
    """``gen_ai.input.messages`` / ``output.messages``: structured, or recorded as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    return [m for m in value if isinstance(m, Mapping)] if isinstance(value, list) else []


def _text(message: Mapping[str, Any]) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        return "\n".join(
            p["content"]
            for p in parts
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("content"), str)
        )
    content = message.get("content")
    return content if isinstance(content, str) else ""
