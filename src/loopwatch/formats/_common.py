"""Small pieces the format readers share: safe field access, tool arguments, and runs built record by record."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..core._events import Event
from ..errors import InputError
from ._run import ErrorHandler, Run, run_id_from_path

RunOf = Callable[[str, Any, str, str], "tuple[Run | None, str | None]"]
"""``(format name, document, run id, path) -> (the run, or None; why it stopped early, or None)``."""


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def number(value: Any) -> float | None:
    """A finite, non-negative number (a cost, a timestamp), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        return None
    return float(value)


def count(value: Any) -> int | None:
    """A non-negative 64-bit integer (token counts; OTLP writes them as digit strings), else ``None``."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else None


def tool_args(raw: Any) -> dict[str, Any]:
    """Tool arguments: a JSON object, or a JSON string of one; anything else is kept under ``input``."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"input": raw}
    return dict(raw) if isinstance(raw, Mapping) else {"input": raw}


def parts_text(value: Any) -> str:
    """A message's text: a string, or the ``text`` of each part of a list of content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            part["text"] for part in value if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    raise ValueError(f"content: expected a string or a list of parts, got {type(value).__name__}")


def read_documents(
    name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler, run_of: RunOf
) -> Iterator[Run]:
    """One run per document (a JSON Lines file of documents gives one per line: ``name``, ``name/1``...).

    A document that stops early is reported with its line, its run so far is yielded, and the file ends."""
    base = run_id_from_path(path)
    for position, (lineno, record) in enumerate(records):
        run, problem = run_of(name, record, base if position == 0 else f"{base}/{position}", path)
        if problem is not None:
            on_error(InputError(problem, path=path, line=lineno))
        if run is not None:
            yield run
        if problem is not None:
            return


def add_records(run: Run, items: Iterable[Any], events_of: Callable[[Any], list[Event]], what: str) -> str | None:
    """Append each item's events to ``run``, each event indexed by its item's position; the problem
    (``what[i]: reason``) of the first item ``events_of`` refuses with ``ValueError``, else ``None``."""
    indices = run.indices if run.indices is not None else []
    run.indices = indices
    for index, item in enumerate(items):
        try:
            events = events_of(item)
        except ValueError as exc:
            return f"{what}[{index}]: {exc}"
        run.events.extend(events)
        indices.extend([index] * len(events))
    return None
