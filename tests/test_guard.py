"""The guard: escalation, polling, cycles, error retries, resets, sessions, snapshots, threads, audit."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from loopwatch import (
    AsyncGuard,
    Event,
    Guard,
    Message,
    Reset,
    StateError,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
    Verdict,
    preset,
)
from loopwatch.core._limits import max_iterations
from loopwatch.errors import ConfigError, EventError
from loopwatch.sinks import JsonlAuditSink, MemorySink

SECRET = "sk-" + "live0123456789abcdefghijklmnopqrstuv"

# -- helpers ---------------------------------------------------------------------------------------------


def same_call(
    n: int, tool: str = "read_file", args: dict[str, Any] | None = None, output: str = "x = 1\n"
) -> list[Event]:
    """``n`` times the same call with the same result."""
    events: list[Event] = []
    for _ in range(n):
        events.append(ToolCall(tool, dict(args or {"path": "src/app.py"})))
        events.append(ToolResult(output, tool=tool))
    return events


def calls_only(verdicts: Sequence[Verdict], events: Sequence[Event]) -> list[Verdict]:
    return [v for v, e in zip(verdicts, events, strict=True) if isinstance(e, ToolCall)]


def run(
    guard: Guard, events: Sequence[Event | dict[str, Any]], session: str = "s", *, enforce: bool = False
) -> list[Verdict]:
    """Observe ``events`` in order. With ``enforce``, act as a harness that honours a ``block``: the refused call
    does not run, so its result is never observed (its slot repeats the call's verdict)."""
    verdicts: list[Verdict] = []
    for event in events:
        refused = bool(verdicts) and verdicts[-1].action == "block" and isinstance(events[len(verdicts) - 1], ToolCall)
        if enforce and refused and isinstance(event, ToolResult):
            verdicts.append(verdicts[-1])
        else:
            verdicts.append(guard.observe(session, event))
    return verdicts


def key(v: Verdict) -> tuple[Any, ...]:
    return (v.action, v.pattern, v.count, v.level, v.loop_start, v.status, v.index)


NATO = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
    "lima", "mike", "november", "oscar", "papa",
]  # fmt: skip


def mixed_run() -> list[Event]:
    """A realistic mix: exploration, an error retried, a cycle, chat, streaming, usage and a long repeat."""
    events: list[Event] = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the failing test in src/app.py"),
        ToolCall("bash", {"command": "ls -la"}, id="c1", thought="look around"),
        ToolResult("app.py\ntests\n", id="c1"),
        Usage(cost=0.01, input_tokens=100, output_tokens=20),
    ]
    for n in (13008, 13015, 13023, 13031):
        events += [
            ToolCall("bash", {"command": "cd srcc"}),
            ToolResult(f"bash: line {n}: cd: srcc: No such file or directory", tool="bash", exit_code=1),
        ]
    for _ in range(3):
        events += [
            ToolCall("read_file", {"path": "a.py"}),
            ToolResult("AAA", tool="read_file"),
            ToolCall("read_file", {"path": "b.py"}),
            ToolResult("BBB", tool="read_file"),
        ]
    events += [TextDelta("I will now "), TextDelta("try again."), Message("assistant", "I will now try again.")]
    events += [Message("user", "Please stop and think")]
    events += same_call(9, "grep", {"pattern": "def main", "path": "."}, "app.py:3:def main():")
    return events


# -- escalation on a plain repeat -----------------------------------------------------------------------------


def test_same_call_same_result_nudge_block_stop() -> None:
    guard = Guard()
    events = same_call(9)
    verdicts = calls_only(run(guard, events, enforce=True), events)
    actions = [v.action for v in verdicts]
    assert actions[:2] == ["ok", "ok"]
    assert verdicts[2].action == "nudge" and verdicts[2].pattern == "repeat" and verdicts[2].count == 3
    assert verdicts[3].action == "ok"  # a nudge is said once per level
    assert verdicts[4].action == "block" and verdicts[4].pattern == "repeat" and verdicts[4].count == 5
    assert verdicts[5].action == "block" and verdicts[6].action == "block"
    stop = verdicts[7]
    assert stop.action == "stop" and stop.status == "LOOP_DETECTED" and stop.count == 8
    assert stop.loop_start == 0
    assert stop.message and stop.reason
    assert verdicts[8].action == "stop"
    assert verdicts[2].message and "read_file" in verdicts[2].message
    assert stop.evidence["refusals_ignored"] == 3 and "refused 3 times" in (stop.reason or "")


def test_a_refusal_shown_but_not_enforced_and_ignored_still_stops() -> None:
    # an integration that cannot refuse shows the refusal to the model; the call runs, and the model asks again
    events = same_call(9)
    assert [v.action for v in calls_only(run(Guard(), events), events)][4:] == ["block"] * 3 + ["stop"] * 2


def test_a_replayed_call_that_succeeds_again_and_again_is_refused_but_not_stopped() -> None:
    # a recording: its agent never saw a refusal, and the same call keeps succeeding the same way (a padding step,
    # a no-op). Nothing fails and nothing was ignored: block, never stop
    events = same_call(14)
    actions = [v.action for v in calls_only(run(Guard(replay=True), events), events)]
    assert actions[4:] == ["block"] * 10


def test_the_same_failing_call_is_stopped_even_when_refusals_are_not_enforced() -> None:
    events = same_call(10, output="Traceback (most recent call last):\nFileNotFoundError: src/app.py")
    verdicts = calls_only(run(Guard(replay=True), events), events)
    assert [v.action for v in verdicts[4:]] == ["block"] * 5 + ["stop"]
    assert verdicts[-1].count == 10 and verdicts[-1].evidence["repeated"]["count"] == 10


def test_polling_with_changing_results_is_never_stopped() -> None:
    guard = Guard()
    verdicts = []
    for i in range(12):
        verdicts.append(guard.observe("s", ToolCall("check_build", {"job": "b-1"})))
        verdicts.append(guard.observe("s", ToolResult(f"compiling module {NATO[i]}", tool="check_build")))
    assert not [v for v in verdicts if v.action in ("block", "stop")]
    assert {v.pattern for v in verdicts if v.action == "nudge"} <= {"polling"}


def test_polling_outputs_differing_in_one_letter_are_progress() -> None:
    guard = Guard()
    verdicts = []
    for i in range(12):
        verdicts.append(guard.observe("s", ToolCall("check_build", {"job": "b-1"})))
        verdicts.append(guard.observe("s", ToolResult(f"compiling module {chr(97 + i)}", tool="check_build")))
    assert not [v for v in verdicts if v.action in ("block", "stop")]
    assert {v.pattern for v in verdicts if v.action == "nudge"} <= {"polling"}


def test_repeat_restarts_at_the_call_that_changed_the_result() -> None:
    guard = Guard()
    events = same_call(1, output="first version") + same_call(2, output="second version")
    verdicts = run(guard, events)
    assert all(v.ok for v in verdicts)
    nudge = guard.observe("s", ToolCall("read_file", {"path": "src/app.py"}))
    assert nudge.action == "nudge" and nudge.pattern == "repeat" and nudge.count == 3
    assert nudge.loop_start == 2  # the first call that returned "second version"


def test_ab_cycle_is_nudged_with_loop_start_at_the_first_a() -> None:
    guard = Guard()
    prefix: list[Event] = [
        Message("user", "go"),
        ToolCall("list_dir", {"path": "."}),
        ToolResult("a b", tool="list_dir"),
    ]
    first_a = len(prefix)
    events = list(prefix)
    for _ in range(3):
        events += [
            ToolCall("read_file", {"path": "a.py"}),
            ToolResult("contents of a", tool="read_file"),
            ToolCall("read_file", {"path": "b.py"}),
            ToolResult("contents of b", tool="read_file"),
        ]
    verdicts = run(guard, events)
    cycles = [v for v in verdicts if v.pattern == "cycle"]
    assert cycles, [key(v) for v in verdicts]
    assert cycles[0].action == "nudge"
    assert cycles[0].loop_start == first_a
    assert cycles[0].count == 3
    assert cycles[0].index == len(events) - 2  # on the third B call
    assert all(v.ok for v in verdicts[: len(events) - 2])


def test_a_cycle_with_changing_results_is_progress() -> None:
    guard = Guard()
    events: list[Event] = []
    for i in range(4):
        events += [
            ToolCall("run_tests", {}),
            ToolResult(f"{NATO[i]} failing", tool="run_tests"),
            ToolCall("edit", {"path": "a.py", "text": NATO[i]}),
            ToolResult("ok", tool="edit"),
        ]
    assert not [v for v in run(guard, events) if v.pattern == "cycle"]


def _cd_srcc(n: int) -> list[Event]:
    events: list[Event] = []
    for i in range(n):
        line = 13008 + 7 * i + (i % 2) * 3
        events.append(ToolCall("bash", {"command": "cd srcc"}))
        events.append(ToolResult(f"bash: line {line}: cd: srcc: No such file or directory", tool="bash", exit_code=1))
    return events


def test_the_same_failing_command_is_caught_by_the_third_attempt() -> None:
    guard = Guard()
    events = _cd_srcc(8)
    verdicts = run(guard, events, enforce=True)
    assert all(v.ok for v in verdicts[:4])
    assert not verdicts[4].ok or not verdicts[5].ok
    assert verdicts[-2].action == "stop"


def test_the_same_failing_command_is_reported_as_error_retry() -> None:
    guard = Guard()
    verdicts = run(guard, _cd_srcc(8))
    assert "error_retry" in {v.pattern for v in verdicts if not v.ok}


def test_error_retry_with_varying_commands_and_line_numbers() -> None:
    guard = Guard()
    events: list[Event] = []
    for i, command in enumerate(["cd srcc", "cd ./srcc", "cd srcc/", "cd  srcc/."]):
        events.append(ToolCall("bash", {"command": command}))
        events.append(
            ToolResult(f"bash: line {13008 + 15 * i}: cd: srcc: No such file or directory", tool="bash", exit_code=1)
        )
    verdicts = run(guard, events)
    retry = [v for v in verdicts if v.pattern == "error_retry"]
    assert retry and retry[0].action == "nudge" and retry[0].count == 3
    assert retry[0].loop_start == 0
    assert all(v.ok for v in verdicts[: verdicts.index(retry[0])])


_SCRIPT = "from sympy import symbols\n\nk = symbols('k')\nprint(k)"


def _script_sent_as_a_command(tools: Sequence[str]) -> list[Event]:
    """A script's body sent to the shell instead of written to a file, under each of ``tools`` in turn (a harness
    that names the tool after the command's first word), refused by bash the same way each time."""
    events: list[Event] = []
    for n, tool in enumerate(tools):
        command = _SCRIPT if tool == "from" else f"{tool}\n{_SCRIPT}"
        line = f"/bin/bash: line {4 + n}:"
        error = f"{line} syntax error near unexpected token `('\n{line} `k = symbols('k')'"
        events += [ToolCall(tool, {"command": command}), ToolResult(error, tool=tool, is_error=True)]
    return events


def test_the_same_failing_action_under_another_tool_name_is_the_same_retry() -> None:
    found = _retries(run(Guard(), _script_sent_as_a_command(["from", "1:1", "1:1"])))
    assert [(count, start) for count, start, _ in found][:1] == [(3, 0)]
    # another action failing the same way right after, under another name, is not a retry of the first one
    events = _script_sent_as_a_command(["from", "1:1", "1:1"])
    other = ToolCall("1:1", {"command": "1:1\nimport os\nos.remove(path_of('data.csv'))\nprint('removed')"})
    events[2] = events[4] = other
    assert _retries(run(Guard(), events)) == []
    # the latest failure's tool is kept in a snapshot: a guard restored after the first failure counts on
    events = _script_sent_as_a_command(["from", "1:1", "1:1"])
    first = Guard()
    run(first, events[:2])
    snapshot = first.snapshot("s")
    assert '"failed": "from"' in json.dumps(snapshot)
    restored = Guard()
    restored.restore(snapshot, "s")
    assert [count for count, _, _ in _retries(run(restored, events[2:]))][:1] == [3]
    # a success in between ends it: the third failure is the second of its tool
    events = _script_sent_as_a_command(["from", "1:1", "1:1"])
    events[2:2] = [ToolCall("1:1", {"command": "1:1\nx = 1"}), ToolResult("File updated.", tool="1:1", is_error=False)]
    assert _retries(run(Guard(), events)) == []


def _run_script(errors: list[str]) -> list[Event]:
    """``python run.py`` failing with each of ``errors`` in turn, edited in between by nothing."""
    events: list[Event] = []
    for n, error in enumerate(errors):
        events.append(ToolCall("bash", {"command": f"python run.py --try {n}"}))
        events.append(ToolResult(f"Traceback (most recent call last):\n{error}", tool="bash", exit_code=1))
    return events


_INDENT = "IndentationError: unexpected indent in line 3 of the generated script"
_MISSING = "FileNotFoundError: [Errno 2] No such file or directory: 'apple_stock_data.csv'"


def _retries(verdicts: Sequence[Verdict]) -> list[tuple[int, int | None, str]]:
    return [(v.count, v.loop_start, v.reason or "") for v in verdicts if v.pattern == "error_retry"]


def test_a_second_error_counts_on_its_own_until_the_first_one_comes_back() -> None:
    # A, B, B: two failures of B after an A, not three "alternating" failures
    assert _retries(run(Guard(), _run_script([_INDENT, _MISSING, _MISSING]))) == []
    # A, B, A: the first error came back, the streak alternates
    found = _retries(run(Guard(), _run_script([_INDENT, _MISSING, _INDENT])))
    assert [(count, start) for count, start, _ in found] == [(3, 0)]
    assert "the same two alternating errors" in found[0][2]
    # A, B, B, B: the third B is the third failure of its own streak, which began at the first B
    found = _retries(run(Guard(), _run_script([_INDENT, _MISSING, _MISSING, _MISSING])))
    assert [(count, start) for count, start, _ in found] == [(3, 2)]
    assert "the same error" in found[0][2]


def test_another_action_answered_with_another_error_starts_afresh() -> None:
    # the same filter quoted another way each time: the error moves with the quoting, so each change had an
    # effect; the streak does not alternate across them
    invalid = 'MSBUILD : error MSB4177: Invalid property. The name "SQLite.Classic)" contains an invalid character.'
    failed = "Failed Issue4414Test [418 ms]\nSystem.InvalidOperationException : Unable to configure HTTP"
    filters = ["Name~Issue4414", 'Name=Issue(\\"SQLite\\")', "Name='Issue(SQLite)'", "Name=Issue\\(SQLite\\)"]
    filters.append("Name~Issue4414&Name~SQLite.Classic")
    events: list[Event] = []
    for n, (text, output) in enumerate(zip(filters, [failed, invalid, invalid, invalid, failed], strict=True)):
        events.append(ToolCall("bash", {"command": f"dotnet test Tests.csproj --no-build --filter {text}"}, id=f"c{n}"))
        events.append(ToolResult(output, id=f"c{n}", is_error=True))
    assert _retries(run(Guard(), events)) == []
    # the same action alternating between two errors still is one streak (see above: A, B, A)
    found = _retries(run(Guard(), _run_script([_INDENT, _MISSING, _INDENT])))
    assert [(count, start) for count, start, _ in found] == [(3, 0)]


def test_error_retry_streaks_saved_before_switches_were_kept_still_load() -> None:
    guard = Guard()
    run(guard, _run_script([_INDENT, _MISSING]))
    snapshot = guard.snapshot("s")
    text = json.dumps(snapshot)
    assert '"switch": [1, 2]' in text  # the second error began at step 2, after one failure of the first
    old = json.loads(text.replace(', "switch": [1, 2]', "").replace('"switch": [1, 2], ', ""))
    assert '"switch"' not in json.dumps(old)
    restored = Guard()
    restored.restore(old, "s")
    # an old streak is read as it was saved, alternating: a second B makes three; a new one waits for a third B
    found = _retries(run(restored, _run_script([_MISSING])[:2], session="s"))
    assert [count for count, _, _ in found] == [3]
    assert _retries(run(guard, _run_script([_MISSING])[:2], session="s")) == []


def test_a_damaged_second_error_is_refused_at_restore() -> None:
    guard = Guard()
    run(guard, _run_script([_INDENT, _MISSING]))
    text = json.dumps(guard.snapshot("s"))
    for bad in ('"x"', "[1]", '[1, "2"]'):
        with pytest.raises(StateError):
            Guard().restore(json.loads(text.replace('"switch": [1, 2]', f'"switch": {bad}')))


# -- resets ------------------------------------------------------------------------------------------------


def test_a_new_user_message_resets_streaks() -> None:
    guard = Guard()
    events = [*same_call(2), Message("user", "please try again"), *same_call(2)]
    assert all(v.ok for v in run(guard, events))
    control = Guard()
    assert not all(v.ok for v in run(control, same_call(4)))


def test_the_same_user_reply_again_does_not_reset() -> None:
    guard = Guard()
    events = [*same_call(2), Message("user", "continue"), *same_call(2), Message("user", "continue"), *same_call(1)]
    verdicts = run(guard, events)
    assert all(v.ok for v in verdicts[:-2])
    assert verdicts[-2].action == "nudge" and verdicts[-2].pattern == "repeat"


def test_user_messages_do_not_reset_when_the_policy_says_so() -> None:
    guard = Guard(policy=preset("default").replace(reset_on_user=False))
    events = [*same_call(2), Message("user", "please try again"), *same_call(1)]
    verdicts = run(guard, events)
    assert verdicts[-2].action == "nudge" and verdicts[-2].pattern == "repeat"


def test_user_messages_reset_streaks_but_limits_keep_counting() -> None:
    guard = Guard(policy=preset("default").replace(limits=max_iterations(7)))
    events = [*same_call(2), Message("user", "one"), *same_call(2), Message("user", "two"), *same_call(2)]
    verdicts = run(guard, events)
    assert all(v.ok for v in verdicts)  # 6 calls, never 3 in a row after a new prompt
    last = guard.observe("s", ToolCall("other_tool", {}))
    assert last.action == "stop" and last.status == "MAX_ITERATIONS"


def test_reset_event_and_guard_reset() -> None:
    guard = Guard()
    assert all(v.ok for v in run(guard, [*same_call(2), Reset(), *same_call(2)]))
    guard.reset("s")
    assert all(v.ok for v in run(guard, same_call(2)))
    assert guard.observe("s", ToolCall("read_file", {"path": "src/app.py"})).action == "nudge"
    guard.reset("never-seen")  # no error
    assert "never-seen" not in guard.sessions()


def test_guard_reset_clears_a_stop() -> None:
    guard = Guard()
    verdicts = run(guard, same_call(8), enforce=True)
    assert verdicts[-2].action == "stop"
    guard.reset("s")
    assert guard.observe("s", ToolCall("read_file", {"path": "src/app.py"})).ok


def test_after_a_stop_every_event_gets_the_same_stop_and_no_new_audit() -> None:
    sink = MemorySink()
    guard = Guard(sinks=[sink])
    verdicts = run(guard, same_call(8), enforce=True)
    stop = verdicts[-2]
    assert stop.action == "stop"
    assert sink.events().count("loop.stop") == 1 and sink.events().count("session.terminated") == 1
    later_events: list[Event] = [
        ToolResult("x", tool="read_file"),
        ToolCall("something_else", {"a": 1}),
        Message("user", "hello?"),
        Usage(cost=1.0),
        TextDelta("..."),
    ]
    for i, event in enumerate(later_events):
        later = guard.observe("s", event)
        assert later.action == "stop"
        assert (later.pattern, later.count, later.status, later.loop_start, later.message) == (
            stop.pattern,
            stop.count,
            stop.status,
            stop.loop_start,
            stop.message,
        )
        assert later.index == stop.index + 2 + i
    assert sink.events().count("loop.stop") == 1
    assert sink.events().count("session.terminated") == 1


# -- sessions -------------------------------------------------------------------------------------------


def test_sessions_are_isolated() -> None:
    guard = Guard()
    one, two = same_call(4), same_call(4)
    got: dict[str, list[Verdict]] = {"one": [], "two": []}
    for a, b in zip(one, two, strict=True):
        got["one"].append(guard.observe("one", a))
        got["two"].append(guard.observe("two", b))
    alone = run(Guard(), one)
    assert [key(v) for v in got["one"]] == [key(v) for v in alone]
    assert [key(v) for v in got["two"]] == [key(v) for v in alone]
    assert guard.observe("three", ToolCall("read_file", {"path": "src/app.py"})).ok
    assert sorted(guard.sessions()) == ["one", "three", "two"]


def test_forget_drops_a_session() -> None:
    guard = Guard()
    run(guard, same_call(2))
    guard.forget("s")
    assert guard.sessions() == []
    assert all(v.ok for v in run(guard, same_call(2)))


# -- snapshot / restore ---------------------------------------------------------------------------------------


def test_snapshot_is_json() -> None:
    guard = Guard()
    run(guard, mixed_run()[:30])
    snap = guard.snapshot("s")
    assert json.loads(json.dumps(snap)) == json.loads(json.dumps(snap, sort_keys=True))
    assert snap["session"] == "s"
    assert guard.snapshot("unknown")["state"]["index"] == 0


def test_snapshot_restore_mid_run_continues_identically() -> None:
    events = mixed_run()
    full = [v.to_json() for v in run(Guard(), events)]
    assert any(v["action"] != "ok" for v in full)
    for cut in range(0, len(events) + 1, 3):
        first = Guard()
        head = [v.to_json() for v in run(first, events[:cut])]
        data = json.loads(json.dumps(first.snapshot("s")))
        second = Guard()
        second.restore(data)
        tail = [v.to_json() for v in run(second, events[cut:])]
        assert head + tail == full, f"diverged after restoring at event {cut}"


def test_restore_under_another_name() -> None:
    first = Guard()
    run(first, same_call(2))
    second = Guard()
    second.restore(json.loads(json.dumps(first.snapshot("s"))), session="renamed")
    assert second.sessions() == ["renamed"]
    assert second.observe("renamed", ToolCall("read_file", {"path": "src/app.py"})).action == "nudge"


def test_snapshot_restore_with_call_ids_and_an_extra_result() -> None:
    events: list[Event] = []
    for i in range(9):
        events += [
            ToolCall("read_file", {"path": "a.py"}, id=f"c{i}"),
            ToolResult("same", id=f"c{i}"),
            ToolResult("a stray result", tool="read_file"),
        ]
    full = [key(v) for v in run(Guard(), events)]
    first = Guard()
    head = [key(v) for v in run(first, events[:1])]
    second = Guard()
    second.restore(json.loads(json.dumps(first.snapshot("s"))))
    assert head + [key(v) for v in run(second, events[1:])] == full


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        "state",
        42,
        [],
        {},
        {"session": "s"},
        {"session": "s", "state": None},
        {"session": "s", "state": "corrupt"},
        {"session": "s", "state": []},
        {"session": "s", "state": {}},
        {"session": "s", "state": {"v": 999}},
        {"session": 5, "state": {"v": 1}},
    ],
    ids=repr,
)
def test_restore_of_garbage_raises_state_error(garbage: Any) -> None:
    guard = Guard()
    with pytest.raises(StateError):
        guard.restore(garbage)
    assert guard.sessions() == []


def test_restore_of_a_damaged_snapshot_raises_state_error() -> None:
    guard = Guard()
    run(guard, mixed_run()[:20])
    good = json.loads(json.dumps(guard.snapshot("s")))
    damaged: list[dict[str, Any]] = []
    for field in ("index", "detectors", "ladders", "usage", "calls"):
        broken = json.loads(json.dumps(good))
        del broken["state"][field]
        damaged.append(broken)
    fewer = json.loads(json.dumps(good))
    fewer["state"]["detectors"] = fewer["state"]["detectors"][1:]  # a rule missing, not at the end
    damaged.append(fewer)
    wrong_keys = json.loads(json.dumps(good))
    wrong_keys["state"]["detectors"][0] = {"nonsense": True}
    damaged.append(wrong_keys)
    negative = json.loads(json.dumps(good))
    negative["state"]["index"] = -3
    damaged.append(negative)
    for data in damaged:
        with pytest.raises(StateError):
            Guard().restore(data)


def test_a_snapshot_from_before_the_preset_gained_rules_still_loads() -> None:
    """Rules added to a preset go last; a snapshot taken before (fewer rule states, the same preset) loads,
    the new rules starting afresh, and a stop it recorded stays."""
    guard = Guard(preset="default-lexical", clock=None)
    call = ToolCall("bash", {"command": "cat /etc/missing"}, id="c")
    for n in range(12):
        guard.observe("s", ToolCall("bash", {"command": "cat /etc/missing"}, id=f"c{n}"))
        guard.observe("s", ToolResult("cat: /etc/missing: No such file or directory", id=f"c{n}"))
    assert guard.observe("s", call).action == "stop"
    old = json.loads(json.dumps(guard.snapshot("s")))
    old["state"]["detectors"] = old["state"]["detectors"][:-3]  # no state for the rules added last
    assert [d.name for d in guard.policy.detectors][-3:] == ["rerun", "self_report", "revisit"]
    for state in old["state"]["detectors"]:
        state.pop("asked", None)  # nor for the rephrase rule's instructions
        state.pop("quiet", None)  # nor for failure_streak's empty results
        for streak in state.get("streaks", {}).values():
            streak.pop("switch", None)  # nor for error_retry's second errors
    assert '"switch"' not in json.dumps(old) and '"quiet"' not in json.dumps(old)
    fresh = Guard(preset="default-lexical", clock=None)
    fresh.restore(old)
    assert fresh.observe("s", call).action == "stop"
    renamed = json.loads(json.dumps(old))
    renamed["state"]["policy"] = "another"
    with pytest.raises(StateError):
        Guard(preset="default-lexical", clock=None).restore(renamed)


def test_restore_rejects_damaged_sketches_and_cycle_windows_at_once() -> None:
    """Damage a rule's own data: restore refuses it (it does not fail later, inside observe or snapshot)."""
    guard = Guard(preset="default-lexical")
    run(guard, mixed_run()[:20])
    good = json.loads(json.dumps(guard.snapshot("s")))
    names = [d.name for d in guard.policy.detectors]
    similar, cycle = names.index("similar_text"), names.index("cycle")
    assert good["state"]["detectors"][similar]["history"], "the run must leave turn sketches"
    for bad in ("/" * 344, "not base64!", ["a", "list"]):  # 2,064 bits; not base64; a word list
        broken = json.loads(json.dumps(good))
        broken["state"]["detectors"][similar]["history"][-1] = bad
        with pytest.raises(StateError):
            Guard(preset="default-lexical").restore(broken)
    wider = json.loads(json.dumps(good))
    wider["state"]["detectors"][cycle]["match"].append(0)  # a window for another max_period
    with pytest.raises(StateError):
        Guard(preset="default-lexical").restore(wider)
    restored = Guard(preset="default-lexical")
    restored.restore(good)  # the undamaged snapshot still loads and goes on as the original does
    assert restored.snapshot("s") == good


def test_restore_of_a_snapshot_from_another_preset_raises_state_error() -> None:
    other = Guard(preset="doom-loop")
    run(other, same_call(2))
    with pytest.raises(StateError):
        Guard().restore(json.loads(json.dumps(other.snapshot("s"))))


# -- threads ------------------------------------------------------------------------------------------------


def thread_events(k: int) -> list[Event]:
    """500 events with loops in them (repeats, cycles, errors), different per k."""
    events: list[Event] = []
    i = 0
    while len(events) < 500:
        phase = (i + k) % 4
        if phase == 0:
            events += same_call(4, args={"path": f"f{k}_{i}.py"})
        elif phase == 1:
            events += _cd_srcc(3)
        elif phase == 2:
            for _ in range(3):
                events += [
                    ToolCall("a", {"k": k}),
                    ToolResult("A", tool="a"),
                    ToolCall("b", {"k": k}),
                    ToolResult("B", tool="b"),
                ]
        else:
            events += [Message("user", f"prompt {NATO[i % len(NATO)]} {k}"), Usage(cost=0.001)]
        i += 1
    return events[:500]


def test_threads_separate_sessions_and_one_shared_session() -> None:
    guard = Guard()
    per_session: dict[str, list[Verdict]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)

    def own(k: int) -> None:
        try:
            events = thread_events(k)
            barrier.wait()
            per_session[f"own-{k}"] = [guard.observe(f"own-{k}", e) for e in events]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def shared(k: int) -> None:
        try:
            events = thread_events(100 + k)
            barrier.wait()
            for e in events:
                guard.observe("shared", e)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=own, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=shared, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert guard.stats["events"] == 16 * 500
    assert guard.stats["errors"] == 0 and guard.stats["skipped"] == 0
    for k in range(8):
        alone = run(Guard(), thread_events(k), session=f"own-{k}")
        assert [v.to_json() for v in per_session[f"own-{k}"]] == [v.to_json() for v in alone]
    assert guard.snapshot("shared")["state"]["index"] == 8 * 500


# -- audit ---------------------------------------------------------------------------------------------------


def test_memory_sink_gets_nudge_block_stop_records() -> None:
    sink = MemorySink()
    guard = Guard(sinks=[sink])
    run(guard, same_call(3))
    assert sink.events() == ["loop.nudge"]
    record = sink.records[0]
    assert record["session"] == "s"
    assert record["action"] == "nudge" and record["pattern"] == "repeat" and record["count"] == 3
    assert record["index"] == 4
    run(guard, same_call(5), enforce=True)
    assert sink.events() == ["loop.nudge", "loop.block", "loop.block", "loop.block", "loop.stop", "session.terminated"]
    stop, terminated = sink.records[-2], sink.records[-1]
    assert stop["status"] == "LOOP_DETECTED" == terminated["status"]
    assert terminated["index"] == stop["index"]


def test_jsonl_sink_redacts_secrets_in_args(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "loops.jsonl"
    sink = JsonlAuditSink(path, fsync=False)
    guard = Guard(sinks=[sink])
    args = {"url": "https://api.example.com/v1", "api_key": SECRET}
    run(guard, same_call(8, "http_get", args, "HTTP 500"), enforce=True)
    sink.close()
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["event"] for r in records][-2:] == ["loop.stop", "session.terminated"]
    assert records[0]["event"] == "loop.nudge"
    assert SECRET not in path.read_text()
    assert all(r["evidence"]["args"]["api_key"] == "[REDACTED]" for r in records)
    assert records[0]["evidence"]["args"]["url"] == "https://api.example.com/v1"


def test_records_are_written_before_observe_returns() -> None:
    guard: Guard
    seen: list[tuple[str, int, int]] = []

    class StatsSink:
        def emit(self, record: dict[str, Any]) -> None:
            seen.append((record["event"], record["index"], guard.stats["events"]))

    guard = Guard(sinks=[StatsSink()])
    events = same_call(3)
    for i, event in enumerate(events):
        verdict = guard.observe("s", event)
        if not verdict.ok:
            assert seen and seen[-1][:2] == (f"loop.{verdict.action}", i)  # already there on return
    assert seen == [("loop.nudge", 4, 5)]


def test_a_failing_sink_is_counted_and_does_not_raise() -> None:
    class Broken:
        def emit(self, record: dict[str, Any]) -> None:
            raise RuntimeError("disk on fire")

    backup = MemorySink()
    guard = Guard(sinks=[Broken(), backup])
    verdicts = run(guard, same_call(5))
    assert [v.action for v in calls_only(verdicts, same_call(5))] == ["ok", "ok", "nudge", "ok", "block"]
    assert guard.stats["audit_errors"] == 2
    assert backup.events() == ["loop.nudge", "loop.block"]  # the other sinks still get them


def test_a_failing_sink_raises_with_on_audit_error_raise() -> None:
    class Broken:
        def emit(self, record: dict[str, Any]) -> None:
            raise RuntimeError("disk on fire")

    guard = Guard(sinks=[Broken()], on_audit_error="raise")
    events = same_call(3)
    for event in events[:4]:
        guard.observe("s", event)
    with pytest.raises(RuntimeError, match="disk on fire"):
        guard.observe("s", events[4])
    assert guard.stats["audit_errors"] == 1


def test_listeners_get_records_and_a_failing_listener_is_harmless() -> None:
    got: list[dict[str, Any]] = []

    def failing(record: dict[str, Any]) -> None:
        raise ValueError("listener bug")

    guard = Guard(listeners=[failing, got.append])
    verdicts = run(guard, same_call(3))
    assert verdicts[4].action == "nudge"
    assert [r["event"] for r in got] == ["loop.nudge"]
    assert got[0]["pattern"] == "repeat"
    assert guard.stats["errors"] == 1


def test_limit_warnings_are_audited_as_such() -> None:
    sink = MemorySink()
    guard = Guard(policy=preset("default").replace(limits=max_iterations(3)), sinks=[sink])
    run(guard, [ToolCall("t", {"i": i}) for i in range(3)])
    assert sink.events() == ["loop.stop", "session.terminated"]
    assert sink.records[0]["status"] == "MAX_ITERATIONS"


# -- eviction ----------------------------------------------------------------------------------------------


def test_evict_idle_with_a_fake_clock() -> None:
    now = [1000.0]
    guard = Guard(clock=lambda: now[0])
    run(guard, same_call(2), session="old")
    now[0] = 1050.0
    run(guard, same_call(2), session="recent")
    now[0] = 1100.0
    assert guard.evict_idle(60) == 1
    assert guard.sessions() == ["recent"]
    assert guard.stats["evicted"] == 1
    # the evicted session starts over; the other one still remembers its streak
    assert guard.observe("old", ToolCall("read_file", {"path": "src/app.py"})).ok
    assert guard.observe("recent", ToolCall("read_file", {"path": "src/app.py"})).action == "nudge"
    assert guard.evict_idle(1000) == 0


def test_evict_idle_without_a_clock_does_nothing() -> None:
    guard = Guard(clock=None)
    run(guard, same_call(1))
    assert guard.evict_idle(0) == 0
    assert guard.sessions() == ["s"]


def test_max_sessions_evicts_the_least_recently_used() -> None:
    guard = Guard(max_sessions=2)
    run(guard, same_call(2), session="a")
    run(guard, same_call(2), session="b")
    guard.observe("a", Message("assistant", "still here"))  # a is now the most recent
    run(guard, same_call(1), session="c")
    assert sorted(guard.sessions()) == ["a", "c"]
    assert guard.stats["evicted"] == 1
    assert guard.observe("a", ToolCall("read_file", {"path": "src/app.py"})).action == "nudge"
    assert guard.observe("b", ToolCall("read_file", {"path": "src/app.py"})).ok  # b forgot its streak


# -- async ----------------------------------------------------------------------------------------------------


def test_async_guard_gives_the_same_verdicts() -> None:
    events = mixed_run()
    expected = [v.to_json() for v in run(Guard(), events)]

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        guard = AsyncGuard()
        got = [(await guard.observe("s", e)).to_json() for e in events]
        snap = await guard.snapshot("s")
        await guard.reset("s")
        await guard.restore(snap)
        assert await guard.evict_idle(10**9) == 0
        return got, snap

    got, snap = asyncio.run(main())
    assert got == expected
    assert snap["state"]["index"] == len(events)


def test_async_guard_exposes_policy_and_stats() -> None:
    guard = AsyncGuard(preset="doom-loop")
    assert guard.policy.name == "doom-loop"

    async def feed() -> None:
        await guard.observe("s", {"type": "bogus"})

    asyncio.run(feed())
    assert guard.stats["skipped"] == 1


def test_guard_options_are_checked() -> None:
    with pytest.raises(ValueError):
        Guard(on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Guard(on_audit_error="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Guard(preset="no-such-preset")
    with pytest.raises(ValueError):
        Guard(preset="default", policy=preset("default"))


def test_an_evicted_session_forgets_its_swarm() -> None:
    guard = Guard(max_sessions=1)
    guard.observe("a", ToolCall("search", {"q": "x"}), swarm="team")
    guard.observe("b", ToolCall("search", {"q": "x"}))  # evicts a
    assert guard.sessions() == ["b"]
    guard.observe("a", ToolCall("search", {"q": "x"}))  # a new session, in no swarm
    counts = guard.swarm_snapshot("team")["counts"]
    assert [entry[0] for entry in counts.values()] == [1]


def test_a_swarm_is_read_and_cleared_by_the_name_observe_gave_it() -> None:
    """A swarm named by a number (or a UUID) is named by its text, in observe() as in swarm_snapshot() and clear_swarm()
    (the in-process backend takes names as strings, compiled or not)."""
    guard = Guard()
    guard.observe("a", ToolCall("search", {"q": "x"}), swarm=7)  # type: ignore[arg-type]
    assert guard.swarm_snapshot(7)["counts"] == guard.swarm_snapshot("7")["counts"] != {}  # type: ignore[arg-type]
    assert guard.swarm_snapshot(7)["swarm"] == "7"  # type: ignore[arg-type]
    guard.clear_swarm(7)  # type: ignore[arg-type]
    assert guard.swarm_snapshot("7")["counts"] == {}
    with pytest.raises(EventError):
        guard.clear_swarm(None)  # type: ignore[arg-type]


def test_the_guard_hands_its_backend_plain_values() -> None:
    """What a user may pass that the session backend (compiled) would refuse: a truthy ``limits``, a clock giving a
    ``Decimal``, a swarm name longer than a name is kept; and a typed error for what is no number of seconds."""
    from decimal import Decimal

    ticks = iter(range(1_000))
    guard = Guard(clock=lambda: Decimal(next(ticks)))
    assert guard.observe("a", ToolCall("bash", {"command": "ls"})).action == "ok"
    guard.reset("a", limits=1)  # type: ignore[arg-type]
    guard.reset("unknown", limits=1)  # type: ignore[arg-type]
    guard.restore(guard.snapshot("a"), session="b")
    assert guard.sessions() == ["a", "b"]
    assert guard.evict_idle(Decimal(10**6)) == 0 and guard.evict_idle(0) == 2  # real numbers are seconds
    with pytest.raises(ConfigError, match="max_idle_seconds"):
        guard.evict_idle("60")  # type: ignore[arg-type]
    long_name = "q" * 2_000
    guard.restore_swarm({"swarm": long_name, "counts": {"f": [1, ["w"], "t"]}})
    assert guard.swarm_snapshot(long_name)["counts"] == {"f": [1, ["w"], "t"]}
    guard.clear_swarm(long_name)
    assert guard.swarm_snapshot(long_name)["counts"] == {}


def test_time_stamps_given_as_ints_stay_ints_in_a_snapshot() -> None:
    """The counters keep a time stamp as it was given, compiled or not (a compiled path that tested it as a float
    would make it one, and the snapshot JSON would differ between the two)."""
    guard = Guard(clock=lambda: 100)
    guard.observe("a", ToolCall("bash", {"command": "ls"}, ts=5))
    guard.observe("a", ToolResult("x", tool="bash", ts=7))
    usage = guard.snapshot("a")["state"]["usage"]
    assert (usage["first_ts"], usage["last_ts"]) == (5, 7)
    assert type(usage["first_ts"]) is int and type(usage["last_ts"]) is int
    guard.observe("b", ToolCall("bash", {"command": "ls"}))  # no ts: the guard's clock, an int
    assert type(guard.snapshot("b")["state"]["usage"]["first_ts"]) is int
