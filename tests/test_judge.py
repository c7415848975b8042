"""The optional LLM judge: asked only when a rule is undecided, at a bounded rate, within a budget; its answers
are audited; its failures never reach the agent. A scripted judge stands in for the model (no network)."""

from __future__ import annotations

from typing import Any

import pytest

from loopwatch import ConfigError, Guard, JudgeAnswer, JudgeRequest, Ladder, LoopJudge, Message
from loopwatch.core._policy import Policy
from loopwatch.core.detectors import rephrase

ASK = "To cancel the booking I need the reservation ID. Could you please share the reservation ID with me?"
REPLY = "I don't have the reservation ID, support told me the user ID is enough."


class ScriptedJudge:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[JudgeRequest] = []

    def __call__(self, request: JudgeRequest) -> Any:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else JudgeAnswer(False, 0.9, "fine")
        if isinstance(answer, Exception):
            raise answer
        return answer


def _guard(judge: ScriptedJudge, count: int = 4, **settings: Any) -> tuple[Guard, list[dict[str, Any]]]:
    # count=4: the second and third asks repeat the first, short of the count: undecided, what the judge is for
    policy = Policy("t", (rephrase(count=count),), {"rephrase": Ladder.of(nudge=count)})
    records: list[dict[str, Any]] = []
    options = {"after": 0, "every": 1, "budget": 3, **settings}
    return Guard(policy=policy, clock=None, judge=LoopJudge(judge, **options), listeners=[records.append]), records


def _talk(guard: Guard, turns: int) -> list[Any]:
    verdicts = [guard.observe("s", Message("user", REPLY))]
    for _ in range(turns):
        verdicts.append(guard.observe("s", Message("assistant", ASK)))
        verdicts.append(guard.observe("s", Message("user", REPLY)))
    return verdicts


def test_a_confident_loop_answer_becomes_an_audited_nudge() -> None:
    judge = ScriptedJudge({"loop": True, "confidence": 0.9, "reason": "it asks for the same ID again"})
    guard, records = _guard(judge)
    verdicts = _talk(guard, 3)
    assert [v.action for v in verdicts] == ["ok"] * 3 + ["nudge"] + ["ok"] * 3  # asked once (every=1: at 3)
    nudge = verdicts[3]
    assert nudge.pattern == "judged_loop" and "same ID again" in (nudge.message or "")
    assert nudge.detector is not None and nudge.detector.startswith("LoopJudge(ScriptedJudge")
    assert nudge.evidence["judge"] == {"loop": True, "confidence": 0.9, "reason": "it asks for the same ID again"}
    assert [r["event"] for r in records] == ["judge.verdict", "loop.nudge", "judge.verdict"]  # asked again at 5
    request = judge.requests[0]
    assert request.index == 3 and len(request.history) == 4 and request.history[-1].startswith("3 assistant: To cancel")
    assert "reservation ID" in request.prompt() and '"loop": true or false' in request.prompt()


def test_not_asked_before_after_events_nor_more_often_than_every_nor_beyond_the_budget() -> None:
    judge = ScriptedJudge()
    guard, _ = _guard(judge, after=100)
    _talk(guard, 3)
    assert judge.requests == []
    judge = ScriptedJudge()
    guard, _ = _guard(judge, count=20, every=1, budget=2)
    guard.observe("s", Message("user", REPLY))
    guard.observe("s", Message("assistant", ASK))
    for n in range(6):  # each ask after the first is undecided or more (count=4 reached at the 4th)
        guard.observe("s", Message("user", REPLY))
        guard.observe("s", Message("assistant", ASK + f" ({n})"))
    assert len(judge.requests) == 2 and guard.stats["judge_calls"] == 2
    judge = ScriptedJudge()
    guard, _ = _guard(judge, count=20, every=4, budget=10)
    _talk(guard, 8)  # undecided at every ask from the second (indices 3, 5, 7...): asked at 3, 7, 11, 15
    assert [r.index for r in judge.requests] == [3, 7, 11, 15]


def test_low_confidence_and_not_loop_answers_change_nothing_but_are_audited() -> None:
    judge = ScriptedJudge(JudgeAnswer(True, 0.3, "maybe"))
    guard, records = _guard(judge)
    assert [v.action for v in _talk(guard, 3)] == ["ok"] * 7
    assert records[0]["event"] == "judge.verdict" and records[0]["confidence"] == 0.3


@pytest.mark.parametrize("failure", [RuntimeError("model down"), "I cannot tell", 42])
def test_a_failing_or_unreadable_judge_never_reaches_the_agent(failure: Any) -> None:
    judge = ScriptedJudge(failure)
    guard, records = _guard(judge)
    assert [v.action for v in _talk(guard, 3)] == ["ok"] * 7
    assert records[0]["event"] == "judge.error" and guard.stats["judge_errors"] == 1


@pytest.mark.parametrize(
    ("text", "loop", "confidence"),
    [
        ('Sure. {"loop": true, "confidence": 0.8, "reason": "same ask"}', True, 0.8),
        ('{"loop": false, "confidence": 1, "reason": "new info"}', False, 1.0),
        ("Yes, confidence: 0.75 - it repeats itself", True, 0.75),
        ("No, it is making progress", False, 0.5),
    ],
)
def test_answers_are_read_from_model_text(text: str, loop: bool, confidence: float) -> None:
    answer = JudgeAnswer.of(text)
    assert (answer.loop, answer.confidence) == (loop, confidence)


def test_bad_answers_and_settings_are_typed_errors() -> None:
    for bad in ({"loop": "yes"}, {"loop": True, "confidence": 2}, (True,), None):
        with pytest.raises(ValueError):
            JudgeAnswer.of(bad)
    with pytest.raises(ConfigError):
        LoopJudge("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LoopJudge(ScriptedJudge(), every=0)
    with pytest.raises(ConfigError):
        Guard(judge=ScriptedJudge())  # type: ignore[arg-type]


def test_the_async_guard_asks_the_judge_off_the_event_loop() -> None:
    import asyncio
    import threading

    from loopwatch import AsyncGuard

    threads: list[str] = []

    def judge(request: JudgeRequest) -> JudgeAnswer:
        threads.append(threading.current_thread().name)
        return JudgeAnswer(True, 0.9, "asks again")

    policy = Policy("t", (rephrase(count=4),), {"rephrase": Ladder.of(nudge=4)})
    guard = AsyncGuard(policy=policy, clock=None, judge=LoopJudge(judge, after=0, every=1))

    async def run() -> list[str]:
        actions = []
        for event in [Message("user", REPLY)] + [
            Message(role, text) for _ in range(3) for role, text in (("assistant", ASK), ("user", REPLY))
        ]:
            actions.append((await guard.observe("s", event)).action)
        return actions

    assert "nudge" in asyncio.run(run())
    assert threads and threading.main_thread().name not in threads
