"""The guard's answer to one event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final, Literal

Action = Literal["ok", "nudge", "block", "stop"]
ACTIONS: Final[tuple[Action, ...]] = ("ok", "nudge", "block", "stop")
SEVERITY: Final[dict[str, int]] = {"ok": 0, "nudge": 1, "block": 2, "stop": 3}
LOOP_DETECTED: Final = "LOOP_DETECTED"
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do after an event.

    - ``ok``: carry on.
    - ``nudge``: carry on, and show ``message`` to the model on its next turn.
    - ``block``: refuse this tool call; ``message`` is the reason the model sees as the tool's result.
    - ``stop``: end the run; ``status`` is ``LOOP_DETECTED`` or the limit's own status.

    ``pattern``/``count``/``level`` say which loop and how far it escalated; ``loop_start`` is the index of
    the repeated unit's first occurrence (cut the context there); ``reason`` is for operators;
    ``detector`` is the ``repr`` of the rule that fired; ``evidence`` holds fingerprints and indices.
    """

    action: Action = "ok"
    index: int = -1
    pattern: str | None = None
    count: int = 0
    level: int = 0
    loop_start: int | None = None
    status: str | None = None
    message: str | None = None
    reason: str | None = None
    detector: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    partial: bool = False

    @property
    def ok(self) -> bool:
        return self.action == "ok"

    @property
    def severity(self) -> int:
        return SEVERITY[self.action]

    def to_json(self) -> dict[str, Any]:
        """The scan-output form (docs/formats.md, section 3) plus the other fields."""
        out: dict[str, Any] = {
            "index": self.index,
            "action": self.action,
            "level": self.level,
            "pattern": self.pattern,
            "loop_start": self.loop_start,
            "reason": self.reason or "",
            "message": self.message or "",
            "count": self.count,
            "status": self.status,
            "detector": self.detector,
        }
        if self.partial:
            out["partial"] = True
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    def detection_json(self) -> dict[str, Any]:
        """Exactly the fields of a detection in ``scan --json`` (docs/formats.md, section 3)."""
        return {
            "index": self.index,
            "action": self.action,
            "level": self.level,
            "pattern": self.pattern,
            "loop_start": self.loop_start,
            "reason": self.reason or "",
            "message": self.message or "",
        }


@lru_cache(maxsize=8_192)
def ok(index: int) -> Verdict:
    """The ``ok`` verdict for event ``index`` (immutable, so shared: most events get one)."""
    return Verdict(index=index)
