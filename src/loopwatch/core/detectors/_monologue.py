"""Talking instead of working: messages in a row without a tool call, and the very same message again."""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass
from typing import Any, Final

from .. import _kernels
from .._fingerprint import preview
from .._ladder import Ladder
from .._patterns import Pattern
from ._base import Detector, Finding, Step
from ._packed import (
    Indices,
    index_at,
    index_tuple,
    indices,
    indices_json,
    indices_len,
    indices_pushed,
)
from ._state import (
    Reader,
    fields_json,
    flag,
    from_fields,
    integer,
    keys_of,
    optional_integer,
    optional_text,
)

MONOLOGUE = Pattern(
    "monologue",
    "You have written {count} messages in a row without using a tool. Stop summarising: pick the next "
    "task and start using tools immediately.",
    ladder=Ladder.of(nudge=4),
)
"""Messages in a row without a tool call, after the agent has used tools."""
REPEAT_MESSAGE = Pattern(
    "repeat_message",
    "You have sent the same message {count} times. Repeating it changes nothing: act on it, or say what is missing.",
    ladder=Ladder.of(nudge=3, stop=6),
)
"""The very same message again."""


@dataclass(slots=True)
class MonologueState:
    """A :class:`MonologueDetector`'s session state."""

    tools: bool = False
    """Has the session used tools?"""
    n: int = 0
    start: int | None = None
    same: int = 0
    """The same message in a row."""
    last: int | None = None
    """The hash of the last message (lowercased, blanks removed)."""
    worker: str | None = None
    idx: Indices = b""


_MONOLOGUE_READERS: Final[dict[str, Reader]] = {
    "tools": flag,
    "n": integer,
    "start": optional_integer,
    "same": integer,
    "last": optional_integer,
    "worker": optional_text,
    "idx": indices,
}


class MonologueDetector(Detector[MonologueState]):
    """Talking instead of working: consecutive assistant messages with no tool call in between, once
    tools have been used in the session (the ``doom-loop`` design's summary loop), and identical assistant messages.

    ``per_worker=True`` counts each worker's (agent's) messages separately, so a group chat of several
    agents taking turns is not one agent talking to itself.
    """

    name = "monologue"
    kinds = frozenset({"call", "message"})
    patterns = (MONOLOGUE, REPEAT_MESSAGE)

    def __init__(self, *, per_worker: bool = True) -> None:
        self.per_worker = per_worker

    def new_state(self) -> MonologueState:
        return MonologueState()

    def dump_state(self, state: MonologueState) -> dict[str, Any]:
        data = fields_json(state)
        data["idx"] = indices_json(state.idx)
        return data

    def load_state(self, data: dict[str, Any]) -> MonologueState:
        keys_of("monologue", data, _MONOLOGUE_READERS)
        return from_fields(MonologueState, data, "monologue", _MONOLOGUE_READERS)

    def observe(self, state: MonologueState, step: Step) -> Finding | None:
        if step.kind == "call":
            state.tools, state.n, state.start, state.same, state.last, state.idx = True, 0, None, 0, None, b""
            return None
        if step.kind == "message" and step.role == "user":
            # someone answered: replying to a user is a conversation, not a monologue (saying the very same
            # thing again after the answer still counts as a repeated message)
            state.n, state.start = 0, None
            return None
        if step.kind != "message" or step.role != "assistant":
            return None
        if self.per_worker and step.worker != state.worker:
            state.n, state.start, state.same, state.last, state.idx = 0, None, 0, None, b""
            state.worker = None if step.worker is None else sys.intern(step.worker)
        text = (step.text or "")[:4_000]
        normalized = zlib.crc32(_kernels.lower(text).encode("utf-8", "surrogatepass").translate(None, b" \t\r\n"))
        state.same = state.same + 1 if normalized == state.last else 1
        state.last = normalized
        state.n += 1
        if state.n == 1:
            state.start = step.index
        state.idx = indices_pushed(state.idx, step.index, 8)
        if state.same >= 2:
            return self._finding(state, step, "repeat_message", state.same)
        if state.tools and state.n >= 2:
            return self._finding(state, step, "monologue", state.n)
        return None

    def _finding(self, state: MonologueState, step: Step, pattern: str, count: int) -> Finding:
        if pattern == "repeat_message":
            reason = f"the same assistant message {count} times in a row"
        else:
            reason = f"{count} assistant messages in a row without using a tool"
        start = index_at(state.idx, -count) if indices_len(state.idx) >= count else state.start
        return Finding(
            pattern=pattern,
            count=count,
            hard=pattern == "repeat_message",  # the very same message again; talking on is not
            key=f"{pattern}:{start if pattern == 'repeat_message' else state.start}",
            loop_start=start,
            reason=reason,
            indices=index_tuple(state.idx)[-count:],
            facts={"text": preview(step.text or "", 160)},
        )


def monologue(*, per_worker: bool = True) -> MonologueDetector:
    """The monologue / summary-loop detector (see :class:`MonologueDetector`)."""
    return MonologueDetector(per_worker=per_worker)
