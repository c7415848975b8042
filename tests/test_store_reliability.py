"""Stores under faults that used to lose events or break writes: a session deleted, expired or lost with a
restarted server and written afresh by another process while a guard still caches it; text a store's
encoding cannot hold; damaged stored rows; a file from the previous layout; the sessions command against a
store it cannot reach."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch._stored import DamagedStateError
from loopwatch.core._events import ToolCall, ToolResult
from loopwatch.stores import StoreError, Versioned, from_storable, storable
from loopwatch.stores.sqlite import SCHEMA_VERSION, SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_server import RedisServer, server_binary_or_fail  # type: ignore[import-not-found]
from stored_state import stored_index

LOOP_CALL = ToolCall("read_file", {"path": "notes.txt"})
LOOP_RESULT = ToolResult("the same notes", tool="read_file")


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _other_work(guard: Guard, session: str, n: int = 4) -> None:
    """``n`` calls and results that are no loop (each call different)."""
    for i in range(n):
        guard.observe(session, ToolCall("search", {"query": f"topic {i}"}))
        guard.observe(session, ToolResult(f"result {i}", tool="search"))


def _loop(guard: Guard, session: str, n: int = 4) -> None:
    for _ in range(n):
        guard.observe(session, LOOP_CALL)
        guard.observe(session, LOOP_RESULT)


def _index(guard: Guard, session: str) -> int:
    assert guard.store is not None
    stored = guard.store.load(session)
    assert stored is not None
    return stored_index(stored.state)


@pytest.fixture
def redis_server() -> Iterator[Callable[..., RedisServer]]:
    binary = server_binary_or_fail()
    started: list[RedisServer] = []

    def start(**kwargs: Any) -> RedisServer:
        started.append(RedisServer(binary=binary, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.close()


# -- a cached state never overwrites a newer one ----------------------------------------------------------------


def _stale_writer_case(make_guard: Callable[[], Guard], lose_the_session: Callable[[Guard], None]) -> None:
    """Guard A works on a session and caches it; the session is lost (deleted, expired, a server restarted
    empty); guard B (another process) writes it afresh with 8 events, a loop whose next call must be refused;
    then A sees that call. With a reused version number, A's write matched and overwrote B's events (its
    stale state judged the call ``ok``); with tokens, it loses, reloads B's state and refuses the call."""
    first, second = make_guard(), make_guard()
    _other_work(first, "run", 4)  # 8 events: A caches the session as written 8 times
    lose_the_session(first)
    _loop(second, "run", 4)  # 8 events written afresh by B: a loop at its 4th repeat
    verdict = first.observe("run", LOOP_CALL)
    assert verdict.action == "block" and verdict.count == 5
    assert _index(second, "run") == 9  # B's 8 events and A's call: none lost, none counted twice


def test_forget_during_a_run_never_lets_a_cached_state_overwrite_newer_events(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _stale_writer_case(lambda: Guard(store=url, clock=None), lambda guard: Guard(store=url).forget("run"))


def test_ttl_expiry_never_lets_a_cached_state_overwrite_newer_events(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "state.db"

    def expire(guard: Guard) -> None:
        clock.now += 120  # past the ttl: the session reads as absent

    _stale_writer_case(lambda: Guard(store=SqliteStore(path, ttl=60, clock=clock), clock=None), expire)


def test_a_redis_restart_without_persistence_never_lets_a_cached_state_overwrite_newer_events(
    redis_server: Callable[..., RedisServer],
) -> None:
    server = redis_server(persistent=False)
    url = server.url + "?prefix=stale"
    _stale_writer_case(lambda: Guard(store=url, clock=None), lambda guard: server.restart())


def test_redis_ttl_expiry_never_lets_a_cached_state_overwrite_newer_events(
    redis_server: Callable[..., RedisServer],
) -> None:
    server = redis_server()
    url = server.url + "?prefix=ttl"

    def expire(guard: Guard) -> None:
        server.command("DEL", "ttl:s:{run}")  # what the server does when the key's ttl runs out

    _stale_writer_case(lambda: Guard(store=url, clock=None), expire)


def test_a_hash_written_before_tokens_is_still_compared_safely(redis_server: Callable[..., RedisServer]) -> None:
    """A session written by the version-number store (no token field) is compared by its version, once: the
    first write gives it a token."""
    server = redis_server()
    store = Guard(store=server.url + "?prefix=old").store
    assert store is not None
    server.command("HSET", "old:s:{legacy}", "v", "3", "s", "legacy state")
    assert store.load("legacy") == Versioned(3, "legacy state", "v3")
    assert store.compare_and_set("legacy", "v2", "stale", "n1") == Versioned(3, "legacy state", "v3")
    assert store.compare_and_set("legacy", "v3", "next", "n1") is None
    assert store.load("legacy") == Versioned(4, "next", "n1")


def test_a_sqlite_file_of_the_previous_layout_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # what schema 1 wrote
        db.execute("CREATE TABLE loopwatch_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE loopwatch_sessions"
            " (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, state TEXT NOT NULL, expires_at REAL)"
        )
        db.execute("INSERT INTO loopwatch_meta VALUES ('schema', '1')")
        db.execute("INSERT INTO loopwatch_sessions VALUES ('a', 7, 'state a', NULL), ('b', 2, 'state b', NULL)")
    store = SqliteStore(path)
    first, second = store.load("a"), store.load("b")
    assert first is not None and second is not None
    assert (first.version, first.state, second.state) == (7, "state a", "state b")
    assert first.token and second.token and first.token != second.token  # random tokens, one each
    assert store.compare_and_set("a", first.token, "next", "n1") is None
    assert store.compare_and_set("a", first.token, "stale", "n2") == Versioned(8, "next", "n1")
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM loopwatch_meta WHERE key = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)


# -- any Python string ---------------------------------------------------------------------------------------------


SURROGATE = "\udcff"  # what os.fsdecode gives for the byte 0xff of a file name that is not UTF-8


def _surrogate_loop(guard: Guard) -> list[str]:
    actions = []
    for _ in range(5):
        actions.append(guard.observe(f"run-{SURROGATE}", ToolCall("cat", {"path": f"report-{SURROGATE}.txt"})).action)
        guard.observe(f"run-{SURROGATE}", ToolResult(f"cat: report-{SURROGATE}.txt: No such file", tool="cat"))
    return actions


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_lone_surrogates_are_stored_and_the_loop_caught_in_sqlite(tmp_path: Path, policy: str) -> None:
    """Before, every write of such a state failed: fail open never caught the loop, fail closed refused
    every call."""
    guard = Guard(store=f"sqlite:///{tmp_path / 'state.db'}", clock=None, on_store_error=policy)  # type: ignore[arg-type]
    actions = _surrogate_loop(guard)
    assert "block" in actions and guard.stats["store_errors"] == 0
    assert guard.sessions() == [f"run-{SURROGATE}"]
    assert guard.snapshot(f"run-{SURROGATE}")["state"]["index"] == 10


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_lone_surrogates_are_stored_and_the_loop_caught_in_redis(
    redis_server: Callable[..., RedisServer], policy: str
) -> None:
    server = redis_server()
    guard = Guard(store=server.url + "?prefix=u", clock=None, on_store_error=policy)  # type: ignore[arg-type]
    actions = _surrogate_loop(guard)
    assert "block" in actions and guard.stats["store_errors"] == 0
    assert guard.sessions() == [f"run-{SURROGATE}"]
    guard.observe("w", ToolCall("t", {}), swarm=f"crew {SURROGATE}")
    assert guard.swarm_snapshot(f"crew {SURROGATE}")["counts"]


def test_storable_is_reversible_and_never_confuses_two_texts() -> None:
    texts = [
        "",
        "plain",
        "é🚀",
        SURROGATE,
        "\ud800\udc00x",
        "\udc00\ud800",
        "\x00utf8:",
        "\x00utf8:é",
        "\x00utf8:\udcff",
    ]
    stored = [storable(t) for t in texts]
    assert len(set(stored)) == len(texts)
    assert [from_storable(s) for s in stored] == texts
    for text in stored:
        text.encode("utf-8")  # valid Unicode every store can hold (raises otherwise)
    assert storable("plain") == "plain" and storable("é🚀") == "é🚀"  # unchanged when nothing needs escaping


# -- damaged rows ----------------------------------------------------------------------------------------------------


def _damage_sqlite(path: Path, session: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE loopwatch_sessions SET state = 'not json {' WHERE id = ?", (session,))


def test_a_damaged_sqlite_row_fails_open_by_starting_afresh_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    records: list[dict[str, Any]] = []
    guard = Guard(store=f"sqlite:///{path}", clock=None, listeners=[records.append])
    _loop(guard, "run", 3)
    _damage_sqlite(path, "run")
    second = Guard(store=f"sqlite:///{path}", clock=None, listeners=[records.append])  # no cache: reads the row
    verdict = second.observe("run", LOOP_CALL)
    assert verdict.action == "ok" and second.stats["damaged_states"] == 1 and second.stats["store_errors"] == 0
    assert [r["event"] for r in records].count("store.damaged_state") == 1
    damaged = next(r for r in records if r["event"] == "store.damaged_state")
    assert damaged["session"] == "run" and damaged["action"] == "started afresh" and "JSON" in damaged["error"]
    assert "damaged" in caplog.text
    assert _index(second, "run") == 1  # the damaged row was replaced by a fresh state and this event


def test_a_damaged_sqlite_row_fails_closed_by_refusing_calls_until_it_is_cleared(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    _loop(Guard(store=url, clock=None), "run", 2)
    _damage_sqlite(path, "run")
    guard = Guard(store=url, clock=None, on_store_error="block")
    refused = guard.observe("run", LOOP_CALL)
    assert refused.action == "block" and refused.pattern == "store_error" and "damaged" in (refused.message or "")
    assert guard.observe("run", LOOP_RESULT).action == "ok"  # only calls are refused
    assert guard.stats["damaged_states"] == 2 and guard.stats["store_errors"] == 2
    guard.forget("run")  # what `loopwatch sessions --forget run` does
    assert guard.observe("run", LOOP_CALL).action == "ok"
    raising = Guard(store=url, clock=None, on_store_error="raise")
    _damage_sqlite(path, "run")
    with pytest.raises(DamagedStateError, match="damaged"):
        raising.observe("run", LOOP_CALL)


def test_a_sqlite_row_with_wrong_types_is_read_as_damaged_not_as_an_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    guard = Guard(store=f"sqlite:///{path}", clock=None)
    _loop(guard, "run", 1)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE loopwatch_sessions SET version = 'seven', state = x'00ff', token = 5 WHERE id = 'run'")
    fresh = Guard(store=f"sqlite:///{path}", clock=None)
    assert fresh.observe("run", LOOP_CALL).action == "ok"
    assert fresh.stats["damaged_states"] == 1 and fresh.stats["store_errors"] == 0


def test_a_damaged_redis_hash_fails_open_by_starting_afresh(redis_server: Callable[..., RedisServer]) -> None:
    server = redis_server()
    url = server.url + "?prefix=d"
    _loop(Guard(store=url, clock=None), "run", 2)
    server.command("HSET", "d:s:{run}", "s", '{"state": {"index": "not a state"}}')
    guard = Guard(store=url, clock=None)
    assert guard.observe("run", LOOP_CALL).action == "ok"
    assert guard.stats["damaged_states"] == 1 and _index(guard, "run") == 1


def test_a_reset_or_forget_of_a_damaged_session_works(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    _loop(Guard(store=url, clock=None), "run", 2)
    _damage_sqlite(path, "run")
    guard = Guard(store=url, clock=None, on_store_error="raise")
    with pytest.raises(DamagedStateError):
        guard.snapshot("run")
    guard.reset("run")  # a reset is a fresh loop state anyway
    assert guard.snapshot("run")["state"]["index"] == 0


# -- the sessions command -------------------------------------------------------------------------------------------


def _sessions_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "sessions", *args], capture_output=True, text=True, timeout=60
    )


def test_sessions_against_an_unreachable_redis_is_one_line_and_exit_2(redis_server: Callable[..., RedisServer]) -> None:
    server = redis_server()
    url = server.url + "?timeout=0.3"
    server.stop()
    done = _sessions_command("--store", url)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("loopwatch: redis store") and "127.0.0.1" in done.stderr


def test_sessions_against_a_file_that_is_not_a_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not a database, just text " * 100)
    for args in ([], ["--reset", "x"], ["--forget", "x"], ["--swarm", "crew"]):
        done = _sessions_command("--store", f"sqlite:///{path}", *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "not a database" in done.stderr


def test_sessions_lists_a_damaged_session_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    guard = Guard(store=url, clock=None)
    _loop(guard, "good", 1)
    _loop(guard, "bad", 1)
    _damage_sqlite(path, "bad")
    done = _sessions_command("--store", url)
    assert done.returncode == 0, done.stderr
    assert "bad  DAMAGED" in done.stdout and "good  2 events" in done.stdout
    listed = json.loads(_sessions_command("--store", url, "--json").stdout)
    assert [row["session"] for row in listed] == ["bad", "good"] and "damaged" in listed[0]


def test_a_locked_sqlite_store_waits_no_longer_than_the_threads_deadline(tmp_path: Path) -> None:
    """``deadline`` bounds every wait of the thread together: the timeout (5 s here) would otherwise apply to
    each of the operations one event makes."""
    path = tmp_path / "state.db"
    store = SqliteStore(path, timeout=5.0)
    store.compare_and_set("s", "", "one", "t1")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for longer than anyone waits
    try:
        with store.deadline(0.2), pytest.raises(StoreError, match="locked"):
            store.compare_and_set("s", "t1", "two", "t2")
        with store.deadline(0.0), pytest.raises(StoreError, match="locked"):
            store.swarm_add("crew", "fp", "w", "t")
        assert store.load("s") == Versioned(1, "one", "t1")  # reading never waits for a writer (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.compare_and_set("s", "t1", "two", "t2") is None
    store.close()
