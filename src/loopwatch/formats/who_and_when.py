"""Multi-agent logs in the Who&When layout (``--format who-and-when``): Magentic-One and AG2 (CaptainAgent) runs.

One JSON object per run: ``{"history": [{"content", "role", "name"?}], "question", "question_ID", ...}`` (a file per
run, or JSON Lines with one run per line). Entry ``i`` of ``history`` is record ``i``; its speaker is its ``name``,
else its ``role``:

- ``human`` (or a ``user`` role without a name): the user's message;
- ``Orchestrator (-> WebSurfer)``: an orchestrator handing an instruction to another agent, read as a call to that
  agent (the tool ``WebSurfer``, arguments ``{"instruction": content}``, the instruction also its reasoning);
- ``Orchestrator (thought)``, ``Orchestrator (termination condition)``: the orchestrator's own messages (its
  progress ledger among them);
- the agents that act rather than talk (``WebSurfer``, ``FileSurfer``, ``ComputerTerminal``, ``Computer_terminal``):
  the result of the instruction or code before them, failed when it reports a non-zero ``exitcode:`` or a Python
  traceback;
- any other speaker (an assistant or an expert agent): an assistant message.

Each event's worker is its speaker (the orchestrator for its instructions). Run ids: the file name, or
``question_ID`` for the runs of a JSON Lines file. ``is_correct`` is kept as the run's
outcome.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult
from ..errors import InputError
from ._common import add_records
from ._run import ErrorHandler, Run, run_id_from_path

__all__ = ["read", "sniff"]

NAMES: Final = ("who-and-when",)

ACTING_AGENTS: Final = frozenset({"WebSurfer", "FileSurfer", "ComputerTerminal", "Computer_terminal"})
"""Agents whose messages are what an action did (a page seen, a file read, code run), not what a model said."""

_HANDOFF: Final = re.compile(r"^(?P<sender>.+?)\s*\(->\s*(?P<target>[^)]+)\)\s*$")
_EXIT_CODE: Final = re.compile(r"exitcode:\s*(-?\d+)")


def sniff(first: Any, path: str) -> str | None:
    """``who-and-when`` for an object with a ``history`` list of ``content``/``role`` entries."""
    if not isinstance(first, Mapping):
        return None
    history = first.get("history")
    if not isinstance(history, list) or not history:
        return None
    entry = history[0]
    return NAMES[0] if isinstance(entry, Mapping) and "content" in entry and "role" in entry else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per object, in file order; a bad entry ends the file."""
    stem = run_id_from_path(path)
    for position, (lineno, record) in enumerate(records):
        run, problem = _run(name, record, stem if position == 0 else None, path, position)
        if problem is not None:
            on_error(InputError(problem, path=path, line=lineno))
        if run is not None:
            yield run
        if problem is not None:
            return


def _run(name: str, record: Any, stem: str | None, path: str, position: int) -> tuple[Run | None, str | None]:
    if not isinstance(record, Mapping):
        return None, f"a run is a JSON object with a 'history', got {type(record).__name__}"
    history = record.get("history")
    if not isinstance(history, list):
        return None, "history: expected a list of messages"
    question_id = record.get("question_ID")
    run_id = stem or (question_id if isinstance(question_id, str) and question_id else f"run/{position}")
    outcome: dict[str, Any] = {}
    if isinstance(record.get("is_correct"), bool):
        outcome["is_correct"] = record["is_correct"]
    meta: dict[str, Any] = {"labels": {"outcome": outcome}}
    if isinstance(question_id, str):
        meta["question_id"] = question_id
    run = Run(id=run_id, source=name, path=path, meta=meta, indices=[])
    return run, add_records(run, history, _entry_events, "history")


def _entry_events(entry: Any) -> list[Event]:
    if not isinstance(entry, Mapping):
        raise ValueError(f"a message is a JSON object, got {type(entry).__name__}")
    content = entry.get("content")
    text = content if isinstance(content, str) else "" if content is None else str(content)
    role, name = entry.get("role"), entry.get("name")
    speaker = name if isinstance(name, str) and name else role
    if not isinstance(speaker, str):
        raise ValueError("a message has a 'role' (a string)")
    if speaker == "human" or (speaker == "user" and not name):
        return [Message(role="user", text=text, worker=speaker)]
    handoff = _HANDOFF.match(speaker)
    if handoff is not None:
        target, sender = handoff["target"].strip(), handoff["sender"].strip()
        return [ToolCall(tool=target, args={"instruction": text}, thought=text, worker=sender)]
    if speaker in ACTING_AGENTS:
        return [ToolResult(output=text, tool=speaker, is_error=_failed(text), worker=speaker)]
    return [Message(role="assistant", text=text, worker=speaker)]


def _failed(text: str) -> bool | None:
    """True for a non-zero exit code or a traceback, False for exit code 0, else unknown."""
    code = _EXIT_CODE.search(text[:200])
    if code is not None:
        return int(code.group(1)) != 0
    return True if "Traceback (most recent call last)" in text else None
