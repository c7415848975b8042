"""Anthropic Messages (``--format anthropic``).

Messages whose content is a string or a list of blocks: an assistant's ``tool_use`` blocks (``id``, ``name``,
``input``) are calls, its ``text`` blocks the thought of the first (``thinking`` is skipped); a user message's
``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error``) are results, any other text in it a user
message. All events of a message report that message's index. A top-level ``system`` is not a message and is
skipped. Layouts, record indices and run ids: :mod:`loopwatch.formats._chat`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from . import _chat
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final[tuple[str, ...]] = (_chat.ANTHROPIC,)


def sniff(first: Any, path: str) -> str | None:
    """``anthropic`` when content blocks of the Messages API show (or a top-level ``system`` with ``messages``)."""
    return _chat.ANTHROPIC if _chat.dialect(first) == _chat.ANTHROPIC else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per conversation."""
    return _chat.read(records, path, on_error)
