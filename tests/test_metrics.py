"""Tests for the command line's metrics (loopwatch.cli._metrics): each metric of docs/labels.md (section 5) on
hand-built runs and the real dev labels."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch.cli._metrics import (
    Detection,
    Label,
    LabelError,
    OutcomeError,
    Report,
    RunOutcome,
    evaluate,
    kept_detections,
    median,
    nearest_rank_percentile,
    parse_label,
    parse_labels,
    resolved_from_labels,
    run_outcome_from_trajectory,
)
from loopwatch.errors import ConfigError, LoopwatchError

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEV_LABELS = CORPUS / "labels" / "dev.jsonl"


def det(index: int, action: str = "nudge", pattern: str = "repeat") -> Detection:
    return Detection(index=index, action=action, level=1, pattern=pattern, loop_start=None)


def episode(start: int, end: int, detectable_at: int | None = None, pattern: str = "repeat") -> dict[str, Any]:
    at = start if detectable_at is None else detectable_at
    return {"start": start, "detectable_at": at, "end": end, "unit_len": 1, "pattern": pattern, "reps": 3}


def label(run_id: str, verdict: str, *episodes: dict[str, Any]) -> Label:
    return parse_label({"id": run_id, "verdict": verdict, "episodes": list(episodes), "confidence": "high"})


def run(run_id: str, steps: int, *detections: Detection, resolved: bool | None = None, source: str = "") -> RunOutcome:
    return RunOutcome(run_id, source, steps, resolved, tuple(detections))


def score(pairs: list[tuple[RunOutcome, Label]], **kwargs: Any) -> Report:
    return evaluate([r for r, _ in pairs], {lab.id: lab for _, lab in pairs}, **kwargs)


# ------------------------------------------------------------------------------------------ episode recall


@pytest.mark.parametrize(("index", "hit"), [(9, False), (10, True), (15, True), (20, True), (21, False)])
def test_episode_recall_counts_detections_inside_inclusive_bounds(index: int, hit: bool) -> None:
    report = score([(run("s/a", 30, det(index)), label("s/a", "recovered", episode(10, 20)))])
    assert report.overall.episode_recall.count == int(hit)
    assert report.overall.episode_recall.total == 1
    assert report.overall.episode_recall.rate == (1.0 if hit else 0.0)
    assert report.episodes[0].first_detection == (index if hit else None)


def test_missed_episodes_lists_undetected_episodes_only() -> None:
    lab = label("s/a", "recovered", episode(2, 5), episode(10, 14, pattern="cycle"))
    report = score([(run("s/a", 20, det(3)), lab)])
    missed = report.missed_episodes()
    assert [(m.run_id, m.position, m.episode.start) for m in missed] == [("s/a", 1, 10)]
    assert missed[0].detected is False
    assert missed[0].delay is None


# -------------------------------------------------------------------------------------------------- delay


def test_delay_is_first_detection_inside_minus_detectable_at_and_may_be_negative() -> None:
    pairs = [
        (run("s/a", 30, det(12), det(13)), label("s/a", "recovered", episode(10, 20, detectable_at=15))),
        (run("s/b", 30, det(5), det(19)), label("s/b", "recovered", episode(10, 20, detectable_at=15))),
    ]
    report = score(pairs)
    assert [e.delay for e in report.episodes] == [-3, 4]
    assert report.overall.delays == (-3, 4)
    assert report.overall.delay_median == 0.5
    assert report.overall.delay_p90 == 4


def test_nearest_rank_percentile_and_median() -> None:
    assert nearest_rank_percentile(list(range(1, 11)), 90) == 9
    assert nearest_rank_percentile(list(range(1, 21)), 90) == 18
    assert nearest_rank_percentile([10, 1, 5], 90) == 10
    assert nearest_rank_percentile([6, 5, 4, 3, 2, 1], 90) == 6  # rank ceil(5.4) = 6, not round(5.4) = 5
    assert nearest_rank_percentile([7], 90) == 7
    assert nearest_rank_percentile([], 90) is None
    assert median([3, 1, 2]) == 2.0
    assert median([1, 2]) == 1.5
    assert median([]) is None
    with pytest.raises(ValueError):
        nearest_rank_percentile([1], 0)


def test_no_detected_episode_gives_no_delay() -> None:
    report = score([(run("s/a", 30), label("s/a", "stuck", episode(10, 29)))])
    assert report.overall.delay_median is None
    assert report.overall.delay_p90 is None


# ------------------------------------------------------------------------------------- live / untruncated


def test_live_view_drops_detections_after_first_stop_untruncated_keeps_them() -> None:
    pairs = [(run("s/a", 40, det(25), det(5, "stop")), label("s/a", "recovered", episode(20, 30)))]
    live = score(pairs)
    full = score(pairs, live=False)
    assert live.overall.episode_recall.count == 0
    assert full.overall.episode_recall.count == 1
    assert live.overall.stray_detections == 1
    assert full.overall.stray_detections == 1
    assert live.to_json()["view"] == "live"
    assert full.to_json()["view"] == "untruncated"


def test_kept_detections_sorts_and_cuts_after_first_stop() -> None:
    dets = [det(9), det(3, "stop"), det(1), det(7, "stop")]
    assert [d.index for d in kept_detections(dets, live=True)] == [1, 3]
    assert [d.index for d in kept_detections(dets, live=False)] == [1, 3, 7, 9]


# ------------------------------------------------------------------------------------ stuck-run stop recall


def test_stuck_stop_recall_needs_stop_inside_last_episode() -> None:
    two = (episode(2, 5), episode(10, 19))
    pairs = [
        (run("s/early", 20, det(4, "stop")), label("s/early", "stuck", *two)),
        (run("s/late", 20, det(12, "stop")), label("s/late", "stuck", *two)),
        (run("s/nudge", 20, det(12)), label("s/nudge", "stuck", *two)),
    ]
    report = score(pairs)
    assert report.overall.stuck_stop_recall.count == 1
    assert report.overall.stuck_stop_recall.total == 3


def test_stuck_stop_recall_live_vs_untruncated() -> None:
    pairs = [
        (
            run("s/a", 20, det(4, "stop"), det(12, "stop")),
            label("s/a", "stuck", episode(2, 5), episode(10, 19)),
        )
    ]
    assert score(pairs).overall.stuck_stop_recall.count == 0
    assert score(pairs, live=False).overall.stuck_stop_recall.count == 1


def test_last_episode_is_the_one_ending_last() -> None:
    lab = label("s/a", "stuck", episode(10, 19), episode(2, 5))
    assert lab.last_episode is not None
    assert lab.last_episode.start == 10


# -------------------------------------------------------------------------------------- false alarms, stray


def test_false_alarm_rate_over_clean_runs_and_listing() -> None:
    pairs = [
        (run("s/noisy", 10, det(3), det(6, "block")), label("s/noisy", "clean")),
        (run("s/quiet", 10), label("s/quiet", "clean")),
        (run("s/stuck", 10, det(8)), label("s/stuck", "stuck", episode(5, 9))),
    ]
    report = score(pairs)
    assert report.overall.false_alarm_rate.count == 1
    assert report.overall.false_alarm_rate.total == 2
    assert [(a.run_id, a.index) for a in report.false_alarms()] == [("s/noisy", 3), ("s/noisy", 6)]


def test_stray_detections_per_thousand_steps_over_all_runs() -> None:
    pairs = [
        (run("s/a", 1000, det(1), det(50), det(999)), label("s/a", "recovered", episode(40, 60))),
        (run("s/b", 500, det(7)), label("s/b", "clean")),
        (run("s/c", 500), label("s/c", "clean")),
    ]
    report = score(pairs)
    assert report.overall.steps == 2000
    assert report.overall.stray_detections == 3
    assert report.overall.stray_per_1k == pytest.approx(1.5)


# ------------------------------------------------------------------------------------------ stop rates


def test_false_stop_rate_counts_clean_and_recovered_runs_only() -> None:
    pairs = [
        (run("s/clean", 10, det(2, "stop")), label("s/clean", "clean")),
        (run("s/rec", 10, det(2), det(3, "block")), label("s/rec", "recovered", episode(1, 4))),  # no stop
        (run("s/rec2", 10, det(3, "stop")), label("s/rec2", "recovered", episode(1, 4))),
        (run("s/stuck", 10, det(8, "stop")), label("s/stuck", "stuck", episode(5, 9))),
    ]
    report = score(pairs)
    assert report.overall.false_stop_rate.count == 2
    assert report.overall.false_stop_rate.total == 3


def test_resolved_run_stop_rate_uses_run_outcome_resolved() -> None:
    pairs = [
        (run("s/a", 10, det(2, "stop"), resolved=True), label("s/a", "clean")),
        (run("s/b", 10, det(2), resolved=True), label("s/b", "clean")),
        (run("s/c", 10, det(2, "stop"), resolved=False), label("s/c", "clean")),
        (run("s/d", 10, det(2, "stop"), resolved=None), label("s/d", "clean")),
    ]
    report = score(pairs)
    assert report.overall.resolved_stop_rate.count == 1
    assert report.overall.resolved_stop_rate.total == 2


# ------------------------------------------------------------------------------------------- steps saved


def test_steps_saved_is_share_of_all_stuck_steps_after_a_stop_in_last_episode() -> None:
    pairs = [
        (run("s/a", 100, det(89, "stop")), label("s/a", "stuck", episode(80, 99))),  # saves 10
        (run("s/b", 50), label("s/b", "stuck", episode(30, 49))),  # no stop: saves 0
        (run("s/c", 50, det(5, "stop")), label("s/c", "stuck", episode(30, 49))),  # stop before last episode
        (run("s/d", 1000, det(1, "stop")), label("s/d", "clean")),  # not stuck: ignored
    ]
    report = score(pairs)
    assert report.overall.steps_saved.count == 10
    assert report.overall.steps_saved.total == 200
    assert report.overall.steps_saved.rate == pytest.approx(0.05)


def test_steps_saved_uses_first_stop_inside_last_episode_untruncated() -> None:
    pairs = [(run("s/a", 100, det(85, "stop"), det(95, "stop")), label("s/a", "stuck", episode(80, 99)))]
    assert score(pairs, live=False).overall.steps_saved.count == 14


# ----------------------------------------------------------------------------------------------- breakdowns


def test_per_source_breakdown_uses_id_prefix_or_explicit_source() -> None:
    pairs = [
        (run("alpha/1", 10, det(5)), label("alpha/1", "recovered", episode(4, 6))),
        (run("alpha/2", 10, det(1)), label("alpha/2", "clean")),
        (run("beta/1", 10), label("beta/1", "stuck", episode(2, 9))),
        (run("x/1", 10, det(0), source="gamma"), label("x/1", "clean")),
    ]
    report = score(pairs)
    assert sorted(report.by_source) == ["alpha", "beta", "gamma"]
    alpha, beta, gamma = (report.by_source[s] for s in ("alpha", "beta", "gamma"))
    assert (alpha.runs, alpha.episode_recall.rate, alpha.false_alarm_rate.rate) == (2, 1.0, 1.0)
    assert (beta.episode_recall.rate, beta.stuck_stop_recall.total, beta.false_alarm_rate.rate) == (
        0.0,
        1,
        None,
    )
    assert gamma.false_alarm_rate.count == 1
    assert report.false_alarms()[-1].source == "gamma"
    assert report.overall.runs == 4


def test_per_pattern_breakdown_and_recall_excluding_patterns() -> None:
    lab = label(
        "s/a",
        "recovered",
        episode(0, 4, detectable_at=2, pattern="repeat"),
        episode(10, 14, detectable_at=12, pattern="rephrase"),
        episode(20, 24, detectable_at=22, pattern="rephrase"),
        episode(30, 34, detectable_at=32, pattern="error_retry"),
    )
    report = score([(run("s/a", 40, det(3), det(11), det(33)), lab)], exclude_patterns={"rephrase"})
    by = report.by_pattern
    assert list(by) == ["repeat", "cycle", "error_retry", "rephrase", "edit_revert", "no_effect", "other"]
    assert (by["repeat"].episode_recall.count, by["repeat"].delay_median) == (1, 1.0)
    assert (by["rephrase"].episode_recall.count, by["rephrase"].episode_recall.total) == (1, 2)
    assert by["rephrase"].delay_p90 == -1
    assert by["cycle"].episode_recall.rate is None
    assert report.overall.episode_recall.count == 3
    assert (report.overall.recall_excluding.count, report.overall.recall_excluding.total) == (2, 2)
    assert report.excluded_patterns == ("rephrase",)


def test_unknown_excluded_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        score([], exclude_patterns={"nope"})


# --------------------------------------------------------------------------------------- input handling


def test_unlabelled_runs_are_ignored_and_counted() -> None:
    lab = label("s/a", "clean")
    report = evaluate([run("s/a", 10), run("s/other", 1000, det(1))], {"s/a": lab, "s/gone": label("s/gone", "clean")})
    assert report.overall.runs == 1
    assert report.overall.steps == 10
    assert report.overall.stray_detections == 0
    assert report.unlabelled_runs == 1
    assert report.unmatched_labels == 1


def test_duplicate_run_is_an_error() -> None:
    with pytest.raises(OutcomeError):
        evaluate([run("s/a", 10), run("s/a", 10)], {"s/a": label("s/a", "clean")})


def test_detection_from_json_round_trip_and_errors() -> None:
    obj = {
        "index": 16,
        "action": "nudge",
        "level": 1,
        "pattern": "error_retry",
        "loop_start": 12,
        "reason": "r",
    }
    parsed = Detection.from_json({**obj, "extra": True})
    assert parsed == Detection(16, "nudge", 1, "error_retry", 12, reason="r")
    assert Detection.from_json(parsed.to_json()) == parsed
    for bad in ({**obj, "action": "ok"}, {**obj, "index": -1}, {**obj, "index": "3"}, {**obj, "level": None}):
        with pytest.raises(OutcomeError) as info:
            Detection.from_json(bad)
        assert isinstance(info.value, LoopwatchError)
        assert isinstance(info.value, ValueError)


GOOD_LABEL: dict[str, Any] = {
    "id": "s/a",
    "verdict": "stuck",
    "episodes": [episode(12, 40, detectable_at=16, pattern="error_retry")],
    "confidence": "high",
    "note": "",
}


def with_episode(**changes: Any) -> dict[str, Any]:
    return {**GOOD_LABEL, "episodes": [{**GOOD_LABEL["episodes"][0], **changes}]}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({**GOOD_LABEL, "id": None}, "id"),
        ({**GOOD_LABEL, "verdict": "looping"}, "verdict"),
        ({k: v for k, v in GOOD_LABEL.items() if k != "verdict"}, "verdict"),
        ({**GOOD_LABEL, "verdict": "clean"}, "episodes"),
        ({**GOOD_LABEL, "episodes": []}, "episodes"),
        ({**GOOD_LABEL, "episodes": "none"}, "episodes"),
        ({**GOOD_LABEL, "episodes": [7]}, "episodes[0].episode"),
        ({**GOOD_LABEL, "confidence": "sure"}, "confidence"),
        (with_episode(end=10), "episodes[0].detectable_at"),
        (with_episode(detectable_at=11), "episodes[0].detectable_at"),
        (with_episode(start="12"), "episodes[0].start"),
        (with_episode(end=True), "episodes[0].end"),
        (with_episode(start=-1), "episodes[0].start"),
        (with_episode(pattern="spiral"), "episodes[0].pattern"),
        (with_episode(unit_len=0), "episodes[0].unit_len"),
    ],
)
def test_malformed_label_raises_label_error(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(LabelError) as info:
        parse_label(obj)
    assert info.value.field == field
    assert isinstance(info.value, LoopwatchError)
    assert isinstance(info.value, ValueError)


def test_parse_label_reads_fields() -> None:
    lab = parse_label({**GOOD_LABEL, "episodes": [{**episode(1, 9, 3, "rephrase"), "unit_len": None}]})
    assert lab.verdict == "stuck"
    assert lab.confidence == "high"
    assert lab.episodes[0].unit_len is None
    assert (lab.episodes[0].start, lab.episodes[0].detectable_at, lab.episodes[0].end) == (1, 3, 9)


def test_parse_label_knows_every_rubric_v2_pattern() -> None:
    # rubric v2 added "edits with no effect" (pattern no_effect); the dev labels use it
    for pattern in ("repeat", "cycle", "error_retry", "rephrase", "edit_revert", "no_effect", "other"):
        lab = parse_label({**GOOD_LABEL, "episodes": [{**episode(6, 84, 38, pattern), "unit_len": 2}]})
        assert lab.episodes[0].pattern == pattern


def test_parse_labels_reports_line_and_duplicates() -> None:
    good = json.dumps(GOOD_LABEL)
    assert list(parse_labels([good, "", json.dumps({**GOOD_LABEL, "id": "s/b"})])) == ["s/a", "s/b"]
    with pytest.raises(LabelError) as info:
        parse_labels([good, "{not json"])
    assert info.value.line == 2
    with pytest.raises(LabelError) as dup:
        parse_labels([good, good])
    assert (dup.value.line, dup.value.run_id) == (2, "s/a")


# ------------------------------------------------------------------------------------------- trajectories


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ({"resolved": True, "exit_status": "Submitted"}, True),  # mini_swe_agent_gemini3
        ({"resolved": False, "hit_cost_limit": True}, False),  # swe_agent_java
        ({"resolved": None, "exit_status": None}, None),  # swe_agent_java, not evaluated
        ({"reward": 1.0}, True),  # tau_bench
        ({"reward": 0.0}, False),
        ({"reward": 0.5}, False),  # only a full reward counts as resolved
        ({"failed_run": True, "is_correct": False}, False),  # who_and_when
        (None, None),  # mast_human has no outcome
    ],
)
def test_resolved_from_labels_per_source(outcome: dict[str, Any] | None, expected: bool | None) -> None:
    labels = {"human": None} if outcome is None else {"outcome": outcome}
    assert resolved_from_labels(labels) is expected


def test_run_outcome_from_trajectory() -> None:
    traj = {
        "id": "tau_bench/airline/gpt-4o/task0_trial0",
        "source": "sierra-research/tau-bench historical_trajectories",
        "steps": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}],
        "labels": {"outcome": {"reward": 1.0}},
    }
    outcome = run_outcome_from_trajectory(traj, [det(1)])
    assert outcome == RunOutcome("tau_bench/airline/gpt-4o/task0_trial0", "tau_bench", 2, True, (det(1),))
    assert run_outcome_from_trajectory({**traj, "id": "solo", "labels": None}, []).source == traj["source"]
    with pytest.raises(OutcomeError):
        run_outcome_from_trajectory({**traj, "steps": None}, [])


# ----------------------------------------------------------------------------------------------- report


def test_report_json_and_table() -> None:
    pairs = [
        (run("alpha/1", 20, det(12, "stop")), label("alpha/1", "stuck", episode(10, 19, 11))),
        (run("beta/1", 10, det(1), resolved=True), label("beta/1", "clean")),
    ]
    report = score(pairs, exclude_patterns=["rephrase"])
    data = report.to_json()
    json.dumps(data)
    assert data["overall"]["episode_recall"] == {"rate": 1.0, "count": 1, "total": 1}
    assert data["overall"]["steps_saved"] == {"rate": 7 / 20, "count": 7, "total": 20}
    assert data["overall"]["delay"] == {"median": 1.0, "p90": 1, "count": 1}
    assert data["by_source"]["beta"]["false_alarm_rate"]["rate"] == 1.0
    assert data["false_alarms"][0]["detection"]["index"] == 1
    assert data["episodes"][0]["delay"] == 1
    table = report.format_table()
    assert "episode recall without rephrase" in table
    assert "35.0%" in table  # steps saved
    lines = table.splitlines()
    alpha = next(line for line in lines if line.startswith("alpha "))
    beta = next(line for line in lines if line.startswith("beta "))
    assert len(alpha) == len(beta)  # aligned columns
    assert "100.0%" in beta  # false alarm rate of beta


@given(
    st.lists(
        st.tuples(st.integers(0, 29), st.sampled_from(["nudge", "block", "stop"])),
        max_size=12,
    )
)
def test_live_view_never_scores_more_than_untruncated(raw: list[tuple[int, str]]) -> None:
    dets = [det(i, a) for i, a in raw]
    pairs = [(run("s/a", 30, *dets), label("s/a", "stuck", episode(3, 8), episode(15, 29)))]
    live, full = score(pairs).overall, score(pairs, live=False).overall
    assert live.episode_recall.count <= full.episode_recall.count
    assert live.stray_detections <= full.stray_detections
    assert live.stuck_stop_recall.count <= full.stuck_stop_recall.count
    assert live.false_stop_rate == full.false_stop_rate
    assert sum(1 for d in kept_detections(dets, live=True) if d.action == "stop") <= 1


# ------------------------------------------------------------------------------------------ real corpus


@pytest.mark.skipif(not DEV_LABELS.exists(), reason="corpus labels not available")
def test_real_dev_labels_parse_and_score_zero_without_detections() -> None:
    with DEV_LABELS.open(encoding="utf-8") as handle:
        labels = parse_labels(handle)
    assert len(labels) == 729
    verdicts = [lab.verdict for lab in labels.values()]
    assert (verdicts.count("stuck"), verdicts.count("recovered"), verdicts.count("clean")) == (76, 29, 624)
    runs = [run(run_id, max((ep.end for ep in lab.episodes), default=0) + 1) for run_id, lab in labels.items()]
    report = evaluate(runs, labels)
    assert report.overall.episode_recall.rate == 0.0
    assert report.overall.episode_recall.total == 127
    assert report.overall.false_alarm_rate.rate == 0.0
    assert report.overall.false_alarm_rate.total == 624
    assert len(report.missed_episodes()) == 127


@pytest.mark.skipif(not DEV_LABELS.exists(), reason="corpus not available")
def test_real_trajectories_give_resolved_outcomes_for_dev_runs() -> None:
    with DEV_LABELS.open(encoding="utf-8") as handle:
        labels = parse_labels(handle)
    runs: list[RunOutcome] = []
    for path in sorted(CORPUS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            runs.extend(run_outcome_from_trajectory(json.loads(line), []) for line in handle)
    report = evaluate(runs, labels)
    assert report.overall.runs == 729
    assert report.unmatched_labels == 0
    assert report.overall.resolved_stop_rate.total == 275  # the denominator of anchor-eval-dev.md's column
    assert sorted(report.by_source) == [
        "mast_human",
        "mini_swe_agent_gemini3",
        "swe_agent_java",
        "tau_bench",
        "who_and_when",
    ]
    assert report.by_source["swe_agent_java"].episode_recall.total == 86
