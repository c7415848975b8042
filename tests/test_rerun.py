"""Changes with no effect: edit, run, same result, edit, run, same result..."""

from __future__ import annotations

import json

import pytest

from loopwatch import Guard, Ladder, ToolCall, ToolResult
from loopwatch.core._engine import Engine
from loopwatch.core._events import Event
from loopwatch.core._policy import Policy
from loopwatch.core.detectors import RerunDetector, rerun
from loopwatch.core.detectors._state import flat_values
from loopwatch.errors import StateError

RUN = {"command": "python reproduce_bug.py"}


def _edit(n: int) -> list[Event]:
    """A different edit each time (another method gets a print), which works."""
    args = {"command": f'edit {170 + 8 * n}:{170 + 8 * n}\n    System.out.println("in method {n}");\nend_of_edit'}
    return [
        ToolCall("edit", args, id=f"e{n}"),
        ToolResult(f"[File: Foo.java (900 lines total)]\n{n}: edited", id=f"e{n}"),
    ]


def _cycle(outputs: list[str], *, edits: bool = True) -> list[Event]:
    events: list[Event] = []
    for n, output in enumerate(outputs):
        if edits:
            events += _edit(n)
        events += [ToolCall("bash", RUN, id=f"r{n}"), ToolResult(output, id=f"r{n}")]
    return events


def _verdicts(events: list[Event], detector: RerunDetector | None = None) -> list[tuple[str, str | None, int]]:
    policy = Policy("t", (detector or rerun(),), {"no_effect": Ladder.of(nudge=3, stop=5)})
    guard = Guard(policy=policy, clock=None)
    return [(v.action, v.pattern, v.count) for v in (guard.observe("s", e) for e in events)]


def test_the_same_result_after_every_edit_is_a_change_with_no_effect() -> None:
    verdicts = _verdicts(_cycle([""] * 5))
    # each round is edit call, edit result, run call, run result: the 3rd run's result is index 11
    assert verdicts[11] == ("nudge", "no_effect", 3)
    assert verdicts[19] == ("stop", "no_effect", 5)
    assert {a for a, _, _ in verdicts[:11]} == {"ok"}


def test_a_result_that_moves_is_progress() -> None:
    outputs = ["Exception at line 3", "Exception at line 9", "Exception in parse", "ok: 2 of 3", "ok: 3 of 3"]
    assert {a for a, _, _ in _verdicts(_cycle(outputs))} == {"ok"}


def test_re_runs_without_changes_are_not_counted() -> None:
    """Nothing changed in between: a plain repeat (the repeat rule's business), not counted here."""
    assert {a for a, _, _ in _verdicts(_cycle([""] * 6, edits=False))} == {"ok"}


def test_a_new_result_starts_over_and_state_stays_small() -> None:
    verdicts = _verdicts(_cycle(["", "", "", "Error: boom", "Error: boom", "Error: boom"]))
    # the 3rd empty run is nudged; the failure starts over, and its own 3rd run is a new streak, nudged again
    assert [(i, v) for i, v in enumerate(verdicts) if v[1]] == [
        (11, ("nudge", "no_effect", 3)),
        (23, ("nudge", "no_effect", 3)),
    ]
    engine = Engine(Policy("t", (rerun(calls=2),), {"no_effect": Ladder.of(nudge=3)}))
    session = engine.new_session()
    for n in range(50):
        pair: list[Event] = [
            ToolCall("bash", {"command": f"python script_{n}.py"}, id=str(n)),
            ToolResult("", id=str(n)),
        ]
        for event in pair:
            engine.observe(session, event)
    assert len(flat_values(session.detectors[0].runs)) == 2
    restored = engine.load(json.loads(json.dumps(engine.dump(session))))
    assert restored.detectors[0] == session.detectors[0]


def test_runs_that_work_and_say_so_never_count() -> None:
    """Re-checking after each step of a refactor: the linter passes every time, the same way."""
    events: list[Event] = []
    for n in range(14):
        events += [
            ToolCall("edit_file", {"path": f"src/m{n}.py", "old_str": f"a{n}", "new_str": f"b{n}"}, id=f"e{n}"),
            ToolResult(f"The file src/m{n}.py has been edited.", id=f"e{n}"),
            ToolCall("bash", {"command": "ruff check src"}, id=f"r{n}"),
            ToolResult("All checks passed!", id=f"r{n}"),
        ]
    assert {a for a, _, _ in _verdicts(events)} == {"ok"}
    guard = Guard(preset="default-lexical", clock=None)
    assert {guard.observe("s", e).action for e in events} == {"ok"}


def test_an_edit_that_failed_is_not_a_change() -> None:
    events: list[Event] = []
    for n in range(5):
        events += [ToolCall("create", {"path": "Foo.java"}, id=f"c{n}"), ToolResult("Error: File exists", id=f"c{n}")]
        events += [ToolCall("bash", RUN, id=f"r{n}"), ToolResult("", id=f"r{n}")]
    assert "no_effect" not in [p for _, p, _ in _verdicts(events)]


def test_a_long_streak_keeps_its_start_and_is_nudged_once() -> None:
    """Past the 8 runs whose indices are kept, the streak is still the same one: no second nudge."""
    policy = Policy("t", (rerun(),), {"no_effect": Ladder.of(nudge=3)})
    guard = Guard(policy=policy, clock=None)
    verdicts = [guard.observe("s", e) for e in _cycle([""] * 12)]
    fired = [(i, v.action, v.loop_start, v.count) for i, v in enumerate(verdicts) if v.pattern == "no_effect"]
    assert fired == [(11, "nudge", 2, 3)]
    engine = Engine(policy)
    session = engine.new_session()
    findings = [engine.observe(session, e) for e in _cycle([""] * 12)]
    assert findings[-1].action == "ok" and session.detectors[0].runs
    (run,) = flat_values(session.detectors[0].runs)
    assert run.count == 12 and run.first == 2 and len(run.indices) == 8  # count, first run, last 8 runs


def test_the_default_preset_has_the_rule() -> None:
    assert any(isinstance(d, RerunDetector) for d in Guard(preset="default-lexical").policy.detectors)
    events = _cycle([""] * 12)
    guard = Guard(preset="default-lexical", clock=None)
    verdicts = [guard.observe("s", e) for e in events]
    assert (verdicts[-1].action, verdicts[-1].pattern, verdicts[-1].count) == ("ok", None, 0)
    nudges = [(i, v.action, v.count) for i, v in enumerate(verdicts) if v.pattern == "no_effect"]
    assert nudges == [(19, "nudge", 5)]  # one nudge, on the fifth identical round; never a block or a stop


def test_look_ups_and_waits_are_left_to_their_own_rules() -> None:
    events: list[Event] = []
    for n in range(5):
        events += _edit(n)
        events += [ToolCall("bash", {"command": "grep -rn needle src"}, id=f"g{n}"), ToolResult("", id=f"g{n}")]
        events += [ToolCall("bash", {"command": "sleep 5"}, id=f"w{n}"), ToolResult("", id=f"w{n}")]
    assert {a for a, _, _ in _verdicts(events)} == {"ok"}


@pytest.mark.parametrize(
    ("runs", "pending"),
    [
        (["not", "an", "object"], None),
        ({"fp": ["o", 2, False, 3]}, None),
        ({"fp": ["o", "2", False, 3, [3]]}, None),
        ({"fp": ["o", 2, False, "3", [3]]}, None),
        ({}, 7),
    ],
)
def test_restore_refuses_a_damaged_state(runs: object, pending: object) -> None:
    engine = Engine(Policy("t", (rerun(),), {"no_effect": Ladder.of(nudge=3)}))
    session = engine.new_session()
    for event in _cycle(["", ""]):
        engine.observe(session, event)
    data = json.loads(json.dumps(engine.dump(session)))
    assert engine.load(data).detectors[0].runs, "the runs must have been recorded"
    data["detectors"][0]["runs"] = runs
    data["detectors"][0]["pending"] = pending
    with pytest.raises(StateError):
        engine.load(data)


def test_bad_settings_are_refused_and_repr_names_them() -> None:
    with pytest.raises(ValueError):
        rerun(threshold=1)
    with pytest.raises(ValueError):
        rerun(calls=0)
    assert repr(rerun()) == "RerunDetector(threshold=3, calls=4)"


def test_a_look_at_what_runs_starts_the_count_over() -> None:
    """Reading the script the run runs is the investigation its sameness calls for."""
    events = _cycle([""] * 2)
    events += [ToolCall("bash", {"command": "cat reproduce_bug.py"}, id="look"), ToolResult("print(1)", id="look")]
    events += _cycle([""] * 2)[4:]  # two more rounds
    assert {a for a, _, _ in _verdicts(events)} == {"ok"}
    assert ("nudge", "no_effect", 3) in _verdicts(_cycle([""] * 4))


def test_the_nudge_names_the_likely_causes() -> None:
    guard = Guard(preset="default-lexical", clock=None)
    message = next(v.message for v in (guard.observe("s", e) for e in _cycle([""] * 5)) if v.pattern == "no_effect")
    assert message is not None
    assert all(cause in message for cause in ("installed copy", "import path", "cache", "build"))


_PARSERS = [
    "import re\ndef parser(log):\n    return dict(re.findall(r'(\\w+) \\.\\.\\. (ok|FAILED)', log))",
    "import xml.etree.ElementTree as ET\ndef parser(log):\n    root = ET.fromstring(log)\n    return {}",
    "def parser(log):\n    out = {}\n    for line in log.splitlines():\n        out[line] = 'pass'\n    return out",
    "import html, json\ndef parser(log):\n    return json.loads(html.unescape(log))",
    "def parser(log: str) -> dict[str, str]:\n    return {name: 'fail' for name in log.split()}",
]


def _scripts(outputs: list[str]) -> list[Event]:
    events: list[Event] = []
    for n, (script, output) in enumerate(zip(_PARSERS, outputs, strict=True)):
        events += [ToolCall("python", {"script": script}, id=f"p{n}"), ToolResult(output, id=f"p{n}")]
    return events


def test_rewritten_code_that_prints_the_very_same_thing_is_a_change_with_no_effect() -> None:
    """Five different scripts, little of their words shared, all printing the same report: the rewrites do not
    reach what decides the output. The default nudges once, from the fifth, and never blocks or stops."""
    same = "Test results for the parser:\n{}\nOriginal parser found: 2763 test cases; this one: 0"
    guard = Guard(clock=None)
    verdicts = [guard.observe("s", e) for e in _scripts([same] * 5)]
    flagged = [(v.index, v.action, v.pattern) for v in verdicts if v.action != "ok"]
    assert flagged == [(9, "nudge", "no_effect")]


def test_code_cells_that_print_nothing_or_print_something_new_are_work() -> None:
    """A notebook's assignment cells print nothing whatever they do; scripts whose output changes made progress."""
    moving = [f"Test results for the parser:\n{{'t{n}': 'pass'}}\nfound: {n}" for n in range(5)]
    for outputs in ([""] * 5, moving):
        guard = Guard(clock=None)
        assert {guard.observe("s", e).action for e in _scripts(outputs)} == {"ok"}
