"""The five seed presets walked through their seed documents' own examples and rules.

Seeds (``../shared/seeds/``): 000 Jaccard turn similarity (``jaccard-turns``), 001 call-signature cycles
(``call-cycles``), 002 Ralph's fuzzy outputs and SafetyGuard limits (``ralph``), 003 doom-loop fingerprints
(``doom-loop``), 004 behavioural 20-action window (``behavioral``).

Where the implementation diverges from its seed the test documents the seed's behaviour and is marked
``xfail(strict=True, reason="BUG: ...")`` (none at the moment).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz

import loopwatch
from loopwatch import (
    LOOP_DETECTED,
    PRESETS,
    Guard,
    Message,
    Reset,
    ToolCall,
    ToolResult,
    UnknownPresetError,
    Usage,
    Verdict,
    preset,
)
from loopwatch.core._fingerprint import bash_file_read, normalized_args, primary_fingerprint
from loopwatch.core._policy import LadderState, decide
from loopwatch.core._similarity import fuzz_ratio, jaccard_tokens, jaccard_ws
from loopwatch.core.detectors._base import Finding

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- helpers -------------------------------------------------------------------------------------------


def make(name: str) -> Guard:
    """A guard on preset ``name`` with no wall clock (runtime comes from events' ``ts`` only)."""
    return Guard(name, clock=None, on_error="raise")


def feed(guard: Guard, session: str, events: Iterable[Any], **kwargs: Any) -> list[Verdict]:
    return [guard.observe(session, event, **kwargs) for event in events]


def actions(verdicts: Sequence[Verdict]) -> list[str]:
    return [v.action for v in verdicts]


def say(*texts: str) -> list[Message]:
    return [Message("assistant", text) for text in texts]


def detector_state(guard: Guard, session: str, position: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = guard.snapshot(session)["state"]["detectors"][position]
    return state


def until_stop(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts up to and including the first stop (a stop is sticky after that)."""
    out: list[Verdict] = []
    for verdict in verdicts:
        out.append(verdict)
        if verdict.action == "stop":
            break
    return out


# Mutually dissimilar turns (Jaccard 0 with each other and with the seed's examples).
DISTINCT_TURNS = (
    "alpha bravo charlie",
    "delta echo foxtrot",
    "golf hotel india",
    "juliet kilo lima",
    "mike november oscar",
    "papa quebec romeo",
    "sierra tango uniform",
)

# Mutually dissimilar outputs for Ralph (pairwise fuzzy ratio well below 0.9).
DISTINCT_OUTPUTS = (
    "Let me check the database for user information...",
    "Compiling the project with optimisations turned on.",
    "All unit tests passed; moving to the integration suite.",
    "Refactoring the payment module into smaller functions.",
    "Writing documentation for the public API endpoints.",
    "Deploying the staging build to the cluster now.",
    "Reviewing the pull request comments from yesterday.",
)


# =====================================================================================================
# presets in general
# =====================================================================================================


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_a_guard(name: str) -> None:
    guard = make(name)
    assert guard.policy.name == name
    assert guard.policy.detectors, f"preset {name} has no detectors"
    assert guard.observe("s", ToolCall("read_file", {"path": "a.py"})).action == "ok"


def test_the_five_seed_presets_exist() -> None:
    assert {"jaccard-turns", "call-cycles", "ralph", "doom-loop", "behavioral"} <= set(PRESETS)


def test_unknown_preset_raises_naming_the_choices() -> None:
    with pytest.raises(UnknownPresetError) as info:
        preset("nope")
    text = str(info.value)
    assert "'nope'" in text
    for name in PRESETS:
        assert name in text
    assert info.value.field == "preset"
    assert isinstance(info.value, loopwatch.ConfigError)


def test_unknown_preset_in_guard_raises() -> None:
    with pytest.raises(UnknownPresetError):
        Guard("nope")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("jaccard-turns", ["SimilarTextDetector(metric='jaccard', threshold=0.85, window=5"]),
        (
            "call-cycles",
            ["CycleDetector(max_period=3, min_period=1, result_aware=False, loose=False, polls_exempt=False)"],
        ),
        ("ralph", ["SimilarTextDetector(metric='fuzz', threshold=0.9, window=5", "max_iterations(100)"]),
        (
            "doom-loop",
            ["DoomLoopDetector(threshold=3, fuzzy_threshold=4, window=10)", "TestFixDetector", "SwarmDetector"],
        ),
        ("behavioral", ["BehavioralDetector(threshold=0.75, window=20)"]),
    ],
)
def test_policy_repr_names_the_detectors(name: str, expected: list[str]) -> None:
    text = repr(make(name).policy)
    assert f"name={name!r}" in text
    for part in expected:
        assert part in text


def test_ralph_repr_names_all_four_limits() -> None:
    text = repr(make("ralph").policy)
    for part in ("max_iterations(100)", "max_runtime(14400)", "max_cost(10.0", "max_consecutive_failures(5)"):
        assert part in text


# =====================================================================================================
# the jaccard-turns preset: Jaccard turn similarity (jaccard-turns)
# =====================================================================================================

SEED000_A = "check price and decide trade"


def seed000_warning(count: int) -> str:
    return f"Loop warning: {count} consecutive similar turns. VP will be notified."


def seed000_termination(count: int) -> str:
    return f"Loop detected: {count} consecutive similar turns (>0.85 similarity). Session will be terminated."


def test_seed000_worked_example_turn_b_is_0_50() -> None:
    assert jaccard_tokens(SEED000_A, "check current price and make trade decision") == pytest.approx(0.50)


def test_seed000_worked_example_turn_c_is_0_833() -> None:
    assert jaccard_tokens(SEED000_A, "check price and decide trade action") == pytest.approx(5 / 6)


def test_seed000_worked_example_turn_d_is_0_833() -> None:
    assert jaccard_tokens(SEED000_A, "check price and decide on trade") == pytest.approx(5 / 6)


def test_seed000_similarity_is_case_insensitive_and_zero_for_empty() -> None:
    assert jaccard_tokens("Check PRICE", "check price") == 1.0
    assert jaccard_tokens("", "check") == 0.0
    assert jaccard_tokens("check", "") == 0.0
    assert jaccard_tokens("   ", "   ") == 0.0


def test_seed000_worked_examples_below_threshold_do_not_count() -> None:
    guard = make("jaccard-turns")
    feed(guard, "s", say(SEED000_A, "check price and decide trade action"))
    assert detector_state(guard, "s")["consecutive"] == 0


def test_seed000_threshold_is_inclusive() -> None:
    """``max_similarity >= SIMILARITY_THRESHOLD``: exactly 0.85 counts as similar."""
    shared = [f"w{i}" for i in range(17)]
    a = " ".join([*shared, "only_a"])
    b = " ".join([*shared, "only_b1", "only_b2"])
    assert jaccard_tokens(a, b) == 0.85
    guard = make("jaccard-turns")
    feed(guard, "s", say(a, b))
    assert detector_state(guard, "s")["consecutive"] == 1


def test_seed000_first_turn_always_passes() -> None:
    guard = make("jaccard-turns")
    verdict = guard.observe("s", Message("assistant", SEED000_A))
    assert verdict.action == "ok"
    state = detector_state(guard, "s")
    assert state["consecutive"] == 0
    assert len(state["history"]) == 1


def test_seed000_identical_turn_counts_as_similar() -> None:
    guard = make("jaccard-turns")
    feed(guard, "s", say(SEED000_A, SEED000_A))
    assert detector_state(guard, "s")["consecutive"] == 1


def test_seed000_three_similar_turns_warn_with_the_seed_text() -> None:
    guard = make("jaccard-turns")
    verdicts = feed(guard, "s", say(*[SEED000_A] * 4))
    assert actions(verdicts[:3]) == ["ok", "ok", "ok"]
    warning = verdicts[3]
    assert warning.action == "nudge"
    assert warning.count == 3
    assert warning.message == seed000_warning(3) == "Loop warning: 3 consecutive similar turns. VP will be notified."
    assert warning.reason == seed000_warning(3)
    assert warning.pattern == "similar_text"
    assert warning.detector is not None and warning.detector.startswith("SimilarTextDetector(")


def test_seed000_four_similar_turns_still_warn() -> None:
    guard = make("jaccard-turns")
    verdict = feed(guard, "s", say(*[SEED000_A] * 5))[-1]
    assert verdict.action == "nudge"
    assert verdict.count == 4
    assert verdict.message == seed000_warning(4)


def test_seed000_five_similar_turns_terminate_with_the_seed_reason() -> None:
    guard = make("jaccard-turns")
    verdict = feed(guard, "s", say(*[SEED000_A] * 6))[-1]
    assert verdict.action == "stop"
    assert verdict.count == 5
    assert verdict.status == LOOP_DETECTED
    assert verdict.reason == seed000_termination(5)
    assert verdict.message == seed000_termination(5)


def test_seed000_termination_is_final_until_reset() -> None:
    """The broker does not let the agent issue one more turn; reset_session() clears the history."""
    guard = make("jaccard-turns")
    feed(guard, "s", say(*[SEED000_A] * 6))
    after = guard.observe("s", Message("assistant", "something entirely new"))
    assert after.action == "stop"
    guard.reset("s")
    assert detector_state(guard, "s")["history"] == []
    # after reset_session the first turn passes again, even if it repeats the old loop
    assert guard.observe("s", Message("assistant", SEED000_A)).action == "ok"
    assert detector_state(guard, "s")["consecutive"] == 0


def test_seed000_reset_event_clears_the_session() -> None:
    guard = make("jaccard-turns")
    feed(guard, "s", say(*[SEED000_A] * 3))
    guard.observe("s", Reset())
    verdicts = feed(guard, "s", say(*[SEED000_A] * 3))
    assert actions(verdicts) == ["ok", "ok", "ok"]


def test_seed000_dissimilar_turn_resets_the_counter() -> None:
    """3 similar turns, 1 dissimilar turn, 2 more similar turns: not looping, no warning."""
    guard = make("jaccard-turns")
    verdicts = feed(guard, "s", say(SEED000_A, SEED000_A, SEED000_A, "golf hotel india", SEED000_A, SEED000_A))
    assert actions(verdicts) == ["ok"] * 6
    assert detector_state(guard, "s")["consecutive"] == 2
    # the counter restarted after the gap: the warning comes at the third similar turn after it
    nxt = guard.observe("s", Message("assistant", SEED000_A))
    assert nxt.action == "nudge"
    assert nxt.count == 3


def test_seed000_alternating_states_are_caught_by_the_window() -> None:
    """A, B, A, B...: each turn is compared with all of the last 5, so the alternation is caught."""
    a, b = "I need more information", "Let me check the data"
    assert jaccard_tokens(a, b) == 0.0
    guard = make("jaccard-turns")
    verdicts = feed(guard, "s", say(a, b, a, b, a, b, a))
    assert actions(verdicts[:4]) == ["ok"] * 4
    assert verdicts[4].action == "nudge"
    assert verdicts[4].count == 3
    assert verdicts[6].action == "stop"
    assert verdicts[6].count == 5


def test_seed000_window_is_the_last_five_turns() -> None:
    """A turn similar only to the 6th-last turn is not similar; one similar to the 5th-last is."""
    guard = make("jaccard-turns")
    feed(guard, "six", say(SEED000_A, *DISTINCT_TURNS[:5], SEED000_A))
    assert detector_state(guard, "six")["consecutive"] == 0

    feed(guard, "five", say(SEED000_A, *DISTINCT_TURNS[:4], SEED000_A))
    assert detector_state(guard, "five")["consecutive"] == 1


def test_seed000_sessions_are_isolated() -> None:
    guard = make("jaccard-turns")
    looping: list[Verdict] = []
    healthy: list[Verdict] = []
    for i in range(4):
        looping.append(guard.observe("loop", Message("assistant", SEED000_A)))
        healthy.append(guard.observe("ok", Message("assistant", DISTINCT_TURNS[i])))
    assert actions(looping) == ["ok", "ok", "ok", "nudge"]
    assert actions(healthy) == ["ok"] * 4
    assert detector_state(guard, "ok")["consecutive"] == 0
    # a session saying what the other one said starts from its own (empty) history
    assert guard.observe("fresh", Message("assistant", SEED000_A)).action == "ok"


def test_seed000_history_is_capped_at_50_per_session() -> None:
    guard = make("jaccard-turns")
    turns = [f"unique{i}a unique{i}b unique{i}c" for i in range(60)]
    verdicts = feed(guard, "s", say(*turns))
    assert actions(verdicts) == ["ok"] * 60
    history = detector_state(guard, "s")["history"]
    assert len(history) == 50
    # the oldest 10 fell off: the first one kept is turn 10
    assert sorted(history[0]) == ["unique10a", "unique10b", "unique10c"]
    assert sorted(history[-1]) == ["unique59a", "unique59b", "unique59c"]


def test_seed000_user_messages_are_not_turns() -> None:
    guard = make("jaccard-turns")
    verdicts = feed(guard, "s", [Message("user", SEED000_A)] * 6)
    assert actions(verdicts) == ["ok"] * 6
    assert detector_state(guard, "s")["history"] == []


def _seed000_check_turn(texts: Sequence[str]) -> list[tuple[str, int]]:
    """The jaccard-turns preset's check_turn() as printed, with the broker's warn / terminate responses."""

    def similarity(a: str, b: str) -> float:
        if not a or not b:
            return 0.0
        tokens_a, tokens_b = set(a.lower().split()), set(b.lower().split())
        if not tokens_a or not tokens_b:
            return 0.0
        return len(tokens_a & tokens_b) / len(tokens_a | tokens_b)

    history: list[str] = []
    consecutive = 0
    out: list[tuple[str, int]] = []
    for text in texts:
        if not history:
            history.append(text)
            out.append(("ok", 0))
            continue
        best = max(similarity(prev, text) for prev in history[-5:])
        history.append(text)
        history = history[-50:]
        consecutive = consecutive + 1 if best >= 0.85 else 0
        if consecutive >= 5:
            out.append(("stop", consecutive))
            break
        out.append(("nudge" if consecutive >= 3 else "ok", consecutive if consecutive >= 3 else 0))
    return out


SEED000_VOCAB = (
    SEED000_A,
    "check price and decide trade action",
    "check current price and make trade decision",
    "I need more information",
    "Let me check the data",
    "CHECK PRICE AND DECIDE TRADE",
    "",
    "   ",
    "golf hotel india",
)


@PROPERTY
@given(st.lists(st.sampled_from(SEED000_VOCAB), max_size=25))
def test_seed000_matches_the_seed_algorithm(texts: list[str]) -> None:
    guard = make("jaccard-turns")
    got = until_stop(feed(guard, "s", say(*texts)))
    expected = _seed000_check_turn(texts)
    assert [(v.action, v.count) for v in got] == expected
    for verdict in got:
        if verdict.action == "nudge":
            assert verdict.reason == seed000_warning(verdict.count)
        if verdict.action == "stop":
            assert verdict.reason == seed000_termination(verdict.count)


# =====================================================================================================
# the call-cycles preset: call-signature cycles (call-cycles)
# =====================================================================================================

READ_AUTH = ToolCall("read_file", {"path": "src/auth.py"})
EDIT_AUTH = ToolCall("edit_file", {"path": "src/auth.py", "old": "a", "new": "b"})
RUN_TESTS = ToolCall("run_tests", {})


def test_seed001_warning_is_injected_as_a_user_message() -> None:
    assert make("call-cycles").policy.nudge_role == "user"


def test_seed001_one_call_cycle_detected_on_the_second_identical_call() -> None:
    guard = make("call-cycles")
    first, second = feed(guard, "s", [READ_AUTH, READ_AUTH])
    assert first.action == "ok"
    assert second.action == "nudge"
    assert second.pattern == "cycle"
    assert second.level == 1
    assert second.message is not None
    assert second.message.startswith("⚠️ Loop detected: You appear to be repeating the same sequence of tool calls")
    assert "The following pattern has repeated 2 times:" in second.message
    assert '  1. read_file({"path":"src/auth.py"})' in second.message
    assert "Please try a different approach. Consider:" in second.message
    assert "- Re-reading error messages more carefully" in second.message
    assert "- Breaking the problem into smaller steps" in second.message


def test_seed001_two_call_cycle_detected_on_the_fourth_call() -> None:
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [EDIT_AUTH, RUN_TESTS, EDIT_AUTH, RUN_TESTS])
    assert actions(verdicts) == ["ok", "ok", "ok", "nudge"]
    message = verdicts[3].message or ""
    assert "The following pattern has repeated 2 times:" in message
    assert "  1. edit_file(" in message
    assert "  2. run_tests(" in message
    assert message.index("  1. edit_file(") < message.index("  2. run_tests(")
    assert verdicts[3].evidence["period"] == 2


def test_seed001_three_call_cycle_detected_on_the_sixth_call() -> None:
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [READ_AUTH, EDIT_AUTH, RUN_TESTS] * 2)
    assert actions(verdicts) == ["ok"] * 5 + ["nudge"]
    message = verdicts[5].message or ""
    assert "The following pattern has repeated 2 times:" in message
    assert "  1. read_file(" in message
    assert "  2. edit_file(" in message
    assert "  3. run_tests(" in message
    assert verdicts[5].evidence["period"] == 3


def test_seed001_four_call_cycles_are_not_among_the_three_patterns() -> None:
    calls = [ToolCall(f"tool_{c}", {}) for c in "abcd"]
    guard = make("call-cycles")
    assert actions(feed(guard, "s", calls * 3)) == ["ok"] * 12


def test_seed001_escalation_warn_warn_harder_then_stop() -> None:
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [READ_AUTH] * 4)
    first, second, third = verdicts[1], verdicts[2], verdicts[3]
    assert (first.action, first.level) == ("nudge", 1)
    assert (second.action, second.level) == ("nudge", 2)
    assert second.message is not None and first.message is not None
    assert second.message != first.message
    assert "again" in second.message
    assert "alternatives" in second.message.lower()
    assert "  1. read_file(" in second.message
    assert third.action == "stop"
    assert third.status == LOOP_DETECTED == "LOOP_DETECTED"
    assert third.level == 3


def test_seed001_two_call_cycle_escalates_on_each_further_detection() -> None:
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [EDIT_AUTH, RUN_TESTS] * 3)
    assert actions(verdicts) == ["ok", "ok", "ok", "nudge", "nudge", "stop"]
    assert [v.level for v in verdicts[3:]] == [1, 2, 3]
    assert verdicts[5].status == LOOP_DETECTED


def test_seed001_same_pattern_detected_again_after_a_break_is_the_second_detection() -> None:
    other = ToolCall("list_dir", {"path": "."})
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [READ_AUTH, READ_AUTH, other, READ_AUTH, READ_AUTH])
    assert actions(verdicts) == ["ok", "nudge", "ok", "ok", "nudge"]
    assert verdicts[1].level == 1
    assert verdicts[4].level == 2


def test_seed001_a_different_pattern_starts_with_the_first_warning() -> None:
    other = ToolCall("list_dir", {"path": "."})
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [READ_AUTH, READ_AUTH, other, other])
    assert (verdicts[1].action, verdicts[1].level) == ("nudge", 1)
    assert (verdicts[3].action, verdicts[3].level) == ("nudge", 1)
    assert "  1. list_dir(" in (verdicts[3].message or "")


def test_seed001_running_tests_after_different_edits_is_not_a_cycle() -> None:
    events: list[ToolCall] = []
    for i in range(5):
        events.append(ToolCall("edit_file", {"path": "src/auth.py", "old": f"v{i}", "new": f"v{i + 1}"}))
        events.append(RUN_TESTS)
    guard = make("call-cycles")
    assert actions(feed(guard, "s", events)) == ["ok"] * 10


def test_seed001_reading_multiple_files_in_sequence_is_not_a_cycle() -> None:
    guard = make("call-cycles")
    calls = [ToolCall("read_file", {"path": f"src/mod{i}.py"}) for i in range(8)]
    assert actions(feed(guard, "s", calls)) == ["ok"] * 8


def test_seed001_signature_ignores_key_order() -> None:
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [ToolCall("t", {"a": 1, "b": 2}), ToolCall("t", {"b": 2, "a": 1})])
    assert actions(verdicts) == ["ok", "nudge"]


def test_seed001_signature_never_includes_the_call_id() -> None:
    guard = make("call-cycles")
    verdicts = feed(
        guard,
        "s",
        [ToolCall("read_file", {"path": "a.py"}, id="call-1"), ToolCall("read_file", {"path": "a.py"}, id="call-2")],
    )
    assert actions(verdicts) == ["ok", "nudge"]


def test_seed001_signature_includes_the_arguments_and_the_tool() -> None:
    guard = make("call-cycles")
    verdicts = feed(
        guard,
        "s",
        [
            ToolCall("read_file", {"path": "a.py"}),
            ToolCall("read_file", {"path": "b.py"}),
            ToolCall("view_file", {"path": "b.py"}),
        ],
    )
    assert actions(verdicts) == ["ok", "ok", "ok"]


def test_seed001_results_in_between_do_not_hide_the_cycle() -> None:
    """The seed's signature is the call only: changing outputs do not break the repetition."""
    guard = make("call-cycles")
    verdicts = feed(guard, "s", [READ_AUTH, ToolResult("v1", tool="read_file"), READ_AUTH])
    assert actions(verdicts) == ["ok", "ok", "nudge"]


def _seed001_detected(signatures: Sequence[str]) -> list[bool]:
    """The call-cycles preset's three checks after each call."""
    out: list[bool] = []
    for n in range(len(signatures)):
        s = signatures[: n + 1]
        one = n >= 1 and s[-1] == s[-2]
        two = n >= 3 and s[-1] == s[-3] and s[-2] == s[-4]
        three = n >= 5 and s[-3:] == s[-6:-3]
        out.append(one or two or three)
    return out


@PROPERTY
@given(st.lists(st.sampled_from("ABC"), max_size=30))
def test_seed001_detects_exactly_the_seed_cycles(letters: list[str]) -> None:
    guard = make("call-cycles")
    verdicts = until_stop(feed(guard, "s", [ToolCall("tool", {"arg": letter}) for letter in letters]))
    expected = _seed001_detected(letters)[: len(verdicts)]
    assert [v.action != "ok" for v in verdicts] == expected


# =====================================================================================================
# the ralph preset: Ralph's fuzzy outputs and SafetyGuard limits (ralph)
# =====================================================================================================


def seed002_ratio(a: str, b: str) -> float:
    return fuzz.ratio(a, b) / 100.0


def test_seed002_fuzz_ratio_is_rapidfuzz_ratio() -> None:
    a, b = DISTINCT_OUTPUTS[0], "Checking the database for user information..."
    assert fuzz_ratio(a, b) == pytest.approx(seed002_ratio(a, b))


def test_seed002_document_example_pair_is_not_a_loop() -> None:
    """The seed claims outputs[0] vs outputs[2] score "~0.91 ... LOOP DETECTED".

    rapidfuzz actually scores the pair 0.872 (below 0.9), and the seed's algorithm (ratio >= 0.9) rules, so
    the example is *not* a loop.
    """
    outputs = [
        "Let me check the database for user information...",
        "I'll query the database to find the user data...",
        "Checking the database for user information...",
    ]
    assert seed002_ratio(outputs[0], outputs[2]) == pytest.approx(0.872, abs=0.001)
    assert fuzz_ratio(outputs[0], outputs[2]) < 0.9
    guard = make("ralph")
    assert actions(feed(guard, "s", say(*outputs))) == ["ok", "ok", "ok"]


def test_seed002_similar_output_stops_with_the_seed_log_text() -> None:
    first = "Checking the database for user information..."
    again = "Checking the database for user information!!!"
    ratio = seed002_ratio(first, again)
    assert ratio >= 0.9
    guard = make("ralph")
    verdicts = feed(guard, "s", say(first, again))
    assert verdicts[0].action == "ok"
    stop = verdicts[1]
    assert stop.action == "stop"
    assert stop.status == LOOP_DETECTED
    assert stop.reason == f"Loop detected: {ratio:.1%} similarity to previous output"
    assert re.fullmatch(r"Loop detected: \d+\.\d% similarity to previous output", stop.message or "")


def test_seed002_threshold_is_inclusive() -> None:
    a, b = "aaaaaaaaaa", "aaaaaaaaab"
    assert seed002_ratio(a, b) == 0.9
    guard = make("ralph")
    assert actions(feed(guard, "s", say(a, b))) == ["ok", "stop"]


def test_seed002_first_output_never_loops() -> None:
    guard = make("ralph")
    assert guard.observe("s", Message("assistant", DISTINCT_OUTPUTS[0])).action == "ok"


def test_seed002_similar_to_the_fifth_last_output_is_a_loop() -> None:
    guard = make("ralph")
    verdicts = feed(guard, "s", say(*DISTINCT_OUTPUTS[:5], DISTINCT_OUTPUTS[0]))
    assert actions(verdicts) == ["ok"] * 5 + ["stop"]


def test_seed002_similar_only_to_the_sixth_last_output_is_not_a_loop() -> None:
    """The window is a deque(maxlen=5): the 6th-last output has been evicted."""
    guard = make("ralph")
    verdicts = feed(guard, "s", say(*DISTINCT_OUTPUTS[:6], DISTINCT_OUTPUTS[0]))
    assert actions(verdicts) == ["ok"] * 7
    assert len(detector_state(guard, "s")["history"]) == 5


def test_seed002_loop_stop_is_final() -> None:
    guard = make("ralph")
    feed(guard, "s", say("same output here", "same output here"))
    assert guard.observe("s", Message("assistant", DISTINCT_OUTPUTS[3])).action == "stop"


RALPH_VOCAB = (*DISTINCT_OUTPUTS[:4], "Checking the database for user information...", "aaaaaaaaaa", "aaaaaaaaab")


@PROPERTY
@given(st.lists(st.sampled_from(RALPH_VOCAB), max_size=20))
def test_seed002_matches_the_seed_algorithm(outputs: list[str]) -> None:
    recent: deque[str] = deque(maxlen=5)
    expected: list[str] = []
    for output in outputs:
        if any(seed002_ratio(prev, output) >= 0.9 for prev in recent):
            expected.append("stop")
            break
        expected.append("ok")
        recent.append(output)
    guard = make("ralph")
    assert actions(until_stop(feed(guard, "s", say(*outputs)))) == expected


def test_seed002_iteration_limit_100() -> None:
    guard = make("ralph")
    verdicts = feed(guard, "s", [ToolCall("bash", {"command": f"step {i}"}) for i in range(100)])
    assert actions(verdicts[:99]) == ["ok"] * 99
    assert verdicts[99].action == "stop"
    assert verdicts[99].status == "MAX_ITERATIONS"
    assert verdicts[99].pattern == "limit"
    # the run has exited
    assert guard.observe("s", ToolCall("bash", {"command": "one more"})).status == "MAX_ITERATIONS"


def test_seed002_assistant_outputs_count_as_iterations() -> None:
    guard = make("ralph")
    assert actions(feed(guard, "s", [ToolCall("bash", {"command": f"step {i}"}) for i in range(98)])) == ["ok"] * 98
    verdicts = feed(guard, "s", say("alpha bravo charlie delta", "the quick brown fox jumps"))
    assert verdicts[0].action == "ok"
    assert (verdicts[1].action, verdicts[1].status) == ("stop", "MAX_ITERATIONS")


def test_seed002_runtime_limit_4_hours() -> None:
    guard = make("ralph")
    first = guard.observe("s", ToolCall("bash", {"command": "start"}, ts=0))
    under = guard.observe("s", ToolCall("bash", {"command": "still going"}, ts=4 * 3600 - 1))
    over = guard.observe("s", ToolCall("bash", {"command": "too late"}, ts=4 * 3600))
    assert (first.action, under.action) == ("ok", "ok")
    assert over.action == "stop"
    assert over.status == "MAX_RUNTIME"


def test_seed002_cost_limit_10_dollars_without_an_early_warning() -> None:
    guard = make("ralph")
    below = guard.observe("s", Usage(cost=9.5))
    assert below.action == "ok", "the ralph preset has no 80% warning"
    reached = guard.observe("s", Usage(cost=0.5))
    assert reached.action == "stop"
    assert reached.status == "MAX_COST"


def test_seed002_five_consecutive_failures_stop() -> None:
    guard = make("ralph")
    verdicts: list[Verdict] = []
    for i in range(5):
        verdicts.append(guard.observe("s", ToolCall("bash", {"command": f"attempt {i}"})))
        verdicts.append(guard.observe("s", ToolResult("error: it broke", is_error=True)))
    assert actions(verdicts[:-1]) == ["ok"] * 9
    assert verdicts[-1].action == "stop"
    assert verdicts[-1].status == "MAX_CONSECUTIVE_FAILURES"


def test_seed002_a_success_resets_the_failure_count() -> None:
    guard = make("ralph")
    outcomes = [True] * 4 + [False] + [True] * 4
    verdicts: list[Verdict] = []
    for i, failed in enumerate(outcomes):
        verdicts.append(guard.observe("s", ToolCall("bash", {"command": f"attempt {i}"})))
        verdicts.append(guard.observe("s", ToolResult("boom" if failed else "fine", exit_code=1 if failed else 0)))
    assert actions(verdicts) == ["ok"] * len(verdicts)
    guard.observe("s", ToolCall("bash", {"command": "attempt 9"}))
    fifth = guard.observe("s", ToolResult("boom", exit_code=1))
    assert (fifth.action, fifth.status) == ("stop", "MAX_CONSECUTIVE_FAILURES")


# =====================================================================================================
# the doom-loop preset: doom-loop fingerprints (doom-loop)
# =====================================================================================================

READ_A = ToolCall("read_file", {"path": "a.py"})


def seed003_initial(tool: str, count: int) -> str:
    return (
        f"[System] You've called {tool} with the same arguments {count} times.\n"
        "This indicates a stuck state. Either:\n"
        "1. Try a DIFFERENT approach or tool\n"
        "2. If blocked, explain what's preventing progress\n"
        "3. If the task is complete, say so explicitly"
    )


def seed003_warning(tool: str, count: int) -> str:
    return (
        f"[System] WARNING: You've called {tool} {count} times with identical arguments.\n"
        "This is a stuck state.\n"
        "1. Try a DIFFERENT approach or tool\n"
        "2. If blocked, explain the blocker"
    )


def seed003_critical(tool: str, count: int) -> str:
    return (
        f"[System] CRITICAL: You've called {tool} with the same arguments {count} times.\n"
        "You are in a doom loop. You MUST:\n"
        f"1. STOP calling {tool} immediately\n"
        "2. Explain what you're stuck on\n"
        "3. Try a completely different approach\n"
        "Further identical calls will be rejected."
    )


def test_seed003_exact_threshold_3_initial_nudge() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A] * 3)
    assert actions(verdicts) == ["ok", "ok", "nudge"]
    assert verdicts[2].level == 1
    assert verdicts[2].count == 3
    assert verdicts[2].message == seed003_initial("read_file", 3)
    assert "You've called read_file with the same arguments 3 times" in (verdicts[2].message or "")


def test_seed003_escalating_nudges_then_rejection() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A] * 8)
    assert actions(verdicts) == ["ok", "ok", "nudge", "nudge", "ok", "nudge", "block", "block"]
    assert verdicts[3].level == 2
    assert verdicts[3].message == seed003_warning("read_file", 4)
    # 5: the warning level was already given (one nudge per level)
    assert verdicts[4].message is None
    assert verdicts[5].level == 3
    assert verdicts[5].message == seed003_critical("read_file", 6)
    assert "Further identical calls will be rejected." in (verdicts[5].message or "")
    for blocked, count in ((verdicts[6], 7), (verdicts[7], 8)):
        assert blocked.count == count
        assert blocked.message is not None and "read_file" in blocked.message
        assert blocked.status is None  # a refusal, not the end of the run


def test_seed003_the_window_holds_the_last_10_calls() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A] * 12)
    assert verdicts[9].count == 10
    assert verdicts[11].count == 10
    assert verdicts[11].action == "block"
    assert len(detector_state(guard, "s")["exact"]) == 10


def test_seed003_a_different_call_ends_the_streak() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A, READ_A, ToolCall("list_dir", {"path": "."}), READ_A, READ_A])
    assert actions(verdicts) == ["ok"] * 5


def test_seed003_a_new_streak_after_a_break_is_nudged_again() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A, READ_A, READ_A, ToolCall("list_dir", {"path": "."}), READ_A, READ_A, READ_A])
    assert verdicts[2].action == "nudge"
    assert verdicts[6].action == "nudge"
    assert verdicts[6].message == seed003_initial("read_file", 3)


def test_seed003_fuzzy_match_counts_from_4() -> None:
    """Calls differing only in non-primary keys share the structural fingerprint: threshold 4, not 3."""
    calls = [ToolCall("read_file", {"path": "a.py", "verbose": i % 2 == 0}) for i in range(5)]
    guard = make("doom-loop")
    verdicts = feed(guard, "s", calls)
    assert actions(verdicts[:3]) == ["ok", "ok", "ok"]
    assert verdicts[3].action == "nudge"
    assert verdicts[3].count == 4
    assert verdicts[3].evidence["match"] == "fuzzy"
    assert "read_file" in (verdicts[3].message or "")


def test_seed003_primary_keys_define_the_structural_fingerprint() -> None:
    base = primary_fingerprint("read_file", {"path": "a.py", "encoding": "utf-8", "timeout": 5})
    assert base == primary_fingerprint("read_file", {"path": "a.py"})
    assert base != primary_fingerprint("read_file", {"path": "b.py"})
    for key in ("path", "file_path", "command", "pattern", "query", "url", "content", "filename", "offset", "limit"):
        assert primary_fingerprint("tool", {key: 1, "extra": 1}) != primary_fingerprint("tool", {key: 2, "extra": 1})


def test_seed003_calls_without_primary_keys_are_not_all_the_same() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [ToolCall("web_search", {"q": f"how to fix error {c}"}) for c in "abcde"])
    assert actions(verdicts) == ["ok"] * 5


def test_seed003_bash_file_reads_share_a_fingerprint() -> None:
    for command in ("cat foo.ts", "head foo.ts", "tail foo.ts", "head -n 20 foo.ts"):
        assert bash_file_read(command) == "foo.ts"
        assert primary_fingerprint("bash", {"command": command}) == "bash:file_read:foo.ts"


@pytest.mark.parametrize("command", ["cat foo.ts | wc -l", "cat foo.ts > out.txt", "cat foo.ts; ls"])
def test_seed003_complex_bash_commands_are_not_normalised(command: str) -> None:
    assert bash_file_read(command) is None
    assert primary_fingerprint("bash", {"command": command}) != "bash:file_read:foo.ts"


def test_seed003_alternating_cat_head_tail_is_a_fuzzy_doom_loop() -> None:
    commands = ["cat foo.ts", "head foo.ts", "tail foo.ts", "cat foo.ts"]
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [ToolCall("bash", {"command": c}) for c in commands])
    assert actions(verdicts) == ["ok", "ok", "ok", "nudge"]
    assert verdicts[3].count == 4
    assert verdicts[3].evidence["match"] == "fuzzy"


def test_seed003_piped_read_is_not_normalised_into_the_loop() -> None:
    commands = ["cat foo.ts", "cat foo.ts | wc -l"] * 3
    guard = make("doom-loop")
    assert actions(feed(guard, "s", [ToolCall("bash", {"command": c}) for c in commands])) == ["ok"] * 6


def test_seed003_reads_of_different_files_are_not_a_loop() -> None:
    commands = ["cat a.ts", "head b.ts", "tail c.ts", "cat d.ts", "cat e.ts"]
    guard = make("doom-loop")
    assert actions(feed(guard, "s", [ToolCall("bash", {"command": c}) for c in commands])) == ["ok"] * 5


PYTEST_X = ToolCall("bash", {"command": "pytest tests/test_x.py"})


def _test_fix_round(i: int, failure: str) -> list[Any]:
    return [
        PYTEST_X,
        ToolResult(failure, is_error=True, exit_code=1),
        ToolCall("edit_file", {"path": "x.py", "content": f"attempt {i}"}),
        ToolResult("ok"),
    ]


def test_seed003_test_fix_rethink_after_3_identical_failures() -> None:
    failure = "FAILED tests/test_x.py::test_a - AssertionError"
    events = [e for i in range(3) for e in _test_fix_round(i, failure)]
    guard = make("doom-loop")
    verdicts = feed(guard, "s", events)
    fired = [(i, v) for i, v in enumerate(verdicts) if v.action != "ok"]
    assert len(fired) == 1
    index, verdict = fired[0]
    assert index == 9  # the result of the third failing test run
    assert verdict.pattern == "test_fix"
    assert verdict.count == 3
    assert verdict.message is not None
    assert verdict.message.startswith("[System] You've had 3 consecutive test failures. Step back and rethink:")
    assert "3. Try a DIFFERENT fix strategy instead of iterating on the same one" in verdict.message


def test_seed003_test_fix_not_when_the_failure_changes() -> None:
    failures = [
        "FAILED tests/test_x.py::test_a - AssertionError: expected one",
        "FAILED tests/test_x.py::test_a - KeyError: 'name'",
        "FAILED tests/test_x.py::test_a - ZeroDivisionError: division by zero",
        "FAILED tests/test_x.py::test_a - TypeError: unsupported operand",
    ]
    events = [e for i, failure in enumerate(failures) for e in _test_fix_round(i, failure)]
    guard = make("doom-loop")
    assert actions(feed(guard, "s", events)) == ["ok"] * len(events)


def test_seed003_test_fix_not_when_the_tests_pass_in_between() -> None:
    failure = "FAILED tests/test_x.py::test_a - AssertionError"
    events = [
        *_test_fix_round(0, failure),
        *_test_fix_round(1, failure),
        PYTEST_X,
        ToolResult("3 passed in 0.1s", is_error=False, exit_code=0),
        *_test_fix_round(2, failure),
        *_test_fix_round(3, failure),
    ]
    guard = make("doom-loop")
    assert actions(feed(guard, "s", events)) == ["ok"] * len(events)


def _failing_bash(commands: Sequence[str], error: str = "No such file or directory") -> list[Any]:
    events: list[Any] = []
    for command in commands:
        events.append(ToolCall("bash", {"command": command}))
        events.append(ToolResult(error, is_error=True, exit_code=1))
    return events


def test_seed003_bash_failure_cascade_with_file_tools_advice() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", _failing_bash(["cat missing.txt", "echo hi > /ro/file", "sed -n 1p nope.txt"]))
    assert actions(verdicts[:5]) == ["ok"] * 5
    cascade = verdicts[5]
    assert cascade.action == "nudge"
    assert cascade.pattern == "failure_streak"
    message = cascade.message or ""
    assert message.startswith("[System] 3 consecutive bash commands have failed")
    for tool in ("read_file", "write_file", "edit_file"):
        assert tool in message


def test_seed003_bash_failure_cascade_without_file_operations() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", _failing_bash(["make build", "npm run build", "cargo build"], "error: build failed"))
    cascade = verdicts[5]
    assert cascade.action == "nudge"
    message = cascade.message or ""
    assert message.startswith("[System] 3 consecutive bash commands have failed")
    assert "write_file" not in message


def test_seed003_bash_failure_cascade_reset_by_a_success() -> None:
    events = [
        *_failing_bash(["cat a.txt", "cat b.txt"]),
        ToolCall("bash", {"command": "ls"}),
        ToolResult("a.txt b.txt", exit_code=0),
        *_failing_bash(["cat c.txt", "cat d.txt"]),
    ]
    guard = make("doom-loop")
    assert actions(feed(guard, "s", events)) == ["ok"] * len(events)


def test_seed003_bash_failure_cascade_counts_bash_only() -> None:
    events: list[Any] = []
    for name in ("a.py", "b.py", "c.py", "d.py"):
        events.append(ToolCall("read_file", {"path": name}))
        events.append(ToolResult("No such file or directory", is_error=True))
    guard = make("doom-loop")
    assert actions(feed(guard, "s", events)) == ["ok"] * len(events)


def test_seed003_summary_loop_after_tools_were_used() -> None:
    guard = make("doom-loop")
    feed(guard, "s", [READ_A, ToolResult("print('hi')")])
    verdicts = feed(guard, "s", say("Here is a summary.", "To recap the work so far.", "Overall status update."))
    assert actions(verdicts) == ["ok", "ok", "nudge"]
    assert verdicts[2].pattern == "monologue"
    message = verdicts[2].message or ""
    assert message.startswith("[System]")
    assert "using tools immediately" in message


def test_seed003_no_summary_loop_before_any_tool_use() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", say("Hello.", "Let me think.", "Here is my plan.", "Starting now."))
    assert actions(verdicts) == ["ok"] * 4


def test_seed003_a_tool_call_ends_the_summary_loop() -> None:
    guard = make("doom-loop")
    events = [READ_A, *say("one summary", "two summary"), ToolCall("list_dir", {"path": "."}), *say("three", "four")]
    assert actions(feed(guard, "s", events)) == ["ok"] * len(events)


def _swarm_calls(guard: Guard, n: int, *, swarms: Sequence[str] = ("swarm-1",), workers: bool = True) -> list[Verdict]:
    verdicts: list[Verdict] = []
    for i in range(n):
        worker = f"w{i % 2 + 1}"
        call = ToolCall("read_file", {"path": "a.py"}, worker=worker if workers else None)
        verdicts.append(guard.observe(f"session-{worker}", call, swarm=swarms[i % len(swarms)]))
    return verdicts


def test_seed003_global_doom_loop_across_two_workers() -> None:
    guard = make("doom-loop")
    verdicts = _swarm_calls(guard, 10)
    assert all(v.pattern != "swarm_repeat" for v in verdicts[:9])
    verdict = verdicts[9]
    assert verdict.action == "nudge"
    assert verdict.pattern == "swarm_repeat"
    assert verdict.count == 10
    assert verdict.message is not None
    assert verdict.message.startswith("[System] GLOBAL DOOM LOOP: 10 calls to read_file across\n2 workers.")
    assert "The entire swarm is stuck on this approach." in verdict.message


def test_seed003_global_doom_loop_across_two_sessions_without_worker_ids() -> None:
    guard = make("doom-loop")
    verdicts = _swarm_calls(guard, 10, workers=False)
    assert verdicts[9].pattern == "swarm_repeat"
    assert verdicts[9].action == "nudge"


def test_seed003_no_global_doom_loop_from_one_worker_alone() -> None:
    guard = make("doom-loop")
    verdicts = [
        guard.observe("solo", ToolCall("read_file", {"path": "a.py"}, worker="w1"), swarm="swarm-1") for _ in range(12)
    ]
    assert all(v.pattern != "swarm_repeat" for v in verdicts)
    assert guard.swarm_snapshot("swarm-1")["counts"]  # the calls were counted, by one worker only


def test_seed003_no_global_doom_loop_across_different_swarms() -> None:
    guard = make("doom-loop")
    verdicts = _swarm_calls(guard, 12, swarms=("swarm-1", "swarm-1", "swarm-2", "swarm-2"))
    assert all(v.pattern != "swarm_repeat" for v in verdicts)


def test_seed003_swarm_counts_survive_snapshot_and_restore() -> None:
    guard = make("doom-loop")
    assert all(v.pattern != "swarm_repeat" for v in _swarm_calls(guard, 9))
    saved = json.loads(json.dumps(guard.swarm_snapshot("swarm-1")))
    (entry,) = saved["counts"].values()
    assert entry[0] == 9
    assert sorted(entry[1]) == ["w1", "w2"]

    restored = make("doom-loop")
    restored.restore_swarm(saved)
    verdict = restored.observe("session-w3", ToolCall("read_file", {"path": "a.py"}, worker="w3"), swarm="swarm-1")
    assert verdict.pattern == "swarm_repeat"
    assert verdict.count == 10
    assert "across\n3 workers" in (verdict.message or "")


def test_seed003_clear_swarm_forgets_the_counts() -> None:
    guard = make("doom-loop")
    _swarm_calls(guard, 9)
    guard.clear_swarm("swarm-1")
    assert guard.swarm_snapshot("swarm-1")["counts"] == {}
    verdicts = _swarm_calls(guard, 8)
    assert all(v.pattern != "swarm_repeat" for v in verdicts)


def test_seed003_session_state_round_trips_through_json() -> None:
    guard = make("doom-loop")
    verdicts = feed(guard, "s", [READ_A] * 3)
    assert verdicts[2].level == 1
    data = json.loads(json.dumps(guard.snapshot("s")))
    assert data["session"] == "s"

    restored = make("doom-loop")
    restored.restore(data)
    after = feed(restored, "s", [READ_A] * 4)
    # detection continues where it left off: 4 -> WARNING, 5 -> nothing new, 6 -> CRITICAL, 7 -> rejected
    assert actions(after) == ["nudge", "ok", "nudge", "block"]
    assert after[0].message == seed003_warning("read_file", 4)
    assert after[2].message == seed003_critical("read_file", 6)
    assert restored.snapshot("s")["state"]["index"] == 7


def test_seed003_restore_under_another_session_name() -> None:
    guard = make("doom-loop")
    feed(guard, "s", [READ_A] * 2)
    restored = make("doom-loop")
    restored.restore(json.loads(json.dumps(guard.snapshot("s"))), session="other")
    assert restored.observe("other", READ_A).message == seed003_initial("read_file", 3)


def test_seed003_reset_keeps_thresholds_and_restarts_detection() -> None:
    guard = make("doom-loop")
    feed(guard, "s", [READ_A] * 3)
    guard.reset("s")
    verdicts = feed(guard, "s", [READ_A] * 3)
    assert actions(verdicts) == ["ok", "ok", "nudge"]
    assert verdicts[2].message == seed003_initial("read_file", 3)


# =====================================================================================================
# the behavioral preset: behavioural 20-action window (behavioral)
# =====================================================================================================

SEED004_REPLAN = "You have repeated a similar action 3 times. Stop and produce a revised plan before continuing."
SEED004_EXPLORE = (
    "You have repeated a similar action 5 times. The current approach is failing. Try a completely different tool "
    "or method."
)
SEED004_FORCE_DONE = (
    "Loop limit reached (8 repetitions). Mark this task complete with partial results and explain what was not "
    "accomplished."
)

SEARCH = ToolCall("search", {"query": "find the login bug in /src/app/auth.ts"})


def test_seed004_normalisation_lowercases_values() -> None:
    assert normalized_args({"q": "Find LOGIN Bug"}) == '{"q":"find login bug"}'


def test_seed004_normalisation_strips_paths_to_basenames() -> None:
    assert normalized_args({"path": "/a/b/file.ts"}) == '{"path":"file.ts"}'
    assert normalized_args({"path": "/a/b/file.ts"}) == normalized_args({"path": "/c/d/file.ts"})


def test_seed004_normalisation_removes_uuids_timestamps_and_numeric_ids() -> None:
    text = normalized_args(
        {"q": "run 123E4567-E89B-12D3-A456-426614174000 at 2024-01-02T03:04:05Z for order 12345 done"}
    )
    assert "123e4567" not in text
    assert "2024" not in text
    assert "12345" not in text
    for word in ("run", "at", "for", "order", "done"):
        assert word in text
    assert normalized_args({"id": 42, "q": "x"}) == normalized_args({"id": 7, "q": "x"})


def test_seed004_normalisation_sorts_keys() -> None:
    text = normalized_args({"b": "x", "a": "y"})
    assert text == normalized_args({"a": "y", "b": "x"})
    assert text.index('"a"') < text.index('"b"')


def test_seed004_normalisation_truncates_to_200_characters() -> None:
    long_a = normalized_args({"q": "word " * 100 + "tail one"})
    long_b = normalized_args({"q": "word " * 100 + "tail two"})
    assert len(long_a) == 200
    assert long_a == long_b


def test_seed004_jaccard_is_the_javascript_function() -> None:
    assert jaccard_ws("a b c", "a b c") == 1.0
    assert jaccard_ws("a b c d", "a b c e") == pytest.approx(3 / 5)
    assert jaccard_ws("A b", "a b") == pytest.approx(1 / 3)  # no lower-casing in the seed's function
    assert jaccard_ws("", "") == 1.0  # "".split(/\s+/) is [""]
    assert jaccard_ws(" a", "a") == 0.5  # " a".split(/\s+/) is ["", "a"]


def test_seed004_escalation_ladder() -> None:
    guard = make("behavioral")
    verdicts = feed(guard, "s", [SEARCH] * 8)
    assert actions(verdicts[:2]) == ["ok", "ok"]
    for verdict, count in zip(verdicts[2:4], (3, 4), strict=True):
        assert (verdict.action, verdict.level, verdict.count) == ("nudge", 1, count)
        assert verdict.message == SEED004_REPLAN
    for verdict, count in zip(verdicts[4:7], (5, 6, 7), strict=True):
        assert (verdict.action, verdict.level, verdict.count) == ("nudge", 2, count)
        assert verdict.message == SEED004_EXPLORE
    done = verdicts[7]
    assert (done.action, done.level, done.count) == ("stop", 3, 8)
    assert done.status == "FORCE_DONE"
    assert done.partial is True
    assert done.message == SEED004_FORCE_DONE


def test_seed004_force_done_is_final() -> None:
    guard = make("behavioral")
    feed(guard, "s", [SEARCH] * 8)
    after = guard.observe("s", ToolCall("read_file", {"path": "other.py"}))
    assert (after.action, after.status, after.partial) == ("stop", "FORCE_DONE", True)


def test_seed004_nudges_are_not_partial_stops() -> None:
    guard = make("behavioral")
    verdicts = feed(guard, "s", [SEARCH] * 7)
    assert not any(v.partial for v in verdicts)
    assert all(v.status is None for v in verdicts)


def test_seed004_levels_are_cumulative() -> None:
    """Level 2 fires at 5 regardless of whether level 1 fired (and 3 at 8 regardless of 1 and 2)."""
    ladder = preset("behavioral").ladders["repeat"]
    for count, level, action in ((5, 2, "nudge"), (8, 3, "stop"), (3, 1, "nudge")):
        finding = Finding(pattern="repeat", count=count, key=f"fresh-{count}", loop_start=0, reason="")
        decision = decide(ladder, LadderState(), finding, count)
        assert decision is not None
        assert (decision.level, decision.action) == (level, action)


def test_seed004_directory_differences_do_not_mask_the_loop() -> None:
    """Never compare raw unnormalised args: path differences would mask real loops."""
    calls = [ToolCall("read_file", {"path": f"/work/{d}/config.yaml"}) for d in ("a", "b", "c")]
    guard = make("behavioral")
    verdicts = feed(guard, "s", calls)
    assert verdicts[2].action == "nudge"
    assert verdicts[2].message == SEED004_REPLAN


def test_seed004_small_argument_variation_stays_similar() -> None:
    words = "grep -r -n -i --color never todo"
    calls = [ToolCall("bash", {"command": f"{words} {name}.py"}) for name in ("alpha", "beta", "gamma")]
    first, second = (normalized_args(c.args) for c in calls[:2])
    assert jaccard_ws(first, second) >= 0.75
    guard = make("behavioral")
    assert actions(feed(guard, "s", calls)) == ["ok", "ok", "nudge"]


def test_seed004_threshold_is_inclusive() -> None:
    a = {"q": "a b c d e f x"}
    b = {"q": "a b c d e f y"}
    c = {"q": "a b c d e f z"}
    assert jaccard_ws(normalized_args(a), normalized_args(b)) == 0.75
    guard = make("behavioral")
    verdicts = feed(guard, "s", [ToolCall("search", args) for args in (a, b, c)])
    assert actions(verdicts) == ["ok", "ok", "nudge"]


def test_seed004_run_is_measured_against_its_anchor() -> None:
    """checkSimilarity compares with lastNormalized, which only changes when an action is not similar.

    A ~ B and B ~ C but not A ~ C: C is compared with the anchor A, so the run restarts at C.
    """
    a = {"query": "a b c d e f g h"}
    b = {"query": "a b c d e f g X"}
    c = {"query": "a b c d e f Y X"}
    na, nb, nc = (normalized_args(x) for x in (a, b, c))
    assert jaccard_ws(na, nb) >= 0.75
    assert jaccard_ws(nb, nc) >= 0.75
    assert jaccard_ws(na, nc) < 0.75
    guard = make("behavioral")
    verdicts = feed(guard, "s", [ToolCall("search", args) for args in (a, b, c, c, c)])
    # with "compare to the previous action" the third call would already be a run of 3
    assert actions(verdicts) == ["ok", "ok", "ok", "ok", "nudge"]
    assert verdicts[4].count == 3
    state = detector_state(guard, "s")
    assert state["anchor"] == nc
    assert state["run"] == 3


def test_seed004_anchor_stays_while_the_run_continues() -> None:
    a = {"query": "a b c d e f g h"}
    b = {"query": "a b c d e f g X"}
    guard = make("behavioral")
    feed(guard, "s", [ToolCall("search", args) for args in (a, b, b)])
    state = detector_state(guard, "s")
    assert state["anchor"] == normalized_args(a)
    assert state["run"] == 3


def test_seed004_a_different_tool_resets_the_run() -> None:
    lookup = ToolCall("lookup", dict(SEARCH.args))
    guard = make("behavioral")
    verdicts = feed(guard, "s", [SEARCH, SEARCH, lookup, SEARCH, SEARCH])
    assert actions(verdicts) == ["ok"] * 5
    assert detector_state(guard, "s")["run"] == 2


def test_seed004_dissimilar_arguments_reset_the_run() -> None:
    other = ToolCall("search", {"query": "deploy the staging build"})
    guard = make("behavioral")
    verdicts = feed(guard, "s", [SEARCH, SEARCH, other, SEARCH, SEARCH])
    assert actions(verdicts) == ["ok"] * 5
    assert detector_state(guard, "s")["run"] == 2


def test_seed004_results_and_messages_are_not_actions() -> None:
    guard = make("behavioral")
    events = [SEARCH, ToolResult("nothing found"), Message("assistant", "hmm"), SEARCH, ToolResult("none"), SEARCH]
    verdicts = feed(guard, "s", events)
    assert verdicts[-1].action == "nudge"
    assert verdicts[-1].count == 3
    assert len(detector_state(guard, "s")["window"]) == 3


def test_seed004_window_keeps_at_most_20_actions() -> None:
    guard = make("behavioral")
    calls = [ToolCall("tool_a" if i % 2 else "tool_b", {"path": f"f{i}.py"}) for i in range(30)]
    verdicts = feed(guard, "s", calls)
    assert actions(verdicts) == ["ok"] * 30
    window = detector_state(guard, "s")["window"]
    assert len(window) == 20
    assert [entry[2] for entry in window] == list(range(10, 30))
    assert window[-1][0] == "tool_a"
    assert window[-1][1] == normalized_args({"path": "f29.py"})


SEED004_QUERIES = ("a b c d e f g h", "a b c d e f g X", "a b c d e f Y X", "deploy the staging build")


def _seed004_escalation(actions_in: Sequence[tuple[str, str]]) -> list[tuple[str, int]]:
    """The behavioral preset's recordAction / checkSimilarity (plus the same-tool rule) / applyEscalation."""

    def jaccard(a: str, b: str) -> float:
        set_a, set_b = set(re.split(r"\s+", a)), set(re.split(r"\s+", b))
        return len(set_a & set_b) / len(set_a | set_b)

    last_tool: str | None = None
    last_normalized: str | None = None
    run = 0
    out: list[tuple[str, int]] = []
    for tool, query in actions_in:
        normalized = json.dumps({"query": query.lower()}, sort_keys=True, separators=(",", ":"))[:200]
        if last_normalized is None:
            last_tool, last_normalized, run = tool, normalized, 1
        elif tool == last_tool and jaccard(last_normalized, normalized) >= 0.75:
            run += 1
        else:
            last_tool, last_normalized, run = tool, normalized, 1
        if run >= 8:
            out.append(("stop", 3))
            break
        if run >= 5:
            out.append(("nudge", 2))
        elif run >= 3:
            out.append(("nudge", 1))
        else:
            out.append(("ok", 0))
    return out


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(("search", "lookup")), st.sampled_from(SEED004_QUERIES)), max_size=30))
def test_seed004_matches_the_seed_algorithm(steps: list[tuple[str, str]]) -> None:
    guard = make("behavioral")
    verdicts = until_stop(feed(guard, "s", [ToolCall(tool, {"query": q}) for tool, q in steps]))
    assert [(v.action, v.level) for v in verdicts] == _seed004_escalation(steps)
    assert len(detector_state(guard, "s")["window"]) <= 20
