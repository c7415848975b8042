"""Properties of the guard over arbitrary event sequences (hypothesis)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import Event, Guard, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, Verdict

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ----------------------------------------------------------------------------------------------

_ALPHABET = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs"))
POOL_TEXTS = [
    "",
    "ok",
    "done",
    "x = 1\n",
    "bash: line 13008: cd: srcc: No such file or directory",
    'Traceback (most recent call last):\n  File "a.py", line 3\nValueError: bad value',
    "FAILED tests/test_app.py::test_main - AssertionError",
    "3 passed in 0.12s",
    "No matches found",
    "compiling module alpha",
    "I will try again.",
]
texts = st.one_of(st.sampled_from(POOL_TEXTS), st.text(_ALPHABET, max_size=60))
tool_names = st.one_of(
    st.sampled_from(["bash", "read_file", "grep", "edit_file", "check_status", "run_tests"]),
    st.text(_ALPHABET, min_size=1, max_size=16),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(_ALPHABET, max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
arg_keys = st.one_of(
    st.sampled_from(["path", "command", "query", "pattern", "task_progress"]), st.text(_ALPHABET, max_size=8)
)
commands = st.one_of(
    st.sampled_from(
        ["cd srcc", "ls -la", "git status", "git diff", "python -m pytest -x", "cat a.py", "find / -name x"]
    ),
    texts,
)
call_ids = st.one_of(st.none(), st.sampled_from(["c1", "c2", "c3"]))
workers = st.one_of(st.none(), st.sampled_from(["w1", "w2"]))


@st.composite
def tool_calls(draw: st.DrawFn) -> ToolCall:
    tool = draw(tool_names)
    if tool == "bash":
        args: dict[str, Any] = {"command": draw(commands)}
    else:
        args = draw(st.dictionaries(arg_keys, values, max_size=3))
    return ToolCall(tool, args, id=draw(call_ids), thought=draw(st.one_of(st.none(), texts)), worker=draw(workers))


@st.composite
def tool_results(draw: st.DrawFn) -> ToolResult:
    call_id = draw(call_ids)
    tool = draw(tool_names) if call_id is None else draw(st.one_of(st.none(), tool_names))
    return ToolResult(
        draw(texts),
        tool=tool,
        is_error=draw(st.one_of(st.none(), st.booleans())),
        exit_code=draw(st.one_of(st.none(), st.integers(-2, 2))),
        id=call_id,
    )


messages = st.builds(Message, st.sampled_from(["assistant", "user", "system"]), texts, worker=workers)
events: st.SearchStrategy[Event] = st.one_of(
    tool_calls(),
    tool_results(),
    tool_calls(),
    tool_results(),
    messages,
    st.builds(TextDelta, texts),
    st.builds(
        Usage,
        cost=st.one_of(st.none(), st.floats(0, 1)),
        input_tokens=st.one_of(st.none(), st.integers(0, 10_000)),
        output_tokens=st.one_of(st.none(), st.integers(0, 10_000)),
    ),
    st.just(Reset()),
)


@st.composite
def event_runs(draw: st.DrawFn, max_size: int = 80) -> list[Event]:
    """Sequences with repetition in them (so loops happen): mostly events from a small pool, some fresh."""
    pool = draw(st.lists(events, min_size=1, max_size=6))
    picks = draw(st.lists(st.integers(0, len(pool) + 1), max_size=max_size))
    return [pool[i] if i < len(pool) else draw(events) for i in picks]


def project(v: Verdict) -> tuple[Any, ...]:
    return (v.action, v.pattern, v.count, v.level, v.loop_start, v.status, v.index, v.message, v.reason, v.partial)


def run(guard: Guard, run_events: Sequence[Event], session: str = "s") -> list[tuple[Any, ...]]:
    return [project(guard.observe(session, e)) for e in run_events]


# -- properties -------------------------------------------------------------------------------------------------


@SETTINGS
@given(event_runs())
def test_determinism(run_events: list[Event]) -> None:
    first, second = Guard(clock=None), Guard(clock=None)
    assert run(first, run_events) == run(second, run_events)
    assert first.stats["errors"] == 0
    assert json.dumps(first.snapshot("s"), sort_keys=True) == json.dumps(second.snapshot("s"), sort_keys=True)


@SETTINGS
@given(event_runs(max_size=50), event_runs(max_size=50), st.lists(st.booleans(), max_size=100))
def test_session_isolation(one: list[Event], two: list[Event], order: list[bool]) -> None:
    alone_one, alone_two = run(Guard(clock=None), one, "one"), run(Guard(clock=None), two, "two")
    guard = Guard(clock=None)
    got: dict[str, list[tuple[Any, ...]]] = {"one": [], "two": []}
    queues = {"one": list(one), "two": list(two)}
    for pick_one in order + [True] * len(one) + [False] * len(two):
        name = "one" if pick_one else "two"
        if queues[name]:
            got[name].append(project(guard.observe(name, queues[name].pop(0))))
    assert got["one"] == alone_one
    assert got["two"] == alone_two


STATE_BOUND = 16_384
"""Bytes of JSON for one session's state under the default preset. Every per-session structure is capped
(call ids, streaks, windows, histories...), so the state does not grow with the number of events; the
bound only depends on how long the drawn texts can be (60 characters here, escaped as ASCII JSON)."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(event_runs(max_size=300))
def test_bounded_state(run_events: list[Event]) -> None:
    guard = Guard(clock=None)
    biggest = 0
    for i, event in enumerate(run_events):
        guard.observe("s", event)
        if i % 25 == 0 or i == len(run_events) - 1:
            biggest = max(biggest, len(json.dumps(guard.snapshot("s"))))
    assert biggest < STATE_BOUND


def test_bounded_state_long_run() -> None:
    """The same property over thousands of varied events: the size levels off instead of growing."""
    guard = Guard(clock=None)
    sizes = []
    for i in range(3_000):
        tool = f"tool_{i % 37}"
        guard.observe("s", ToolCall(tool, {"path": f"f{i}.py", "query": "q" * (i % 50)}, id=f"id{i}"))
        guard.observe(
            "s", ToolResult(f"error number {i}: something failed " * (i % 3), id=f"id{i}", is_error=i % 2 == 0)
        )
        if i % 7 == 0:
            guard.observe("s", Message("assistant", f"attempt {i} " * 10))
        if i % 500 == 499:
            sizes.append(len(json.dumps(guard.snapshot("s"))))
    assert max(sizes) < STATE_BOUND
    assert sizes[-1] <= 2 * sizes[0]


@SETTINGS
@given(st.data())
def test_snapshot_restore_at_any_point(data: st.DataObject) -> None:
    run_events = data.draw(event_runs())
    cut = data.draw(st.integers(0, len(run_events)))
    full = run(Guard(clock=None), run_events)
    first = Guard(clock=None)
    head = run(first, run_events[:cut])
    second = Guard(clock=None)
    second.restore(json.loads(json.dumps(first.snapshot("s"))))
    assert head + run(second, run_events[cut:]) == full
