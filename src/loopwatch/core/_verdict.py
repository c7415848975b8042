"""The guard's answer to one event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from types import FunctionType, MappingProxyType
from typing import Any, Final, Literal

Action = Literal["ok", "nudge", "block", "stop"]
ACTIONS: Final[tuple[Action, ...]] = ("ok", "nudge", "block", "stop")
SEVERITY: Final[dict[str, int]] = {"ok": 0, "nudge": 1, "block": 2, "stop": 3}
LOOP_DETECTED: Final = "LOOP_DETECTED"
_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _no_evidence() -> Mapping[str, Any]:
    return _EMPTY


@dataclass(frozen=True, slots=True, init=False)
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
    evidence: Mapping[str, Any] = field(default_factory=_no_evidence)
    partial: bool = False

    def __init__(
        self,
        action: Action = "ok",
        index: int = -1,
        pattern: str | None = None,
        count: int = 0,
        level: int = 0,
        loop_start: int | None = None,
        status: str | None = None,
        message: str | None = None,
        reason: str | None = None,
        detector: str | None = None,
        evidence: Mapping[str, Any] | None = None,
        partial: bool = False,
    ) -> None:
        # Written out, so that mypyc compiles it and sets the fields directly (the frozen class's refusing __setattr__
        # is for Python code): the one dataclasses writes runs as Python, each field through object.__setattr__.
        if not COMPILED:
            given = (action, index, pattern, count, level, loop_start, status, message, reason, detector)
            set_frozen(self, _FIELDS, (*given, _EMPTY if evidence is None else evidence, partial))
            return
        self.action = action  # type: ignore[misc]
        self.index = index  # type: ignore[misc]
        self.pattern = pattern  # type: ignore[misc]
        self.count = count  # type: ignore[misc]
        self.level = level  # type: ignore[misc]
        self.loop_start = loop_start  # type: ignore[misc]
        self.status = status  # type: ignore[misc]
        self.message = message  # type: ignore[misc]
        self.reason = reason  # type: ignore[misc]
        self.detector = detector  # type: ignore[misc]
        self.evidence = _EMPTY if evidence is None else evidence  # type: ignore[misc]
        self.partial = partial  # type: ignore[misc]

    def __reduce__(self) -> tuple[type[Verdict], tuple[Any, ...]]:
        # copied and pickled through the constructor (a compiled class's own way makes it empty first)
        return Verdict, tuple(getattr(self, name) for name in _FIELDS)

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


_FIELDS: Final = tuple(f.name for f in fields(Verdict))


def set_frozen(instance: object, names: tuple[str, ...], values: tuple[Any, ...]) -> None:
    """Each of ``values`` set on the frozen ``instance`` under its name in ``names``, as the constructor ``dataclasses``
    writes sets them (what the written-out constructors of ``Verdict`` and ``Finding`` do when run from source)."""
    for name, value in zip(names, values, strict=True):
        object.__setattr__(instance, name, value)


def _compiled() -> bool:
    return not isinstance(_compiled, FunctionType)  # mypyc makes a function another kind of object


COMPILED: Final = _compiled()
"""Are the core's compiled modules running compiled? They are compiled together, and run compiled or from source
together (:mod:`loopwatch._native`): this one answers for all (``Verdict`` and ``Finding`` set their fields by it)."""


@lru_cache(maxsize=8_192)
def ok(index: int) -> Verdict:
    """The ``ok`` verdict for event ``index`` (immutable, so shared: most events get one)."""
    return Verdict(index=index)
