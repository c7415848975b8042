"""Reading a labels file for ``loopwatch eval`` (the label format: docs/labels.md): every problem is a
:class:`~loopwatch.cli._metrics.LabelError` naming the file and line, and the field when one is at fault.

Labels are strict where trace files are lenient: a field the format does not define is an error, with the
closest defined field suggested, because a misspelt ``detectable_at`` or ``episodes`` would otherwise be
scored silently as a run without loops.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from typing import Any, Final

from ._metrics import Label, LabelError, parse_labels

LABEL_FIELDS: Final = ("id", "verdict", "episodes", "confidence", "note")
EPISODE_FIELDS: Final = ("start", "detectable_at", "end", "unit_len", "pattern", "reps", "note")


def read_labels(path: str | os.PathLike[str]) -> dict[str, Label]:
    """The labels in ``path`` (one JSON object per line), keyed by run id."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise LabelError(f"{name}: labels file not found") from None
    except IsADirectoryError:
        raise LabelError(f"{name}: is a directory, not a labels file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LabelError(f"{name}: cannot read the labels file: {reason}") from None
    for number, text in enumerate(lines, 1):
        _check_fields(text, name, number)
    try:
        return parse_labels(lines)
    except LabelError as exc:
        raise _error(f"{name}:{exc.line}: {_without_line(exc)}", exc.field, exc.line) from None


def _error(message: str, field: str | None, line: int | None) -> LabelError:
    """A :class:`LabelError` whose message is ``message`` as it is (file and line already in it)."""
    error = LabelError(message)
    error.field, error.line = field, line
    return error


def _without_line(exc: LabelError) -> str:
    text = str(exc)
    prefix = f"line {exc.line}: "
    return text[len(prefix) :] if exc.line is not None and text.startswith(prefix) else text


def _check_fields(text: str, path: str, line: int) -> None:
    if not text.strip():
        return
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError:
        return  # parse_labels reports it with its line
    if not isinstance(value, Mapping):
        return
    run = value.get("id")
    where = f"{path}:{line}: " + (f"run {run!r}: " if isinstance(run, str) else "")
    _unknown(value, LABEL_FIELDS, where, "", "a label")
    episodes = value.get("episodes")
    if isinstance(episodes, list):
        for position, episode in enumerate(episodes):
            if isinstance(episode, Mapping):
                _unknown(episode, EPISODE_FIELDS, where, f"episodes[{position}].", "an episode")


def _unknown(obj: Mapping[str, Any], known: tuple[str, ...], where: str, prefix: str, what: str) -> None:
    for key in obj:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            field = f"{prefix}{key}"
            raise _error(f"{where}{field}: unknown field{hint} ({what} has {', '.join(known)})", field, None)
