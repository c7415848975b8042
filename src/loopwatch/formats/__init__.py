"""Readers of foreign trace formats: each maps a file to runs of events (docs/formats.md, section 1).

A format module defines::

    NAMES: tuple[str, ...]                       # the format names it reads, e.g. ("openai",)
    def sniff(first: Any, path: str) -> str | None  # its format name if a file's first JSON value is its format
    def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]

``records`` yields ``(line number, parsed JSON value)``: one per non-blank line of a JSONL file, exactly one
``(1, document)`` for a file that is one JSON document. A bad record is reported with
``on_error(InputError(reason, path=path, line=lineno))`` and ends the file (runs already complete may still be
yielded). A run's ``indices`` say which record of the user's run each event came from; a run without an id of
its own takes :func:`loopwatch.readers.run_id_from_path`.

:data:`REGISTRY` lists the modules in the order their ``sniff`` is tried (most specific first; ``events`` and
``trajectory`` are read by :mod:`loopwatch.readers` and sniffed before all of them). Modules are imported
only when a file needs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from ._run import ErrorHandler, Run

__all__ = ["REGISTRY", "FormatReader", "load", "modules", "reader"]

REGISTRY: dict[str, str] = {
    "claude_code": "loopwatch.formats.claude_code",
    "swe_agent": "loopwatch.formats.swe_agent",
    "mini_swe_agent": "loopwatch.formats.mini_swe_agent",
    "openhands": "loopwatch.formats.openhands",
    "tau_bench": "loopwatch.formats.tau_bench",
    "otel": "loopwatch.formats.otel",
    "who_and_when": "loopwatch.formats.who_and_when",
    "autogen": "loopwatch.formats.autogen",
    "langsmith": "loopwatch.formats.langsmith",
    "langfuse": "loopwatch.formats.langfuse",
    "openai_responses": "loopwatch.formats.openai_responses",
    "anthropic": "loopwatch.formats.anthropic",
    "openai": "loopwatch.formats.openai",
}
"""Module name -> importable path, in sniffing order (the chat formats last: they are the most general)."""


class FormatReader(Protocol):
    """What a format module provides (see the module docstring)."""

    NAMES: tuple[str, ...]

    def sniff(self, first: Any, path: str) -> str | None: ...

    def read(
        self, name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler
    ) -> Iterator[Run]: ...


def load(module: str) -> FormatReader:
    """The registered module ``module`` (imported on first use)."""
    return cast(FormatReader, importlib.import_module(REGISTRY[module]))


def modules() -> Iterator[FormatReader]:
    """The registered modules, in sniffing order, each imported when reached."""
    for name in REGISTRY:
        yield load(name)


def reader(format: str) -> FormatReader | None:
    """The module reading format ``format``, or ``None`` when none is registered."""
    for module in modules():
        if format in module.NAMES:
            return module
    return None
