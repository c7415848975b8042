"""Reading a configuration's values: each check names the setting (its dotted path) and what was expected, and an
unknown key gets the nearest valid one."""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from .errors import ConfigError


def as_table(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise expected("a table", value, path)
    return value


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise expected("a boolean (true or false)", value, path)
    return value


def as_refusals(value: Any, path: str) -> int | Literal[False]:
    if value is False:
        return False
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise expected("a positive integer or false", value, path)
    return value


def as_string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise expected("a string", value, path)
    return value


def as_strings(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise expected("a list of strings", value, path)
    return tuple(value)


def as_choice(value: Any, choices: Collection[str], path: str) -> str:
    if value not in choices or not isinstance(value, str):
        raise expected(f"one of {listing(choices)}", value, path)
    return value


def as_positive_int(value: Any, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise expected("a positive integer", value, path)
    return value


def as_positive_number(value: Any, path: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise expected("a positive number", value, path)
    if not math.isfinite(value) or value <= 0:
        raise expected("a positive finite number", value, path)
    return value


# -- messages of errors --------------------------------------------------------------------------------


def expected(what: str, value: Any, path: str) -> ConfigError:
    return ConfigError(f"expected {what}, got {_show(value)}", field=path or None)


def _show(value: Any) -> str:
    kinds = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"{shown} ({kinds.get(type(value), type(value).__name__)})"


def check_keys(table: Mapping[str, Any], allowed: Collection[str], path: str, what: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(unknown(key, allowed, what), field=join(path, str(key)))


def unknown(key: Any, choices: Collection[str], what: str) -> str:
    if not choices:
        return f"unknown {what} {key!r} (there are none)"
    return f"unknown {what} {key!r}{did_you_mean(str(key), choices)} (expected one of {listing(choices)})"


def did_you_mean(key: str, choices: Collection[str]) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def listing(choices: Iterable[Any]) -> str:
    return ", ".join(repr(c) for c in choices)


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
