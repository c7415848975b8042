"""A guard on Redis whose server dies in the middle of a run, and comes back (persistent or not)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.core._events import ToolCall, ToolResult

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
        assert {r["event"] for r in records} == {"store.error"}
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
