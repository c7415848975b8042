"""What every trace reader gives: runs of events (:class:`Run`), each named by its own id or by its file; the
format names; how a reader reports a bad record (:data:`ErrorHandler`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ..core._events import Event
from ..errors import InputError
from ._files import text_without_surrogates

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
    name = text_without_surrogates(os.path.basename(path.rstrip("/\\")))  # a file name that is not UTF-8
    stripped = True
    while stripped:
        stripped = False
        for suffix in _ID_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, stripped = name[: -len(suffix)], True
    return name or "run"
