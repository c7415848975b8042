"""A store's settings checked: its URL's query options against those it takes, a number of seconds, a ``ttl``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..errors import ConfigError


def refuse_unknown_options(options: Iterable[str], known: Sequence[str], where: str) -> None:
    """A :class:`ConfigError` (field ``store``) naming the ``options`` not in ``known`` (a misspelled ``ttl``), if
    any; ``where``: the URL as the message shows it (``'sqlite:///a.db?tll=5'``, ``the Redis URL``)."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        names, choices = ", ".join(unknown), ", ".join(known)
        raise ConfigError(f"unknown option(s) {names} in {where} (known: {choices})", field="store")


def seconds(value: object) -> bool:
    """Is ``value`` a finite number of seconds (not a text, not ``True``)?"""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_ttl(ttl: float | None) -> float | None:
    """``ttl``, ``None`` or a positive number of seconds; else a :class:`ConfigError` (field ``store``)."""
    if ttl is not None and not (seconds(ttl) and ttl > 0):
        raise ConfigError(f"ttl must be a positive number of seconds, not {ttl!r}", field="store")
    return ttl
