"""A model's response as the LiteLLM adapter reads and changes it: the assistant message and usage of a chat
completion (first choice) or an Anthropic message, and the refused tool calls taken out of it with their reasons
added to its text (see :mod:`loopwatch.adapters.litellm`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ._litellm_history import _plain

_ARGS_SHOWN: Final = 200


def _reply(response: Any) -> tuple[dict[str, Any], Any] | None:
    """The assistant message of a chat completion (first choice) or an Anthropic message, and its usage."""
    if isinstance(response, Mapping):
        if response.get("type") == "message" and isinstance(response.get("content"), list):  # Anthropic
            return {"role": "assistant", "content": _plain(response["content"])}, _plain(response.get("usage"))
        return None
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return None
    message = getattr(choices[0], "message", None)
    plain = _plain(message)
    if not isinstance(plain, dict):
        return None  # a streamed chunk, or something else
    plain["role"] = "assistant"
    return plain, _plain(getattr(response, "usage", None))


def _shown(args: Mapping[str, Any]) -> str:
    text = json.dumps(dict(args), ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= _ARGS_SHOWN else text[: _ARGS_SHOWN - 3] + "..."


def _joined(text: Any, notes: list[str]) -> str:
    before = text.strip() if isinstance(text, str) else ""
    return "\n\n".join([before, *notes] if before else notes)


def _refuse(response: Any, refused: dict[int, str]) -> None:
    """Remove the refused tool calls from ``response`` (in place) and add the reasons to its text."""
    notes = [refused[k] for k in sorted(refused)]
    if isinstance(response, dict):  # Anthropic: tool_use blocks
        blocks, position = [], -1
        for block in response.get("content") or []:
            kind = block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
            if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                position += 1
                if position in refused:
                    continue
            blocks.append(block)
        blocks.append({"type": "text", "text": "\n\n".join(notes)})
        response["content"] = blocks
        if not any(_kind(b) == "tool_use" for b in blocks):
            response["stop_reason"] = "end_turn"
        return
    choice = response.choices[0]
    message = choice.message
    calls = list(getattr(message, "tool_calls", None) or [])
    kept = [c for k, c in enumerate(calls) if k not in refused]
    legacy = getattr(message, "function_call", None)
    if legacy is not None and len(calls) in refused:  # the legacy function_call comes after the tool calls
        message.function_call = None
        legacy = None
    message.tool_calls = kept or None
    message.content = _joined(message.content, notes)
    if not kept and legacy is None:
        choice.finish_reason = "stop"


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
