"""Ladders, second strikes, tie-breaking between rules, and polling advice (the policy layer)."""

from __future__ import annotations

import pytest

from loopwatch import Guard, Ladder, Message, Rung, ToolCall, ToolResult, Verdict, preset
from loopwatch.core._policy import LadderState, decide
from loopwatch.core.detectors._base import Finding


def _finding(key: str, count: int) -> Finding:
    return Finding(pattern="cycle", count=count, key=key, loop_start=0, reason="r", blockable=True)


def test_ladder_validation_names_the_problem() -> None:
    with pytest.raises(ValueError, match="strictly increase"):
        Ladder.of(nudge=(3, 3))
    with pytest.raises(ValueError, match="de-escalate"):
        Ladder((Rung(2, "block"), Rung(3, "nudge")))
    with pytest.raises(ValueError, match="restrike"):
        Ladder.of(nudge=3, restrike=0)
    with pytest.raises(ValueError, match="nudge, block or stop"):
        Rung(1, "ok")  # type: ignore[arg-type]


def test_one_nudge_per_level_per_streak() -> None:
    ladder, state = Ladder.of(nudge=3, block=5), LadderState()
    actions = [decide(ladder, state, _finding("a", n), n) for n in range(1, 7)]
    assert [d.action if d else None for d in actions] == [None, None, "nudge", None, "block", "block"]


def test_a_new_streak_soon_after_a_warning_is_a_second_strike() -> None:
    ladder, state = Ladder.of(nudge=3, restrike=10), LadderState()
    first = decide(ladder, state, _finding("a", 3), 10)
    assert first is not None and first.action == "nudge"
    second = decide(ladder, state, _finding("b", 3), 18)
    assert second is not None and second.action == "stop"
    assert second.level == 2


def test_a_new_streak_long_after_the_warning_starts_over() -> None:
    ladder, state = Ladder.of(nudge=3, restrike=10), LadderState()
    decide(ladder, state, _finding("a", 3), 10)
    later = decide(ladder, state, _finding("b", 3), 40)
    assert later is not None and later.action == "nudge"


def test_without_restrike_a_new_streak_is_only_nudged() -> None:
    ladder, state = Ladder.of(nudge=3), LadderState()
    decide(ladder, state, _finding("a", 3), 10)
    again = decide(ladder, state, _finding("b", 3), 12)
    assert again is not None and again.action == "nudge"


def _two_text_loops(guard: Guard) -> tuple[list[Verdict], list[Verdict]]:
    looping = "I will check the configuration file and then update the settings accordingly now."
    other = "I will check the configuration file and then update the settings accordingly later today."
    first = [guard.observe("s", Message("assistant", f"{looping} Attempt {i}.")) for i in range(4)]
    guard.observe("s", Message("assistant", "Something entirely different about deployment windows and DNS."))
    second = [guard.observe("s", Message("assistant", f"{other} Try {i}.")) for i in range(12)]
    return first, second


def test_default_only_nudges_text_loops_however_often_they_come_back() -> None:
    """Similar text is similarity, not hard evidence: the default nudges it and never blocks or stops it."""
    first, second = _two_text_loops(Guard(clock=None))
    assert first[-1].action == "nudge" and first[-1].pattern == "similar_text"
    assert {v.action for v in first + second} <= {"ok", "nudge"}


def test_restrike_stops_a_second_text_loop_when_a_policy_allows_it() -> None:
    """Without hard_evidence a ladder's restrike turns a second streak right after a warning into a stop."""
    policy = preset("default").replace(
        hard_evidence=False, ladders={"similar_text": Ladder.of(nudge=3, stop=8, restrike=15)}
    )
    first, second = _two_text_loops(Guard(policy=policy, clock=None))
    assert not any(v.action == "stop" for v in first)
    stop = next(v for v in second if v.action == "stop")
    assert "warning did not help" in (stop.reason or "")


def test_the_more_specific_rule_wins_a_tie() -> None:
    guard = Guard(clock=None)
    verdicts = []
    for line in (4312, 4327, 4342):
        verdicts.append(guard.observe("s", ToolCall("bash", {"command": "cd srcc"})))
        verdicts.append(guard.observe("s", ToolResult(f"bash: line {line}: cd: srcc: No such file or directory")))
    fired = [v for v in verdicts if not v.ok]
    assert fired and fired[0].pattern == "error_retry"
    assert "No such file or directory" in (fired[0].message or "")


def test_polling_with_changing_results_gets_one_blocking_wait_advice() -> None:
    guard = Guard(clock=None)
    stages = [
        "queued",
        "compiling",
        "linking",
        "testing",
        "packaging",
        "uploading",
        "signing",
        "indexing",
        "mirroring",
        "sorting",
    ]
    stages += ["hashing", "scanning", "pushing", "tagging", "publishing", "notifying"]
    verdicts = []
    for stage in stages:
        verdicts.append(guard.observe("s", ToolCall("bash", {"command": "gh run view 42"})))
        verdicts.append(guard.observe("s", ToolResult(f"status: in progress, now {stage}")))
    assert not any(v.action in ("block", "stop") for v in verdicts)
    nudges = [v for v in verdicts if v.action == "nudge"]
    assert [v.pattern for v in nudges] == ["polling"]
    assert "blocking wait" in (nudges[0].message or "")


def test_talking_with_a_user_is_not_a_monologue() -> None:
    guard = Guard(preset="doom-loop", clock=None)
    guard.observe("s", ToolCall("get_order", {"id": "1"}))
    guard.observe("s", ToolResult('{"status": "shipped"}'))
    verdicts = []
    for turn in range(6):
        verdicts.append(guard.observe("s", Message("assistant", f"Here is update number {turn} on your order.")))
        verdicts.append(guard.observe("s", Message("user", f"Thanks, and what about item {turn}?")))
    assert all(v.ok for v in verdicts)
    alone = [guard.observe("t", ToolCall("ls", {}))] + [
        guard.observe("t", Message("assistant", f"Summary {i}: all good so far.")) for i in range(3)
    ]
    assert alone[-1].action == "nudge" and alone[-1].pattern == "monologue"


def test_moving_counters_and_hex_letter_words_are_progress() -> None:
    """Digits are content: a build whose progress counter moves is not a stale repeat."""
    outputs = [f"compiling module {letter}: {10 * i}% done" for i, letter in enumerate("abcdef")]

    def polls(outputs: list[str]) -> list[str]:
        guard = Guard(clock=None)
        actions = []
        for output in outputs:
            actions.append(guard.observe("s", ToolCall("bash", {"command": "tail -n 1 build.log"})).action)
            actions.append(guard.observe("s", ToolResult(output)).action)
        return actions

    assert set(polls(outputs)) == {"ok"}  # every result differs: polling, nowhere near its nudge
    stale = polls(["compiling module a: 10% done (took 3ms)"] * 6)
    assert "nudge" in stale  # the same status six times over is a stale repeat


def test_waiting_on_a_job_with_the_same_status_is_polling_not_a_loop() -> None:
    """OpenHands#5355: an agent that must keep checking a long job is not stuck while the job runs."""
    guard = Guard(clock=None)
    verdicts = []
    for _ in range(14):
        verdicts.append(guard.observe("s", ToolCall("bash", {"command": "sleep 60 && gh run view 4242"})))
        verdicts.append(guard.observe("s", ToolResult("X build  in_progress  (elapsed 3m)")))
    assert not any(v.action in ("block", "stop") for v in verdicts)
    assert all(v.pattern == "polling" for v in verdicts if not v.ok)
    more = [guard.observe("s", ToolCall("bash", {"command": "sleep 60 && gh run view 4242"})) for _ in range(2)]
    assert any(v.pattern == "polling" and v.action == "nudge" for v in more)
    assert "blocking wait" in next(v.message for v in more if not v.ok)


def test_the_same_plain_call_with_the_same_result_is_a_loop() -> None:
    guard = Guard(clock=None)
    actions = []
    for _ in range(6):
        actions.append(guard.observe("s", ToolCall("bash", {"command": "gh api repos/o/r/issues/7"})).action)
        guard.observe("s", ToolResult('{"state": "open"}'))
    assert "block" in actions
