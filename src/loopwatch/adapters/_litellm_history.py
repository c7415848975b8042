"""What the LiteLLM adapter knows of a session's history between requests (:class:`_Session`: how many messages
it observed, digests of the last ones, the calls and texts it saw in responses, the nudges waiting), the session a
request belongs to (:func:`default_session`), and the helpers that read messages as plain data (digests, the
adapter's own messages). No litellm here: :mod:`loopwatch.adapters.litellm` drives it.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..core._events import ToolCall
from ..core._verdict import Verdict
from ..formats import _chat

MARK: Final = "[loopwatch]"
"""The start of every message the adapter writes (nudges, refusals); such messages are never observed."""
_HEADER: Final = "x-loopwatch-session"
_RECENT: Final = 64  # digests of the last observed messages kept for re-syncing an edited history
_REMEMBERED: Final = 1_024  # call ids, response texts and request ids remembered per adapter / session


@dataclass
class _Session:
    """What the adapter remembers of one session's history between requests."""

    name: str
    seen: int = 0  # messages of the history already observed
    last: str = ""  # digest of the last of them
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT))
    calls: OrderedDict[str, None] = field(default_factory=OrderedDict)  # ids of the tool calls already observed
    texts: deque[str] = field(default_factory=lambda: deque(maxlen=16))  # digests of assistant texts observed
    stop: Verdict | None = None
    conversation: _chat.Conversation = field(init=False)

    def __post_init__(self) -> None:
        self.conversation = _chat.Conversation(self.name, "litellm")

    def saw_call(self, call: ToolCall) -> None:
        if call.id is None:
            return
        self.calls[call.id] = None
        self.conversation.names[call.id] = call.tool
        while len(self.calls) > _REMEMBERED:
            old, _ = self.calls.popitem(last=False)
            self.conversation.names.pop(old, None)


# -- messages --------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A message (a dict, or a pydantic object such as litellm's ``Message``) as plain JSON-like data."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump())
    return value


def _stable(value: Any) -> Any:
    """``value`` without what clients change from one request to the next (``cache_control``, ``None``s)."""
    if isinstance(value, Mapping):
        return {k: _stable(v) for k, v in value.items() if v is not None and k != "cache_control"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(_stable(value), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()


def _is_ours(message: Any) -> bool:
    return isinstance(message, Mapping) and _chat.text_of(message.get("content")).startswith(MARK)


def _metadata(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [m for m in (data.get("metadata"), data.get("litellm_metadata")) if isinstance(m, Mapping)]


def _header(data: Mapping[str, Any], name: str) -> str | None:
    request = data.get("proxy_server_request")
    sources = [request.get("headers") if isinstance(request, Mapping) else None]
    sources += [m.get("headers") for m in _metadata(data)]
    for headers in sources:
        if isinstance(headers, Mapping):
            for key, value in headers.items():
                if isinstance(key, str) and key.lower() == name and isinstance(value, str) and value:
                    return value
    return None


def default_session(data: Mapping[str, Any]) -> str:
    """The session of a request (``data``: litellm's keyword arguments, or the proxy's request body)."""
    metadata = _metadata(data)
    for meta in metadata:
        value = meta.get("loopwatch_session")
        if isinstance(value, str) and value:
            return value
    value = _header(data, _HEADER) or data.get("litellm_session_id")
    if isinstance(value, str) and value:
        return value
    for meta in metadata:
        value = meta.get("session_id")
        if isinstance(value, str) and value:
            return value
    messages = data.get("messages")
    head: list[Any] = []
    for message in messages if isinstance(messages, list) else ():
        plain = _plain(message)
        if _is_ours(plain):
            continue
        head.append(plain)
        if len(head) >= 4 or (isinstance(plain, Mapping) and plain.get("role") == "user"):
            break
    owner = [data.get("user"), data.get("user_api_key_hash")] + [m.get("user_api_key_hash") for m in metadata]
    return f"litellm-{_digest([owner, head])[:16]}"
