"""Ladders: how a pattern escalates as its count grows.

A :class:`Ladder` maps a finding's count to an escalation level and action::

    Ladder.of(nudge=3, block=5, stop=8)       # nudge at 3, refuse further calls at 5, end the run at 8

Nudges are emitted once per level per streak (no nudge spam) unless ``renotify=True``; a block refuses
every further call of the streak; a stop ends the run. A rule declares each pattern's default ladder
(:class:`loopwatch.core.Pattern`); a policy (:mod:`loopwatch.core._policy`) holds the ladders it escalates by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ._checked import integer_at_least
from ._errors import ConfigError
from ._verdict import SEVERITY, Action

Metric = Literal["count", "detections"]


@dataclass(frozen=True, slots=True)
class Rung:
    """Escalate to ``action`` once the count reaches ``at``; ``message`` overrides the template."""

    at: int
    action: Action
    message: str | None = None
    reason: str | None = None
    status: str | None = None
    partial: bool = False

    def __post_init__(self) -> None:
        if self.action not in ("nudge", "block", "stop"):
            raise ConfigError(f"a rung's action is nudge, block or stop, got {self.action!r}", field="action")
        integer_at_least(self.at, 1, "at")  # a rung's threshold
        for name in ("message", "reason", "status"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"must be text, got {type(value).__name__}", field=name)
        if not isinstance(self.partial, bool):
            raise ConfigError(f"must be true or false, got {self.partial!r}", field="partial")


@dataclass(frozen=True, slots=True)
class Ladder:
    """Rungs in increasing order of ``at``. ``metric="detections"`` counts findings instead (the call-cycles preset)."""

    rungs: tuple[Rung, ...]
    renotify: bool = False
    metric: Metric = "count"
    restrike: int | None = None
    """Second strike: a *new* streak of this pattern reaching a rung within ``restrike`` events of the
    previous streak's last verdict ends the run (the earlier nudge did not help; Gemini CLI's strike 2)."""

    def __post_init__(self) -> None:
        if isinstance(self.rungs, list):
            object.__setattr__(self, "rungs", tuple(self.rungs))
        if not isinstance(self.rungs, tuple) or not all(isinstance(rung, Rung) for rung in self.rungs):
            raise ConfigError(f"expected a tuple of Rung, got {self.rungs!r}", field="rungs")
        if self.metric not in ("count", "detections"):
            raise ConfigError(f"must be 'count' or 'detections', got {self.metric!r}", field="metric")
        if not isinstance(self.renotify, bool):
            raise ConfigError(f"must be true or false, got {self.renotify!r}", field="renotify")
        ats = [r.at for r in self.rungs]
        if ats != sorted(ats) or len(set(ats)) != len(ats):
            raise ConfigError(f"ladder thresholds must strictly increase, got {ats}", field="rungs")
        severities = [SEVERITY[r.action] for r in self.rungs]
        if severities != sorted(severities):
            raise ConfigError("ladder actions must not de-escalate (nudge <= block <= stop)", field="rungs")
        if self.restrike is not None:
            integer_at_least(self.restrike, 1, "restrike")  # events

    @classmethod
    def of(
        cls,
        *,
        nudge: int | Sequence[int] | None = None,
        block: int | None = None,
        stop: int | None = None,
        renotify: bool = False,
        metric: Metric = "count",
        restrike: int | None = None,
    ) -> Ladder:
        """A ladder from thresholds: ``nudge`` may list several nudge levels (``nudge=(3, 4, 6)``)."""
        if nudge is None:
            nudges: list[int] = []
        elif isinstance(nudge, int) or not isinstance(nudge, Sequence) or isinstance(nudge, str):
            nudges = [nudge]  # a number (Rung checks it), or something that is not a list of them: Rung says what
        else:
            nudges = list(nudge)
        rungs = [Rung(n, "nudge") for n in nudges]
        if block is not None:
            rungs.append(Rung(block, "block"))
        if stop is not None:
            rungs.append(Rung(stop, "stop"))
        return cls(tuple(rungs), renotify=renotify, metric=metric, restrike=restrike)

    def level_for(self, value: int) -> int:
        """1-based index of the highest rung reached by ``value`` (0: none)."""
        from ._decide import rung_reached  # (compiled with the engine, which asks it of every finding)

        return rung_reached(self.rungs, value)

    def __repr__(self) -> str:
        rungs = ", ".join(f"{r.action}@{r.at}" for r in self.rungs)
        extra = (", renotify" if self.renotify else "") + (", per detection" if self.metric == "detections" else "")
        extra += f", restrike within {self.restrike}" if self.restrike else ""
        return f"Ladder({rungs}{extra})"
