"""Regular expressions compiled on first use: a hook process judges one event and needs few of them, and
compiling all of loopwatch's patterns at import costs more than judging (~14 ms here)."""

from __future__ import annotations

import re
from typing import Any, Final, cast

_ATTRIBUTES: Final = (
    "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer", "pattern", "flags", "groups",
    "groupindex",
)  # fmt: skip


class _Lazy:
    """Stands for a compiled pattern; on first use it compiles it and keeps the pattern's own bound methods, so
    later calls cost what calling the compiled pattern costs."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, compiled when first used."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
