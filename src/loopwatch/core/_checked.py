"""The checks public constructors share: a setting that must be a whole number of at least some size, a positive
finite number, or a share (a similarity, a fraction: above 0, at most 1); anything else is a
:class:`~loopwatch.errors.ConfigError` naming the setting (``True`` is no number here, though Python counts it as
1)."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

from ._errors import ConfigError

__all__ = ["file_path", "fraction", "integer_at_least", "optional_integer_at_least", "positive_number"]


def integer_at_least(value: object, minimum: int, field: str) -> int:
    """``value``, an integer of at least ``minimum``; else a :class:`ConfigError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    return value


def positive_number(value: object, field: str) -> float:
    """``value``, a number above 0 and finite; else a :class:`ConfigError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(f"must be a positive finite number, got {value!r}", field=field)
    return value


def optional_integer_at_least(value: object, minimum: int, field: str) -> int | None:
    """``value``, ``None`` or an integer of at least ``minimum``; else a :class:`ConfigError` naming ``field``."""
    return None if value is None else integer_at_least(value, minimum, field)


def fraction(value: object, field: str) -> float:
    """``value``, a number above 0 and at most 1 (a similarity, a share); else a :class:`ConfigError` naming
    ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"must be a number above 0 and at most 1, got {value!r}", field=field)
    return value


def file_path(value: object, field: str) -> Path:
    """``value``, a file or folder name (a text or a path object), as a :class:`~pathlib.Path`; else a
    :class:`ConfigError` naming ``field``."""
    if not isinstance(value, (str, os.PathLike)) or (isinstance(value, str) and "\0" in value):
        raise ConfigError(f"must be a file name (a text or a path), got {value!r}", field=field)
    from pathlib import Path  # here: a hook run, which checks other settings, never loads pathlib

    try:
        return Path(value)
    except TypeError:  # a path object whose fspath is bytes
        raise ConfigError(f"must be a file name (a text or a path), got {value!r}", field=field) from None
