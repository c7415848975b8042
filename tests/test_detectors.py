"""Detectors and presets through the guard: each seed's documented behaviour and the default detectors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from loopwatch import PRESETS, Event, Guard, Message, TextDelta, ToolCall, ToolResult, Verdict, preset
from loopwatch._presets import (
    SEED000_TERMINATE,
    SEED000_WARN,
    SEED004_EXPLORE,
    SEED004_FORCE_DONE,
    SEED004_REPLAN,
)
from loopwatch.config import Config
from loopwatch.core._policy import Ladder, exempt
from loopwatch.core.detectors import cycle, failure_streak, feedback_repeat, repeat
from loopwatch.core.detectors._base import push


def run(guard: Guard, events: Sequence[Event], session: str = "s", **kwargs: Any) -> list[Verdict]:
    return [guard.observe(session, e, **kwargs) for e in events]


def flagged(verdicts: Sequence[Verdict]) -> list[tuple[int, str, str | None, int]]:
    return [(i, v.action, v.pattern, v.count) for i, v in enumerate(verdicts) if not v.ok]


# -- every preset ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_a_working_guard(name: str) -> None:
    guard = Guard(preset=name)
    assert guard.policy.name == name
    events: list[Event] = []
    for _ in range(10):
        events += [ToolCall("read_file", {"path": "a.py"}), ToolResult("same", tool="read_file")]
        events += [Message("assistant", "I will read the file a.py again to check it")]
    verdicts = run(guard, events)
    assert any(not v.ok for v in verdicts), f"{name} saw no loop at all"
    assert guard.stats["errors"] == 0
    json.dumps(guard.snapshot("s"))


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match="default"):
        preset("nope")


# -- the jaccard-turns preset: Jaccard turns ---------------------------------------------------------------------------


def test_seed000_three_similar_turns_warn_five_terminate() -> None:
    guard = Guard(preset="jaccard-turns")
    text = "I will check the database for the user information now"
    verdicts = run(guard, [Message("assistant", text) for _ in range(6)])
    assert flagged(verdicts)[:3] == [
        (3, "nudge", "similar_text", 3),
        (4, "nudge", "similar_text", 4),
        (5, "stop", "similar_text", 5),
    ]
    assert verdicts[3].message == SEED000_WARN.format(count=3)
    assert verdicts[5].message == SEED000_TERMINATE.format(count=5)


def test_seed000_a_different_turn_resets_the_count() -> None:
    guard = Guard(preset="jaccard-turns")
    same = "I will check the database for the user information now"
    events: list[Event] = [Message("assistant", same) for _ in range(3)]
    events.append(Message("assistant", "Completely unrelated words about deployment pipelines and caching"))
    events += [Message("assistant", same) for _ in range(2)]
    verdicts = run(guard, events)
    assert all(v.ok for v in verdicts)


# -- the call-cycles preset: call cycles -------------------------------------------------------------------------------


def test_seed001_one_call_cycle_warn_warn_stop() -> None:
    guard = Guard(preset="call-cycles")
    verdicts = run(guard, [ToolCall("read_file", {"path": "a"}) for _ in range(4)])
    assert [(v.action, v.level) for v in verdicts] == [("ok", 0), ("nudge", 1), ("nudge", 2), ("stop", 3)]
    assert verdicts[3].status == "LOOP_DETECTED"
    assert "repeated" in (verdicts[1].message or "")
    assert guard.policy.nudge_role == "user"


def test_seed001_two_call_cycle() -> None:
    guard = Guard(preset="call-cycles")
    verdicts = run(guard, [ToolCall("t", {"p": p}) for p in "ababab"])
    assert [v.action for v in verdicts] == ["ok", "ok", "ok", "nudge", "nudge", "stop"]
    assert all(v.pattern == "cycle" and v.loop_start == 0 for v in verdicts[3:])


def test_detector_reprs_and_validation() -> None:
    detector = cycle(max_period=3, min_period=2)
    assert repr(detector).startswith("CycleDetector(max_period=3, min_period=2")
    assert detector == cycle(max_period=3, min_period=2)
    assert detector != cycle(max_period=4, min_period=2)
    with pytest.raises(ValueError):
        cycle(max_period=1, min_period=2)
    assert repr(repeat()).startswith("RepeatDetector(")


# -- the ralph preset: Ralph -------------------------------------------------------------------------------------------


def test_seed002_ninety_percent_similar_output_exits() -> None:
    guard = Guard(preset="ralph")
    first = guard.observe("s", Message("assistant", "The quick brown fox jumps over the lazy dog today"))
    second = guard.observe("s", Message("assistant", "The quick brown fox jumps over the lazy dog today!"))
    assert first.ok
    assert second.action == "stop" and second.pattern == "similar_text"
    assert (second.message or "").startswith("Loop detected: ") and "similarity to previous output" in (
        second.message or ""
    )


def test_seed002_dissimilar_outputs_pass() -> None:
    guard = Guard(preset="ralph")
    texts = ["Reading the configuration file", "Running the unit tests now", "All tests pass, writing summary"]
    assert all(v.ok for v in run(guard, [Message("assistant", t) for t in texts]))


def test_seed002_limits() -> None:
    assert repr(preset("ralph").limits) == (
        "max_iterations(100) | max_runtime(14400) | max_cost(10.0, warn_at=None) | max_consecutive_failures(5)"
    )


# -- the doom-loop preset: doom loop -----------------------------------------------------------------------------------


def test_seed003_exact_fingerprint_ladder() -> None:
    guard = Guard(preset="doom-loop")
    verdicts = run(guard, [ToolCall("read_file", {"path": "a.ts"}) for _ in range(8)])
    got = flagged(verdicts)
    assert got[0] == (2, "nudge", "repeat", 3)
    assert verdicts[2].message is not None and verdicts[2].message.startswith(
        "[System] You've called read_file with the same arguments 3 times."
    )
    assert (verdicts[3].message or "").startswith("[System] WARNING: You've called read_file 4 times")
    assert (verdicts[5].message or "").startswith("[System] CRITICAL: You've called read_file")
    assert verdicts[6].action == "block"


def test_seed003_structural_fingerprint_for_plain_reads() -> None:
    guard = Guard(preset="doom-loop")
    commands = ["cat foo.ts", "head foo.ts", "tail foo.ts", "head -n 5 foo.ts"]
    verdicts = run(guard, [ToolCall("bash", {"command": c}) for c in commands])
    assert [v.action for v in verdicts] == ["ok", "ok", "ok", "nudge"]
    assert verdicts[3].count == 4 and verdicts[3].evidence.get("match") == "fuzzy"


def test_seed003_complex_commands_are_not_normalised() -> None:
    guard = Guard(preset="doom-loop")
    commands = ["cat foo.ts | head", "head foo.ts > x", "tail foo.ts; ls", "cat foo.ts | wc -l"]
    assert all(v.ok for v in run(guard, [ToolCall("bash", {"command": c}) for c in commands]))


# -- the behavioral preset: behavioural window -------------------------------------------------------------------------


def test_seed004_replan_explore_force_done() -> None:
    guard = Guard(preset="behavioral")
    events = [
        ToolCall("read_file", {"path": f"/tmp/run{i}/src/Main.py", "id": i, "at": f"2024-05-0{i + 1}T10:00:00Z"})
        for i in range(9)
    ]
    verdicts = run(guard, events)
    assert [v.action for v in verdicts[:2]] == ["ok", "ok"]
    assert verdicts[2].message == SEED004_REPLAN
    assert verdicts[4].message == SEED004_EXPLORE
    stop = verdicts[7]
    assert stop.action == "stop" and stop.status == "FORCE_DONE" and stop.partial
    assert stop.message == SEED004_FORCE_DONE
    assert stop.count == 8 and stop.level == 3


def test_seed004_another_tool_breaks_the_run() -> None:
    guard = Guard(preset="behavioral")
    events = [ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "a.py"})]
    events += [ToolCall("write_file", {"path": "a.py"})]
    events += [ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "a.py"})]
    assert all(v.ok for v in run(guard, events))


# -- default detectors -------------------------------------------------------------------------------------------


def test_swarm_wide_repeat_across_workers() -> None:
    guard = Guard()
    words = ["alpha", "bravo", "kilo", "lima", "mike", "oscar", "papa", "romeo", "sierra", "tango", "uniform"]
    verdicts = []
    for i, word in enumerate(words):
        session, worker = f"s{i % 5}", f"w{i % 5}"
        verdicts.append(guard.observe(session, ToolCall("search", {"query": "jdk"}, worker=worker), swarm="team"))
        guard.observe(session, ToolResult(f"result {word}", tool="search"), swarm="team")
    assert [v.action for v in verdicts[:9]] == ["ok"] * 9
    assert verdicts[9].action == "nudge" and verdicts[9].pattern == "swarm_repeat" and verdicts[9].count == 10
    snap = guard.swarm_snapshot("team")
    assert max(entry[0] for entry in snap["counts"].values()) == 11
    fresh = Guard()
    fresh.restore_swarm(json.loads(json.dumps(snap)))
    assert fresh.swarm_snapshot("team") == snap
    guard.clear_swarm("team")
    assert guard.swarm_snapshot("team")["counts"] == {}


def test_no_swarm_no_swarm_repeat() -> None:
    guard = Guard()
    verdicts = []
    for i in range(12):
        verdicts.append(guard.observe(f"s{i}", ToolCall("search", {"query": "jdk"}, worker=f"w{i}")))
    assert all(v.ok for v in verdicts)


def test_chanting_in_one_message_and_in_a_stream() -> None:
    chanting = Config(detectors={"chanting": {"enabled": True}}).policy()  # the rule default retired, brought back
    chunk = "The answer is that we must keep going forward now. "
    whole = Guard(policy=chanting).observe("s", Message("assistant", chunk * 12))
    assert whole.action == "nudge" and whole.pattern == "chanting" and whole.count >= 5
    guard = Guard(policy=chanting)
    verdicts = run(guard, [TextDelta(chunk) for _ in range(12)])
    hits = [v for v in verdicts if v.pattern == "chanting"]
    assert len(hits) == 1 and hits[0].loop_start == 0
    normal = Guard(policy=chanting).observe("s", Message("assistant", " ".join(f"word{i}" for i in range(400))))
    assert normal.ok


def test_monologue_after_tools() -> None:
    guard = Guard()
    texts = ["First I think about the design", "Then the plan is to refactor", "Maybe a cache would help"]
    texts += ["Or rewrite the parser instead"]
    events: list[Event] = [ToolCall("ls", {}), ToolResult("a", tool="ls")]
    events += [Message("assistant", t) for t in texts]
    verdicts = run(guard, events)
    assert flagged(verdicts) == [(5, "nudge", "monologue", 4)]
    assert verdicts[5].loop_start == 2


def test_the_same_assistant_message_again_and_again() -> None:
    guard = Guard()
    verdicts = run(guard, [Message("assistant", "Done.") for _ in range(7)])
    assert verdicts[2].action == "nudge" and verdicts[2].pattern == "repeat_message"
    assert verdicts[5].action == "stop" and verdicts[5].status == "LOOP_DETECTED"


def test_similar_assistant_turns() -> None:
    guard = Guard()
    base = "I will now run the tests again to see whether the fix worked"
    verdicts = run(guard, [Message("assistant", f"{base} {w}") for w in ("a", "b", "c", "d")])
    assert verdicts[3].action == "nudge" and verdicts[3].pattern == "similar_text"


def test_exempt_tools_are_never_flagged() -> None:
    guard = Guard(policy=preset("default").replace(tools=exempt(["wait"])))
    events: list[Event] = []
    for _ in range(10):
        events += [ToolCall("wait", {"seconds": 5}), ToolResult("waiting", tool="wait")]
    assert all(v.ok for v in run(guard, events))


def test_custom_ladder_per_pattern() -> None:
    policy = preset("default").replace(ladders={"repeat": Ladder.of(nudge=2, stop=4)})
    guard = Guard(policy=policy)
    events: list[Event] = []
    for _ in range(4):
        events += [ToolCall("read_file", {"path": "a"}), ToolResult("No such file: a", tool="read_file", is_error=True)]
    verdicts = run(guard, events)
    assert verdicts[2].action == "nudge" and verdicts[6].action == "stop" and verdicts[6].pattern == "repeat"
    # the same call succeeding the same way is refused at the ladder's stop, not stopped: nothing fails
    succeeding = [e for _ in range(4) for e in (ToolCall("read_file", {"path": "a"}), ToolResult("same"))]
    assert run(Guard(policy=policy), succeeding)[6].action == "block"


def test_ladders_validate() -> None:
    with pytest.raises(ValueError):
        Ladder.of(nudge=5, block=3)
    with pytest.raises(ValueError):
        Ladder.of(nudge=0)
    assert repr(Ladder.of(nudge=3, block=5, stop=8)) == "Ladder(nudge@3, block@5, stop@8)"
    assert Ladder.of(nudge=(3, 4), stop=6).level_for(5) == 2


def test_push_keeps_the_newest() -> None:
    items: list[int] = []
    for i in range(10):
        push(items, i, 3)
    assert items == [7, 8, 9]


# -- feedback_repeat: the harness's same complaint -------------------------------------------------------------

_COMPLAINT = "Please always provide EXACTLY ONE action in triple backticks, found {} actions."


def _rejected_turns(attempts: int) -> list[Event]:
    """``attempts`` assistant turns the harness could not run, each answered with the same complaint."""
    events: list[Event] = []
    for n in range(attempts):
        events += [Message("assistant", f"THOUGHT: try {n}\n```bash\nls\n```\n```bash\npwd\n```")]
        events += [Message("user", _COMPLAINT.format(n + 2))]
    return events


def test_feedback_repeat_reports_a_third_plain_reply_after_two_complaints() -> None:
    guard = Guard(policy=preset("default").replace(detectors=(feedback_repeat(threshold=4, reply_threshold=3),)))
    verdicts = run(
        guard, [*_rejected_turns(2), Message("assistant", "THOUGHT: again\n```bash\nls\n```\n```bash\npwd\n```")]
    )
    assert flagged(verdicts) == [(4, "nudge", "error_retry", 3)]


def test_feedback_repeat_gives_different_attempts_more_room() -> None:
    """Another patch after "the patch did not resolve the issue, try again" is the agent trying things: such a
    streak of different attempts is reported from its fifth attempt, not its third."""
    complaint = "Written an applicable patch, but it did not resolve the issue. Please try again."
    events: list[Event] = []
    for n, body in enumerate(["return a + b", "raise ValueError(name)", "cache.clear()", "yield from items", "pass"]):
        events += [
            Message("assistant", f"Patch {n}:\n```python\ndef fix_{n}():\n    {body}\n```"),
            Message("user", complaint),
        ]
    guard = Guard(policy=preset("default").replace(detectors=(feedback_repeat(threshold=4, reply_threshold=3),)))
    assert flagged(run(guard, events)) == [(8, "nudge", "error_retry", 5)]


def test_feedback_repeat_judges_the_latest_attempt_not_the_streaks_first() -> None:
    """Different attempts at first, then the very same one sent again after the same complaint: that resend is a
    repeat, reported at the third written-out attempt as a plain streak's would be, not held to the variants'
    fifth because earlier attempts varied."""
    complaint = "Written an applicable patch, but it did not resolve the issue. Please try again."
    patch = "Patch:\n```python\ndef fix():\n    raise ValueError(name)\n```"
    events: list[Event] = [
        Message("assistant", "Patch:\n```python\ndef fix():\n    return a + b\n```"),
        Message("user", complaint),
        Message("assistant", patch),
        Message("user", complaint),
    ]
    guard = Guard(policy=preset("default").replace(detectors=(feedback_repeat(threshold=4, reply_threshold=3),)))
    assert flagged(run(guard, events)) == []
    assert [(v.action, v.pattern, v.count) for v in run(guard, [Message("assistant", patch)])] == [
        ("nudge", "error_retry", 3)
    ]


def test_feedback_repeat_waits_for_its_threshold_when_the_attempt_is_a_call() -> None:
    guard = Guard(policy=preset("default").replace(detectors=(feedback_repeat(threshold=4, reply_threshold=3),)))
    complaint = Message("user", "Error: the tool `ls` is not allowed here; use `bash`.")
    events = [*_rejected_turns(1)[:1], complaint, ToolCall("ls", {}), complaint, ToolCall("ls", {"all": True})]
    assert flagged(run(guard, events)) == []  # a call after two complaints may be the fix
    verdicts = run(guard, [complaint, ToolCall("ls", {"long": True})])
    assert [(v.action, v.pattern, v.count) for v in verdicts] == [("ok", None, 0), ("nudge", "error_retry", 4)]


def test_feedback_repeat_without_reply_threshold_treats_replies_and_calls_alike() -> None:
    guard = Guard(policy=preset("default").replace(detectors=(feedback_repeat(threshold=4),)))
    assert flagged(run(guard, _rejected_turns(4))) == [(6, "nudge", "error_retry", 4)]
    assert (
        repr(feedback_repeat(threshold=4, reply_threshold=3))
        == "FeedbackRepeatDetector(threshold=4, reply_threshold=3, similarity=0.8, variant_similarity=0.5, variants=5)"
    )
    with pytest.raises(ValueError, match="reply_threshold"):
        feedback_repeat(reply_threshold=1)


def test_default_preset_reports_the_third_rejected_reply() -> None:
    verdicts = run(Guard(preset="default-lexical"), _rejected_turns(3))
    assert (4, "nudge", "error_retry", 3) in flagged(verdicts)


# -- failure_streak: nothing back, whichever tool -------------------------------------------------------------


def _nothing_back(rounds: int) -> list[Event]:
    """An install that times out, a look-up that prints nothing, a guessed file that is not there, in turns."""
    kinds: list[Event] = [
        ToolCall("bash", {"command": "sudo apt-get install default-jdk"}),
        ToolResult("\nEXECUTION TIMED OUT", tool="bash"),
        ToolCall("bash", {"command": "which javac"}),
        ToolResult("", tool="bash"),
        ToolCall("find_file", {"file_name": "INSTALL.md"}),
        ToolResult('No matches found for "INSTALL.md" in /repo', tool="find_file"),
    ]
    return (kinds * rounds)[: 2 * rounds]


def _longest_streak(events: Sequence[Event], **kwargs: Any) -> int:
    """The longest streak ``failure_streak(**kwargs)`` counts in ``events`` (one guard per ladder threshold:
    a ladder speaks once per level)."""
    longest = 0
    for n in range(1, 10):
        policy = preset("default").replace(detectors=(failure_streak(**kwargs),))
        guard = Guard(policy=policy.replace(ladders={"failure_streak": Ladder.of(nudge=n)}))
        if any(v.pattern == "failure_streak" for v in run(guard, events)):
            longest = n
    return longest


def test_failure_streak_counts_calls_that_found_nothing_when_asked() -> None:
    verdicts = run(Guard(preset="default-lexical"), _nothing_back(6))
    nudges = [v for v in verdicts if v.pattern == "failure_streak"]
    assert [(v.action, v.count, v.loop_start) for v in nudges] == [("nudge", 6, 0)]
    assert verdicts.index(nudges[0]) == 11  # on the sixth result
    assert "failed or found nothing" in (nudges[0].reason or "")
    assert nudges[0].message and "all failed or found nothing" in nudges[0].message
    assert _longest_streak(_nothing_back(6), empty=True) == 6
    assert _longest_streak(_nothing_back(6)) == 1  # without empty=True only failures count


def test_failure_streak_ends_at_a_change_an_echo_or_a_result_with_something_in_it() -> None:
    edit: list[Event] = [ToolCall("bash", {"command": "sed -i 's/a/b/' x.py"}), ToolResult("", tool="bash")]
    echo: list[Event] = [
        ToolCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}),
        ToolResult("", tool="bash"),
    ]
    found: list[Event] = [ToolCall("bash", {"command": "ls"}), ToolResult("pom.xml\nsrc\n", tool="bash")]
    for breaker in (edit, echo, found):
        assert _longest_streak([*_nothing_back(4), *breaker, *_nothing_back(4)], empty=True) == 4
    failed: list[Event] = [
        ToolCall("bash", {"command": "sed -i 's/a/b/' x.py"}),
        ToolResult("sed: can't read x.py", tool="bash", is_error=True),
    ]
    events = [*_nothing_back(4), *failed, *_nothing_back(1)]
    assert _longest_streak(events, empty=True) == 6  # a change that fails is a failure


def test_failure_streak_loads_a_state_saved_before_empty_results_counted() -> None:
    detector = failure_streak(empty=True)
    old = {"n": 2, "start": 4, "idx": [4, 6], "file_ops": False, "last": "E: Unable to locate package"}
    assert detector.dump_state(detector.load_state(old)) == {
        **old,
        "quiet": [],
        "items": {},
        "item": None,
        "errors": [],
    }
    for damaged in (False, [1, "2"], list(range(9))):
        with pytest.raises(ValueError, match="quiet"):
            detector.load_state({**old, "quiet": damaged})


def test_feedback_repeat_leaves_a_conversation_alone() -> None:
    """ "continue" after "continue" in a chat is not a harness complaining: only a reply that writes an action
    out (a fenced block) where a call was expected counts from the reply threshold."""
    story = [Message("user", "Write a short story about a fox.")]
    for line in ("Once upon a time a fox lived by the forest.", "Each night it crept closer.", "One winter..."):
        story += [Message("assistant", line), Message("user", "continue")]
    assert flagged(run(Guard(preset="default-lexical"), story[:-1])) == []


def test_failure_streak_matches_results_to_their_calls_when_calls_run_in_parallel() -> None:
    write = ToolCall("write_file", {"path": "a.py", "content": "x = 1"}, id="w")
    grep = ToolCall("bash", {"command": "grep -rn missing_name src"}, id="g")
    parallel: list[Event] = [write, grep, ToolResult("", id="w"), ToolResult("", id="g")]
    # the write that worked printed nothing: a change that worked, it ends the streak (taken for the grep's
    # empty result it would make three); the grep's empty result then starts a new one
    assert _longest_streak([*_nothing_back(2), *parallel, *_nothing_back(1)], empty=True) == 2
    swapped: list[Event] = [write, grep, ToolResult("", id="g"), ToolResult("", id="w")]
    assert _longest_streak([*_nothing_back(2), *swapped, *_nothing_back(1)], empty=True) == 3


def test_a_finding_is_frozen_copies_and_pickles_compiled_or_not() -> None:
    import copy
    import dataclasses
    import pickle

    from loopwatch.core.detectors import Finding

    finding = Finding("repeat", 3, "repeat:x:1", 1, "why", (1, 2, 3), {"call": "x"}, blockable=True, hard=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.count = 4  # type: ignore[misc]
    assert copy.copy(finding) == finding == copy.deepcopy(finding) == pickle.loads(pickle.dumps(finding))
    assert dataclasses.replace(finding, count=4) == Finding(
        "repeat", 4, "repeat:x:1", 1, "why", (1, 2, 3), {"call": "x"}, blockable=True, hard=True
    )
    plain = Finding(pattern="rephrase", count=2, key="k", loop_start=None, reason="r")
    assert (plain.indices, plain.facts, plain.blockable, plain.hard, plain.stoppable) == ((), {}, False, False, True)
    assert plain.facts is not Finding("rephrase", 2, "k", None, "r").facts  # a new mapping each, as the factory made
    assert [f.name for f in dataclasses.fields(Finding)] == [
        "pattern", "count", "key", "loop_start", "reason", "indices", "facts", "blockable", "hard", "stoppable"
    ]  # fmt: skip


def test_a_verdict_is_frozen_copies_and_pickles_compiled_or_not() -> None:
    import copy
    import dataclasses
    import pickle

    verdict = Verdict("block", 7, "repeat", 3, 2, 4, None, "stop it", "why", "RepeatDetector()", {"indices": [4, 7]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.action = "stop"  # type: ignore[misc]
    assert copy.copy(verdict) == verdict == copy.deepcopy(verdict) == pickle.loads(pickle.dumps(verdict))
    assert dataclasses.replace(verdict, index=8).to_json() == {**verdict.to_json(), "index": 8}
    plain = Verdict(index=3)
    assert (plain.action, plain.ok, plain.evidence, plain.partial, plain.severity) == ("ok", True, {}, False, 0)
    assert Verdict(**{**verdict.to_json(), "evidence": verdict.evidence}) == verdict
