"""A rule of one's own with a bug, for the tests of how a guard contains a rule that raises."""

from __future__ import annotations

from typing import Any

from loopwatch.core.detectors import Detector, Finding, Step


class RaisingRule(Detector):
    """Raises ``RuntimeError(message)`` on every step while ``broken`` is set (on the calls of ``tool`` only, when
    given), and finds nothing otherwise. It keeps no state."""

    name = "raising"
    kinds = frozenset({"call", "result", "message", "delta", "usage"})

    def __init__(self, *, message: str = "a rule's bug", tool: str | None = None, broken: bool = True) -> None:
        self.message = message
        self.tool = tool
        self.broken = broken

    def new_state(self) -> None:
        return None

    def observe(self, state: None, step: Step) -> Finding | None:
        if self.broken and (self.tool is None or step.tool == self.tool):
            raise RuntimeError(self.message)
        return None

    def dump_state(self, state: None) -> dict[str, Any]:
        return {}

    def load_state(self, data: dict[str, Any]) -> None:
        return None
