"""SWE-agent trajectories (``.traj``): one JSON document per run, ``trajectory[i]`` = one agent turn.

Each turn ``{"action", "observation", "response", "thought", ...}`` becomes two events with the turn's index:
the call (tool = the command's first word, args = ``{"command": <the whole command line>}``, thought = the
model's whole response) and its result (the observation). A turn whose action is empty (the model's output
could not be parsed) becomes an assistant message and an empty result, as in the corpus's converted runs.
Synthetic autosubmission turns (``exit_cost``, ``exit_context``, ...) carry no command and are skipped.

SWE-agent records no exit codes: ``is_error`` is ``True`` when the observation carries one of the error messages
of the shell or of SWE-agent's own commands (``_ERROR``), otherwise unknown (``None``), never ``False``. This is
the rule the corpus converter used (it agrees with the converted ``swe_agent_java`` runs on 9,284 of their
9,285 observations).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult
from ._common import add_records, mapping, read_documents
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final = ("swe-agent",)

_EXIT_ACTIONS: Final = frozenset({"exit_cost", "exit_context", "exit_api", "exit_format", "exit_error", "exit_forfeit"})
_ERROR: Final = re.compile(
    r"command not found"
    r"|: No such file or directory"
    r"|Your proposed edit has introduced new syntax error"
    r"|^Usage: "
    r"|^Error: "
    r"|^Traceback \(most recent call last\)"
    r"|^File .* not found"
    r"|^\w+: cannot (?:access|open) "
    r"|^No file open\. Use the `open` command"
    r"|\.java:\d+: error:",
    re.MULTILINE,
)


def sniff(first: Any, path: str) -> str | None:
    """``swe-agent`` for an object with a ``trajectory`` list of ``action``/``observation`` turns."""
    if not isinstance(first, Mapping) or not isinstance(first.get("trajectory"), list):
        return None
    if "messages" in first or "steps" in first:
        return None
    turns = first["trajectory"]
    if turns:
        turn = turns[0]
        return NAMES[0] if isinstance(turn, Mapping) and "action" in turn and "observation" in turn else None
    return NAMES[0] if "history" in first or "info" in first else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per trajectory document (a JSON Lines file of trajectories gives one per line)."""
    return read_documents(name, records, path, on_error, _run)


def _run(name: str, record: Any, run_id: str, path: str) -> tuple[Run | None, str | None]:
    """The run of one trajectory document and the reason it stopped early (``None`` when read whole)."""
    if not isinstance(record, Mapping):
        return None, f"a SWE-agent trajectory is a JSON object, got {type(record).__name__}"
    turns = record.get("trajectory")
    if not isinstance(turns, list):
        return None, "trajectory: expected a list of turns"
    info = mapping(record.get("info"))
    outcome = {key: info[key] for key in ("exit_status", "model_stats") if key in info}
    run = Run(id=run_id, source=name, path=path, meta={"labels": {"outcome": outcome}}, indices=[])
    return run, add_records(run, turns, _turn_events, "trajectory")


def _turn_events(turn: Any) -> list[Event]:
    if not isinstance(turn, Mapping):
        raise ValueError(f"a turn is a JSON object, got {type(turn).__name__}")
    action = _text(turn, "action").strip()
    if action in _EXIT_ACTIONS:
        return []
    response = _text(turn, "response")
    observation = _text(turn, "observation")
    words = action.split()
    if not words:
        return [Message(role="assistant", text=response), ToolResult(output=observation, tool="tool")]
    tool = words[0]
    return [
        ToolCall(tool=tool, args={"command": action}, thought=response or None),
        ToolResult(output=observation, tool=tool, is_error=True if _ERROR.search(observation) else None),
    ]


def _text(turn: Mapping[str, Any], key: str) -> str:
    value = turn.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string, got {type(value).__name__}")
    return value
