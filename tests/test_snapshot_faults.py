"""Mutated snapshots (hypothesis): whatever ``restore`` accepts, detection goes on. A snapshot is refused with a
``StateError``, or it is loaded and every later event is judged: at most one internal error, after which the
session starts afresh (``stats["state_resets"]``) and no error follows."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch import Guard, Message, TextDelta, ToolCall, ToolResult, Usage
from loopwatch.errors import StateError

PRESETS = ["default-lexical", "doom-loop", "behavioral", "jaccard-turns", "call-cycles", "ralph"]
TRAFFIC = [
    ToolCall("bash", {"command": "cd srcc"}),
    ToolResult("bash: cd: srcc: No such file or directory", tool="bash", is_error=True),
    Message("assistant", "I will try the same command again. " * 8),
    TextDelta("the same sentence again. " * 4),
    Usage(cost=0.1, input_tokens=5),
    ToolCall("grep", {"pattern": "foo"}),
    ToolResult("No matches found", tool="grep"),
]


def _snapshot(name: str) -> dict[str, Any]:
    guard = Guard(preset=name, clock=lambda: 1_000.0)
    for _ in range(4):
        for event in TRAFFIC:
            guard.observe("s", event)
    return guard.snapshot("s")


SNAPSHOTS = {name: _snapshot(name) for name in PRESETS}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*path, i))


# values of every JSON type and shape a damaged or hand-edited snapshot could hold
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.integers()), max_size=3),
    st.just("DELETE"),
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(PRESETS))
    snapshot = copy.deepcopy(SNAPSHOTS[name])
    paths = [p for p in _paths(snapshot["state"]) if p]
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3)):
        parent: Any = snapshot["state"]
        try:
            for key in path[:-1]:
                parent = parent[key]
            value = draw(HOSTILE)
            if value == "DELETE" and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):  # an earlier change removed or replaced the parent
            continue
    return name, json.loads(json.dumps(snapshot))  # what a snapshot read back from JSON holds


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_snapshot_is_refused_or_detection_goes_on(case: tuple[str, dict[str, Any]]) -> None:
    name, snapshot = case
    logging.disable(logging.CRITICAL)
    try:
        guard = Guard(preset=name, clock=lambda: 2_000.0)
        try:
            guard.restore(snapshot)
        except StateError:
            return
        verdicts = [guard.observe("s", event) for _ in range(3) for event in TRAFFIC]
    finally:
        logging.disable(logging.NOTSET)
    # at most the first event met the damage; the session then started afresh and every event was judged
    assert guard.stats["errors"] <= 1 and guard.stats["state_resets"] == guard.stats["errors"]
    assert all(v.index >= 0 for v in verdicts)


@pytest.mark.parametrize("name", PRESETS)
def test_an_intact_snapshot_round_trips(name: str) -> None:
    guard = Guard(preset=name)
    guard.restore(SNAPSHOTS[name])
    assert guard.snapshot("s") == SNAPSHOTS[name]
