"""Who is calling the service: the token's name and what the request said about the agent, for the request being
answered (a context variable), and the audit sink that adds the caller to each record."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Caller:
    """Who sent the request being judged, and what it said about the agent (for notes and audit records)."""

    client: str | None = None
    agent: str | None = None
    model: str | None = None
    swarm: str | None = None


NOBODY: Final = Caller()
current_caller: ContextVar[Caller] = ContextVar("loopwatch_caller", default=NOBODY)


class ClientTagged:
    """An audit sink that adds the calling token's name (``client``) to each record before passing it on."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def __repr__(self) -> str:
        return f"ClientTagged({self.sink!r})"

    def emit(self, record: dict[str, Any]) -> None:
        client = current_caller.get().client
        self.sink.emit({**record, "client": client} if client else record)

    def close(self) -> None:
        self.sink.close()
