"""One session pipeline: the guard loads, has the engine evaluate, saves and emits, over either session backend;
the backend alone counts swarm calls; the engine gives the verdict with its audit records."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard, JudgeAnswer, JudgeRequest, Ladder, LoopJudge, Message, ToolCall, ToolResult
from loopwatch._presets import preset
from loopwatch._session_backend import InProcessSessions
from loopwatch._stored import StoredSessions
from loopwatch.core._engine import Engine
from loopwatch.core._policy import Policy
from loopwatch.core._swarm_tally import SwarmTally
from loopwatch.core.detectors import rephrase
from loopwatch.stores import Versioned
from loopwatch.stores.sqlite import SqliteStore

CALL = ToolCall("read_file", {"path": "notes.txt"})
RESULT = ToolResult("the same notes", tool="read_file")


def test_the_engine_gives_each_verdict_with_its_audit_records() -> None:
    engine = Engine(preset("default-lexical"))
    state = engine.new_session()
    seen = []
    for _ in range(9):
        for event in (CALL, RESULT):
            verdict, records = engine.evaluate(state, event, session="run", now=12.5, swarm="crew")
            seen.append((verdict.action, [r["event"] for r in records]))
            if records:
                assert records[0]["index"] == verdict.index and records[0]["ts"] == 12.5
                assert records[0]["session"] == "run" and records[0]["swarm"] == "crew"
    assert ("ok", []) in seen and ("nudge", ["loop.nudge"]) in seen and ("block", ["loop.block"]) in seen
    stops = [events for action, events in seen if action == "stop"]
    assert stops[0] == ["loop.stop", "session.terminated"]  # the stop is written once
    assert all(events == [] for events in stops[1:])


def test_a_limit_warning_comes_from_the_engine_as_a_record() -> None:
    from loopwatch.core._events import Usage
    from loopwatch.core._limits import Limits, max_cost

    engine = Engine(Policy("t", (), {}, limits=Limits((max_cost(1.0, warn_at=0.5),))))
    state = engine.new_session()
    verdict, records = engine.evaluate(state, Usage(cost=0.6), session="s")
    assert verdict.action == "nudge" and [r["event"] for r in records] == ["limit.warning"]
    assert engine.evaluate(state, Usage(cost=0.01), session="s").records == ()  # warned once


def test_the_swarm_rule_gets_the_backend_s_tally_counted_once_per_call() -> None:
    engine = Engine(preset("default-lexical"))
    state = engine.new_session()
    counted: list[tuple[str, str, str]] = []

    def count(fingerprint: str, worker: str, tool: str) -> SwarmTally:
        counted.append((fingerprint, worker, tool))
        return SwarmTally(calls=50, workers=3)  # what a busy swarm's store would answer

    verdict = engine.evaluate(state, CALL, session="w1", count_swarm=count).verdict
    engine.evaluate(state, RESULT, session="w1", count_swarm=count)
    assert counted == [(engine.call_fingerprint(CALL), "w1", "read_file")]  # calls only, with the engine's fingerprint
    assert verdict.pattern == "swarm_repeat" and verdict.count == 50 and verdict.evidence["workers"] == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        SwarmTally(1, 1).calls = 2  # type: ignore[misc]
    lexical_only = Engine(preset("call-cycles"))  # no swarm rule: nothing is counted
    lexical_only.evaluate(lexical_only.new_session(), CALL, session="w1", count_swarm=count)
    assert len(counted) == 1


def test_the_guard_drives_the_backend_its_store_setting_names(tmp_path: Path) -> None:
    assert isinstance(Guard().backend, InProcessSessions)
    assert isinstance(Guard(store="memory://").backend, InProcessSessions)
    stored = Guard(store=f"sqlite:///{tmp_path / 'state.db'}")
    assert isinstance(stored.backend, StoredSessions) and "SqliteStore" in repr(stored.backend)


class InterruptedStore(SqliteStore):
    """A real SQLite store where another process writes the session just before this one's first write."""

    def __init__(self, path: Path, interloper: Guard) -> None:
        super().__init__(str(path))
        self.interloper = interloper
        self.interrupt = True
        self.swarm_adds = 0

    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        if self.interrupt:
            self.interrupt = False
            self.interloper.observe(session, ToolResult("another process's event"))
        return super().compare_and_set(session, expected, state, token)

    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        self.swarm_adds += 1
        return super().swarm_add(swarm, fingerprint, worker, tool)


def test_a_lost_compare_and_set_judges_again_but_counts_the_swarm_call_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    other = Guard(store=f"sqlite:///{path}", clock=None)
    other.observe("run", Message("assistant", "starting"))
    store = InterruptedStore(path, other)
    guard = Guard(store=store, clock=None)
    verdict = guard.observe("run", CALL, swarm="crew")
    assert not store.interrupt and store.swarm_adds == 1
    assert verdict.index == 2  # judged again on the state the other process wrote (its 2 events first)
    assert guard.snapshot("run")["state"]["index"] == 3
    assert guard.swarm_snapshot("crew")["counts"][guard.engine.call_fingerprint(CALL)][0] == 1


class ScriptedJudge:
    def __call__(self, request: JudgeRequest) -> JudgeAnswer:
        return JudgeAnswer(True, 0.9, "it asks for the same ID again")


ASK = "To cancel the booking I need the reservation ID. Could you please share the reservation ID with me?"
REPLY = "I don't have the reservation ID, support told me the user ID is enough."


def _judged_records(store: str | None) -> list[dict[str, Any]]:
    policy = Policy("t", (rephrase(count=4),), {"rephrase": Ladder.of(nudge=4)})
    records: list[dict[str, Any]] = []
    judge = LoopJudge(ScriptedJudge(), after=0, every=1, budget=1)
    guard = Guard(policy=policy, clock=None, judge=judge, listeners=[records.append], store=store)
    guard.observe("s", Message("user", REPLY), swarm="crew")
    for _ in range(3):
        guard.observe("s", Message("assistant", ASK))
        guard.observe("s", Message("user", REPLY))
    return records


def test_the_judge_s_nudge_is_recorded_alike_with_or_without_a_store(tmp_path: Path) -> None:
    in_process = _judged_records(None)
    assert [r["event"] for r in in_process] == ["judge.verdict", "loop.nudge"]
    assert in_process[1]["swarm"] == "crew" and in_process[1]["pattern"] == "judged_loop"
    assert _judged_records(f"sqlite:///{tmp_path / 'state.db'}") == in_process


def test_threads_of_one_swarm_have_every_call_counted_in_the_process() -> None:
    import threading

    guard = Guard("default-lexical", clock=None)
    call = ToolCall("web_search", {"query": "release notes"})

    def work(worker: int) -> None:
        for i in range(300):
            guard.observe(f"worker-{worker}", call, swarm="crew")
            guard.observe(f"worker-{worker}", ToolResult(f"page {i} of worker {worker}"))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = guard.swarm_snapshot("crew")["counts"]
    assert [(calls, len(workers)) for calls, workers, _ in counts.values()] == [(1_800, 6)]
