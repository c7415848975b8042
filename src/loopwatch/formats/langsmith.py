"""LangSmith runs (``--format langsmith``), as exported from LangSmith: the run data format of its API and SDK
(``client.list_runs(...)`` written out with each run's ``dict()``/``model_dump()``, or ``read_run(...,
load_child_runs=True)``).

A file is a JSON list of runs, JSON Lines with one run per line, ``{"runs": [...]}``, or a root run whose
``child_runs`` hold the rest (nested at any depth). Runs are grouped into one loopwatch run per trace
(``trace_id``; a run without one belongs to its root's ``id``) and ordered by ``dotted_order`` (else
``start_time``): record ``i`` of a run is the ``i``-th LangSmith run of its trace in that order.

- a ``tool`` run is a call to its ``name`` with its ``inputs`` (a tool's single ``input`` string is read as JSON
  arguments when it is JSON) and its result: ``outputs.output`` (the content of a serialised ``ToolMessage``, or
  the value as text); failed when the run has an ``error`` (then the error is the output when there is none) or
  its status, or the message's, is ``error``;
- a ``retriever`` run is a look-up: a call with its inputs, and the documents' ``page_content`` as its result;
- an ``llm`` run gives its tokens and cost (``prompt_tokens``, ``completion_tokens``, ``total_cost``) and the
  model's text (``outputs.generations[0][0]``: the message's content, else ``text``) as an assistant message;
- the trace's root gives the user's request: the last human message of ``inputs.messages``, else
  ``inputs.input`` or ``inputs.question`` when it is text;
- other runs (``chain``, ``prompt``, ``parser``, ``embedding``) give no event.
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

NAMES: Final = ("langsmith",)

RUN_TYPES: Final = frozenset({"tool", "chain", "llm", "retriever", "embedding", "prompt", "parser"})
_HUMAN: Final = frozenset({"human", "user", "HumanMessage", "HumanMessageChunk"})


def _is_run(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("run_type"), str)
        and value["run_type"].lower() in RUN_TYPES
        and ("inputs" in value or "trace_id" in value or "dotted_order" in value)
    )


def sniff(first: Any, path: str) -> str | None:
    """``langsmith`` for a run (``run_type`` with ``inputs``, ``trace_id`` or ``dotted_order``), a list of them or
    ``{"runs": [...]}``."""
    if isinstance(first, Mapping) and isinstance(first.get("runs"), list):
        first = first["runs"]
    if isinstance(first, list):
        return NAMES[0] if first and _is_run(first[0]) else None
    return NAMES[0] if _is_run(first) else None


@dataclass
class _Trace:
    id: str
    order: int
    runs: list[tuple[str, int, Mapping[str, Any]]] = field(default_factory=list)  # (sort key, seen, run)


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per trace, in order of first appearance; a malformed run ends the file (its traces so far kept)."""
    traces: dict[str, _Trace] = {}
    seen = 0
    for lineno, record in records:
        items = record.get("runs") if isinstance(record, Mapping) and "runs" in record else record
        try:
            for item in items if isinstance(items, list) else [items]:
                for run in _flattened(item, None):
                    trace_id = _trace_of(run)
                    trace = traces.setdefault(trace_id, _Trace(trace_id, len(traces)))
                    trace.runs.append((_sort_key(run), seen, run))
                    seen += 1
        except ValueError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
    for trace in traces.values():
        yield _run(name, trace, path)


def _flattened(run: Any, root: str | None) -> Iterator[Mapping[str, Any]]:
    """A run and the runs nested in its ``child_runs``, with the root's id as their trace when they name none."""
    if not _is_run(run):
        raise ValueError("expected a LangSmith run (an object with 'run_type' and 'inputs')")
    if root is not None and not isinstance(run.get("trace_id"), str):
        run = {**run, "trace_id": root}
    yield run
    children = run.get("child_runs")
    for child in children if isinstance(children, list) else ():
        yield from _flattened(child, _trace_of(run))


def _trace_of(run: Mapping[str, Any]) -> str:
    for key in ("trace_id", "id"):
        value = run.get(key)
        if isinstance(value, str) and value:
            return value
    raise ValueError("a run needs an 'id' or a 'trace_id' (a string)")


def _sort_key(run: Mapping[str, Any]) -> str:
    for key in ("dotted_order", "start_time"):
        value = run.get(key)
        if isinstance(value, str):
            return value
    return ""


def _run(name: str, trace: _Trace, path: str) -> Run:
    ordered = [r for _, _, r in sorted(trace.runs, key=lambda item: (item[0], item[1]))]
    run = Run(id=trace.id, source=name, path=path, indices=[])
    assert run.indices is not None
    root = next((r for r in ordered if not r.get("parent_run_id") and r.get("id") == trace.id), None)
    for index, item in enumerate(ordered):
        events: list[Event] = []
        if item is root:
            request = _request(mapping(item.get("inputs")))
            if request:
                events.append(Message(role="user", text=request))
        events.extend(_events(item))
        run.events.extend(events)
        run.indices.extend([index] * len(events))
    return run


def _events(run: Mapping[str, Any]) -> list[Event]:
    kind = str(run.get("run_type")).lower()
    name = run.get("name") if isinstance(run.get("name"), str) else kind
    run_id = run.get("id") if isinstance(run.get("id"), str) else None
    error = run.get("error") if isinstance(run.get("error"), str) and run.get("error") else None
    outputs = run.get("outputs")
    if kind in ("tool", "retriever"):
        inputs = mapping(run.get("inputs"))
        args: dict[str, Any] = dict(inputs)
        if set(inputs) == {"input"}:
            args = tool_args(inputs["input"]) if isinstance(inputs["input"], str) else {"input": inputs["input"]}
        text, failed = _tool_output(outputs) if kind == "tool" else (_documents(outputs), False)
        failed = failed or error is not None or run.get("status") == "error"
        if not text and error:
            text = error
        return [
            ToolCall(tool=str(name), args=args, id=run_id),
            ToolResult(output=text, tool=str(name), id=run_id, is_error=failed),
        ]
    if kind == "llm":
        events: list[Event] = []
        tokens_in, tokens_out = count(run.get("prompt_tokens")), count(run.get("completion_tokens"))
        cost = number(_float(run.get("total_cost")))
        if tokens_in is not None or tokens_out is not None or cost is not None:
            events.append(Usage(cost=cost, input_tokens=tokens_in, output_tokens=tokens_out))
        text = _generation_text(outputs)
        if text:
            events.append(Message(role="assistant", text=text))
        return events
    return []


def _float(value: Any) -> Any:
    """LangSmith writes costs as decimal strings in some exports."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return value


def _tool_output(outputs: Any) -> tuple[str, bool]:
    """(text, failed) of a tool run's outputs."""
    value = outputs.get("output") if isinstance(outputs, Mapping) and "output" in outputs else outputs
    message = _lc_kwargs(value)
    if message is not None:
        status = message.get("status")
        return _content_text(message.get("content")), status == "error"
    if isinstance(value, Mapping) and "content" in value and "tool_call_id" in value:  # a plain ToolMessage dict
        return _content_text(value.get("content")), value.get("status") == "error"
    return _as_text(value), False


def _documents(outputs: Any) -> str:
    docs = outputs.get("documents") if isinstance(outputs, Mapping) else outputs
    if isinstance(docs, list):
        texts = []
        for doc in docs:
            kwargs = _lc_kwargs(doc) or (doc if isinstance(doc, Mapping) else {})
            content = kwargs.get("page_content")
            texts.append(content if isinstance(content, str) else _as_text(doc))
        return "\n\n".join(texts)
    return _as_text(outputs)


def _generation_text(outputs: Any) -> str:
    generations = outputs.get("generations") if isinstance(outputs, Mapping) else None
    first: Any = generations
    while isinstance(first, list):
        first = first[0] if first else None
    if not isinstance(first, Mapping):
        return ""
    message = _lc_kwargs(first.get("message")) or mapping(first.get("message"))
    content = _content_text(message.get("content")) if message else ""
    if content:
        return content
    text = first.get("text")
    return text if isinstance(text, str) else ""


def _request(inputs: Mapping[str, Any]) -> str:
    """The user's request from a root run's inputs."""
    messages = inputs.get("messages")
    while isinstance(messages, list) and messages and isinstance(messages[0], list):
        messages = messages[-1]  # a batch of conversations: the last
    if isinstance(messages, list):
        for message in reversed(messages):
            kwargs = _lc_kwargs(message)
            if kwargs is not None:
                kind = message.get("id", [""])[-1] if isinstance(message.get("id"), list) else ""
                if kind in _HUMAN:
                    return _content_text(kwargs.get("content"))
            elif isinstance(message, Mapping) and (message.get("role") in _HUMAN or message.get("type") in _HUMAN):
                return _content_text(message.get("content"))
    for key in ("input", "question", "query"):
        value = inputs.get(key)
        if isinstance(value, str):
            return value
    return ""


def _lc_kwargs(value: Any) -> Mapping[str, Any] | None:
    """The ``kwargs`` of a LangChain-serialised object (``{"lc": 1, "type": "constructor", ...}``)."""
    if isinstance(value, Mapping) and value.get("type") == "constructor" and isinstance(value.get("kwargs"), Mapping):
        kwargs: Mapping[str, Any] = value["kwargs"]
        return kwargs
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, Mapping) and isinstance(part.get("text"), str))
        )
    return "" if content is None else _as_text(content)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)
