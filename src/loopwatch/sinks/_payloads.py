"""The body a webhook posts, one per format: the record itself (``json``), a Slack message, a Discord message."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any, Final, Literal

from ._records import REASON_LIMIT, as_text, facts, one_line, severity, summarize, truncate

WebhookFormat = Literal["json", "slack", "discord"]
FORMATS: Final[tuple[str, ...]] = ("json", "slack", "discord")

_YELLOW, _ORANGE, _RED, _GREY = 0xF1C40F, 0xE67E22, 0xE74C3C, 0x95A5A6
_COLORS: Final[Mapping[int, int]] = {1: _YELLOW, 2: _YELLOW, 3: _ORANGE, 4: _RED, 5: _RED}

_SLACK_TEXT_LIMIT: Final = 3000  # a section block's text
_DISCORD_CONTENT_LIMIT: Final = 2000
_DISCORD_TITLE_LIMIT: Final = 256
_DISCORD_DESCRIPTION_LIMIT: Final = 4000  # 4096 allowed; the whole embed must stay under 6000
_DISCORD_FIELD_LIMIT: Final = 200  # 1024 allowed; see above


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_payload(record: Mapping[str, Any]) -> dict[str, Any]:
    lines = [f"*{name.capitalize()}:* {_slack_escape(truncate(value, 200))}" for name, value in facts(record)]
    reason = as_text(record.get("reason")) or as_text(record.get("message"))
    if reason:
        lines.append(f"*Reason:* {_slack_escape(truncate(reason, REASON_LIMIT))}")
    section = truncate("\n".join(lines) or _slack_escape(summarize(record)), _SLACK_TEXT_LIMIT)
    return {
        "text": truncate(_slack_escape(summarize(record)), _SLACK_TEXT_LIMIT),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": section}}],
    }


def _iso_time(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def _discord_payload(record: Mapping[str, Any]) -> dict[str, Any]:
    kind = as_text(record.get("action")) or as_text(record.get("event")) or "event"
    reason = as_text(record.get("reason")) or as_text(record.get("message")) or summarize(record)
    embed: dict[str, Any] = {
        "title": truncate(one_line(f"loopwatch {kind}"), _DISCORD_TITLE_LIMIT),
        "description": truncate(reason, _DISCORD_DESCRIPTION_LIMIT),
        "color": _COLORS.get(severity(record), _GREY),
        "fields": [
            {"name": name, "value": truncate(value, _DISCORD_FIELD_LIMIT) or "-", "inline": True}
            for name, value in facts(record)
        ],
    }
    timestamp = _iso_time(record.get("ts"))
    if timestamp is not None:
        embed["timestamp"] = timestamp
    return {
        "content": truncate(summarize(record), _DISCORD_CONTENT_LIMIT),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},  # never ping @everyone from record text
    }


def _json_payload(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record


FORMATTERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]] = {
    "json": _json_payload,
    "slack": _slack_payload,
    "discord": _discord_payload,
}
