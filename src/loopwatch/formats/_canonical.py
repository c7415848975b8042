"""loopwatch's own formats: ``events`` (an event stream, one session per ``session`` field) and ``trajectory`` (a run
as a list of steps) (docs/formats.md, sections 1 and 2)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

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


_SESSION_KEY: Final = '"session"'
_SESSION_VALUE: Final = re.compile(r'"session"\s*:\s*"([^"\\]*)"')


def raw_session(line: str) -> str | None:
    """The session of an event-stream line, read without parsing the line, where the text leaves no doubt; else
    ``None`` (the line must be parsed to know). Certain when ``"session"`` appears once, as a key of the top-level
    object (only an opening brace, and whole strings without a backslash, before it), with a string value without
    escapes, and the line holds no ``\\u`` escape (which could spell another ``session`` key). Then it is what
    parsing the line would give (:func:`~loopwatch.core._events.session_of`), if the line parses at all."""
    at = line.find(_SESSION_KEY)
    if at < 0 or line.find(_SESSION_KEY, at + len(_SESSION_KEY)) >= 0 or "\\u" in line:
        return None
    head = line[:at].lstrip()
    if head[:1] != "{" or "{" in head[1:] or "[" in head or "\\" in head or head.count('"') % 2:
        return None
    value = _SESSION_VALUE.match(line, at)
    if value is None:
        return None
    try:
        return session_of({"session": value.group(1)})
    except EventError:
        return None


class SessionShare:
    """One worker's share of an event stream's sessions when ``parts`` workers share the file: the sessions numbered
    ``part``, ``part + parts``... (from 0, in the order of their first events). Every worker numbers every session,
    reading its name from the line itself where :func:`raw_session` can, so the workers agree without parsing one
    another's events."""

    __slots__ = ("_mine", "_others", "part", "parts")

    def __init__(self, part: int, parts: int) -> None:
        self.part, self.parts = part, parts
        self._mine: set[str] = set()
        self._others: set[str] = set()

    def __repr__(self) -> str:
        return f"SessionShare({self.part}, {self.parts})"

    def claims(self, session: str) -> bool:
        """Is ``session`` this worker's (numbered here when it is new)?"""
        if session in self._mine:
            return True
        if session in self._others:
            return False
        if (len(self._mine) + len(self._others)) % self.parts == self.part:
            self._mine.add(session)
            return True
        self._others.add(session)
        return False

    def wants(self, line: str) -> bool:
        """Does this worker parse ``line``: an event of its own sessions, or one whose session takes parsing to
        know?"""
        session = raw_session(line)
        return session is None or self.claims(session)


def event_stream(
    path: str, records: Iterable[tuple[int, Any]], on_error: ErrorHandler, share: SessionShare | None = None
) -> Iterator[Run]:
    """The sessions of an event stream, one run each, in the order of their first events.

    ``share``: only that worker's sessions (see :class:`SessionShare`), for workers sharing one file: together they
    give every session once, each in its place. A worker judges only the events of its sessions (and of lines it
    had to parse to learn their session), so a bad record is met by the worker it falls to (by all, for a line that
    does not parse); the caller scans such a file again in one piece (``loopwatch scan -j``), for the output of one
    worker."""
    runs: dict[str, Run] = {}
    for lineno, record in records:
        try:
            # a dict first: asking the Mapping ABC costs ~80 ns a line
            session = session_of(record) if type(record) is dict or isinstance(record, Mapping) else "default"
            if share is not None and not share.claims(session):
                continue  # another worker's session
            event = parse_event(record)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
        run = runs.get(session)
        if run is None:
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
