"""Policy: which detectors run, how each pattern escalates (ladders), limits, per-tool settings.

A :class:`Ladder` (:mod:`loopwatch.core._ladder`) maps a finding's count to an escalation level and action::

    Ladder.of(nudge=3, block=5, stop=8)       # nudge at 3, refuse further calls at 5, end the run at 8

Nudges are emitted once per level per streak (no nudge spam) unless ``renotify=True``; a block refuses
every further call of the streak; a stop ends the run. A policy's ladders may only name patterns a rule declared
(:mod:`loopwatch.core._patterns`): a misspelt one is a ConfigError naming them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ._checked import integer_at_least
from ._decide import Decision, decide
from ._errors import ConfigError
from ._ladder import Ladder, Metric, Rung
from ._limits import Limit, Limits
from ._messages import Messages
from ._patterns import REGISTRY
from ._session_state import LadderState
from .detectors._base import Detector, check_judges

__all__ = [
    "Decision",
    "Ladder",
    "LadderState",
    "Metric",
    "Policy",
    "Rung",
    "ToolSettings",
    "check_ladders",
    "check_restrike",
    "decide",
    "exempt",
]


@dataclass(frozen=True)
class ToolSettings:
    """Per-tool settings: exempt it, ignore or keep only some argument keys, or use other ladders."""

    exempt: bool = False
    ignore_keys: tuple[str, ...] = ()
    keep_keys: tuple[str, ...] | None = None
    ladders: Mapping[str, Ladder] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.exempt, bool):
            raise ConfigError(f"must be true or false, got {self.exempt!r}", field="exempt")
        for name in ("ignore_keys", "keep_keys"):
            keys = getattr(self, name)
            if keys is not None and not key_names(keys):
                raise ConfigError(f"must be a tuple of key names, got {keys!r}", field=name)
        check_ladders(self.ladders, "ladders")


class Retired(NamedTuple):
    """A rule a policy held and no longer does: the rule as it was held (a configuration can bring it back, after the
    policy's own rules: ``[detectors.NAME] enabled = true``), where its state sat in the policy's snapshots, and the
    keys that state had (how an old snapshot's entry is told from the rule now at that place)."""

    detector: Detector[Any]
    position: int
    keys: frozenset[str]


@dataclass(frozen=True)
class Policy:
    """Everything that decides verdicts, and nothing that moves data (no clock, no I/O)."""

    name: str
    detectors: tuple[Detector[Any], ...]
    ladders: Mapping[str, Ladder]
    limits: Limits = field(default_factory=Limits)
    messages: Messages = field(default_factory=Messages)
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    ignore_keys: tuple[str, ...] = ("task_progress",)
    reset_on_user: bool = True
    nudge_role: Literal["system", "user"] = "system"
    stop_after_refusals: int | None = None
    """Stop the run when the same call comes back this many times in a row after being refused (each refusal
    reached the agent: the call did not run, or the refusal was shown to the model), whatever the pattern's ladder
    says: the refusals were ignored. Replays of recordings never count a refused call that ran (the recorded agent
    saw no refusal). ``None``: only the ladders stop."""
    hard_evidence: bool = False
    """Block and stop only on hard evidence: the same unit repeated with nothing changed in between, after a
    nudge for it was given and ignored (see :attr:`~loopwatch.core.detectors.Finding.hard`). Every other
    finding (similar text, reworded intents, chanting, monologues, self-reported stalls, streaks of different
    calls that find nothing, an error retried after changes that worked) may only nudge, whatever its ladder."""
    retired: tuple[Retired, ...] = ()
    """Rules this policy held and no longer does: a snapshot taken while it held them still loads (the engine
    drops their states, see :meth:`~loopwatch.core.Engine.load`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ConfigError(f"must be a string, got {type(self.name).__name__}", field="name")
        if isinstance(self.detectors, list):
            object.__setattr__(self, "detectors", tuple(self.detectors))
        if not isinstance(self.detectors, tuple):
            raise ConfigError(f"expected a tuple of rules, got {type(self.detectors).__name__}", field="detectors")
        for name, key in (("ladders", "pattern"), ("tools", "tool")):
            if not isinstance(getattr(self, name), Mapping):
                kind = type(getattr(self, name)).__name__
                raise ConfigError(f"expected a mapping by {key}, got {kind}", field=name)
        for name in ("reset_on_user", "hard_evidence"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"must be true or false, got {getattr(self, name)!r}", field=name)
        if not key_names(self.ignore_keys):
            raise ConfigError(f"must be a tuple of key names, got {self.ignore_keys!r}", field="ignore_keys")
        for detector in self.detectors:
            if not isinstance(detector, Detector):
                raise ConfigError(f"expected rules (Detector), got {type(detector).__name__}", field="detectors")
            check_judges(detector)
        check_ladders(self.ladders, "ladders")
        if not isinstance(self.limits, (Limits, Limit)):  # one limit, or several joined with |
            raise ConfigError(f"expected limits (max_iterations(40) | ...), got {self.limits!r}", field="limits")
        if not isinstance(self.messages, Messages):
            raise ConfigError(f"expected Messages, got {type(self.messages).__name__}", field="messages")
        if self.stop_after_refusals is not None:
            integer_at_least(self.stop_after_refusals, 1, "stop_after_refusals")
        if self.nudge_role not in ("system", "user"):
            raise ConfigError(f"must be 'system' or 'user', got {self.nudge_role!r}", field="nudge_role")
        for name, settings in self.tools.items():
            if not isinstance(settings, ToolSettings):
                raise ConfigError(f"expected ToolSettings, got {settings!r}", field=f"tools.{name}")
        check_restrike(self.ladders, self.tools, hard_evidence=self.hard_evidence)

    def tool(self, name: str) -> ToolSettings | None:
        return self.tools.get(name)

    def ladder(self, pattern: str, tool: str | None) -> Ladder | None:
        settings = self.tools.get(tool) if tool else None
        if settings is not None and pattern in settings.ladders:
            return settings.ladders[pattern]
        return self.ladders.get(pattern)

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` applied (``ladders``/``tools`` are merged, not replaced)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for merged in ("ladders", "tools"):
            if merged in changes:
                changes[merged] = {**values[merged], **changes[merged]}
        values.update(changes)
        return Policy(**values)

    def __repr__(self) -> str:
        detectors = ", ".join(repr(d) for d in self.detectors)
        return f"Policy(name={self.name!r}, detectors=[{detectors}], limits={self.limits!r})"


def key_names(keys: object) -> bool:
    """Is ``keys`` a collection of argument key names (a text is not: it is one name's letters)?"""
    return isinstance(keys, Collection) and not isinstance(keys, (str, bytes)) and all(isinstance(k, str) for k in keys)


def check_ladders(ladders: Mapping[str, Ladder], path: str) -> None:
    """Every key a declared pattern that a ladder escalates, every value a :class:`Ladder`; else ConfigError
    (``field``: ``<path>.<pattern>``) naming the patterns a ladder can be set for."""
    if not isinstance(ladders, Mapping):
        raise ConfigError(f"expected a mapping of pattern names to ladders, got {type(ladders).__name__}", field=path)
    for pattern, ladder in ladders.items():
        where = f"{path}.{pattern}"
        REGISTRY.get(pattern, field=where, escalated=True)
        if not isinstance(ladder, Ladder):
            raise ConfigError(f"expected a Ladder, got {ladder!r}", field=where)


def check_restrike(ladders: Mapping[str, Ladder], tools: Mapping[str, ToolSettings], *, hard_evidence: bool) -> None:
    """With ``hard_evidence`` a ladder's ``restrike`` never fires (a new streak is not the same unit repeated): a
    ConfigError rather than a setting that silently does nothing."""
    if not hard_evidence:
        return
    tables = [("ladders", ladders)] + [(f"tools.{name}.ladders", settings.ladders) for name, settings in tools.items()]
    for path, table in tables:
        for pattern, ladder in table.items():
            if ladder.restrike is not None:
                raise ConfigError(
                    "restrike stops a new streak, and with hard_evidence only the same unit repeated may stop a "
                    "run: set hard_evidence = false to use it",
                    field=f"{path}.{pattern}.restrike",
                )


def exempt(tools: Collection[str]) -> dict[str, ToolSettings]:
    """Per-tool settings exempting ``tools`` from loop detection (limits still count them)."""
    return {name: ToolSettings(exempt=True) for name in tools}
