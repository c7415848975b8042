"""OpenAI Chat Completions message lists (``--format openai``).

Messages with role ``system`` / ``developer`` / ``user`` / ``assistant`` / ``tool`` (and the legacy
``function``): an assistant message's ``tool_calls`` (``function.arguments`` is a JSON string) are calls, its
``content`` the thought of the first; a ``tool`` message is the result of the call its ``tool_call_id`` names.
Layouts, record indices and run ids: :mod:`loopwatch.formats._chat`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from . import _chat
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final[tuple[str, ...]] = (_chat.OPENAI,)


def sniff(first: Any, path: str) -> str | None:
    """``openai`` for role/content messages without another API's marks."""
    return _chat.OPENAI if _chat.dialect(first) == _chat.OPENAI else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per conversation."""
    return _chat.read(records, path, on_error)
