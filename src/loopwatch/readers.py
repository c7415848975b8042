"""Readers: trace files -> runs of events (FORMAT.md sections 1 and 2).

A reader never stops at the first bad record of a scan: it yields what it could read and reports the
bad record (file, line, reason) as an :class:`~loopwatch.errors.InputError` in ``Run.errors`` or through
the ``on_error`` callback, so the caller can go on with the other files and say some input was bad.
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Final, Literal

from .errors import EventError, InputError
from .events import EVENT_TYPES, Event, Message, ToolCall, ToolResult, parse_event, session_of

Format = Literal["events", "trajectory"]
FORMATS: Final = ("events", "trajectory")
ErrorHandler = Callable[[InputError], None]


@dataclass
class Run:
    """One run (trajectory) or session (event stream): its events, in order, and where it came from."""

    id: str
    events: list[Event] = field(default_factory=list)
    source: str | None = None
    path: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def expand_paths(paths: Iterable[str], on_error: ErrorHandler | None = None) -> list[str]:
    """Files named by ``paths``: files as given, directories walked (sorted), globs expanded, ``-`` = stdin.

    A glob or a directory that names no trace file is reported to ``on_error``.
    """
    out: list[str] = []
    for path in paths:
        found = _expand(path)
        if not found and on_error is not None:
            on_error(InputError("no trace file matches", path=path))
        out.extend(found)
    return out


def _expand(path: str) -> list[str]:
    out: list[str] = []
    if path == "-":
        out.append(path)
    elif os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            out.extend(os.path.join(root, f) for f in sorted(files) if _is_trace_name(f))
    elif any(c in path for c in "*?["):
        out.extend(sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p)))
    else:
        out.append(path)
    return out


def _is_trace_name(name: str) -> bool:
    return name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson"))


def open_text(path: str) -> IO[str]:
    """Open a trace file as text (gzip detected by content, ``-`` = stdin); invalid UTF-8 is replaced.

    Closing the returned handle never closes the process's standard input.
    """
    if path == "-":
        raw: IO[bytes] = io.BufferedReader(_Unclosable(sys.stdin.buffer))
    else:
        raw = open(path, "rb")  # noqa: SIM115 (the caller closes the returned wrapper)
    if raw.peek(2)[:2] == b"\x1f\x8b":  # type: ignore[attr-defined]
        raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")


class _Unclosable(io.RawIOBase):
    """A read-only view of a binary stream whose ``close`` leaves the stream open (for stdin)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _records(path: str, on_error: ErrorHandler) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line; a bad line is reported and ends the file."""
    try:
        handle = open_text(path)
    except OSError as exc:
        on_error(InputError(f"cannot open: {exc.strerror or exc}", path=path))
        return
    with handle:
        lineno = 0
        try:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    on_error(InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno))
                    return
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            on_error(InputError(f"read error: {exc}", path=path, line=lineno or None))


def sniff_format(record: Any) -> Format | None:
    """``events`` or ``trajectory`` from a file's first record (``None`` when neither)."""
    if isinstance(record, Mapping):
        if isinstance(record.get("type"), str) and record["type"] in EVENT_TYPES:
            return "events"
        if "steps" in record:
            return "trajectory"
        if "type" in record:
            return "events"
    return None


def read_runs(
    paths: Iterable[str], *, format: Format | None = None, on_error: ErrorHandler | None = None
) -> Iterator[Run]:
    """Runs from every file in ``paths``; bad records go to ``on_error`` (default: raise)."""

    def _raise(error: InputError) -> None:
        raise error

    handler = on_error or _raise
    for path in expand_paths(paths, handler):
        yield from read_file(path, format=format, on_error=handler)


def read_file(path: str, *, format: Format | None = None, on_error: ErrorHandler) -> Iterator[Run]:
    """Runs of one file, in file order."""
    records = _records(path, on_error)
    first = next(records, None)
    if first is None:
        return
    kind = format or sniff_format(first[1])
    if kind is None:
        on_error(
            InputError("neither an event stream nor a trajectory (no 'type' or 'steps')", path=path, line=first[0])
        )
        return
    chained = _chain(first, records)
    if kind == "trajectory":
        yield from _trajectories(path, chained, on_error)
    else:
        yield from _event_stream(path, chained, on_error)


def _chain(first: tuple[int, Any], rest: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    yield first
    yield from rest


def _event_stream(path: str, records: Iterable[tuple[int, Any]], on_error: ErrorHandler) -> Iterator[Run]:
    runs: dict[str, Run] = {}
    for lineno, record in records:
        try:
            session = session_of(record) if isinstance(record, Mapping) else "default"
            event = parse_event(record)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
        run = runs.get(session)
        if run is None:
            run = runs[session] = Run(id=session, path=path)
        run.events.append(event)
    yield from runs.values()


def _trajectories(path: str, records: Iterable[tuple[int, Any]], on_error: ErrorHandler) -> Iterator[Run]:
    for lineno, record in records:
        try:
            yield trajectory_run(record, path=path)
        except EventError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            return


def trajectory_run(record: Any, *, path: str | None = None) -> Run:
    """One trajectory object (FORMAT.md section 2) as a run; step ``i`` becomes event ``i``."""
    if not isinstance(record, Mapping):
        raise EventError(f"a trajectory is a JSON object, got {type(record).__name__}")
    steps = record.get("steps")
    if not isinstance(steps, list):
        raise EventError("expected a list of steps", field="steps")
    run_id = record.get("id")
    if not isinstance(run_id, str):
        run_id = os.path.basename(path or "run").split(".")[0]
    events = []
    for i, step in enumerate(steps):
        try:
            events.append(step_event(step))
        except EventError as exc:
            raise EventError(f"step {i}: {exc}") from exc
    source = record.get("source") if isinstance(record.get("source"), str) else None
    labels = record.get("labels") if isinstance(record.get("labels"), Mapping) else {}
    return Run(id=run_id, events=events, source=source, path=path, meta={"labels": labels})


def step_event(step: Any) -> Event:
    """One trajectory step as an event."""
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
            return ToolCall(tool=tool, args=args or {}, thought=text or None, worker=agent)
        return Message(role="assistant", text=text, worker=agent)
    if role == "tool":
        is_error = step.get("is_error")
        return ToolResult(
            output=text,
            tool=tool or "tool",
            is_error=is_error if isinstance(is_error, bool) else None,
            worker=agent,
        )
    if role in ("user", "system"):
        return Message(role=role, text=text, worker=agent)
    raise EventError(f"expected assistant, tool, user or system, got {role!r}", field="role")
