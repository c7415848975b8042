"""Langfuse observations (``--format langfuse``), as its public API returns them.

A file is the answer of ``GET /api/public/observations`` (``{"data": [...], "meta": {...}}``), a trace with its
observations (``GET /api/public/traces/{id}``: ``{"id", "input", "observations": [...]}``, or a list of them), a
JSON list of observations, or JSON Lines with one observation (or one such answer) per line. Observations are grouped
into one run per trace (``traceId``) and ordered by ``startTime``: record ``i`` of a run is the ``i``-th
observation of its trace in that order.

Following Langfuse's observation types:

- a ``TOOL`` observation is a call to its ``name`` with its ``input`` (an object, or kept under ``input``) and its
  result, the ``output`` as text; failed when its ``level`` is ``ERROR`` (its ``statusMessage`` then stands in for a
  missing output);
- a ``RETRIEVER`` observation is a look-up, read the same way;
- a ``GENERATION`` gives its tokens (``usageDetails``, else ``usage``: ``input`` / ``output``) and cost
  (``costDetails.total``, else ``calculatedTotalCost`` or ``totalCost``) and the model's text (``output``: text, a
  message's ``content``, or the last message of a list) as an assistant message;
- a trace's ``input`` (text, or the last user message of a list) is the user's request, before its observations;
- ``SPAN``, ``EVENT``, ``AGENT``, ``CHAIN``, ``EMBEDDING``, ``EVALUATOR`` and ``GUARDRAIL`` observations give no
  event (the tools and models inside an agent are observations of their own).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..errors import InputError
from ._common import count, mapping, number, tool_args
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final = ("langfuse",)

TYPES: Final = frozenset(
    {"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR", "EMBEDDING", "GUARDRAIL"}
)


def _is_observation(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and value["type"].upper() in TYPES
        and "traceId" in value
        and "startTime" in value
    )


def _observations_of(record: Any) -> list[Any] | None:
    """The observations a record holds (an API answer, a trace, a list), or None when it is one observation."""
    if isinstance(record, Mapping):
        for key in ("data", "observations"):
            if isinstance(record.get(key), list):
                return list(record[key])
    if isinstance(record, list):
        out: list[Any] = []
        for item in record:
            inner = _observations_of(item)
            out.extend(inner if inner is not None else [item])
        return out
    return None


def sniff(first: Any, path: str) -> str | None:
    """``langfuse`` for an observation, a list of them, an observations answer or a trace with observations."""
    items = _observations_of(first)
    if items is None:
        return NAMES[0] if _is_observation(first) else None
    return NAMES[0] if items and _is_observation(items[0]) else None


@dataclass
class _Trace:
    id: str
    request: str = ""
    observations: list[tuple[str, int, Mapping[str, Any]]] = field(default_factory=list)


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per trace, in order of first appearance; a malformed observation ends the file."""
    traces: dict[str, _Trace] = {}
    seen = 0
    for lineno, record in records:
        for holder in _traces_in(record):
            request = _request(holder.get("input"))
            if isinstance(holder.get("id"), str) and request:
                traces.setdefault(holder["id"], _Trace(holder["id"])).request = request
        items = _observations_of(record)
        try:
            for item in items if items is not None else [record]:
                if not _is_observation(item):
                    raise ValueError("expected a Langfuse observation (an object with 'type', 'traceId', 'startTime')")
                trace_id = item.get("traceId")
                if not isinstance(trace_id, str) or not trace_id:
                    raise ValueError("traceId: expected a non-empty string")
                start = item.get("startTime")
                traces.setdefault(trace_id, _Trace(trace_id)).observations.append(
                    (start if isinstance(start, str) else "", seen, item)
                )
                seen += 1
        except ValueError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
    for trace in traces.values():
        if trace.observations:
            yield _run(name, trace, path)


def _traces_in(record: Any) -> list[Mapping[str, Any]]:
    if isinstance(record, Mapping) and isinstance(record.get("observations"), list):
        return [record]
    if isinstance(record, list):
        return [t for t in record if isinstance(t, Mapping) and isinstance(t.get("observations"), list)]
    return []


def _run(name: str, trace: _Trace, path: str) -> Run:
    run = Run(id=trace.id, source=name, path=path, indices=[])
    assert run.indices is not None
    ordered = [o for _, _, o in sorted(trace.observations, key=lambda item: (_instant(item[0]), item[1]))]
    for index, observation in enumerate(ordered):
        events: list[Event] = []
        if index == 0 and trace.request:
            events.append(Message(role="user", text=trace.request))
        events.extend(_events(observation))
        run.events.extend(events)
        run.indices.extend([index] * len(events))
    return run


def _instant(value: str) -> str:
    """ISO times compared as text, with ``Z`` and ``+00:00`` made the same."""
    return value[:-1] + "+00:00" if value.endswith("Z") else value


def _events(observation: Mapping[str, Any]) -> list[Event]:
    kind = str(observation.get("type")).upper()
    name = observation.get("name") if isinstance(observation.get("name"), str) else kind.lower()
    obs_id = observation.get("id") if isinstance(observation.get("id"), str) else None
    if kind in ("TOOL", "RETRIEVER"):
        raw = observation.get("input")
        args = tool_args(raw) if isinstance(raw, (str, Mapping)) or raw is None else {"input": raw}
        failed = str(observation.get("level") or "").upper() == "ERROR"
        text = _text(observation.get("output"))
        status = observation.get("statusMessage")
        if not text and failed and isinstance(status, str):
            text = status
        return [
            ToolCall(tool=str(name), args=args, id=obs_id),
            ToolResult(output=text, tool=str(name), id=obs_id, is_error=failed),
        ]
    if kind == "GENERATION":
        events: list[Event] = []
        usage = mapping(observation.get("usageDetails")) or mapping(observation.get("usage"))
        tokens_in = count(usage.get("input", usage.get("promptTokens")))
        tokens_out = count(usage.get("output", usage.get("completionTokens")))
        costs = mapping(observation.get("costDetails"))
        cost = number(costs.get("total"))
        for key in ("calculatedTotalCost", "totalCost"):
            if cost is None:
                cost = number(observation.get(key))
        if tokens_in is not None or tokens_out is not None or cost is not None:
            events.append(Usage(cost=cost, input_tokens=tokens_in, output_tokens=tokens_out))
        text = _message_text(observation.get("output"))
        if text:
            events.append(Message(role="assistant", text=text))
        return events
    return []


def _message_text(output: Any) -> str:
    """A generation's text: text, a message's ``content``, or the last message of a list."""
    if isinstance(output, list):
        output = output[-1] if output else None
    if isinstance(output, Mapping):
        content = output.get("content")
        if isinstance(content, list):
            return "\n".join(
                str(p.get("text")) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            )
        return content if isinstance(content, str) else ""
    return output if isinstance(output, str) else ""


def _request(value: Any) -> str:
    if isinstance(value, str):
        return value
    messages = value.get("messages") if isinstance(value, Mapping) else value
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return _message_text(message)
    return ""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)
