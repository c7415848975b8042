"""Small pieces the framework adapters share (standard library only)."""

from __future__ import annotations

import json

from ..errors import ConfigError
from ..guard import Guard
from ..policy import Policy


def as_text(value: object) -> str:
    """A tool's output as text: strings as they are, anything else as sorted JSON (or its ``str``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def guard_of(guard: Guard | None, preset: str | Policy | None) -> Guard:
    """The adapter's guard: ``guard`` as given, else a new in-memory one with ``preset`` (not both)."""
    if guard is not None and preset is not None:
        raise ConfigError("give either guard or preset, not both", field="preset")
    return guard if guard is not None else Guard(preset)
