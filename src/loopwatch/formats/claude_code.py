"""Claude Code session transcripts (``--format claude-code``): the JSONL files under ``~/.claude/projects/``.

One entry per line. ``user`` and ``assistant`` entries carry an Anthropic message in ``message`` and are read as
in :mod:`loopwatch.formats.anthropic`; every other entry type (``summary``, ``system``, ``file-history-snapshot``,
``queue-operation``, ``progress``, ...) is not conversation and is skipped, never an error. Details:

- index = the entry's 0-based line in the file (every line counts), so a detection points at the user's line;
- Claude Code writes each block of a streamed reply on a line of its own (same ``message.id``): the text of a
  reply becomes the thought of the reply's first tool call, reported at the tool call's line; thinking is skipped;
- ``isMeta`` and ``isCompactSummary`` user entries (notes from the harness, a compaction's summary) are ``system``
  messages, so they do not count as a new prompt;
- ``usage`` becomes a ``usage`` event (cache reads and writes count as input), once per reply;
- the run's id is its ``sessionId`` (the first one, as a resumed session's file holds several); sidechain
  entries (sub-agents, ``isSidechain``) form runs of their own, ``SESSION/agent-ID`` (``SESSION/sidechain``
  without an ``agentId``), so sub-agents' files under ``SESSION/subagents/`` never mix with the main session;
- a ``sessions-index.json`` file in a project folder holds no conversation: it gives no run;
- the output of ``claude -p --output-format stream-json --verbose`` (``session_id``; a sub-agent's messages
  carry ``parent_tool_use_id``, their run is ``SESSION/agent-TOOL_USE_ID``) reads the same way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall
from ..errors import EventError, InputError
from . import _chat
from ._run import ErrorHandler, Run, run_id_from_path

__all__ = ["read", "sniff"]

NAME: Final = "claude-code"
NAMES: Final[tuple[str, ...]] = (NAME,)
_MARKS: Final = ("sessionId", "parentUuid", "leafUuid", "isSidechain", "session_id")


def sniff(first: Any, path: str) -> str | None:
    """``claude-code`` for a transcript entry (or a project's session index)."""
    if not isinstance(first, Mapping):
        return None
    if _is_index(first):
        return NAME
    kind = first.get("type")
    if isinstance(kind, str) and (kind == "file-history-snapshot" or any(k in first for k in _MARKS)):
        return NAME
    return None


def _is_index(value: Mapping[str, Any]) -> bool:
    return isinstance(value.get("entries"), list) and "originalPath" in value


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """The main session's run, then one run per sidechain, in order of first appearance."""
    chains: dict[str, _Chain] = {}
    spent: set[tuple[Any, Any]] = set()
    first = True
    for lineno, entry in records:
        if first and sniff(entry, path) is None:
            on_error(InputError("not a Claude Code transcript entry (no type with sessionId)", path=path, line=lineno))
            break
        first = False
        if not isinstance(entry, Mapping):
            on_error(InputError(f"expected a JSON object, got {type(entry).__name__}", path=path, line=lineno))
            break
        kind = entry.get("type")
        if kind not in ("user", "assistant"):
            continue
        message = entry.get("message")
        if not isinstance(message, Mapping):
            on_error(InputError(f"a {kind} entry needs a 'message' object", path=path, line=lineno))
            break
        chain = _chain_of(chains, entry, path)
        try:
            if kind == "user":
                chain.user(entry, message, lineno - 1)
            else:
                key = (_plain_key(message.get("id")), _plain_key(entry.get("requestId")))
                first_line = key[0] is None or key not in spent
                spent.add(key)
                chain.assistant(message, lineno - 1, usage=first_line)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
    for chain in chains.values():
        chain.flush()
        yield chain.conversation.run


def _chain_of(chains: dict[str, _Chain], entry: Mapping[str, Any], path: str) -> _Chain:
    agent, parent = entry.get("agentId"), entry.get("parent_tool_use_id")
    key = "main"
    if entry.get("isSidechain") is True:
        key = f"agent-{agent}" if isinstance(agent, str) and agent else "sidechain"
    elif isinstance(parent, str) and parent:  # stream-json: a sub-agent's message names the Task call it serves
        key = f"agent-{parent}"
    chain = chains.get(key)
    if chain is None:
        session = entry.get("sessionId", entry.get("session_id"))
        session = session if isinstance(session, str) and session else run_id_from_path(path)
        chain = chains[key] = _Chain(session if key == "main" else f"{session}/{key}", path)
    return chain


class _Chain:
    """One conversation of a transcript, with the text of a reply whose tool call may be on a later line."""

    def __init__(self, run_id: str, path: str) -> None:
        self.conversation = _chat.Conversation(run_id, path)
        self.pending: tuple[Any, str, int] | None = None  # (message id, text, line index)

    def flush(self) -> None:
        if self.pending is not None:
            _, text, index = self.pending
            self.conversation.add([Message(role="assistant", text=text)], index)
            self.pending = None

    def user(self, entry: Mapping[str, Any], message: Mapping[str, Any], index: int) -> None:
        self.flush()
        events = _chat.message_events({**message, "role": "user"}, self.conversation)
        if entry.get("isMeta") is True or entry.get("isCompactSummary") is True:
            events = [Message(role="system", text=e.text) if isinstance(e, Message) else e for e in events]
        self.conversation.add(events, index)

    def assistant(self, message: Mapping[str, Any], index: int, *, usage: bool) -> None:
        events: list[Event] = _chat.message_events({**message, "role": "assistant"}, self.conversation)
        message_id = message.get("id")
        if self.pending is not None and (message_id is None or self.pending[0] != message_id):
            self.flush()
        if len(events) == 1 and isinstance(events[0], Message) and message_id is not None:
            text = events[0].text  # the reply's text: held for the reply's tool call
            if self.pending is not None:
                self.pending = (message_id, f"{self.pending[1]}\n{text}", self.pending[2])
            else:
                self.pending = (message_id, text, index)
            events = []
        elif self.pending is not None and any(isinstance(e, ToolCall) for e in events):
            first = next(i for i, e in enumerate(events) if isinstance(e, ToolCall))
            call = events[first]
            assert isinstance(call, ToolCall)
            thought = "\n".join(t for t in (self.pending[1], call.thought) if t)
            events[first] = dataclasses.replace(call, thought=thought or None)
            self.pending = None
        if usage:
            spent = _chat.usage_event(message.get("usage"))
            if spent is not None:
                events.append(spent)
        self.conversation.add(events, index)


def _plain_key(value: Any) -> Any:
    """A message or request id as a key: itself when it is a string or a number, else its JSON text."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    return json.dumps(value, sort_keys=True, default=repr)
