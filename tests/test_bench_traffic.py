"""The benchmark's traffic holds the loops it says it holds, and each is caught by the rule meant for it.

``benchmarks/bench_guard.py`` times the guard on sessions of three kinds: working (no loop), stuck repeating
one call, and stuck retrying a failing command with other flags each time. If a kind stopped holding its loop
(a retry session that is really a repeat), the benchmark would time other work than it says; these tests run
its sessions through the real guard and check which rules fire."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopwatch._guard import Guard
from loopwatch.core._events import ToolCall, ToolResult

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load("bench_guard")


SESSIONS = 30


@pytest.fixture(scope="module")
def fired(bench: ModuleType) -> set[tuple[str, str]]:
    """(session, rule name) for every rule that gave a non-ok verdict, over the first sessions of the benchmark."""
    content = bench.Content(1)
    guard = Guard(preset="default-lexical", clock=None)
    names = bench.rule_names(guard.policy)
    out: set[tuple[str, str]] = set()
    for name, _kind, event in bench.wave(content, 0, SESSIONS, 50, 1):
        verdict = guard.observe(name, event)
        if not verdict.ok:
            out.add((name, names[verdict.detector]))
    return out


def test_the_three_kinds_of_session_are_distinct(bench: ModuleType) -> None:
    kinds = [bench.session_kind(n) for n in range(SESSIONS)]
    assert kinds.count("repeat") == SESSIONS // 5
    assert kinds.count("retry") == SESSIONS // 10
    assert kinds.count("working") == SESSIONS - SESSIONS // 5 - SESSIONS // 10


def test_a_retry_session_retries_one_failing_command_with_other_arguments(bench: ModuleType) -> None:
    number = next(n for n in range(SESSIONS) if bench.session_kind(n) == "retry")
    events = [event for _kind, event in bench.session_events(bench.Content(1), number, 50, 1)]
    retried = bench.RETRY_COMMAND.split("{", 1)[0]
    retries = [
        (call, result)
        for call, result in itertools.pairwise(events)
        if isinstance(call, ToolCall) and str(call.args.get("command")).startswith(retried)
        if isinstance(result, ToolResult)
    ]
    assert len(retries) == bench.LOOP_PAIRS
    commands = [call.args["command"] for call, _ in retries]
    assert len(set(commands)) == len(commands)  # never the same call twice: not a repeat
    outputs = {result.output for _, result in retries}
    assert len(outputs) == 1  # the same error each time
    assert "KeyError: 'timeout'" in outputs.pop()


def test_each_loop_is_caught_by_its_rule(bench: ModuleType, fired: set[tuple[str, str]]) -> None:
    by_kind = bench.rules_by_kind(fired, SESSIONS)
    assert by_kind["retry"]["rules"].get("error_retry") == by_kind["retry"]["sessions"] == SESSIONS // 10
    assert "repeat" not in by_kind["retry"]["rules"]
    assert by_kind["repeat"]["rules"].get("repeat") == by_kind["repeat"]["sessions"]
    assert by_kind["working"]["rules"] == {}
    assert all(bench.loops_caught(by_kind).values())


def test_the_report_flags_a_retry_session_caught_by_the_repeat_rule(bench: ModuleType) -> None:
    retry = bench.session_name(next(n for n in range(SESSIONS) if bench.session_kind(n) == "retry"))
    by_kind = bench.rules_by_kind({(retry, "repeat")}, SESSIONS)
    checks = bench.loops_caught(by_kind)
    assert checks["repeat rule in no retry session"] is False
    assert checks["error_retry in every retry session"] is False


def test_each_rule_alone_is_timed_over_the_floor(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """``--each-rule``: one pass per rule of the preset, with that rule alone and no limits, over the floor's
    sessions; the report gives each rule's cost over the floor for each event type."""
    args = bench.argparse.Namespace(preset="default-lexical")
    rules = bench.preset("default-lexical").detectors
    for at, rule in enumerate(rules):
        alone = bench._policy(args, (at,))
        assert alone.detectors == (rule,) and not alone.limits
    assert bench._policy(args, ()).detectors == ()
    small = ["--sessions", "6", "--events", "9", "--wave", "6", "--floor-sessions", "6", "--memory-sessions", "0"]
    small += ["--pause-seconds", "0"]
    assert bench.main([*small, "--each-rule", "--json"]) == 0
    result = bench.json.loads(capsys.readouterr().out)
    assert list(result["alone"]) == [rule.name for rule in rules]
    for per_type in result["alone"].values():
        assert per_type["tool_call"]["count"] == result["floor"]["tool_call"]["count"] > 0
    bench.main([*small, "--each-rule"])
    report = capsys.readouterr().out
    assert "each rule alone" in report
    for rule in rules:
        assert any(line.split()[:1] == [rule.name] for line in report.splitlines())
    bench.main(small)
    assert "each rule alone" not in capsys.readouterr().out
    with pytest.raises(SystemExit):  # without the floor there is nothing to time a rule over
        bench.main([*small[:-6], "--pause-seconds", "0", "--floor-sessions", "0", "--each-rule"])
    assert "--each-rule" in capsys.readouterr().err


def test_passes_report_each_events_fastest_pass(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """``--passes 2``: the same traffic twice through a new guard; the figures of each event's fastest pass can be
    no slower than the first pass's, order statistic by order statistic. The machine's pauses are measured around
    the timed run."""
    content = bench.Content(1)
    assert list(bench.waves(content, 6, 9, 6, 1)) == list(bench.waves(content, 6, 9, 6, 1))  # each pass's events
    small = ["--sessions", "6", "--events", "9", "--wave", "6", "--floor-sessions", "0", "--memory-sessions", "0"]
    small += ["--pause-seconds", "0.05"]
    assert bench.main([*small, "--passes", "2", "--json"]) == 0
    result = bench.json.loads(capsys.readouterr().out)
    best = result["best_of_passes"]
    assert best["passes"] == 2
    for kind in ("tool_call", "tool_result", "message"):
        first, fastest = result["per_type"][kind], best["per_type"][kind]
        assert fastest["count"] == first["count"] > 0
        assert fastest["median_us"] <= first["median_us"] and fastest["p99_us"] <= first["p99_us"]
    pauses = result["machine_pauses"]
    assert pauses["per_second"] >= 0 and 0 <= pauses["time_share"] < 1 and len(pauses["before_and_after"]) == 2
    bench.main([*small, "--passes", "2"])
    assert "fastest of 2 passes" in capsys.readouterr().out
    bench.main(small)
    report = capsys.readouterr().out
    assert "fastest of" not in report and "the machine paused this program" in report
    assert bench.main([*small, "--pause-seconds", "0", "--json"]) == 0  # the last one given counts
    assert "machine_pauses" not in bench.json.loads(capsys.readouterr().out)
    for wrong in (["--passes", "0"], ["--pause-seconds", "-1"]):
        with pytest.raises(SystemExit):
            bench.main([*small, *wrong])
        assert wrong[0] in capsys.readouterr().err
