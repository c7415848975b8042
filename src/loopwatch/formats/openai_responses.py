"""OpenAI Responses API items (``--format openai-responses``).

Items: ``message`` (role and content parts), ``function_call`` (``name``, ``arguments`` as a JSON string,
``call_id``) and ``function_call_output`` (``call_id``, ``output``), ``custom_tool_call``, the built-in tools'
``*_call`` / ``*_call_output`` items, ``reasoning`` (skipped). A conversation is a list of items, or an object
with ``input`` / ``output`` / ``items`` / ``data`` (a stored response, a request with its response, a listed
conversation). Layouts, record indices and run ids: :mod:`loopwatch.formats._chat`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from . import _chat
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final[tuple[str, ...]] = (_chat.RESPONSES,)


def sniff(first: Any, path: str) -> str | None:
    """``openai-responses`` when items (or content parts) of the Responses API show."""
    return _chat.RESPONSES if _chat.dialect(first) == _chat.RESPONSES else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per conversation."""
    return _chat.read(records, path, on_error)
