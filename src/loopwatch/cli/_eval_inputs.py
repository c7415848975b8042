"""What the metrics score: a run's outcome (its length, task outcome and a detector's detections) and an annotator's
label (verdict and loop episodes), read from JSON strictly, every error naming the run, the field and the line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import LoopwatchError

ACTIONS: Final = ("nudge", "block", "stop")
VERDICTS: Final = ("stuck", "recovered", "clean")
PATTERNS: Final = ("repeat", "cycle", "error_retry", "rephrase", "edit_revert", "no_effect", "other")
CONFIDENCES: Final = ("high", "medium", "low")


# --------------------------------------------------------------------------------------------------- errors


def _where(message: str, *, run_id: str | None, field: str | None, line: int | None) -> str:
    parts = [] if line is None else [f"line {line}"]
    if run_id is not None:
        parts.append(f"run {run_id!r}")
    if field is not None:
        parts.append(field)
    return ": ".join([*parts, message])


class LabelError(LoopwatchError, ValueError):
    """A label (the labels format) is malformed; ``run_id``, ``field`` and ``line`` locate the problem."""

    def __init__(
        self, message: str, *, run_id: str | None = None, field: str | None = None, line: int | None = None
    ) -> None:
        self.run_id = run_id
        self.field = field
        self.line = line
        super().__init__(_where(message, run_id=run_id, field=field, line=line))


class OutcomeError(LoopwatchError, ValueError):
    """A detection (scan output), trajectory or run given to evaluation is malformed."""

    def __init__(self, message: str, *, run_id: str | None = None, field: str | None = None) -> None:
        self.run_id = run_id
        self.field = field
        super().__init__(_where(message, run_id=run_id, field=field, line=None))


class _FieldError(Exception):
    """Internal: one field of a JSON object is wrong; converted to a public error by the caller."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


# ------------------------------------------------------------------------------------------- field readers


def _as_object(obj: object, what: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise _FieldError(what, f"must be a JSON object, got {type(obj).__name__}")
    return obj


def _opt_int(obj: Mapping[str, Any], key: str, *, minimum: int = 0) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldError(key, f"must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise _FieldError(key, f"must be >= {minimum}, got {value}")
    return value


def _req_int(obj: Mapping[str, Any], key: str, *, minimum: int = 0) -> int:
    value = _opt_int(obj, key, minimum=minimum)
    if value is None:
        raise _FieldError(key, "is required (an integer)")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _FieldError(key, f"must be a string, got {type(value).__name__}")
    return value


def _req_str(obj: Mapping[str, Any], key: str) -> str:
    value = _opt_str(obj, key)
    if not value:
        raise _FieldError(key, "is required (a non-empty string)")
    return value


def _choice(obj: Mapping[str, Any], key: str, choices: Sequence[str]) -> str:
    value = _req_str(obj, key)
    if value not in choices:
        raise _FieldError(key, f"must be one of {', '.join(choices)}; got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------- detections


@dataclass(frozen=True, slots=True)
class Detection:
    """One verdict of ``nudge`` or stronger, as in a scan's ``detections`` list."""

    index: int
    action: str
    level: int
    pattern: str
    loop_start: int | None
    reason: str = ""
    message: str = ""

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Detection:
        """Parse one entry of a scan's ``detections`` list; raises :class:`OutcomeError` when malformed."""
        try:
            return cls._parse(_as_object(obj, "detection"))
        except _FieldError as exc:
            raise OutcomeError(exc.message, field=exc.field) from None

    @classmethod
    def _parse(cls, obj: Mapping[str, Any]) -> Detection:
        return cls(
            index=_req_int(obj, "index"),
            action=_choice(obj, "action", ACTIONS),
            level=_req_int(obj, "level"),
            pattern=_req_str(obj, "pattern"),
            loop_start=_opt_int(obj, "loop_start"),
            reason=_opt_str(obj, "reason"),
            message=_opt_str(obj, "message"),
        )

    def to_json(self) -> dict[str, Any]:
        """The form a scan writes in its ``detections`` list."""
        return {
            "index": self.index,
            "action": self.action,
            "level": self.level,
            "pattern": self.pattern,
            "loop_start": self.loop_start,
            "reason": self.reason,
            "message": self.message,
        }


def parse_detections(items: Iterable[Mapping[str, Any]]) -> tuple[Detection, ...]:
    """Parse a scan's ``detections`` list."""
    return tuple(Detection.from_json(item) for item in items)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a detector did on one recorded run: ``steps`` is the run's length, ``resolved`` its task
    outcome (``None`` when unknown) and ``source`` the corpus source used for the per-source breakdown (when
    empty, the id's prefix before the first ``/`` is used)."""

    id: str
    source: str
    steps: int
    resolved: bool | None
    detections: tuple[Detection, ...]


def source_from_id(run_id: str) -> str:
    """The corpus source named by a run id: its prefix before the first ``/``."""
    return run_id.split("/", 1)[0]


def source_of(run: RunOutcome) -> str:
    return run.source or source_from_id(run.id)


def resolved_from_labels(labels: object) -> bool | None:
    """A trajectory's task outcome from its ``labels.outcome``: ``resolved`` (SWE-bench style sources), else
    ``reward == 1`` (tau-bench), else ``is_correct`` (Who&When); ``None`` when none is recorded (MAST, or
    SWE-agent runs never evaluated)."""
    if not isinstance(labels, Mapping):
        return None
    outcome = labels.get("outcome")
    if not isinstance(outcome, Mapping):
        return None
    resolved = outcome.get("resolved")
    if isinstance(resolved, bool):
        return resolved
    reward = outcome.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        return bool(reward == 1)
    correct = outcome.get("is_correct")
    return correct if isinstance(correct, bool) else None


def run_outcome_from_trajectory(obj: Mapping[str, Any], detections: Sequence[Detection]) -> RunOutcome:
    """Build a :class:`RunOutcome` from a trajectory object (the trajectory format) and a detector's verdicts.

    ``source`` is the id's prefix (the trajectories' own ``source`` field is a long description of where the
    data came from); for an id without ``/`` the trajectory's ``source`` string is used when present."""
    run_id = obj.get("id")
    if not isinstance(run_id, str) or not run_id:
        raise OutcomeError("is required (a non-empty string)", field="id")
    steps = obj.get("steps")
    if not isinstance(steps, list):
        raise OutcomeError("must be a list", run_id=run_id, field="steps")
    source = source_from_id(run_id)
    if "/" not in run_id and isinstance(obj.get("source"), str) and obj["source"]:
        source = obj["source"]
    resolved = resolved_from_labels(obj.get("labels"))
    return RunOutcome(run_id, source, len(steps), resolved, tuple(detections))


# -------------------------------------------------------------------------------------------------- labels


@dataclass(frozen=True, slots=True)
class Episode:
    """One labelled loop episode; ``start``, ``detectable_at`` and ``end`` are step indices."""

    start: int
    detectable_at: int
    end: int
    pattern: str
    unit_len: int | None = None
    reps: int | None = None
    note: str = ""

    def contains(self, index: int) -> bool:
        """Whether step ``index`` lies in ``[start, end]`` (both inclusive)."""
        return self.start <= index <= self.end

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "detectable_at": self.detectable_at,
            "end": self.end,
            "unit_len": self.unit_len,
            "pattern": self.pattern,
            "reps": self.reps,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Label:
    """An annotator's label for one run."""

    id: str
    verdict: str
    episodes: tuple[Episode, ...]
    confidence: str | None = None
    note: str = ""

    @property
    def last_episode(self) -> Episode | None:
        """The episode that ends last (for a ``stuck`` run, the one lasting until the run ends)."""
        return max(self.episodes, key=lambda ep: (ep.end, ep.start), default=None)


def _parse_episode(obj: object, position: int) -> Episode:
    try:
        ep = _as_object(obj, "episode")
        episode = Episode(
            start=_req_int(ep, "start"),
            detectable_at=_req_int(ep, "detectable_at"),
            end=_req_int(ep, "end"),
            pattern=_choice(ep, "pattern", PATTERNS),
            unit_len=_opt_int(ep, "unit_len", minimum=1),
            reps=_opt_int(ep, "reps", minimum=1),
            note=_opt_str(ep, "note"),
        )
        _check_episode_order(episode)
    except _FieldError as exc:
        raise _FieldError(f"episodes[{position}].{exc.field}", exc.message) from None
    return episode


def _check_episode_order(ep: Episode) -> None:
    if not ep.start <= ep.detectable_at <= ep.end:
        raise _FieldError(
            "detectable_at",
            f"needs start <= detectable_at <= end, got {ep.start}, {ep.detectable_at}, {ep.end}",
        )


def _parse_episodes(obj: Mapping[str, Any]) -> tuple[Episode, ...]:
    raw = obj.get("episodes")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _FieldError("episodes", f"must be a list, got {type(raw).__name__}")
    return tuple(_parse_episode(item, pos) for pos, item in enumerate(raw))


def _check_verdict(verdict: str, episodes: tuple[Episode, ...]) -> None:
    if verdict == "clean" and episodes:
        raise _FieldError("episodes", "a 'clean' run has no episodes")
    if verdict != "clean" and not episodes:
        raise _FieldError("episodes", f"a {verdict!r} run needs at least one episode")


def _parse_label_fields(obj: Mapping[str, Any], run_id: str) -> Label:
    verdict = _choice(obj, "verdict", VERDICTS)
    episodes = _parse_episodes(obj)
    _check_verdict(verdict, episodes)
    confidence = obj.get("confidence")
    if confidence is not None:
        confidence = _choice(obj, "confidence", CONFIDENCES)
    return Label(run_id, verdict, episodes, confidence, _opt_str(obj, "note"))


def parse_label(obj: Mapping[str, Any]) -> Label:
    """Parse one label object; raises :class:`LabelError` naming the run and field when it is malformed."""
    if not isinstance(obj, Mapping):
        raise LabelError(f"a label must be a JSON object, got {type(obj).__name__}")
    run_id = obj.get("id")
    if not isinstance(run_id, str) or not run_id:
        raise LabelError("is required (a non-empty string)", field="id")
    try:
        return _parse_label_fields(obj, run_id)
    except _FieldError as exc:
        raise LabelError(exc.message, run_id=run_id, field=exc.field) from None


def _parse_label_line(text: str, line: int) -> Label:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelError(f"invalid JSON: {exc.msg}", line=line) from None
    try:
        return parse_label(obj)
    except LabelError as exc:
        raise LabelError(str(exc), line=line) from None


def parse_labels(lines: Iterable[str]) -> dict[str, Label]:
    """Parse labels JSONL text (one object per line, blank lines skipped) into a mapping keyed by run id.
    Errors carry the 1-based line number; a repeated id is an error."""
    labels: dict[str, Label] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        label = _parse_label_line(text, number)
        if label.id in labels:
            raise LabelError("duplicate label", run_id=label.id, line=number)
        labels[label.id] = label
    return labels
