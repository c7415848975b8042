"""Message templates: what the model is told, per pattern and escalation level.

Templates use ``str.format`` fields from the finding: ``{tool}``, ``{call}``, ``{count}``, ``{error}``,
``{failures}`` (error retries: the failures so far), ``{outcome}`` (failure streaks: "failed" or "failed
or found nothing"), ``{calls}``, ``{period}``, ``{chunk}``, ``{workers}``, ``{ledger}`` (a progress ledger's
own reason), ``{reason}``. Unknown fields are left as written. The default templates are those the patterns declare
(:class:`loopwatch.core.Pattern`); users override them per pattern (every level) or per pattern and level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import detectors as _rules  # noqa: F401  (defining the rules declares their patterns and templates)
from ._errors import ConfigError
from ._patterns import REGISTRY

Overrides = Mapping[str, "str | Mapping[int | str, str]"]


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with ``fields`` filled in; unknown fields are left as written, never an error."""
    try:
        return template.format_map(_Fields(fields))
    except (ValueError, IndexError, AttributeError, KeyError):  # a malformed user template
        return template


class Messages:
    """Templates by pattern and level, with user overrides on top of the defaults.

    Lookup for (pattern, level, action): the level's own template, else the action's (``"block"``,
    ``"stop"``), else the highest level at or below ``level``, else the pattern's level 1.
    """

    def __init__(self, overrides: Overrides | None = None, base: Mapping[str, Mapping[int | str, str]] | None = None):
        """``base``: the templates overridden (default: those the patterns declare); ``overrides`` may only name
        declared patterns and levels (a number from 1, or ``nudge``, ``block``, ``stop``), else ConfigError."""
        for given, name in ((overrides, "messages"), (base, "base")):
            if given is not None and not isinstance(given, Mapping):
                raise ConfigError(f"expected templates by pattern (a mapping), got {type(given).__name__}", field=name)
        table: dict[str, dict[int | str, str]] = {k: dict(v) for k, v in (base or REGISTRY.templates()).items()}
        for pattern, value in (overrides or {}).items():
            where = f"messages.{pattern}"
            REGISTRY.get(pattern, field=where)
            if not isinstance(value, (str, Mapping)):
                raise ConfigError(f"expected a template or templates by level, got {value!r}", field=where)
            for level, text in ({} if isinstance(value, str) else value).items():
                _check_level(level, text, f"messages.{pattern}.{level}")
            if isinstance(value, str):
                table[pattern] = {1: value, "block": value, "stop": value}
            else:
                table.setdefault(pattern, {}).update({_level_key(k): v for k, v in value.items()})
        self.table = table

    def template(self, pattern: str, level: int, action: str) -> str:
        entry = self.table.get(pattern) or {}
        if level in entry:
            return entry[level]
        if action in entry:
            return entry[action]
        for lower in range(level - 1, 0, -1):
            if lower in entry:
                return entry[lower]
        return entry.get(1, "{reason}")

    def __repr__(self) -> str:
        return f"Messages(patterns={sorted(self.table)})"


_ACTIONS = ("nudge", "block", "stop")


def _check_level(level: object, text: object, field: str) -> None:
    number = level if isinstance(level, int) and not isinstance(level, bool) else None
    if isinstance(level, str) and level.isdigit():
        number = int(level)
    if (number is None or number < 1) and level not in _ACTIONS:
        levels = f"a level number (1, 2, ...) or one of {', '.join(map(repr, _ACTIONS))}"
        raise ConfigError(f"expected {levels}, got {level!r}", field=field)
    if not isinstance(text, str):
        raise ConfigError(f"expected a template string, got {text!r}", field=field)


def _level_key(key: int | str) -> int | str:
    if isinstance(key, str) and key.isdigit():
        return int(key)
    return key
