"""AutoGen AgentChat messages (``--format autogen``): what a team or an agent returns, saved as JSON.

A file holds a ``TaskResult`` (``result.model_dump()``: ``{"messages": [...], "stop_reason": ...}``), a JSON list
of messages, or JSON Lines with one message (or one ``TaskResult``) per line: each ``TaskResult`` is a run, a file of
bare messages is one run. Messages are AgentChat's, each with its ``type`` and ``source``:

- ``TextMessage``, ``MultiModalMessage`` (its text parts), ``HandoffMessage``, ``StopMessage``: the message of its
  source (``user`` gives a user message, any other source an assistant message);
- ``ToolCallRequestEvent``: one call per ``FunctionCall`` (``arguments`` is a JSON string), with the text of a
  ``ThoughtEvent`` just before it as the first call's reasoning;
- ``ToolCallExecutionEvent``: one result per ``FunctionExecutionResult`` (``is_error`` kept);
- ``CodeGenerationEvent`` / ``CodeExecutionEvent``: a call to ``code_execution`` with the code, and its result with
  the exit code;
- a message's ``models_usage`` (``prompt_tokens``, ``completion_tokens``): the tokens it cost;
- ``ToolCallSummaryMessage`` repeats the results just before it and gives no event; so do streaming chunks and the
  other events.

Each event's worker is its message's ``source``. Message ``i`` of a run is record ``i``. Run ids: the file name
(``name/1``, ``name/2``... for further results).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..errors import InputError
from ._common import count, mapping, parts_text, tool_args
from ._run import ErrorHandler, Run, run_id_from_path

__all__ = ["read", "sniff"]

NAMES: Final = ("autogen",)

_TEXT: Final = frozenset({"TextMessage", "MultiModalMessage", "HandoffMessage", "StopMessage", "StructuredMessage"})
_SILENT: Final = frozenset(
    {
        "ToolCallSummaryMessage",
        "ModelClientStreamingChunkEvent",
        "UserInputRequestedEvent",
        "MemoryQueryEvent",
        "SelectSpeakerEvent",
        "SelectorEvent",
    }
)
_ACTIONS: Final = frozenset(
    {"ToolCallRequestEvent", "ToolCallExecutionEvent", "ThoughtEvent", "CodeGenerationEvent", "CodeExecutionEvent"}
)
_KNOWN: Final = _TEXT | _SILENT | _ACTIONS


def _is_message(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") in _KNOWN and "source" in value


def sniff(first: Any, path: str) -> str | None:
    """``autogen`` for an AgentChat message, a list of them, or a ``TaskResult`` holding them."""
    if isinstance(first, list):
        return NAMES[0] if first and _is_message(first[0]) else None
    if isinstance(first, Mapping) and isinstance(first.get("messages"), list):
        messages = first["messages"]
        return NAMES[0] if messages and _is_message(messages[0]) else None
    return NAMES[0] if _is_message(first) else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per ``TaskResult`` (or per list of messages); a file of single messages is one run."""
    stem = run_id_from_path(path)
    loose: _Builder | None = None
    results = 0
    for lineno, record in records:
        if _is_message(record):
            if loose is None:
                loose = _Builder(Run(id=stem, source=name, path=path, indices=[]))
            problem = loose.add(record)
            if problem is not None:
                on_error(InputError(problem, path=path, line=lineno))
                yield loose.run
                return
            continue
        messages = record.get("messages") if isinstance(record, Mapping) else record
        if not isinstance(messages, list):
            on_error(
                InputError("expected an AgentChat message, a list of them or a TaskResult", path=path, line=lineno)
            )
            return
        run_id = stem if results == 0 else f"{stem}/{results}"
        results += 1
        builder = _Builder(Run(id=run_id, source=name, path=path, indices=[]))
        if isinstance(record, Mapping) and isinstance(record.get("stop_reason"), str):
            builder.run.meta["stop_reason"] = record["stop_reason"]
        for message in messages:
            problem = builder.add(message)
            if problem is not None:
                on_error(InputError(problem, path=path, line=lineno))
                yield builder.run
                return
        yield builder.run
    if loose is not None:
        yield loose.run


class _Builder:
    """Adds a run's messages one by one, each its record."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.records = 0
        self.thought: str | None = None

    def add(self, message: Any) -> str | None:
        """Append the events of ``message``; the problem, when it is not a message this format knows."""
        index = self.records
        self.records += 1
        try:
            events = self._events(message)
        except ValueError as exc:
            return f"message {index}: {exc}"
        self.run.events.extend(events)
        assert self.run.indices is not None
        self.run.indices.extend([index] * len(events))
        return None

    def _events(self, message: Any) -> list[Event]:
        if not isinstance(message, Mapping):
            raise ValueError(f"a message is a JSON object, got {type(message).__name__}")
        kind, source = message.get("type"), message.get("source")
        if not isinstance(kind, str) or not isinstance(source, str):
            raise ValueError("a message has a 'type' and a 'source' (strings)")
        content = message.get("content")
        events: list[Event] = []
        if kind == "ThoughtEvent":
            self.thought = content if isinstance(content, str) else None
            return events
        thought, self.thought = self.thought, None
        if kind in _TEXT:
            text = content if isinstance(content, str) else parts_text(content) if isinstance(content, list) else ""
            if kind == "StructuredMessage" and not isinstance(content, str):
                text = str(content)
            events.append(Message(role="user" if source == "user" else "assistant", text=text, worker=source))
        elif kind == "ToolCallRequestEvent":
            events.extend(_calls(content, thought, source))
        elif kind == "ToolCallExecutionEvent":
            events.extend(_results(content, source))
        elif kind == "CodeGenerationEvent":
            blocks = message.get("code_blocks")
            code = "\n\n".join(
                b["code"] for b in blocks or () if isinstance(b, Mapping) and isinstance(b.get("code"), str)
            )
            code = code or str(content or "")
            events.append(ToolCall(tool="code_execution", args={"code": code}, thought=thought, worker=source))
        elif kind == "CodeExecutionEvent":
            result = mapping(message.get("result"))
            exit_code = result.get("exit_code")
            output = result.get("output") if isinstance(result.get("output"), str) else content
            events.append(
                ToolResult(
                    tool="code_execution",
                    output=output if isinstance(output, str) else "",
                    exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                    worker=source,
                )
            )
        usage = mapping(message.get("models_usage"))
        tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
        if tokens_in is not None or tokens_out is not None:
            events.append(Usage(input_tokens=tokens_in, output_tokens=tokens_out))
        return events


def _calls(content: Any, thought: str | None, source: str) -> list[Event]:
    if not isinstance(content, list):
        raise ValueError("a ToolCallRequestEvent's content is a list of function calls")
    out: list[Event] = []
    for n, call in enumerate(content):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ValueError(f"content[{n}]: a function call has a 'name'")
        call_id = call.get("id")
        out.append(
            ToolCall(
                tool=call["name"],
                args=tool_args(call.get("arguments")),
                id=call_id if isinstance(call_id, str) else None,
                thought=thought if n == 0 else None,
                worker=source,
            )
        )
    return out


def _results(content: Any, source: str) -> list[Event]:
    if not isinstance(content, list):
        raise ValueError("a ToolCallExecutionEvent's content is a list of function results")
    out: list[Event] = []
    for n, result in enumerate(content):
        if not isinstance(result, Mapping):
            raise ValueError(f"content[{n}]: a function result is a JSON object")
        text, name, call_id = result.get("content"), result.get("name"), result.get("call_id")
        is_error = result.get("is_error")
        out.append(
            ToolResult(
                output=text if isinstance(text, str) else "" if text is None else str(text),
                tool=name if isinstance(name, str) else None,
                id=call_id if isinstance(call_id, str) else None,
                is_error=is_error if isinstance(is_error, bool) else None,
                worker=source,
            )
        )
    return out
