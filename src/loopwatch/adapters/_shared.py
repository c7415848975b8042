"""Small pieces the framework adapters share (standard library only)."""

from __future__ import annotations

import json


def as_text(value: object) -> str:
    """A tool's output as text: strings as they are, anything else as sorted JSON (or its ``str``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
