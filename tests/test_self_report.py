"""Self-reported stalls: an orchestrator's progress ledger saying, turn after turn, that it is stuck."""

from __future__ import annotations

import json

import pytest

from loopwatch import Guard, Ladder, Message, ToolCall, ToolResult, Verdict, preset
from loopwatch.core._policy import Policy
from loopwatch.core.detectors import SelfReportDetector, self_report
from loopwatch.core.detectors._ledger import ledger_of, stalled


def ledger(*, in_loop: bool, progress: bool, why: str = "The recent actions have been repetitive") -> Message:
    """A Magentic-One orchestrator's progress ledger, as its runs record it."""
    body = {
        "is_request_satisfied": {"reason": "Only one fund has been found so far.", "answer": False},
        "is_in_loop": {"reason": why, "answer": in_loop},
        "is_progress_being_made": {"reason": "No new information in recent steps.", "answer": progress},
        "next_speaker": {"reason": "WebSurfer can search.", "answer": "WebSurfer"},
        "instruction_or_question": {"reason": "Keep searching.", "answer": "Please search for the funds."},
    }
    return Message("assistant", "Updated Ledger:\n" + json.dumps(body, indent=2))


def turn(n: int) -> list[ToolCall | ToolResult | Message]:
    """The instruction the ledger chose and the web agent's reply."""
    return [
        ToolCall("WebSurfer", {"instruction": f"Please search for the funds, attempt {n}."}, id=str(n)),
        ToolResult(f"I typed 'funds {n}' into the search box.\nThe page shows {n} results.", id=str(n)),
    ]


def _guard() -> Guard:
    return Guard(policy=Policy("t", (self_report(),), {"stalled": Ladder.of(nudge=2)}), clock=None)


def _run(guard: Guard, events: list[ToolCall | ToolResult | Message]) -> list[Verdict]:
    return [guard.observe("s", e) for e in events]


def test_two_ledgers_in_a_row_that_say_stuck_are_reported() -> None:
    events = [ledger(in_loop=False, progress=True), *turn(0)]
    events += [ledger(in_loop=True, progress=False), *turn(1), ledger(in_loop=True, progress=False), *turn(2)]
    verdicts = _run(_guard(), events)
    hits = [(i, v.action, v.pattern, v.count, v.loop_start) for i, v in enumerate(verdicts) if not v.ok]
    assert hits == [(6, "nudge", "stalled", 2, 3)]  # on the second stuck ledger; the streak began at the first
    assert "repetitive" in (verdicts[6].reason or "") and "repetitive" in (verdicts[6].message or "")
    assert "SelfReportDetector(threshold=2)" in (verdicts[6].detector or "")


def test_either_answer_counts_and_a_healthy_ledger_ends_the_streak() -> None:
    events = [ledger(in_loop=False, progress=False), *turn(0), ledger(in_loop=True, progress=False), *turn(1)]
    assert [v.action for v in _run(_guard(), events)][3] == "nudge"  # no progress, then in a loop
    loop = {"is_in_loop": {"reason": "repeated scrolling", "answer": True}}
    assert stalled({**loop, "is_progress_being_made": {"answer": None}}) == "repeated scrolling"  # no answer
    assert stalled(loop) == "repeated scrolling"


def test_a_ledger_that_says_progress_is_being_made_is_not_a_stall_even_in_a_loop() -> None:
    # scrolling down a page: "in a loop of scrolling", "but making progress through the article"
    events = [ledger(in_loop=True, progress=True), *turn(0), ledger(in_loop=True, progress=False), *turn(1)]
    assert all(v.ok for v in _run(_guard(), events))
    events += [ledger(in_loop=True, progress=False), *turn(2)]
    assert [v.action for v in _run(_guard(), events)][6] == "nudge"  # two in a row that say no progress
    parsed = ledger_of(ledger(in_loop=True, progress=True).text)
    assert parsed is not None and stalled(parsed) is None
    events = [ledger(in_loop=True, progress=False), *turn(0), ledger(in_loop=False, progress=True), *turn(1)]
    events += [ledger(in_loop=True, progress=False), *turn(2)]
    assert all(v.ok for v in _run(_guard(), events))


def test_only_a_ledger_is_read() -> None:
    assert ledger_of('I wonder whether "is_in_loop" applies to me.') is None  # no JSON
    assert ledger_of('Updated Ledger:\n{"is_in_loop": true, "broken": ') is None  # not valid JSON
    assert ledger_of('{"is_in_loop": "yes"}') is None  # not a ledger's answer
    parsed = ledger_of(ledger(in_loop=True, progress=False).text)
    assert parsed is not None and stalled(parsed) == "The recent actions have been repetitive"
    assert stalled({"is_in_loop": {"answer": False}, "is_progress_being_made": {"answer": True}}) is None
    guard = _guard()
    chatter = [Message("assistant", '"is_in_loop": {"answer": true}'), Message("user", "Updated Ledger: {}")] * 3
    assert all(v.ok for v in _run(guard, chatter))
    assert guard.stats["errors"] == 0


def test_the_default_preset_reports_it_and_the_setting_is_checked() -> None:
    events = [ledger(in_loop=True, progress=False), *turn(0), ledger(in_loop=True, progress=False), *turn(1)]
    for name in ("default", "default-lexical"):
        verdicts = _run(Guard(preset=name, clock=None), events)
        assert [(v.action, v.pattern) for v in verdicts if not v.ok] == [("nudge", "stalled")]
    assert any(isinstance(d, SelfReportDetector) for d in preset("default").detectors)
    with pytest.raises(ValueError, match="threshold"):
        self_report(threshold=0)


def test_a_ledger_among_other_text_is_found_and_hostile_json_is_not_an_error() -> None:
    wrapped = "Plan {step 1}: check.\n" + (ledger(in_loop=True, progress=False).text or "") + "\n{trailing}"
    parsed = ledger_of(wrapped)
    assert parsed is not None and stalled(parsed) == "The recent actions have been repetitive"
    deep = '{"is_in_loop": ' + "[" * 5000 + "]" * 5000 + "}"  # past the JSON parser's nesting depth
    assert ledger_of(deep) is None
    guard = _guard()
    assert all(v.ok for v in _run(guard, [Message("assistant", deep)] * 3))
    assert guard.stats["errors"] == 0
