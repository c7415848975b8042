"""loopwatch's own formats: ``events`` (an event stream, one session per ``session`` field) and ``trajectory`` (a run
as a list of steps) (docs/formats.md, sections 1 and 2)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..core._events import EVENT_TYPES, Event, Message, Reset, ToolCall, ToolResult, parse_event, session_of
from ..errors import EventError, InputError
from ._run import ErrorHandler, Format, Run, run_id_from_path


def _is_event(record: Mapping[str, Any]) -> bool:
    kind = record.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        return False
    # foreign messages carrying "type": "message" (OpenAI Responses items, Anthropic replies) have content
    return kind != "message" or "content" not in record or "text" in record


def sniff_canonical(record: Any) -> Format | None:
    if isinstance(record, Mapping):
        if _is_event(record):
            return "events"
        if "steps" in record:
            return "trajectory"
    elif isinstance(record, list) and record and isinstance(record[0], Mapping):
        return sniff_canonical(record[0])  # a JSON list of events or of trajectories
    return None


def event_stream(
    path: str, records: Iterable[tuple[int, Any]], on_error: ErrorHandler, share: tuple[int, int] | None = None
) -> Iterator[Run]:
    """The sessions of an event stream, one run each, in the order of their first events.

    ``share=(k, n)``: only the sessions numbered k, k + n, k + 2n... (from 0, in the order of their first events), for
    the k-th of n workers sharing one file: together they give every session once, each in its place. Every event is
    still checked, so each worker stops at the same bad record."""
    part, parts = share or (0, 1)
    runs: dict[str, Run] = {}
    others: set[str] = set()
    for lineno, record in records:
        try:
            session = session_of(record) if isinstance(record, Mapping) else "default"
            event = parse_event(record)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
        run = runs.get(session)
        if run is None:
            if parts > 1 and (session in others or (len(runs) + len(others)) % parts != part):
                others.add(session)  # another worker's session
                continue
            run = runs[session] = Run(id=session, path=path)
        run.events.append(event)
    yield from runs.values()


def trajectories(path: str, records: Iterable[tuple[int, Any]], on_error: ErrorHandler) -> Iterator[Run]:
    for lineno, record in records:
        try:
            yield trajectory_run(record, path=path)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            return


def trajectory_run(record: Any, *, path: str | None = None) -> Run:
    """One trajectory object (docs/formats.md, section 2) as a run; step ``i`` becomes event ``i``."""
    if not isinstance(record, Mapping):
        raise EventError(f"a trajectory is a JSON object, got {type(record).__name__}")
    steps = record.get("steps")
    if not isinstance(steps, list):
        raise EventError("expected a list of steps", field="steps")
    run_id = record.get("id")
    if not isinstance(run_id, str):
        run_id = run_id_from_path(path)
    events: list[Event] = []
    last = len(steps) - 1
    for i, step in enumerate(steps):
        # a tool step is the result of the call right before it, whatever tool name it was recorded under: the two
        # share an id, given as they are made (a step that is not a call ignores its own)
        answered = i < last and _is_tool_step(steps[i + 1])
        link = f"step-{i - 1}" if i and isinstance(events[-1], ToolCall) and events[-1].id is not None else None
        try:
            event = step_event(step, call_id=f"step-{i}" if answered else None, result_id=link)
        except EventError as exc:
            raise EventError(f"step {i}: {exc}") from exc
        events.append(event)
    source = record.get("source") if isinstance(record.get("source"), str) else None
    labels = record.get("labels") if isinstance(record.get("labels"), Mapping) else {}
    return Run(id=run_id, events=events, source=source, path=path, meta={"labels": labels})


def _is_tool_step(step: Any) -> bool:
    return isinstance(step, Mapping) and step.get("role") == "tool"


def step_event(step: Any, *, call_id: str | None = None, result_id: str | None = None) -> Event:
    """One trajectory step as an event; a call gets ``call_id`` and a result ``result_id`` (the ids that link a
    result to its call)."""
    if not isinstance(step, Mapping):
        raise EventError(f"a step is a JSON object, got {type(step).__name__}")
    role = step.get("role")
    text = step.get("text")
    text = text if isinstance(text, str) else ("" if text is None else json.dumps(text))
    agent = step.get("agent") if isinstance(step.get("agent"), str) else None
    tool = step.get("tool") if isinstance(step.get("tool"), str) else None
    if role == "assistant":
        if tool:
            args = step.get("args")
            if args is not None and not isinstance(args, Mapping):
                args = {"input": args}
            return ToolCall(tool=tool, args=args or {}, id=call_id, thought=text or None, worker=agent)
        return Message(role="assistant", text=text, worker=agent)
    if role == "tool":
        is_error = step.get("is_error")
        return ToolResult(
            output=text,
            tool=tool or "tool",
            is_error=is_error if isinstance(is_error, bool) else None,
            id=result_id,
            worker=agent,
        )
    if role == "system" and step.get("new_context") is True:
        # the harness started a fresh conversation: the model no longer sees what came before, so nothing it does
        # from here repeats what it did there
        return Reset(worker=agent)
    if role in ("user", "system"):
        return Message(role=role, text=text, worker=agent)
    raise EventError(f"expected assistant, tool, user or system, got {role!r}", field="role")
