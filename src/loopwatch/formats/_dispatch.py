"""Which reader reads a file: its format forced or sniffed from its first JSON value (loopwatch's own formats first,
then the registry's), and a record no reader expected ending the file as a bad record, never as an exception."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..errors import InputError
from ._canonical import SessionShare, event_stream, sniff_canonical, trajectories
from ._files import expand_paths, first_sentence, read_records
from ._run import FORMATS, ErrorHandler, Format, Run


def sniff_format(record: Any, path: str = "") -> Format | None:
    """The format of a file from its first JSON value (``None`` when no reader recognises it).

    ``events`` and ``trajectory`` are tried first, then the readers of :mod:`loopwatch.formats` in their
    registry's order; any other object with a ``type`` is taken for an event stream (whose unknown event
    type is then reported with its line).
    """
    kind = sniff_canonical(record)
    if kind is not None:
        return kind
    from .. import formats

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
    k, k + n, k + 2n...; of a JSONL event stream, the k-th, (k + n)-th... session in the order of their first
    events, each worker parsing only the lines of its sessions (and those whose session takes parsing to know:
    :class:`~loopwatch.formats._canonical.SessionShare`); any other file is read whole by share 0 and skipped by
    the others. A bad record is reported by the share that parses its line (by every share, for an event-stream
    line whose session cannot be read without parsing it), and by share 0 alone where every share parses every
    record (pretty-printed JSON documents). A share stops at the bad record it meets, so shares of a file with one
    end in different places: ``loopwatch scan -j`` scans such a file again in one piece.
    """
    if format is not None and format not in FORMATS:
        on_error(InputError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})", path=path))
        return
    share, shares = part or (0, 1)

    def _ignore(error: InputError) -> None:
        pass

    # share 0 reports what every share reads (the first record, a stream's events, JSON documents)
    handler: ErrorHandler = _ignore if share != 0 and shares > 1 else on_error
    skip: list[int] = []
    documents: list[bool] = []
    route: list[Callable[[str], bool]] = []
    records = read_records(path, lambda error: handler(error), skip, documents, route)
    first = next(records, None)
    if first is None:
        return
    kind = format or sniff_format(first[1], path)
    if kind is None:
        handler(InputError(f"not a trace format loopwatch knows ({', '.join(FORMATS)})", path=path, line=first[0]))
        return
    sessions: SessionShare | None = None
    if shares > 1:
        if kind == "trajectory" and not isinstance(first[1], list):
            skip[:] = share, shares
            if not documents:
                handler = on_error  # each share parses lines of its own (of JSON documents, share 0 reports)
            if share != 0:
                first = next(records, None)  # the first line is share 0's
                if first is None:
                    return
        elif kind == "events" and not isinstance(first[1], list):
            sessions = SessionShare(share, shares)
            if not documents:
                route[:] = [sessions.wants]  # other shares' events are not parsed
                handler = on_error  # so each share reports the bad record it meets
        elif share != 0:
            return  # not splittable: share 0 reads it all
    seen = [first[0]]
    chained = _chain(first, records, seen)
    if kind == "trajectory":
        runs = trajectories(path, _flatten(chained), handler)
    elif kind == "events":
        runs = event_stream(path, _flatten(chained), handler, sessions)
    else:
        from .. import formats

        module = formats.reader(kind)
        if module is None:
            on_error(InputError(f"no reader is registered for format {kind!r}", path=path))
            return
        runs = module.read(kind, chained, path, handler)
    yield from _guarded(runs, path, seen, handler)


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
        reason = f"unreadable record ({type(exc).__name__}: {first_sentence(exc)[:200]})"
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
