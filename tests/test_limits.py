"""Limits: iterations, runtime, cost, tokens, consecutive failures; composition; they survive resets."""

from __future__ import annotations

import math
from typing import Any

import pytest

from loopwatch import Guard, Message, Reset, ToolCall, ToolResult, Usage, Verdict, preset
from loopwatch.core._limits import (
    Limit,
    Limits,
    MaxConsecutiveFailures,
    MaxCost,
    MaxIterations,
    MaxRuntime,
    MaxTokens,
    max_consecutive_failures,
    max_cost,
    max_iterations,
    max_runtime,
    max_tokens,
)
from loopwatch.sinks import MemorySink


def guard_with(limits: Limit | Limits, **kwargs: Any) -> Guard:
    return Guard(policy=preset("default").replace(limits=limits), **kwargs)


def distinct_call(i: int, ts: float | None = None) -> ToolCall:
    """Calls that never repeat, so only limits can say anything about them."""
    return ToolCall("read_file", {"path": f"src/module_{i}.py"}, ts=ts)


def summary(v: Verdict) -> tuple[str, str | None, str | None]:
    return (v.action, v.pattern, v.status)


# -- each limit ------------------------------------------------------------------------------------------


def test_max_iterations_counts_calls_and_assistant_messages() -> None:
    guard = guard_with(max_iterations(5))
    verdicts = [guard.observe("s", distinct_call(0)), guard.observe("s", ToolResult("a", tool="read_file"))]
    verdicts.append(guard.observe("s", Message("assistant", "thinking out loud")))
    verdicts.append(guard.observe("s", Message("user", "go on")))  # not an agent action
    verdicts.append(guard.observe("s", Message("system", "note")))  # neither
    verdicts.append(guard.observe("s", distinct_call(1)))
    verdicts.append(guard.observe("s", distinct_call(2)))
    assert all(v.ok for v in verdicts)  # 4 actions so far
    fifth = guard.observe("s", distinct_call(3))
    assert summary(fifth) == ("stop", "limit", "MAX_ITERATIONS")
    assert "5" in (fifth.reason or "")
    assert fifth.detector == "max_iterations(5)"
    assert fifth.evidence["limit"] == 5


def test_max_runtime_uses_event_timestamps() -> None:
    guard = guard_with(max_runtime(60), clock=None)
    stamps = [1000.0, 1030.0, 1059.9]
    assert all(guard.observe("s", distinct_call(i, ts)).ok for i, ts in enumerate(stamps))
    late = guard.observe("s", distinct_call(9, 1060.0))
    assert summary(late) == ("stop", "limit", "MAX_RUNTIME")


def test_max_runtime_without_timestamps_or_clock_never_fires() -> None:
    guard = guard_with(max_runtime(1), clock=None)
    assert all(guard.observe("s", distinct_call(i)).ok for i in range(30))


def test_max_runtime_uses_the_guard_clock_when_events_have_no_ts() -> None:
    now = [500.0]
    guard = guard_with(max_runtime(100), clock=lambda: now[0])
    assert guard.observe("s", distinct_call(0)).ok
    now[0] = 599.0
    assert guard.observe("s", distinct_call(1)).ok
    now[0] = 600.0
    assert summary(guard.observe("s", distinct_call(2))) == ("stop", "limit", "MAX_RUNTIME")


def test_max_cost_warns_once_at_80_percent_then_stops() -> None:
    sink = MemorySink()
    guard = guard_with(max_cost(1.0), sinks=[sink])
    costs = [0.5, 0.25, 0.125, 0.0625, 0.0625]  # totals 0.5, 0.75, 0.875, 0.9375, 1.0 (exact in binary)
    verdicts = [guard.observe("s", Usage(cost=c)) for c in costs]
    assert [summary(v) for v in verdicts] == [
        ("ok", None, None),
        ("ok", None, None),
        ("nudge", "limit", "MAX_COST"),
        ("ok", None, None),  # warned once only
        ("stop", "limit", "MAX_COST"),
    ]
    assert verdicts[2].message
    assert verdicts[4].evidence["value"] == 1.0
    assert sink.events() == ["limit.warning", "loop.stop", "session.terminated"]


def test_max_cost_without_warning() -> None:
    guard = guard_with(max_cost(1.0, warn_at=None))
    assert guard.observe("s", Usage(cost=0.99)).ok
    assert summary(guard.observe("s", Usage(cost=0.01))) == ("stop", "limit", "MAX_COST")


def test_max_cost_a_single_big_spend_stops_without_warning_first() -> None:
    guard = guard_with(max_cost(2.0))
    assert summary(guard.observe("s", Usage(cost=5.0))) == ("stop", "limit", "MAX_COST")


def test_max_tokens_counts_input_and_output() -> None:
    guard = guard_with(max_tokens(1000))
    assert guard.observe("s", Usage(input_tokens=400, output_tokens=100)).ok
    assert guard.observe("s", Usage(input_tokens=400)).ok
    assert guard.observe("s", Usage(cost=3.0)).ok  # no tokens
    assert summary(guard.observe("s", Usage(output_tokens=100))) == ("stop", "limit", "MAX_TOKENS")


def test_max_consecutive_failures_resets_on_success() -> None:
    guard = guard_with(max_consecutive_failures(3))
    script: list[tuple[str, bool]] = [
        ("a", True),
        ("b", True),
        ("c", False),  # success: the streak starts over
        ("d", True),
        ("e", True),
    ]
    for i, (name, failed) in enumerate(script):
        assert guard.observe("s", ToolCall("tool_" + name, {"i": i})).ok
        assert guard.observe("s", ToolResult(f"result {name}", tool="tool_" + name, is_error=failed)).ok
    guard.observe("s", ToolCall("tool_f", {}))
    third = guard.observe("s", ToolResult("boom", tool="tool_f", is_error=True))
    assert summary(third) == ("stop", "limit", "MAX_CONSECUTIVE_FAILURES")


def test_a_stop_by_a_limit_sticks() -> None:
    guard = guard_with(max_iterations(2))
    guard.observe("s", distinct_call(0))
    stop = guard.observe("s", distinct_call(1))
    assert stop.status == "MAX_ITERATIONS"
    later = guard.observe("s", Message("user", "please continue"))
    assert summary(later) == ("stop", "limit", "MAX_ITERATIONS")


# -- composition -------------------------------------------------------------------------------------------


def test_composition_and_repr() -> None:
    limits = max_iterations(50) | max_cost(5.0)
    assert isinstance(limits, Limits)
    assert repr(limits) == "max_iterations(50) | max_cost(5.0)"
    assert list(limits) == [MaxIterations(50), MaxCost(5.0)]
    three = limits | max_tokens(10)
    assert repr(three) == "max_iterations(50) | max_cost(5.0) | max_tokens(10)"
    assert repr(max_tokens(1) | (max_runtime(60) | max_consecutive_failures(3))) == (
        "max_tokens(1) | max_runtime(60) | max_consecutive_failures(3)"
    )
    assert repr(max_cost(5.0, warn_at=None)) == "max_cost(5.0, warn_at=None)"
    assert repr(max_cost(5.0, warn_at=0.5)) == "max_cost(5.0, warn_at=0.5)"
    assert repr(Limits()) == "Limits()"
    assert not Limits()
    assert limits


def test_limits_equality() -> None:
    assert max_iterations(5) == MaxIterations(5)
    assert max_iterations(5) != max_iterations(6)
    assert max_iterations(5) != max_tokens(5)
    assert (max_iterations(5) | max_cost(1.0)) == (max_iterations(5) | max_cost(1.0))
    assert hash(max_iterations(5) | max_cost(1.0)) == hash(max_iterations(5) | max_cost(1.0))
    assert {max_cost(1.0), max_cost(1.0)} == {max_cost(1.0)}


def test_composed_limits_each_fire() -> None:
    limits = max_iterations(3) | max_cost(1.0, warn_at=None)
    by_cost = guard_with(limits)
    assert summary(by_cost.observe("s", Usage(cost=1.5))) == ("stop", "limit", "MAX_COST")
    by_iterations = guard_with(limits)
    verdicts = [by_iterations.observe("s", distinct_call(i)) for i in range(3)]
    assert [v.status for v in verdicts] == [None, None, "MAX_ITERATIONS"]


def test_a_stop_beats_a_warning() -> None:
    guard = guard_with(max_cost(1.0) | max_tokens(10))
    verdict = guard.observe("s", Usage(cost=0.9, input_tokens=20))
    assert summary(verdict) == ("stop", "limit", "MAX_TOKENS")


def test_a_single_limit_works_as_a_policy_limits() -> None:
    guard = guard_with(max_cost(1.0, warn_at=None))
    assert summary(guard.observe("s", Usage(cost=2.0))) == ("stop", "limit", "MAX_COST")
    assert guard.stats["errors"] == 0


def test_or_with_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        max_iterations(3) | 5  # type: ignore[operator]


# -- invalid values -----------------------------------------------------------------------------------------

BAD_VALUES: list[Any] = [0, -1, -0.5, math.nan, math.inf, -math.inf, True, False, "5", None]


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("factory", [max_iterations, max_cost, max_runtime, max_tokens, max_consecutive_failures])
def test_invalid_values_raise_value_error(factory: Any, value: Any) -> None:
    with pytest.raises(ValueError):
        factory(value)


@pytest.mark.parametrize("factory", [max_iterations, max_tokens, max_consecutive_failures])
def test_count_limits_need_whole_numbers(factory: Any) -> None:
    with pytest.raises(ValueError):
        factory(2.5)
    assert factory(3.0) == factory(3)


@pytest.mark.parametrize("warn_at", [0, 1, 1.5, -0.1, math.nan, "0.8", True])
def test_invalid_warn_at(warn_at: Any) -> None:
    with pytest.raises(ValueError):
        max_cost(5.0, warn_at=warn_at)


def test_classes_and_factories_agree() -> None:
    assert max_runtime() == MaxRuntime(4 * 3600)
    assert max_cost() == MaxCost(10.0)
    assert max_consecutive_failures() == MaxConsecutiveFailures(5)
    assert max_tokens(7) == MaxTokens(7)


# -- limits keep counting through loop resets -----------------------------------------------------------------


def test_limits_keep_counting_across_reset_events_and_user_messages() -> None:
    guard = guard_with(max_iterations(6) | max_cost(1.0, warn_at=None))
    assert guard.observe("s", distinct_call(0)).ok
    assert guard.observe("s", distinct_call(1)).ok
    assert guard.observe("s", Reset()).ok
    assert guard.observe("s", Usage(cost=0.6)).ok
    assert guard.observe("s", Message("user", "new instructions")).ok
    assert guard.observe("s", distinct_call(2)).ok
    guard.reset("s")  # the API reset: loop state only
    assert guard.observe("s", distinct_call(3)).ok
    assert guard.observe("s", Reset()).ok
    assert guard.observe("s", Message("user", "yet another prompt")).ok
    assert guard.observe("s", distinct_call(4)).ok
    assert summary(guard.observe("s", distinct_call(5))) == ("stop", "limit", "MAX_ITERATIONS")
    cost = guard_with(max_cost(1.0, warn_at=None))
    cost.observe("s", Usage(cost=0.6))
    cost.observe("s", Reset())
    cost.observe("s", Message("user", "hello again"))
    assert summary(cost.observe("s", Usage(cost=0.6))) == ("stop", "limit", "MAX_COST")


def test_reset_with_limits_clears_the_counters() -> None:
    guard = guard_with(max_iterations(3))
    guard.observe("s", distinct_call(0))
    guard.observe("s", distinct_call(1))
    guard.reset("s", limits=True)
    assert guard.observe("s", distinct_call(2)).ok
    assert guard.observe("s", distinct_call(3)).ok
    assert guard.observe("s", distinct_call(4)).status == "MAX_ITERATIONS"


def test_consecutive_failures_survive_a_reset_event() -> None:
    guard = guard_with(max_consecutive_failures(2))
    guard.observe("s", ToolCall("a", {}))
    assert guard.observe("s", ToolResult("boom", tool="a", is_error=True)).ok
    guard.observe("s", Reset())
    guard.observe("s", ToolCall("b", {}))
    assert guard.observe("s", ToolResult("bang", tool="b", is_error=True)).status == "MAX_CONSECUTIVE_FAILURES"
