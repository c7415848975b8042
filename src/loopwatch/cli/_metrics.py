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

import math
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ._eval_inputs import (
    ACTIONS,
    CONFIDENCES,
    PATTERNS,
    VERDICTS,
    Detection,
    Episode,
    Label,
    LabelError,
    OutcomeError,
    RunOutcome,
    parse_detections,
    parse_label,
    parse_labels,
    resolved_from_labels,
    run_outcome_from_trajectory,
    source_from_id,
    source_of,
)
from ._metrics_table import format_report

__all__ = [  # the scores, and what is scored (read in _eval_inputs)
    "ACTIONS",
    "CONFIDENCES",
    "PATTERNS",
    "VERDICTS",
    "Detection",
    "Episode",
    "EpisodeOutcome",
    "FalseAlarm",
    "Label",
    "LabelError",
    "Metrics",
    "OutcomeError",
    "PatternMetrics",
    "Ratio",
    "Report",
    "RunOutcome",
    "evaluate",
    "kept_detections",
    "median",
    "nearest_rank_percentile",
    "parse_detections",
    "parse_label",
    "parse_labels",
    "resolved_from_labels",
    "run_outcome_from_trajectory",
    "source_from_id",
]


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
    source = source_of(run)
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
        return format_report(self)


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
