"""Trace files as JSON records: paths expanded (directories walked, globs), files opened (gzip, standard input,
bytes that are not UTF-8), JSONL streamed or whole documents decoded, every bad record reported, never raised."""

from __future__ import annotations

import contextlib
import glob
import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, Final

from ..core._kernels import surrogate_escape
from ..core._kernels_py import SURROGATE_ESCAPE
from ..errors import InputError

if TYPE_CHECKING:
    from ._run import ErrorHandler

_TRACE_SUFFIXES: Final = (".jsonl", ".json", ".ndjson", ".traj")


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


def read_records(
    path: str,
    on_error: ErrorHandler,
    skip: list[int] | None = None,
    documents: list[bool] | None = None,
    route: list[Callable[[str], bool]] | None = None,
) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) per record; a bad record is reported and ends the file.

    JSONL is streamed, one record per non-blank line. When the first non-blank line is the unfinished start
    of a longer value (``{`` or ``[`` of a pretty-printed document), the file is one JSON document instead
    (or several concatenated ones), each a record numbered by the line it starts on.
    ``skip`` (``[part, parts]``, set by the caller once it knows the lines are independent records): after
    the first record, only lines whose ordinal is ``part`` modulo ``parts`` are parsed and yielded (of JSON
    documents, every one is parsed and only those are yielded). ``documents`` gets ``True`` appended, before the
    first record is yielded, when the file is read as JSON documents rather than line by line. ``route`` (one
    predicate, set by the caller like ``skip``): after the first record, a line it says no to is not parsed (JSON
    lines only; documents are all parsed).
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
                if route and not route[0](line):
                    continue  # another worker's event
                line = line.rstrip("\r\n")
                try:
                    value = _loads(line)
                except json.JSONDecodeError as exc:
                    if first and exc.pos >= len(line.rstrip()):  # the line ended before the value did
                        if documents is not None:
                            documents.append(True)
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

    ``skip`` as for :func:`read_records`: after the first document, only the caller's share is yielded.
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
        raise _UnreadableJSON(f"unreadable JSON: {first_sentence(exc)}") from None
    return _without_lone_surrogates(value) if surrogate_escape(text) else value


def _raw_decode(decoder: json.JSONDecoder, text: str, pos: int) -> tuple[Any, int]:
    try:
        value, end = decoder.raw_decode(text, pos)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise _UnreadableJSON("unreadable JSON: nested too deeply") from None
    except ValueError as exc:
        raise _UnreadableJSON(f"unreadable JSON: {first_sentence(exc)}") from None
    return (_without_lone_surrogates(value) if SURROGATE_ESCAPE.search(text, pos, end) else value), end


def first_sentence(exc: BaseException) -> str:
    return str(exc).split(";", 1)[0]


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every string's lone surrogates replaced by U+FFFD (iteratively: any depth)."""
    if isinstance(value, str):
        return text_without_surrogates(value)
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = text_without_surrogates(item)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            cleaned = container[key] = {text_without_surrogates(k): v for k, v in item.items()}
            stack.extend((cleaned, k) for k in cleaned)
    return root[0]


def text_without_surrogates(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text
