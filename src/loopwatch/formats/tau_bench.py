"""tau-bench results: ``{"task_id", "trial", "reward", "info", "traj"}``, where ``traj`` is the OpenAI-style chat.

A results file is a JSON list of results (what ``tau-bench`` writes) or JSON Lines with one result per line. Each
result is a run whose id is ``task<task_id>_trial<trial>`` (the file's own identification of the run; the corpus
ids end the same way). Message ``i`` of ``traj`` is record ``i``: the system prompt is skipped, user and assistant
texts are messages, each of an assistant message's ``tool_calls`` is a call (the message's text is the first
call's thought), a ``tool`` message is the result of the call it names, an error when the environment's answer
starts with ``Error`` (tau-bench's own convention for failed actions). ``reward`` is kept in the run's labels.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult
from ..errors import InputError
from ._common import add_records, parts_text
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final = ("tau-bench",)


def _is_result(value: Any) -> bool:
    return isinstance(value, Mapping) and "task_id" in value and isinstance(value.get("traj"), list)


def sniff(first: Any, path: str) -> str | None:
    """``tau-bench`` for a result object, or a list whose first item is one."""
    if isinstance(first, list):
        return NAMES[0] if first and _is_result(first[0]) else None
    return NAMES[0] if _is_result(first) else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per result, in file order."""
    for lineno, record in records:
        results = record if isinstance(record, list) else [record]
        for position, result in enumerate(results):
            where = f"result {position}: " if isinstance(record, list) else ""
            run, problem = _run(name, result, path)
            if problem is not None:
                on_error(InputError(where + problem, path=path, line=lineno))
            if run is not None:
                yield run
            if problem is not None:
                return


def _run(name: str, result: Any, path: str) -> tuple[Run | None, str | None]:
    if not isinstance(result, Mapping):
        return None, f"a tau-bench result is a JSON object, got {type(result).__name__}"
    traj = result.get("traj")
    task_id = result.get("task_id")
    if not isinstance(traj, list):
        return None, "traj: expected a list of messages"
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)):
        return None, "task_id: expected an integer or a string"
    trial = result.get("trial")
    run_id = (
        f"task{task_id}"
        if isinstance(trial, bool) or not isinstance(trial, (int, str))
        else f"task{task_id}_trial{trial}"
    )
    outcome = {"reward": result["reward"]} if "reward" in result else {}
    run = Run(id=run_id, source=name, path=path, meta={"labels": {"outcome": outcome}}, indices=[])
    return run, add_records(run, traj, _message_events, "traj")


def _message_events(message: Any) -> list[Event]:
    if not isinstance(message, Mapping):
        raise ValueError(f"a message is a JSON object, got {type(message).__name__}")
    role = message.get("role")
    text = parts_text(message.get("content"))
    if role == "system":
        return []
    if role == "user":
        return [Message(role="user", text=text)]
    if role == "assistant":
        calls = message.get("tool_calls")
        if not calls:
            return [Message(role="assistant", text=text)]
        if not isinstance(calls, list):
            raise ValueError("tool_calls: expected a list")
        return [_call(call, text if n == 0 else "") for n, call in enumerate(calls)]
    if role == "tool":
        tool = message.get("name")
        call_id = message.get("tool_call_id")
        return [
            ToolResult(
                output=text,
                tool=tool if isinstance(tool, str) else None,
                id=call_id if isinstance(call_id, str) else None,
                is_error=text.startswith("Error"),
            )
        ]
    raise ValueError(f"role: expected system, user, assistant or tool, got {role!r}")


def _call(call: Any, thought: str) -> ToolCall:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError("tool_calls: expected {'function': {'name', 'arguments'}}")
    args = function.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            args = {"input": args}
    if args is None:
        args = {}
    elif not isinstance(args, Mapping):
        args = {"input": args}
    call_id = call.get("id")
    return ToolCall(
        tool=function["name"], args=args, id=call_id if isinstance(call_id, str) else None, thought=thought or None
    )
