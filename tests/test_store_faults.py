"""A guard on Redis whose server dies in the middle of a run, and comes back (persistent or not)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.core._events import ToolCall, ToolResult
from loopwatch.stores import StoreError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_server import RedisServer  # type: ignore[import-not-found]
from stored_state import stored_index

CALL = ToolCall("read_file", {"path": "notes.txt"})


def _step(guard: Guard, session: str = "run") -> Any:
    verdict = guard.observe(session, CALL)
    guard.observe(session, ToolResult("the same notes"))
    return verdict


@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "restarted-empty"])
def test_fail_open_guard_survives_a_dead_server_and_recovers_by_itself(persistent: bool) -> None:
    server = RedisServer(persistent=persistent)
    records: list[dict[str, Any]] = []
    try:
        guard = Guard(store=server.url + "?timeout=0.5", clock=None, listeners=[records.append])
        assert _step(guard).action == "ok"
        assert _step(guard).action == "ok"
        server.stop()  # SIGKILL, mid-run
        down = [_step(guard) for _ in range(3)]  # nothing escapes into the agent
        assert [v.action for v in down] == ["ok", "ok", "ok"]
        assert guard.stats["store_errors"] == 6
        assert {(r["event"], r["operation"]) for r in records} == {("store.error", "observe")}
        assert "password" not in records[0]["store"]
        server.start()  # same port: the guard finds it again without being told
        back = _step(guard)
        stored = guard.store.load("run") if guard.store is not None else None
        assert stored is not None
        index = stored_index(stored.state)
        if persistent:
            # intact: the 4 events written before the crash, then this call and its result
            assert index == 6 and back.action == "nudge" and back.count == 3
        else:
            # cleanly reset: the server came back empty, the session starts afresh
            assert index == 2 and back.action == "ok"
        assert guard.stats["store_errors"] == 6
    finally:
        server.close()


def test_fail_closed_guard_refuses_calls_while_the_server_is_down() -> None:
    server = RedisServer()
    try:
        guard = Guard(store=server.url + "?timeout=0.5", clock=None, on_store_error="block")
        assert _step(guard).action == "ok"
        server.stop()
        refused = guard.observe("run", CALL)
        assert refused.action == "block" and refused.pattern == "store_error"
        server.start()
        assert guard.observe("run", CALL).action == "ok"
    finally:
        server.close()


@pytest.mark.parametrize("setting", ["allow", "block"])
def test_reset_and_forget_follow_on_store_error_when_the_server_is_down(setting: str) -> None:
    # the integrations call them on the agent's path (a run's end, a stopped thread resumed): failing open or closed,
    # nothing escapes into the agent, and the failure is counted and reported like an event's
    server = RedisServer(persistent=True)
    records: list[dict[str, Any]] = []
    try:
        guard = Guard(store=server.url + "?timeout=0.5", clock=None, on_store_error=setting, listeners=[records.append])
        _step(guard)
        server.stop()
        guard.reset("run")
        guard.forget("run")
        assert guard.stats["store_errors"] == 2
        assert [(r["event"], r["operation"], r["session"], r["worker"], r["policy"]) for r in records] == [
            ("store.error", "reset", "run", None, setting),
            ("store.error", "forget", "run", None, setting),
        ]
        assert all("ConnectionError" in r["error"] or "refused" in r["error"] for r in records)
        server.start()
        assert guard.store is not None and guard.store.load("run") is not None  # left as it was
        guard.forget("run")
        assert guard.store.load("run") is None and guard.stats["store_errors"] == 2
    finally:
        server.close()


def test_reset_and_forget_raise_the_store_error_when_told_to() -> None:
    server = RedisServer()
    records: list[dict[str, Any]] = []
    try:
        guard = Guard(store=server.url + "?timeout=0.5", clock=None, on_store_error="raise", listeners=[records.append])
        _step(guard)
        server.stop()
        with pytest.raises(StoreError):
            guard.reset("run")
        with pytest.raises(StoreError):
            guard.forget("run")
        assert guard.stats["store_errors"] == 2 and records == []
    finally:
        server.close()
