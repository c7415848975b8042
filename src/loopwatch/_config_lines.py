"""Where a setting is written: the line of a TOML text that sets a dotted path, for error messages that point at
it (no TOML parser needed: the file already parsed, only its lines are read)."""

from __future__ import annotations

import re
from typing import Final


def setting_line(text: str, field: str, *, prefix: tuple[str, ...] = ()) -> int | None:
    """The 1-based line of TOML ``text`` that sets ``field`` (a dotted path such as ``ladders.repeat.nudge``),
    or of the nearest table or key that holds it; ``prefix``: the table the configuration lives in
    (``("tool", "loopwatch")`` in a ``pyproject.toml``). ``None`` when no line names it."""
    wanted = tuple(field.split("."))
    table: tuple[str, ...] | None = () if not prefix else None
    best: tuple[int, int] | None = None  # (how many parts matched, line)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _TABLE_HEADER.match(line)
        if header is not None:
            parts = _key_parts(header.group(1))
            table = parts[len(prefix) :] if parts[: len(prefix)] == prefix else None
            if table is not None:
                best = _better(best, _matched(table, wanted), number, len(table))
            continue
        key = _KEY_LINE.match(line)
        if key is None or table is None:
            continue
        path = (*table, *_key_parts(key.group(1)))
        best = _better(best, _matched(path, wanted), number, len(path))
    return best[1] if best is not None else None


_TABLE_HEADER: Final = re.compile(r"\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY_PART: Final = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY_LINE: Final = re.compile(rf"({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")


def _key_parts(key: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', key))


def _matched(path: tuple[str, ...], wanted: tuple[str, ...]) -> int:
    """How many of ``wanted``'s parts ``path`` names, when ``path`` is ``wanted`` or holds it; else 0."""
    return len(path) if path == wanted[: len(path)] else 0


def _better(best: tuple[int, int] | None, matched: int, line: int, length: int) -> tuple[int, int] | None:
    if matched == 0 or matched != length:
        return best
    return (matched, line) if best is None or matched > best[0] else best
