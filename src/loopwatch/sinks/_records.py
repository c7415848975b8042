"""What a record says, read the same way by every format: its action (and how severe it is) and one line for
humans."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

#: Actions in increasing severity; ``min_action`` of :class:`~loopwatch.sinks.WebhookSink` takes one of them.
ACTIONS: Final[tuple[str, ...]] = ("warning", "nudge", "block", "stop", "terminated")
_SEVERITY: Final[Mapping[str, int]] = {
    "warning": 1,
    "warn": 1,
    "nudge": 2,
    "block": 3,
    "stop": 4,
    "terminate": 5,
    "terminated": 5,
}

REASON_LIMIT: Final = 1500


def severity_of(word: object) -> int:
    if not isinstance(word, str):
        return 0
    return _SEVERITY.get(word.rsplit(".", 1)[-1].lower(), 0)


def severity(record: Mapping[str, Any]) -> int:
    return max(severity_of(record.get("action")), severity_of(record.get("event")))


def action_of(record: Mapping[str, Any]) -> str | None:
    """The record's action as one of :data:`ACTIONS` (``"loop.stop"`` -> ``"stop"``), or ``None``."""
    level = severity(record)
    return ACTIONS[level - 1] if level else None


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=repr)


def one_line(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(record: Mapping[str, Any]) -> str:
    """One line for humans: ``loopwatch stop: session s1, repeat x3 - <reason>``."""
    kind = as_text(record.get("action")) or as_text(record.get("event")) or "event"
    line = f"loopwatch {kind}: session {as_text(record.get('session')) or '?'}"
    if record.get("pattern"):
        line += f", {as_text(record['pattern'])}"
        if record.get("count") is not None:
            line += f" x{as_text(record['count'])}"
    reason = as_text(record.get("reason")) or as_text(record.get("message"))
    if reason:
        line += f" - {truncate(reason, REASON_LIMIT)}"
    return one_line(line)


def facts(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    names = ("session", "pattern", "action", "count", "event", "worker")
    return [(name, one_line(as_text(record.get(name)))) for name in names if record.get(name) is not None]
