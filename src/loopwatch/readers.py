"""Readers: trace files -> runs of events (docs/formats.md, sections 1 and 2, and foreign formats).

A file is read as JSONL (one JSON value per line, streamed) or, when its first line is the start of a longer
value, as one JSON document (a pretty-printed object or list; several concatenated documents also work). Its
format is ``events`` or ``trajectory`` (loopwatch's own) or one of the foreign formats of :mod:`loopwatch.formats`;
``--format`` forces it, otherwise it is sniffed from the file's first JSON value.

A reader never stops at the first bad record of a scan: it yields what it could read and reports the
bad record (file, line, reason) as an :class:`~loopwatch.errors.InputError` through the ``on_error``
callback, so the caller can go on with the other files and say some input was bad. Whatever a file holds
(values of the wrong type where a format says what goes, numbers too long for Python, nesting deeper than
the JSON parser goes, bytes that are not UTF-8, a damaged gzip stream), it ends as runs and such reports,
never as another exception. Escaped lone surrogates (``"\ud800"``), which no output encoding can write, are
read as U+FFFD, as bytes that are not UTF-8 are.

This module is the readers' public face; the reading itself lives with the formats (``loopwatch.formats``' private
modules).
"""

from __future__ import annotations

from .formats._canonical import step_event, trajectory_run
from .formats._dispatch import read_file, read_runs, sniff_format
from .formats._files import expand_paths, open_text, read_meter
from .formats._run import FORMATS, ErrorHandler, Format, Run, run_id_from_path

__all__ = [
    "FORMATS",
    "ErrorHandler",
    "Format",
    "Run",
    "expand_paths",
    "open_text",
    "read_file",
    "read_meter",
    "read_runs",
    "run_id_from_path",
    "sniff_format",
    "step_event",
    "trajectory_run",
]
