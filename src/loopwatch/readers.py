"""Readers: trace files -> runs of events (docs/formats.md, sections 1 and 2, and foreign formats).

A file is read as JSONL (one JSON value per line, streamed) or, when its first line is the start of a longer
value, as one JSON document (a pretty-printed object or list; several concatenated documents also work). Its
format is ``events`` or ``trajectory`` (handled here) or one of the foreign formats of :mod:`loopwatch.formats`;
``--format`` forces it, otherwise it is sniffed from the file's first JSON value.

A reader never stops at the first bad record of a scan: it yields what it could read and reports the
bad record (file, line, reason) as an :class:`~loopwatch.errors.InputError` through the ``on_error``
callback, so the caller can go on with the other files and say some input was bad. Whatever a file holds
(values of the wrong type where a format says what goes, numbers too long for Python, nesting deeper than
the JSON parser goes, bytes that are not UTF-8, a damaged gzip stream), it ends as runs and such reports,
never as another exception. Escaped lone surrogates (``"\ud800"``), which no output encoding can write, are
read as U+FFFD, as bytes that are not UTF-8 are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Final

from .errors import EventError, InputError
from .events import EVENT_TYPES, Event, Message, Reset, ToolCall, ToolResult, parse_event, session_of

Format = str
"""A format name, one of :data:`FORMATS`."""

FORMATS: Final[tuple[str, ...]] = (
    "events",
    "trajectory",
    "openai",
    "openai-responses",
    "anthropic",
    "claude-code",
    "swe-agent",
    "mini-swe-agent",
    "openhands",
    "tau-bench",
    "otel",
    "who-and-when",
    "autogen",
    "langsmith",
    "langfuse",
)
ErrorHandler = Callable[[InputError], None]
_TRACE_SUFFIXES: Final = (".jsonl", ".json", ".ndjson", ".traj")
_ID_SUFFIXES: Final = (".gz", ".jsonl", ".json", ".ndjson", ".traj")


@dataclass
class Run:
    """One run (trajectory) or session (event stream): its events, in order, and where it came from."""

    id: str
    events: list[Event] = field(default_factory=list)
    source: str | None = None
    path: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    indices: list[int] | None = None
    """``indices[i]``: the 0-based index, in the user's own run, of the record event ``i`` came from (the
    step of a trajectory, the message of a message list, the line of a transcript); ``None``: event ``i``
    came from record ``i``."""


def run_id_from_path(path: str | None) -> str:
    """A run's id when it has none of its own: the file's name without its extensions.

    ``runs/x.traj.json`` -> ``x``, ``x.jsonl.gz`` -> ``x``; standard input is ``stdin``, no path ``run``.
    """
    if path is None:
        return "run"
    if path == "-":
        return "stdin"
    name = _text_without_surrogates(os.path.basename(path.rstrip("/\\")))  # a file name that is not UTF-8
    stripped = True
    while stripped:
        stripped = False
        for suffix in _ID_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, stripped = name[: -len(suffix)], True
    return name or "run"


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
    name = name.lower()
    return name.endswith(_TRACE_SUFFIXES) or name.endswith(tuple(s + ".gz" for s in _TRACE_SUFFIXES))


_READ_METERS: list[Callable[[int], None]] = []


@contextlib.contextmanager
def read_meter(count: Callable[[int], None]) -> Iterator[None]:
    """While active, ``count(n)`` is told of every ``n`` bytes read from trace files in this process (as stored
    on disk: compressed bytes for a gzip file), for a progress bar with the files' sizes as its total."""
    _READ_METERS.append(count)
    try:
        yield
    finally:
        _READ_METERS.remove(count)


def open_text(path: str) -> IO[str]:
    """Open a trace file as text (gzip detected by content, ``-`` = stdin); invalid UTF-8 is replaced, a BOM dropped.

    Closing the returned handle never closes the process's standard input.
    """
    if path == "-":
        raw: IO[bytes] = io.BufferedReader(_Unclosable(sys.stdin.buffer))
    elif _READ_METERS:
        raw = io.BufferedReader(_Metered(open(path, "rb", buffering=0), _READ_METERS[-1]))  # noqa: SIM115
    else:
        raw = open(path, "rb")  # noqa: SIM115 (the caller closes the returned wrapper)
    if raw.peek(2)[:2] == b"\x1f\x8b":  # type: ignore[attr-defined]
        raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace")


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


class _Metered(io.RawIOBase):
    """A file's raw reads, each counted by a read meter."""

    def __init__(self, stream: IO[bytes], count: Callable[[int], None]) -> None:
        self._stream = stream
        self._count = count

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        read: int = self._stream.readinto(buffer)  # type: ignore[attr-defined]
        if read:
            self._count(read)
        return read

    def close(self) -> None:
        self._stream.close()
        super().close()


def _records(path: str, on_error: ErrorHandler, skip: list[int] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) per record; a bad record is reported and ends the file.

    JSONL is streamed, one record per non-blank line. When the first non-blank line is the unfinished start
    of a longer value (``{`` or ``[`` of a pretty-printed document), the file is one JSON document instead
    (or several concatenated ones), each a record numbered by the line it starts on.
    ``skip`` (``[part, parts]``, set by the caller once it knows the lines are independent records): after
    the first record, only lines whose ordinal is ``part`` modulo ``parts`` are parsed and yielded.
    """
    try:
        handle = open_text(path)
    except OSError as exc:
        on_error(InputError(f"cannot open: {exc.strerror or exc}", path=path))
        return
    with handle:
        lineno = 0
        first = True
        ordinal = -1
        try:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                ordinal += 1
                if skip and ordinal % skip[1] != skip[0]:
                    continue  # another worker's record: not even parsed
                line = line.rstrip("\r\n")
                try:
                    value = _loads(line)
                except json.JSONDecodeError as exc:
                    if first and exc.pos >= len(line.rstrip()):  # the line ended before the value did
                        yield from _documents(path, line + "\n" + handle.read(), lineno, on_error, skip)
                        return
                    on_error(InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno))
                    return
                except _UnreadableJSON as exc:
                    on_error(InputError(str(exc), path=path, line=lineno))
                    return
                first = False
                yield lineno, value
        except (OSError, EOFError, zlib.error) as exc:
            on_error(InputError(f"read error: {exc}", path=path, line=lineno or None))


def _documents(
    path: str, text: str, first_line: int, on_error: ErrorHandler, skip: list[int] | None = None
) -> Iterator[tuple[int, Any]]:
    """The JSON documents of ``text`` (which starts on line ``first_line``), each with the line it starts on.

    ``skip`` as for :func:`_records`: after the first document, only the caller's share is yielded.
    """
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    line, counted = first_line, 0  # ``line`` is the line of ``text[counted]``
    ordinal = -1
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            return
        line, counted = line + text.count("\n", counted, pos), pos
        try:
            value, pos = _raw_decode(decoder, text, pos)
        except json.JSONDecodeError as exc:
            where = first_line + exc.lineno - 1
            on_error(InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=where))
            return
        except _UnreadableJSON as exc:
            on_error(InputError(str(exc), path=path, line=line))
            return
        ordinal += 1
        if not skip or ordinal == 0 or ordinal % skip[1] == skip[0]:
            yield line, value


class _UnreadableJSON(ValueError):
    """JSON the parser cannot turn into values: nested too deeply, a number too long for Python."""


_LONE_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _loads(text: str) -> Any:
    """``json.loads``; its limits (nesting, number length) as :class:`_UnreadableJSON`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _UnreadableJSON("unreadable JSON: nested too deeply") from None
    except ValueError as exc:  # an integer with more digits than Python converts from text
        raise _UnreadableJSON(f"unreadable JSON: {_first_sentence(exc)}") from None
    return _without_lone_surrogates(value) if _LONE_SURROGATE_ESCAPE.search(text) else value


def _raw_decode(decoder: json.JSONDecoder, text: str, pos: int) -> tuple[Any, int]:
    try:
        value, end = decoder.raw_decode(text, pos)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _UnreadableJSON("unreadable JSON: nested too deeply") from None
    except ValueError as exc:
        raise _UnreadableJSON(f"unreadable JSON: {_first_sentence(exc)}") from None
    return (_without_lone_surrogates(value) if _LONE_SURROGATE_ESCAPE.search(text, pos, end) else value), end


def _first_sentence(exc: BaseException) -> str:
    return str(exc).split(";", 1)[0]


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every string's lone surrogates replaced by U+FFFD (iteratively: any depth)."""
    if isinstance(value, str):
        return _text_without_surrogates(value)
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = _text_without_surrogates(item)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            cleaned = container[key] = {_text_without_surrogates(k): v for k, v in item.items()}
            stack.extend((cleaned, k) for k in cleaned)
    return root[0]


def _text_without_surrogates(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _is_event(record: Mapping[str, Any]) -> bool:
    kind = record.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        return False
    # foreign messages carrying "type": "message" (OpenAI Responses items, Anthropic replies) have content
    return kind != "message" or "content" not in record or "text" in record


def _sniff_canonical(record: Any) -> Format | None:
    if isinstance(record, Mapping):
        if _is_event(record):
            return "events"
        if "steps" in record:
            return "trajectory"
    elif isinstance(record, list) and record and isinstance(record[0], Mapping):
        return _sniff_canonical(record[0])  # a JSON list of events or of trajectories
    return None


def sniff_format(record: Any, path: str = "") -> Format | None:
    """The format of a file from its first JSON value (``None`` when no reader recognises it).

    ``events`` and ``trajectory`` are tried first, then the readers of :mod:`loopwatch.formats` in their
    registry's order; any other object with a ``type`` is taken for an event stream (whose unknown event
    type is then reported with its line).
    """
    kind = _sniff_canonical(record)
    if kind is not None:
        return kind
    from . import formats

    for module in formats.modules():
        try:
            name = module.sniff(record, path)
        except Exception:  # a record its sniffing did not expect (a value of the wrong type): not this format
            name = None
        if name is not None:
            return name
    if isinstance(record, Mapping) and "type" in record:
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


def read_file(
    path: str, *, format: Format | None = None, on_error: ErrorHandler, part: tuple[int, int] | None = None
) -> Iterator[Run]:
    """Runs of one file, in file order; ``format`` forces the format (default: sniffed).

    ``part=(k, n)`` reads only the k-th of n interleaved shares of the file's runs, for n workers sharing
    one big file: for a JSONL trajectory file (one run per line) the k-th worker parses only lines
    k, k + n, k + 2n...; any other file is read whole by share 0 and skipped by the others.
    """
    if format is not None and format not in FORMATS:
        on_error(InputError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})", path=path))
        return
    skip: list[int] = []
    records = _records(path, on_error, skip)
    first = next(records, None)
    if first is None:
        return
    kind = format or sniff_format(first[1], path)
    if kind is None:
        on_error(InputError(f"not a trace format loopwatch knows ({', '.join(FORMATS)})", path=path, line=first[0]))
        return
    if part is not None and part[1] > 1:
        if kind != "trajectory" or isinstance(first[1], list):
            if part[0] != 0:
                return  # not splittable: share 0 reads it all
        else:
            skip[:] = part
            if part[0] != 0:
                first = next(records, None)  # the first line is share 0's
                if first is None:
                    return
    seen = [first[0]]
    chained = _chain(first, records, seen)
    if kind == "trajectory":
        runs = _trajectories(path, _flatten(chained), on_error)
    elif kind == "events":
        runs = _event_stream(path, _flatten(chained), on_error)
    else:
        from . import formats

        module = formats.reader(kind)
        if module is None:
            on_error(InputError(f"no reader is registered for format {kind!r}", path=path))
            return
        runs = module.read(kind, chained, path, on_error)
    yield from _guarded(runs, path, seen, on_error)


def _guarded(runs: Iterator[Run], path: str, seen: list[int], on_error: ErrorHandler) -> Iterator[Run]:
    """The runs of a file; a record no reader expected (a value of the wrong type where the format says
    what goes, say) ends the file as a bad record, reported with its line, like any other bad record."""
    try:
        yield from runs
    except InputError:
        raise  # the caller's on_error raised it: theirs to handle
    except RecursionError:
        on_error(InputError("unreadable record: nested too deeply", path=path, line=seen[0]))
    except Exception as exc:
        reason = f"unreadable record ({type(exc).__name__}: {_first_sentence(exc)[:200]})"
        on_error(InputError(reason, path=path, line=seen[0]))


def _flatten(records: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """A JSON list of events or trajectories is read as if they were on lines of their own."""
    for lineno, record in records:
        if isinstance(record, list):
            for item in record:
                yield lineno, item
        else:
            yield lineno, record


def _chain(
    first: tuple[int, Any], rest: Iterator[tuple[int, Any]], seen: list[int] | None = None
) -> Iterator[tuple[int, Any]]:
    """The records, ``first`` then ``rest``; ``seen[0]``: the line of the last one handed out."""
    yield first
    for record in rest:
        if seen is not None:
            seen[0] = record[0]
        yield record


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
    for i, step in enumerate(steps):
        try:
            event = step_event(step)
        except EventError as exc:
            raise EventError(f"step {i}: {exc}") from exc
        previous = events[-1] if events else None
        if isinstance(event, ToolResult) and isinstance(previous, ToolCall) and previous.id is None:
            # a tool step is the result of the call right before it, whatever tool name it was recorded under
            link = f"step-{i - 1}"
            events[-1] = dataclasses.replace(previous, id=link)
            event = dataclasses.replace(event, id=link)
        events.append(event)
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
    if role == "system" and step.get("new_context") is True:
        # the harness started a fresh conversation: the model no longer sees what came before, so nothing it does
        # from here repeats what it did there
        return Reset(worker=agent)
    if role in ("user", "system"):
        return Message(role=role, text=text, worker=agent)
    raise EventError(f"expected assistant, tool, user or system, got {role!r}", field="role")
