"""Store URLs, registration of third-party stores, state encoding, and the guard's store-error policies."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch import _stored as stored_module
from loopwatch.core._events import ToolCall, ToolResult
from loopwatch.errors import ConfigError
from loopwatch.stores import (
    AsyncMemoryStore,
    MemoryStore,
    Store,
    StoreError,
    Versioned,
    async_store_from_url,
    register,
    store_from_url,
)
from loopwatch.stores.sqlite import SqliteStore
from stored_state import stored_index


def test_urls_name_their_store(tmp_path: Path) -> None:
    assert isinstance(store_from_url("memory://"), MemoryStore)
    assert store_from_url("memory://?ttl=30").ttl == 30.0
    sqlite = store_from_url(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(sqlite, SqliteStore)
    sqlite.close()
    assert isinstance(async_store_from_url("memory://"), AsyncMemoryStore)
    with pytest.raises(ConfigError, match=r"unknown store URL scheme in 'mongo://x' \(known: memory://") as info:
        store_from_url("mongo://x")
    assert info.value.field == "store"
    with pytest.raises(ConfigError, match="ttl must be a number"):
        store_from_url("memory://?ttl=soon")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis://[::1/0", r"unreadable store URL 'redis://\[::1/0': Invalid IPv6 URL"),
        ("memory://?tll=30", r"unknown option\(s\) tll in 'memory://\?tll=30' \(known: ttl\)"),
        (3, "a store URL is a string, not int"),
    ],
)
def test_an_unreadable_store_url_is_a_config_error(url: Any, reason: str) -> None:
    for open_store in (store_from_url, async_store_from_url):
        with pytest.raises(ConfigError, match=reason) as info:
            open_store(url)
        assert info.value.field == "store"
    if isinstance(url, str):
        with pytest.raises(ConfigError, match=reason):
            Guard(store=url)


def test_the_memory_url_keeps_sessions_in_the_guard_itself() -> None:
    guard = Guard(store="memory://", clock=None)
    assert guard.store is None  # no serialising: the in-process path
    assert "store=" not in repr(guard)


def test_third_party_stores_can_be_registered(tmp_path: Path) -> None:
    class Recording(MemoryStore):
        writes = 0

        def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
            Recording.writes += 1
            return super().compare_and_set(session, expected, state, token)

    register("recording", lambda url, options: Recording(url))
    guard = Guard(store="recording://here", clock=None)
    assert isinstance(guard.store, Recording) and repr(guard).endswith("store=Recording('recording://here'))")
    guard.observe("s", ToolCall("read", {"path": "a"}))
    guard.observe("s", ToolResult("x"))
    assert Recording.writes == 2


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json"])
def test_state_text_is_the_same_json_with_or_without_orjson(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not fast:
        monkeypatch.setattr(stored_module, "_orjson", None)
    data: dict[str, Any] = {"a": [1, 2.5, None, True], "é": "ü\u2028", "big": 2**70, "nested": {"k": "v"}}
    text = stored_module.encode_state(data)
    assert json.loads(text) == data  # plain JSON either way (2**70 falls back to json under orjson)
    assert stored_module.decode_state(text) == data


def test_the_async_memory_store_mirrors_the_sync_one() -> None:
    async def run() -> list[Any]:
        store = AsyncMemoryStore()
        out: list[Any] = [await store.compare_and_set("s", "", "one", "t1")]
        out.append(await store.compare_and_set("s", "", "two", "t1"))
        out.append(await store.swarm_add("h", "fp", "w", "t"))
        out.append([name async for name, _ in store.sessions()])
        await store.close()
        return out

    created, lost, tally, names = asyncio.run(run())
    assert created is None and lost == Versioned(1, "one", "t1") and tally.calls == 1 and names == ["s"]


# -- when the store fails ------------------------------------------------------------------------------------


def _broken_sqlite(tmp_path: Path) -> SqliteStore:
    """A real SQLite store whose file is full: every write fails with SQLITE_FULL."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "full.db"
    store = SqliteStore(path)
    store.compare_and_set("warm-up", "", "x", "t1")
    with sqlite3.connect(path) as db:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
    store.close()
    store = SqliteStore(path)
    store._conn().execute(f"PRAGMA max_page_count = {pages}")
    return store


def _call(i: int) -> ToolCall:
    return ToolCall("write_file", {"path": f"f{i}.txt", "content": f"version {i}"})


def _until_full(guard: Guard, event: Any = None) -> tuple[str, Any]:
    """Observe in new sessions (each a new row) until the full file refuses one: (its session, verdict)."""
    for i in range(500):
        before = guard.stats["store_errors"]
        verdict = guard.observe(f"s{i}", event if event is not None else _call(i))
        if guard.stats["store_errors"] > before:
            return f"s{i}", verdict
    raise AssertionError("the file never filled up")


def test_fail_open_answers_ok_and_says_so(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    guard = Guard(store=_broken_sqlite(tmp_path), clock=None, listeners=[records.append])
    session, verdict = _until_full(guard)
    assert verdict.action == "ok" and "store error (fail open)" in (verdict.reason or "")
    assert guard.stats["store_errors"] == 1
    assert [r["event"] for r in records] == ["store.error"]
    assert records[0]["session"] == session and records[0]["policy"] == "allow"
    assert "full" in records[0]["error"]


def test_fail_closed_blocks_tool_calls_only(tmp_path: Path) -> None:
    guard = Guard(store=_broken_sqlite(tmp_path), clock=None, on_store_error="block")
    _, blocked = _until_full(guard)
    assert blocked.action == "block" and blocked.pattern == "store_error"
    assert "loop guard unavailable" in (blocked.message or "")
    other = Guard(store=_broken_sqlite(tmp_path / "other"), clock=None, on_store_error="block")
    _, answered = _until_full(other, ToolResult("y"))
    assert answered.action == "ok"


def test_raise_lets_the_store_error_through(tmp_path: Path) -> None:
    guard = Guard(store=_broken_sqlite(tmp_path), clock=None, on_store_error="raise")
    with pytest.raises(StoreError, match="full"):
        _until_full(guard)
    with pytest.raises(ConfigError):
        Guard(store="memory://", on_store_error="maybe")  # type: ignore[arg-type]


def test_a_guard_recovers_when_the_store_does(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    guard = Guard(store=store, clock=None)
    call = ToolCall("read_file", {"path": "a.txt"})
    for _ in range(2):
        guard.observe("s", call)
        guard.observe("s", ToolResult("same"))
    locker = sqlite3.connect(path, timeout=0.1)
    locker.execute("BEGIN EXCLUSIVE")
    fast_fail = SqliteStore(path, timeout=0.05)
    failing = Guard(store=fast_fail, clock=None)
    assert failing.observe("s", call).reason and failing.stats["store_errors"] == 1
    locker.rollback()
    locker.close()
    # back: the state is intact (the failed event was not written), and judging goes on from it
    third = failing.observe("s", call)
    assert third.action == "nudge" and third.pattern == "repeat" and third.count == 3
    stored = fast_fail.load("s")
    assert stored is not None and stored_index(stored.state) == 5


def test_store_is_a_real_abstract_contract() -> None:
    with pytest.raises(TypeError):
        Store()  # type: ignore[abstract]
