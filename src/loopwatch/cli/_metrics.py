"""Scoring loop detectors against labelled runs: the metrics the docs' labels page defines. Pure, no I/O.

Inputs are :class:`RunOutcome` objects (a run's id, source, length, task outcome and the detections a detector
returned for it) and :class:`Label` objects parsed from the labels JSONL (the format and loop rubric of the docs'
labels page).
:func:`evaluate` turns them into a :class:`Report`.

Two views:

- live (default): a run is over after its first ``stop``, so every detection after it is dropped before
  scoring (what a deployed detector would have done);
- untruncated (``live=False``): every detection is kept.

Definitions (all over runs that have a label; runs without one are counted in ``Report.unlabelled_runs``
and otherwise ignored). A detection is any verdict of ``nudge`` or stronger, and an episode covers the step
indices ``[start, end]``, both ends inclusive.

- episode recall: share of labelled episodes with a detection at an index in ``[start, end]``;
- detection delay: for detected episodes, index of the first detection in ``[start, end]`` minus
  ``detectable_at`` (negative when a detector fires before a human would call it a loop); reported as the
  median (mean of the two middle values for an even count) and the p90, the nearest-rank 90th percentile: the
  value at 1-based rank ``ceil(0.9 * n)`` of the sorted delays;
- stuck-run stop recall: share of ``stuck`` runs with a ``stop`` at an index inside their last episode (the
  one ending last);
- false alarm rate: share of ``clean`` runs with any detection;
- stray detections: detections outside every labelled episode of their run, per 1,000 steps of all runs;
- false stop rate: share of ``clean`` and ``recovered`` runs with a ``stop``;
- resolved-run stop rate: share of runs whose task outcome is resolved (``RunOutcome.resolved is True``) that
  get a ``stop``;
- steps saved: for each ``stuck`` run with a ``stop`` inside its last episode, ``run length - stop index - 1``
  for the first such stop, summed and divided by the total steps of all ``stuck`` runs (the share of stuck
  runs' steps that come after a stop in their last episode; this reproduces the figures of
  anchor-eval-dev.md).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError, LoopwatchError

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


def _source_of(run: RunOutcome) -> str:
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


# ------------------------------------------------------------------------------------------ summary stats


@dataclass(frozen=True, slots=True)
class Ratio:
    """``count`` out of ``total``; ``rate`` is ``None`` when there is nothing to measure."""

    count: int
    total: int

    @property
    def rate(self) -> float | None:
        return None if self.total == 0 else self.count / self.total

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate, "count": self.count, "total": self.total}


def median(values: Sequence[int]) -> float | None:
    """The median (mean of the two middle values for an even count); ``None`` for no values."""
    return float(statistics.median(values)) if values else None


def nearest_rank_percentile(values: Sequence[int], q: float) -> int | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100): the value at 1-based rank ``ceil(q / 100 * n)``
    of the sorted values; ``None`` for no values."""
    if not 0 < q <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# ------------------------------------------------------------------------------------------- per-run facts


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    """How one labelled episode fared: ``first_detection`` is the first kept detection in ``[start, end]``."""

    run_id: str
    source: str
    verdict: str
    position: int
    episode: Episode
    first_detection: int | None

    @property
    def detected(self) -> bool:
        return self.first_detection is not None

    @property
    def delay(self) -> int | None:
        """First detection minus ``detectable_at`` (negative = earlier than a human would call it)."""
        return None if self.first_detection is None else self.first_detection - self.episode.detectable_at

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "verdict": self.verdict,
            "position": self.position,
            "episode": self.episode.to_json(),
            "detected": self.detected,
            "first_detection": self.first_detection,
            "delay": self.delay,
        }


@dataclass(frozen=True, slots=True)
class FalseAlarm:
    """A detection on a ``clean`` run."""

    run_id: str
    source: str
    detection: Detection

    @property
    def index(self) -> int:
        return self.detection.index

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "source": self.source, "detection": self.detection.to_json()}


@dataclass(frozen=True, slots=True)
class _RunResult:
    run: RunOutcome
    label: Label
    source: str
    detections: tuple[Detection, ...]
    episodes: tuple[EpisodeOutcome, ...]
    stray: int
    stopped: bool
    saved: int | None  # steps after the first stop in the last episode (stuck runs only)


def kept_detections(detections: Sequence[Detection], *, live: bool) -> tuple[Detection, ...]:
    """Detections ordered by index (stable); in the live view, all after the first ``stop`` are dropped."""
    ordered = sorted(detections, key=lambda d: d.index)
    if not live:
        return tuple(ordered)
    for position, det in enumerate(ordered):
        if det.action == "stop":
            return tuple(ordered[: position + 1])
    return tuple(ordered)


def _first_inside(episode: Episode, detections: Sequence[Detection]) -> int | None:
    return next((d.index for d in detections if episode.contains(d.index)), None)


def _first_stop_inside(episode: Episode | None, detections: Sequence[Detection]) -> int | None:
    if episode is None:
        return None
    return next((d.index for d in detections if d.action == "stop" and episode.contains(d.index)), None)


def _episode_outcomes(
    run_id: str, source: str, label: Label, detections: Sequence[Detection]
) -> tuple[EpisodeOutcome, ...]:
    return tuple(
        EpisodeOutcome(run_id, source, label.verdict, pos, ep, _first_inside(ep, detections))
        for pos, ep in enumerate(label.episodes)
    )


def _count_stray(label: Label, detections: Sequence[Detection]) -> int:
    return sum(1 for d in detections if not any(ep.contains(d.index) for ep in label.episodes))


def _steps_saved(label: Label, steps: int, detections: Sequence[Detection]) -> int | None:
    if label.verdict != "stuck":
        return None
    stop = _first_stop_inside(label.last_episode, detections)
    return None if stop is None else max(0, steps - stop - 1)


def _judge_run(run: RunOutcome, label: Label, live: bool) -> _RunResult:
    source = _source_of(run)
    kept = kept_detections(run.detections, live=live)
    return _RunResult(
        run=run,
        label=label,
        source=source,
        detections=kept,
        episodes=_episode_outcomes(run.id, source, label, kept),
        stray=_count_stray(label, kept),
        stopped=any(d.action == "stop" for d in kept),
        saved=_steps_saved(label, run.steps, kept),
    )


# ------------------------------------------------------------------------------------------------ metrics


@dataclass(frozen=True, slots=True)
class Metrics:
    """The metrics over a group of labelled runs (all of them, or one source)."""

    runs: int
    steps: int
    episode_recall: Ratio
    recall_excluding: Ratio
    delays: tuple[int, ...]
    stuck_stop_recall: Ratio
    false_alarm_rate: Ratio
    stray_detections: int
    false_stop_rate: Ratio
    resolved_stop_rate: Ratio
    steps_saved: Ratio

    @property
    def delay_median(self) -> float | None:
        return median(self.delays)

    @property
    def delay_p90(self) -> int | None:
        return nearest_rank_percentile(self.delays, 90)

    @property
    def stray_per_1k(self) -> float | None:
        return None if self.steps == 0 else 1000 * self.stray_detections / self.steps

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "steps": self.steps,
            "episode_recall": self.episode_recall.to_json(),
            "episode_recall_excluding": self.recall_excluding.to_json(),
            "delay": _delay_json(self.delays),
            "stuck_run_stop_recall": self.stuck_stop_recall.to_json(),
            "false_alarm_rate": self.false_alarm_rate.to_json(),
            "stray_detections": {"per_1k_steps": self.stray_per_1k, "count": self.stray_detections},
            "false_stop_rate": self.false_stop_rate.to_json(),
            "resolved_run_stop_rate": self.resolved_stop_rate.to_json(),
            "steps_saved": self.steps_saved.to_json(),
        }


@dataclass(frozen=True, slots=True)
class PatternMetrics:
    """Episode recall and delay for the episodes of one labelled pattern."""

    pattern: str
    episode_recall: Ratio
    delays: tuple[int, ...]

    @property
    def delay_median(self) -> float | None:
        return median(self.delays)

    @property
    def delay_p90(self) -> int | None:
        return nearest_rank_percentile(self.delays, 90)

    def to_json(self) -> dict[str, Any]:
        return {"episode_recall": self.episode_recall.to_json(), "delay": _delay_json(self.delays)}


def _delay_json(delays: Sequence[int]) -> dict[str, Any]:
    return {"median": median(delays), "p90": nearest_rank_percentile(delays, 90), "count": len(delays)}


def _recall(episodes: Sequence[EpisodeOutcome]) -> Ratio:
    return Ratio(sum(1 for e in episodes if e.detected), len(episodes))


def _delays(episodes: Sequence[EpisodeOutcome]) -> tuple[int, ...]:
    return tuple(e.delay for e in episodes if e.delay is not None)


def _share(
    results: Sequence[_RunResult], member: Callable[[_RunResult], bool], hit: Callable[[_RunResult], bool]
) -> Ratio:
    group = [r for r in results if member(r)]
    return Ratio(sum(1 for r in group if hit(r)), len(group))


def _steps_saved_ratio(results: Sequence[_RunResult]) -> Ratio:
    stuck = [r for r in results if r.label.verdict == "stuck"]
    return Ratio(sum(r.saved or 0 for r in stuck), sum(r.run.steps for r in stuck))


def _metrics(results: Sequence[_RunResult], excluded: frozenset[str]) -> Metrics:
    episodes = [e for r in results for e in r.episodes]
    return Metrics(
        runs=len(results),
        steps=sum(r.run.steps for r in results),
        episode_recall=_recall(episodes),
        recall_excluding=_recall([e for e in episodes if e.episode.pattern not in excluded]),
        delays=_delays(episodes),
        stuck_stop_recall=_share(results, lambda r: r.label.verdict == "stuck", lambda r: r.saved is not None),
        false_alarm_rate=_share(results, lambda r: r.label.verdict == "clean", lambda r: bool(r.detections)),
        stray_detections=sum(r.stray for r in results),
        false_stop_rate=_share(results, lambda r: r.label.verdict != "stuck", lambda r: r.stopped),
        resolved_stop_rate=_share(results, lambda r: r.run.resolved is True, lambda r: r.stopped),
        steps_saved=_steps_saved_ratio(results),
    )


def _pattern_metrics(episodes: Sequence[EpisodeOutcome]) -> dict[str, PatternMetrics]:
    out: dict[str, PatternMetrics] = {}
    for pattern in PATTERNS:
        group = [e for e in episodes if e.episode.pattern == pattern]
        out[pattern] = PatternMetrics(pattern, _recall(group), _delays(group))
    return out


def _source_metrics(results: Sequence[_RunResult], excluded: frozenset[str]) -> dict[str, Metrics]:
    sources = sorted({r.source for r in results})
    return {s: _metrics([r for r in results if r.source == s], excluded) for s in sources}


def _false_alarms(results: Sequence[_RunResult]) -> tuple[FalseAlarm, ...]:
    return tuple(FalseAlarm(r.run.id, r.source, d) for r in results if r.label.verdict == "clean" for d in r.detections)


# ------------------------------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True)
class Report:
    """The result of :func:`evaluate`: overall, per-source and per-pattern metrics plus the per-episode
    outcomes and the false alarms behind them."""

    live: bool
    excluded_patterns: tuple[str, ...]
    overall: Metrics
    by_source: Mapping[str, Metrics]
    by_pattern: Mapping[str, PatternMetrics]
    episodes: tuple[EpisodeOutcome, ...]
    alarms: tuple[FalseAlarm, ...]
    unlabelled_runs: int
    unmatched_labels: int

    def missed_episodes(self) -> list[EpisodeOutcome]:
        """Labelled episodes with no kept detection inside them, in input order."""
        return [e for e in self.episodes if not e.detected]

    def false_alarms(self) -> list[FalseAlarm]:
        """Every kept detection on a ``clean`` run, in input order."""
        return list(self.alarms)

    def to_json(self) -> dict[str, Any]:
        return {
            "view": "live" if self.live else "untruncated",
            "excluded_patterns": list(self.excluded_patterns),
            "unlabelled_runs": self.unlabelled_runs,
            "unmatched_labels": self.unmatched_labels,
            "overall": self.overall.to_json(),
            "by_source": {s: m.to_json() for s, m in self.by_source.items()},
            "by_pattern": {p: m.to_json() for p, m in self.by_pattern.items()},
            "episodes": [e.to_json() for e in self.episodes],
            "false_alarms": [a.to_json() for a in self.alarms],
        }

    def format_table(self) -> str:
        """Plain-text, aligned tables: overall metrics, per source, per pattern."""
        return _format_report(self)


def _check_excluded(exclude_patterns: Collection[str]) -> frozenset[str]:
    unknown = sorted(set(exclude_patterns) - set(PATTERNS))
    if unknown:
        raise ConfigError(f"unknown pattern(s) {', '.join(unknown)}", field="exclude_patterns")
    return frozenset(exclude_patterns)


def _judge_runs(runs: Iterable[RunOutcome], labels: Mapping[str, Label], live: bool) -> tuple[list[_RunResult], int]:
    results: list[_RunResult] = []
    seen: set[str] = set()
    unlabelled = 0
    for run in runs:
        if run.id in seen:
            raise OutcomeError("duplicate run", run_id=run.id)
        seen.add(run.id)
        label = labels.get(run.id)
        if label is None:
            unlabelled += 1
        else:
            results.append(_judge_run(run, label, live))
    return results, unlabelled


def evaluate(
    runs: Iterable[RunOutcome],
    labels: Mapping[str, Label],
    *,
    live: bool = True,
    exclude_patterns: Collection[str] = (),
) -> Report:
    """Score detections against labels (see the module docstring for every definition).

    ``live=True`` drops each run's detections after its first ``stop``; ``exclude_patterns`` (for example
    ``{"rephrase"}``) adds an episode recall over the other patterns' episodes only. Runs without a label are
    ignored (counted in ``unlabelled_runs``); labels without a run are counted in ``unmatched_labels``."""
    excluded = _check_excluded(exclude_patterns)
    results, unlabelled = _judge_runs(runs, labels, live)
    episodes = tuple(e for r in results for e in r.episodes)
    return Report(
        live=live,
        excluded_patterns=tuple(p for p in PATTERNS if p in excluded),
        overall=_metrics(results, excluded),
        by_source=_source_metrics(results, excluded),
        by_pattern=_pattern_metrics(episodes),
        episodes=episodes,
        alarms=_false_alarms(results),
        unlabelled_runs=unlabelled,
        unmatched_labels=len(set(labels) - {r.run.id for r in results}),
    )


# --------------------------------------------------------------------------------------------- formatting

_DASH: Final = "–"


def _pct(ratio: Ratio) -> str:
    rate = ratio.rate
    return _DASH if rate is None else f"{100 * rate:.1f}%"


def _pct_count(ratio: Ratio) -> str:
    return _DASH if ratio.rate is None else f"{_pct(ratio)} ({ratio.count})"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return _DASH
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{digits}f}"


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """Columns separated by two spaces; ``align`` holds ``l`` or ``r`` per column (default: the first column
    left-aligned, the others right-aligned)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(cells, widths, align, strict=True)
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _overall_rows(report: Report) -> list[list[str]]:
    m = report.overall
    rows = [
        [
            "episode recall",
            _pct(m.episode_recall),
            f"{m.episode_recall.count} of {m.episode_recall.total} episodes",
        ],
    ]
    if report.excluded_patterns:
        r = m.recall_excluding
        name = f"episode recall without {', '.join(report.excluded_patterns)}"
        rows.append([name, _pct(r), f"{r.count} of {r.total} episodes"])
    return [
        *rows,
        ["detection delay median", _num(m.delay_median), f"steps, over {len(m.delays)} detected episodes"],
        ["detection delay p90", _num(m.delay_p90), "steps, nearest rank"],
        ["stuck-run stop recall", _pct(m.stuck_stop_recall), _of(m.stuck_stop_recall, "stuck runs")],
        ["false alarm rate", _pct(m.false_alarm_rate), _of(m.false_alarm_rate, "clean runs")],
        [
            "stray detections /1k steps",
            _num(m.stray_per_1k),
            f"{m.stray_detections} stray detections in {m.steps} steps",
        ],
        ["false stop rate", _pct(m.false_stop_rate), _of(m.false_stop_rate, "clean + recovered runs")],
        ["resolved-run stop rate", _pct(m.resolved_stop_rate), _of(m.resolved_stop_rate, "resolved runs")],
        ["steps saved", _pct(m.steps_saved), _of(m.steps_saved, "steps of stuck runs")],
    ]


def _of(ratio: Ratio, what: str) -> str:
    return f"{ratio.count} of {ratio.total} {what}"


_SOURCE_HEADERS: Final = (
    "source",
    "runs",
    "episodes",
    "episode recall",
    "delay med",
    "delay p90",
    "stuck stop recall",
    "false alarm rate",
    "stray /1k",
    "false stop rate",
    "resolved stop rate",
    "steps saved",
)


def _source_row(name: str, m: Metrics) -> list[str]:
    return [
        name,
        str(m.runs),
        str(m.episode_recall.total),
        _pct(m.episode_recall),
        _num(m.delay_median),
        _num(m.delay_p90),
        f"{_pct(m.stuck_stop_recall)} of {m.stuck_stop_recall.total}",
        f"{_pct(m.false_alarm_rate)} of {m.false_alarm_rate.total}",
        _num(m.stray_per_1k),
        _pct_count(m.false_stop_rate),
        _pct_count(m.resolved_stop_rate),
        _pct(m.steps_saved),
    ]


def _pattern_row(m: PatternMetrics) -> list[str]:
    r = m.episode_recall
    return [m.pattern, str(r.total), str(r.count), _pct(r), _num(m.delay_median), _num(m.delay_p90)]


def _format_report(report: Report) -> str:
    view = "live view (detections after a run's first stop dropped)" if report.live else "untruncated view"
    m = report.overall
    title = f"{m.runs} labelled runs, {m.steps} steps, {m.episode_recall.total} episodes; {view}"
    if report.unlabelled_runs:
        title += f"; {report.unlabelled_runs} runs without a label ignored"
    sources = [_source_row(name, sm) for name, sm in report.by_source.items()]
    patterns = [_pattern_row(pm) for pm in report.by_pattern.values()]
    pattern_headers = ("pattern", "episodes", "detected", "recall", "delay med", "delay p90")
    return "\n\n".join(
        [
            title,
            _render(("metric", "value", "detail"), _overall_rows(report), "lrl"),
            "Per source\n" + _render(_SOURCE_HEADERS, [*sources, _source_row("all", m)]),
            "Per pattern\n" + _render(pattern_headers, patterns),
        ]
    )
