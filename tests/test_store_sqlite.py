"""The SQLite store: the store contract (side by side with MemoryStore), URLs, processes and threads
sharing one file without losing an update, faults (locked, read-only, full, not a database), the async twin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch.errors import ConfigError
from loopwatch.stores import (
    MAX_SWARM_FINGERPRINTS,
    MAX_SWARM_WORKERS,
    MemoryStore,
    Store,
    StoreError,
    SwarmTally,
    Versioned,
    new_token,
    store_from_url,
)
from loopwatch.stores._sqlite_store import FILE_CHECK_EVERY
from loopwatch.stores._sqlite_wal import AUTO_CHECKPOINT_PAGES, CHECKPOINT_EVERY
from loopwatch.stores.sqlite import SCHEMA_VERSION, AsyncSqliteStore, SqliteStore, async_from_url, from_url


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


MakeStore = Callable[..., Store]


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Builds the store under test: ``make(ttl=..., clock=...)``; every test below runs on both kinds."""
    made: list[Store] = []

    def build(ttl: float | None = None, clock: Callable[[], float] | None = None) -> Store:
        clock = clock if clock is not None else Clock()
        store: Store
        if request.param == "memory":
            store = MemoryStore(ttl=ttl, clock=clock)
        else:
            store = SqliteStore(tmp_path / f"state{len(made)}.db", ttl=ttl, clock=clock)
        made.append(store)
        return store

    yield build
    for store in made:
        store.close()


# -- the contract, on MemoryStore and SqliteStore alike ---------------------------------------------------


def test_unknown_session_has_no_state(make: MakeStore) -> None:
    store = make()
    assert store.load("nobody") is None
    assert list(store.sessions()) == []
    assert store.health() is True


def test_compare_and_set_versions(make: MakeStore) -> None:
    store = make()
    assert store.compare_and_set("s", "", "one", "t1") is None
    assert store.load("s") == Versioned(1, "one", "t1")
    assert store.compare_and_set("s", "", "again", "t1") == Versioned(1, "one", "t1")  # someone wrote first
    assert store.compare_and_set("s", "t1", "two", "t2") is None
    assert store.compare_and_set("s", "t1", "stale", "t2") == Versioned(2, "two", "t2")
    assert store.compare_and_set("s", "t7", "ahead", "t8") == Versioned(2, "two", "t2")
    assert store.compare_and_set("s", "v2", "a version, not a token", "t9") == Versioned(2, "two", "t2")
    assert store.compare_and_set("s", "", "as if new", "t9") == Versioned(2, "two", "t2")
    assert store.compare_and_set("s", "t2", "three", "t3") is None
    assert store.load("s") == Versioned(3, "three", "t3")
    assert store.load("other") is None


def test_state_text_round_trips(make: MakeStore) -> None:
    store = make()
    texts = ["", "ünïcödé ✓ 🚀", '{"a": [1, 2, "\\u0000"]}', "nul\x00inside", "x" * 200_000]
    for i, text in enumerate(texts):
        assert store.compare_and_set(f"s{i}", "", text, "t1") is None
        assert store.load(f"s{i}") == Versioned(1, text, "t1")


def test_delete(make: MakeStore) -> None:
    store = make()
    store.compare_and_set("s", "", "one", "t1")
    store.compare_and_set("s", "t1", "two", "t2")
    store.delete("s")
    store.delete("s")  # twice, and unknown sessions: no error
    store.delete("never")
    assert store.load("s") is None
    assert store.compare_and_set("s", "", "afresh", "t1") is None
    assert store.load("s") == Versioned(1, "afresh", "t1")


def test_compare_and_set_on_a_vanished_session(make: MakeStore) -> None:
    """A writer holding version 2 of a session deleted meanwhile must learn it lost, not think it wrote."""
    store = make()
    store.compare_and_set("s", "", "one", "t1")
    store.compare_and_set("s", "t1", "two", "t2")
    store.delete("s")
    assert store.compare_and_set("s", "t2", "three", "t3") == Versioned(0, "", "")
    assert store.load("s") is None
    assert store.compare_and_set("s", "", "three", "t1") is None


def test_sessions_lists_every_live_session_once(make: MakeStore) -> None:
    store = make()
    names = [f"session-{i:04d}" for i in range(700)]  # several pages of the SQLite store
    for name in names:
        store.compare_and_set(name, "", name.upper(), "t1")
    store.compare_and_set("session-0001", "t1", "second", "t2")
    store.delete("session-0002")
    listed = list(store.sessions())
    assert len(listed) == len(names) - 1
    found = dict(listed)
    assert found["session-0000"] == Versioned(1, "SESSION-0000", "t1")
    assert found["session-0001"] == Versioned(2, "second", "t2")
    assert "session-0002" not in found


def test_ttl_with_an_injected_clock(make: MakeStore) -> None:
    clock = Clock(100.0)
    store = make(ttl=10.0, clock=clock)
    assert store.ttl == 10.0
    store.compare_and_set("old", "", "a", "t1")
    clock.now = 105.0
    store.compare_and_set("young", "", "b", "t1")
    clock.now = 110.0  # exactly ttl after the write: still alive
    assert store.load("old") == Versioned(1, "a", "t1")
    clock.now = 110.5
    assert store.load("old") is None
    assert dict(store.sessions()) == {"young": Versioned(1, "b", "t1")}
    assert store.compare_and_set("young", "t1", "b2", "t2") is None  # a write renews the ttl
    clock.now = 120.0
    assert store.load("young") == Versioned(2, "b2", "t2")
    assert store.compare_and_set("old", "", "reborn", "t1") is None  # an expired session starts again at 1
    assert store.load("old") == Versioned(1, "reborn", "t1")
    clock.now = 200.0
    assert store.load("young") is None
    assert store.expire() == 2
    assert store.expire() == 0
    assert list(store.sessions()) == []


def test_no_ttl_never_expires(make: MakeStore) -> None:
    clock = Clock(0.0)
    store = make(clock=clock)
    store.compare_and_set("s", "", "a", "t1")
    clock.now = 1e12
    assert store.load("s") == Versioned(1, "a", "t1")
    assert store.expire() == 0


def test_compare_and_set_on_an_expired_session(make: MakeStore) -> None:
    clock = Clock(0.0)
    store = make(ttl=5.0, clock=clock)
    store.compare_and_set("s", "", "a", "t1")
    clock.now = 6.0
    assert store.compare_and_set("s", "t1", "b", "t2") == Versioned(0, "", "")
    assert store.load("s") is None


def test_swarm_tallies(make: MakeStore) -> None:
    store = make()
    assert store.swarm_counts("hive") == {}
    assert store.swarm_add("hive", "fp1", "w1", "search") == SwarmTally(1, 1)
    assert store.swarm_add("hive", "fp1", "w1", "search") == SwarmTally(2, 1)
    assert store.swarm_add("hive", "fp1", "w2", "other-tool") == SwarmTally(3, 2)
    assert store.swarm_add("hive", "fp2", "w2", "fetch") == SwarmTally(1, 1)
    assert store.swarm_add("other", "fp1", "w9", "search") == SwarmTally(1, 1)
    assert store.swarm_counts("hive") == {"fp1": (3, ["w1", "w2"], "search"), "fp2": (1, ["w2"], "fetch")}
    assert list(store.swarm_counts("hive")) == ["fp1", "fp2"]
    assert store.swarm_counts("other") == {"fp1": (1, ["w9"], "search")}
    store.swarm_clear("hive")
    store.swarm_clear("never")
    assert store.swarm_counts("hive") == {}
    assert store.swarm_add("hive", "fp1", "w3", "search") == SwarmTally(1, 1)
    assert store.swarm_counts("other") == {"fp1": (1, ["w9"], "search")}


def test_swarm_worker_cap(make: MakeStore) -> None:
    store = make()
    for i in range(MAX_SWARM_WORKERS + 6):
        tally = store.swarm_add("hive", "fp", f"w{i}", "t")
    assert tally == SwarmTally(MAX_SWARM_WORKERS + 6, MAX_SWARM_WORKERS)
    assert store.swarm_add("hive", "fp", "w0", "t") == SwarmTally(MAX_SWARM_WORKERS + 7, MAX_SWARM_WORKERS)
    calls, workers, _ = store.swarm_counts("hive")["fp"]
    assert calls == MAX_SWARM_WORKERS + 7
    assert workers == [f"w{i}" for i in range(MAX_SWARM_WORKERS)]


def test_swarm_fingerprint_cap_evicts_the_oldest(make: MakeStore) -> None:
    store = make()
    for i in range(MAX_SWARM_FINGERPRINTS):
        store.swarm_add("hive", f"fp{i}", "w", "t")
    store.swarm_add("hive", "fp0", "w", "t")  # counting again does not make it younger
    store.swarm_add("hive", "new1", "w", "t")
    store.swarm_add("hive", "new2", "w", "t")
    counts = store.swarm_counts("hive")
    assert len(counts) == MAX_SWARM_FINGERPRINTS
    assert "fp0" not in counts and "fp1" not in counts
    assert list(counts)[:2] == ["fp2", "fp3"]
    assert list(counts)[-2:] == ["new1", "new2"]
    assert store.swarm_add("hive", "fp0", "w", "t") == SwarmTally(1, 1)  # evicted: starts over
    assert "fp2" not in store.swarm_counts("hive")


def test_swarm_restore(make: MakeStore) -> None:
    store = make()
    store.swarm_add("hive", "gone", "w", "t")
    counts = {"b": (5, ["w1", "w2"], "fetch"), "a": (2, ["w3"], "search")}
    store.swarm_restore("hive", counts)
    assert store.swarm_counts("hive") == counts
    assert list(store.swarm_counts("hive")) == ["b", "a"]
    assert store.swarm_add("hive", "a", "w4", "search") == SwarmTally(3, 2)
    assert store.swarm_add("hive", "c", "w4", "x") == SwarmTally(1, 1)
    assert list(store.swarm_counts("hive")) == ["b", "a", "c"]
    store.swarm_restore("hive", {})
    assert store.swarm_counts("hive") == {}
    store.swarm_restore("fresh", {"f": (1, ["w"], "t")})
    assert store.swarm_counts("fresh") == {"f": (1, ["w"], "t")}
    with pytest.raises(ValueError):  # not a count: nothing changes
        store.swarm_restore("fresh", {"f": ("many", ["w"], "t")})  # type: ignore[dict-item]
    assert store.swarm_counts("fresh") == {"f": (1, ["w"], "t")}


def test_swarm_counts_are_copies(make: MakeStore) -> None:
    store = make()
    store.swarm_add("hive", "fp", "w1", "t")
    store.swarm_counts("hive")["fp"][1].append("intruder")
    assert store.swarm_counts("hive") == {"fp": (1, ["w1"], "t")}


def test_swarms_expire_with_the_ttl(make: MakeStore) -> None:
    clock = Clock(0.0)
    store = make(ttl=10.0, clock=clock)
    store.swarm_add("hive", "fp", "w1", "t")
    clock.now = 8.0
    store.swarm_add("hive", "fp", "w2", "t")  # a write renews the swarm's ttl
    clock.now = 15.0
    assert store.swarm_counts("hive") == {"fp": (2, ["w1", "w2"], "t")}
    clock.now = 18.5
    assert store.swarm_counts("hive") == {}
    assert store.swarm_add("hive", "fp", "w3", "t") == SwarmTally(1, 1)
    clock.now = 40.0
    assert store.expire() == 1
    assert store.swarm_counts("hive") == {}


# -- SqliteStore: the file, its tables, URLs --------------------------------------------------------------


def test_state_persists_and_is_shared_between_stores(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = SqliteStore(path)
    second = SqliteStore(path)
    first.compare_and_set("s", "", "one", "t1")
    assert second.load("s") == Versioned(1, "one", "t1")
    assert second.compare_and_set("s", "", "two", "t1") == Versioned(1, "one", "t1")
    first.swarm_add("hive", "fp", "w1", "t")
    assert second.swarm_add("hive", "fp", "w2", "t") == SwarmTally(2, 2)
    first.close()
    second.close()
    third = SqliteStore(path)
    assert third.load("s") == Versioned(1, "one", "t1")
    assert third.swarm_counts("hive") == {"fp": (2, ["w1", "w2"], "t")}
    third.close()
    third.close()  # twice: fine
    assert third.load("s") == Versioned(1, "one", "t1")  # a closed store reopens
    third.close()


def test_wal_mode_and_schema_version_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    assert store.health()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT value FROM loopwatch_meta WHERE key = 'schema'").fetchone()[0] == str(SCHEMA_VERSION)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"loopwatch_sessions", "loopwatch_swarms", "loopwatch_swarm_calls"} <= tables
    store.close()


def test_the_store_checkpoints_its_write_ahead_log_itself(tmp_path: Path) -> None:
    """Every CHECKPOINT_EVERY writes a connection copies the log into the database and has it start over, instead
    of SQLite retrying (and syncing) after every commit once the log passes 1,000 pages; SQLite's own threshold
    stays as a backstop, far above."""
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    state = "x" * 6_000  # two pages and more
    for n in range(CHECKPOINT_EVERY - 1):
        assert store.compare_and_set(f"s{n}", "", state, new_token()) is None
    assert store.checkpoints == 0
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # another program's: SQLite's own
    store.compare_and_set("last", "", state, new_token())
    assert (store.checkpoints, store.checkpoint_failures) == (1, 0)
    store.compare_and_set("after", "", state, new_token())
    with sqlite3.connect(path) as db:
        busy, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and frames < 10  # only the last write's pages: the log started over (>1,500 without)
    assert store._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == AUTO_CHECKPOINT_PAGES
    store.close()


def test_a_checkpoint_that_fails_is_counted_and_logged_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "state.db")

    def locked(conn: sqlite3.Connection) -> None:  # what SQLite raises when another process holds the file
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr("loopwatch.stores._sqlite_store.checkpoint", locked)
    with caplog.at_level("WARNING", logger="loopwatch"):
        for n in range(CHECKPOINT_EVERY):
            assert store.compare_and_set(f"s{n}", "", f"state {n}", new_token()) is None
    assert (store.checkpoints, store.checkpoint_failures) == (0, 1)
    assert [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()] == [
        f"loopwatch: {store!r} could not checkpoint its write-ahead log (database is locked); nothing is lost, the"
        f" next checkpoint, {CHECKPOINT_EVERY} writes on, tries again"
    ]
    last = store.load(f"s{CHECKPOINT_EVERY - 1}")
    assert last is not None and last.state == f"state {CHECKPOINT_EVERY - 1}"
    store.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = SqliteStore(path)
    assert first.health()
    first.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE loopwatch_meta SET value = '99' WHERE key = 'schema'")
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="schema version '99'"):
        store.load("s")
    assert store.health() is False
    store.close()


def test_shares_the_file_with_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
    store = SqliteStore(path)
    store.compare_and_set("s", "", "one", "t1")
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM users").fetchall() == [("ada",)]


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = store_from_url("sqlite:///rel.db?ttl=30&timeout=0.5&synchronous=FULL")
    assert isinstance(relative, SqliteStore)
    assert relative.path == str(tmp_path / "rel.db")
    assert (relative.ttl, relative.timeout, relative.synchronous) == (30.0, 0.5, "full")
    assert relative.url == "sqlite:///rel.db?ttl=30&timeout=0.5&synchronous=FULL"
    assert repr(relative) == "SqliteStore('sqlite:///rel.db?ttl=30&timeout=0.5&synchronous=FULL')"
    relative.compare_and_set("s", "", "x", "t1")
    assert (tmp_path / "rel.db").exists()
    relative.close()
    (tmp_path / "sub dir").mkdir()
    absolute = store_from_url(f"sqlite:///{tmp_path}/sub%20dir/abs.db")
    assert isinstance(absolute, SqliteStore)
    assert absolute.path == str(tmp_path / "sub dir" / "abs.db")
    assert (absolute.ttl, absolute.timeout, absolute.synchronous) == (None, 5.0, "normal")
    assert from_url("sqlite:///x.db", {"ttl": ""}).ttl is None
    twin = async_from_url("sqlite:///x.db", {"ttl": "7"})
    assert isinstance(twin, AsyncSqliteStore)
    assert (twin.sync.path, twin.ttl, twin.url) == (str(tmp_path / "x.db"), 7.0, "sqlite:///x.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://host/x.db", "names a host"),
        ("sqlite://", "no database file"),
        ("sqlite:///", "no database file"),
        ("sqlite:x.db", "no database file"),
        ("sqlite:///:memory:", "memory://"),
        ("sqlite:///x.db?tll=5", "unknown option"),
        ("sqlite:///x.db?ttl=soon", "not a number"),
        ("sqlite:///x.db?ttl=0", "positive"),
        ("sqlite:///x.db?ttl=-3", "positive"),
        ("sqlite:///x.db?ttl=inf", "positive"),
        ("sqlite:///x.db?timeout=-1", "timeout"),
        ("sqlite:///x.db?timeout=nan", "timeout"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous"),
        ("sqlite:///no/such/dir/x.db", "does not exist"),
        ("sqlite:///.", "is a directory"),
    ],
)
def test_bad_urls(url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message) as caught:
        store_from_url(url)
    assert caught.value.field == "store"


def test_any_python_string_is_stored_losslessly(tmp_path: Path) -> None:
    """Lone surrogates (``os.fsdecode`` of a file name that is not UTF-8) in names and states, and names that
    look like the escape marker itself: all stored and read back exactly, none mistaken for another."""
    store = SqliteStore(tmp_path / "state.db")
    odd = ["\ud800", "a\udcff b", "\x00utf8:x", "x", "\U0001f680\udc80"]
    for i, name in enumerate(odd):
        assert store.compare_and_set(name, "", f"state {name} {i}", "t1") is None
    assert {name: store.load(name) for name in odd} == {
        name: Versioned(1, f"state {name} {i}", "t1") for i, name in enumerate(odd)
    }
    assert dict(store.sessions()) == {name: Versioned(1, f"state {name} {i}", "t1") for i, name in enumerate(odd)}
    store.swarm_add("\udc80 swarm", "fp", "worker \ud800", "tool \udfff")
    assert store.swarm_counts("\udc80 swarm") == {"fp": (1, ["worker \ud800"], "tool \udfff")}
    store.delete("\ud800")
    assert store.load("\ud800") is None and store.load("x") is not None
    store.close()


# -- processes and threads sharing one file -----------------------------------------------------------------

_shared: SqliteStore | None = None  # set before forking: the children inherit it (and must reconnect)


def _store_for(path: str) -> SqliteStore:
    if _shared is not None and _shared.path == path:
        return _shared
    return SqliteStore(path, timeout=30)


def _increment(path: str, times: int) -> int:
    """``times`` read-modify-write increments of a counter in one session's state; the conflicts seen."""
    store = _store_for(path)
    conflicts = 0
    for _ in range(times):
        current = store.load("shared")
        while True:
            token = current.token if current is not None else ""
            count = json.loads(current.state)["count"] if current is not None and current.state else 0
            state = json.dumps({"count": count + 1, "pid": os.getpid()})
            current = store.compare_and_set("shared", token, state, new_token())
            if current is None:
                break
            conflicts += 1
    return conflicts


def _count_calls(path: str, worker: str, times: int) -> list[int]:
    store = _store_for(path)
    return [store.swarm_add("hive", "same-call", worker, "search").calls for _ in range(times)]


def _child(target: Callable[..., Any], args: tuple[Any, ...], barrier: Any, results: Any) -> None:
    barrier.wait(timeout=60)  # every process starts hammering at the same moment
    try:
        results.put((True, target(*args)))
    except BaseException as exc:
        results.put((False, repr(exc)))


def _in_processes(method: str, target: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    context: Any = multiprocessing.get_context(method)
    barrier = context.Barrier(len(calls))
    results = context.Queue()
    running = [context.Process(target=_child, args=(target, args, barrier, results)) for args in calls]
    for process in running:
        process.start()
    outcomes = [results.get(timeout=120) for _ in running]
    for process in running:
        process.join(timeout=60)
    assert [outcome for ok, outcome in outcomes if not ok] == []
    assert [process.exitcode for process in running] == [0] * len(running)
    return [outcome for _, outcome in outcomes]


def _start_methods() -> list[str]:
    return [m for m in ("spawn", "fork") if m in multiprocessing.get_all_start_methods()]


@pytest.mark.parametrize("method", _start_methods())
def test_processes_never_lose_a_session_update(method: str, tmp_path: Path) -> None:
    """With fork, the children inherit the parent's store (with its open connection) and must reconnect."""
    global _shared
    path = str(tmp_path / "state.db")
    _shared = SqliteStore(path, timeout=30)
    _shared.compare_and_set("warm-up", "", "the parent's connection is open when it forks", "t1")
    processes, times = 4, 100
    try:
        _in_processes(method, _increment, [(path, times)] * processes)
        final = _shared.load("shared")
    finally:
        _shared.close()
        _shared = None
    assert final is not None
    assert json.loads(final.state)["count"] == processes * times
    assert final.version == processes * times


@pytest.mark.parametrize("method", _start_methods())
def test_processes_count_every_swarm_call_once(method: str, tmp_path: Path) -> None:
    global _shared
    path = str(tmp_path / "state.db")
    _shared = SqliteStore(path, timeout=30)
    _shared.swarm_add("warm-up", "fp", "parent", "t")
    processes, times = 4, 100
    try:
        seen = _in_processes(method, _count_calls, [(path, f"worker-{i}", times) for i in range(processes)])
        counts = _shared.swarm_counts("hive")
    finally:
        _shared.close()
        _shared = None
    total = processes * times
    assert sorted(calls for batch in seen for calls in batch) == list(range(1, total + 1))  # each tally once
    assert counts["same-call"][0] == total
    assert sorted(counts["same-call"][1]) == [f"worker-{i}" for i in range(processes)]


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db", timeout=30)
    threads, times = 8, 50
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for _ in range(times):
                current = store.load("shared")
                while True:
                    version, token = (current.version, current.token) if current is not None else (0, "")
                    current = store.compare_and_set("shared", token, str(version + 1), new_token())
                    if current is None:
                        break
                store.swarm_add("hive", "fp", f"w{worker}", "t")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    running = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    assert errors == []
    final = store.load("shared")
    assert final is not None and (final.version, final.state) == (threads * times, str(threads * times))
    assert store.swarm_counts("hive")["fp"][0] == threads * times
    assert len(store._conns) <= threads + 1
    store.close()
    assert store._conns == {}


# -- faults ------------------------------------------------------------------------------------------------


def test_a_locked_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path, timeout=0.2)
    store.compare_and_set("s", "", "one", "t1")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # held longer than the store's timeout
    try:
        with pytest.raises(StoreError, match="locked") as caught:
            store.compare_and_set("s", "t1", "two", "t2")
        assert str(path) in str(caught.value) and "compare_and_set" in str(caught.value)
        with pytest.raises(StoreError, match="locked"):
            store.swarm_add("hive", "fp", "w", "t")
        assert store.load("s") == Versioned(1, "one", "t1")  # WAL: readers do not wait for the writer
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.compare_and_set("s", "t1", "two", "t2") is None
    assert store.swarm_add("hive", "fp", "w", "t") == SwarmTally(1, 1)
    store.close()


def _file_modes_bind(folder: Path) -> bool:
    """Whether a read-only file mode stops this process from writing (not so for root)."""
    probe = folder / "probe"
    probe.write_text("")
    probe.chmod(stat.S_IRUSR)
    try:
        with probe.open("a"):
            return False
    except PermissionError:
        return True
    finally:
        probe.chmod(stat.S_IRUSR | stat.S_IWUSR)
        probe.unlink()


def test_a_read_only_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    store.compare_and_set("s", "", "one", "t1")
    if not _file_modes_bind(tmp_path):
        # root (with CAP_DAC_OVERRIDE) writes through any file mode: make the connection read-only instead
        store._conn().execute("PRAGMA query_only = ON")
        mode = None
    else:
        store.close()  # an open connection keeps writing through its descriptor: reopen on a read-only file
        mode = path.stat().st_mode
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        with pytest.raises(StoreError, match="readonly") as caught:
            store.compare_and_set("s", "t1", "two", "t2")
        assert str(path) in str(caught.value) and "-wal and -shm" in str(caught.value)
    finally:
        if mode is not None:  # SQLite made the -wal and -shm files read-only too, like the database
            for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
                if (path.parent / name).exists():
                    (path.parent / name).chmod(mode)
    assert store.load("s") == Versioned(1, "one", "t1")
    assert store.compare_and_set("s", "t1", "two", "t2") is None  # usable again once the file is writable
    assert store.load("s") == Versioned(2, "two", "t2")
    store.close()


def test_a_full_disk(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SqliteStore(path)
    store.compare_and_set("s", "", "small", "t1")
    conn = store._conn()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow any more
    with pytest.raises(StoreError, match="full") as caught:
        store.compare_and_set("s", "t1", "big" * 100_000, "t2")
    assert str(path) in str(caught.value)
    assert store.load("s") == Versioned(1, "small", "t1")  # the previous version, never half a write
    conn = store._conn()
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(StoreError, match="full"):
        store.swarm_restore("hive", {f"fp{i}" * 20: (1, ["w"] * 30, "t") for i in range(2_000)})
    assert store.swarm_counts("hive") == {}  # the transaction rolled back whole
    assert store.compare_and_set("s", "t1", "big" * 100_000, "t2") is None  # room again (a fresh connection)
    store.close()


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not a SQLite file, just text that is long enough to look like a header" * 20)
    store = SqliteStore(path)
    assert store.health() is False
    with pytest.raises(StoreError, match="not a database"):
        store.load("s")
    path.unlink()
    assert store.health() is True  # the cause is gone: a fresh file
    assert store.compare_and_set("s", "", "one", "t1") is None
    store.close()


def test_a_vanished_directory(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    store = SqliteStore(folder / "state.db")
    folder.rmdir()
    assert store.health() is False
    with pytest.raises(StoreError, match="unable to open"):
        store.swarm_add("hive", "fp", "w", "t")
    folder.mkdir()
    assert store.swarm_add("hive", "fp", "w", "t") == SwarmTally(1, 1)
    store.close()


# -- the async twin ----------------------------------------------------------------------------------------


def _script(clock: Clock) -> list[tuple[str, tuple[Any, ...]]]:
    return [
        ("load", ("s",)),
        ("compare_and_set", ("s", "", "one", "t1")),
        ("compare_and_set", ("s", "", "again", "t1")),
        ("compare_and_set", ("s", "t1", "two", "t2")),
        ("load", ("s",)),
        ("compare_and_set", ("t", "", "other", "t1")),
        ("swarm_add", ("hive", "fp", "w1", "t")),
        ("swarm_add", ("hive", "fp", "w2", "t")),
        ("swarm_counts", ("hive",)),
        ("swarm_restore", ("hive", {"a": (3, ["w"], "x")})),
        ("swarm_counts", ("hive",)),
        ("swarm_clear", ("hive",)),
        ("swarm_counts", ("hive",)),
        ("delete", ("t",)),
        ("compare_and_set", ("t", "t1", "gone", "t2")),
        ("health", ()),
        ("expire", ()),
    ]


def test_the_async_twin_gives_the_same_results(tmp_path: Path) -> None:
    clock = Clock(0.0)
    sync = SqliteStore(tmp_path / "sync.db", ttl=60.0, clock=clock)
    twin = AsyncSqliteStore(tmp_path / "async.db", ttl=60.0, clock=clock, threads=2)
    expected = [getattr(sync, name)(*args) for name, args in _script(clock)]
    expected_sessions = sorted(sync.sessions())

    async def run() -> tuple[list[Any], list[tuple[str, Versioned]], bool]:
        got = [await getattr(twin, name)(*args) for name, args in _script(clock)]
        listed = sorted([item async for item in twin.sessions()])
        results = await asyncio.gather(*(twin.swarm_add("many", "fp", f"w{i}", "t") for i in range(20)))
        assert sorted(tally.calls for tally in results) == list(range(1, 21))
        await twin.close()
        reopened = await twin.load("s") == Versioned(2, "two", "t2")  # a closed store reopens
        await twin.close()
        return got, listed, reopened

    got, listed, reopened = asyncio.run(run())
    assert got == expected
    assert listed == expected_sessions == [("s", Versioned(2, "two", "t2"))]
    assert reopened
    assert repr(twin) == f"AsyncSqliteStore({twin.url!r})"
    sync.close()


def test_the_async_twin_raises_store_errors(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    twin = AsyncSqliteStore(path, timeout=0.1)

    async def run() -> None:
        assert await twin.compare_and_set("s", "", "one", "t1") is None
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError, match="locked"):
            await twin.compare_and_set("s", "t1", "two", "t2")
        other.execute("ROLLBACK")
        other.close()
        assert await twin.compare_and_set("s", "t1", "two", "t2") is None
        assert await twin.health() is True
        await twin.close()

    asyncio.run(run())


def test_many_sessions_listed_by_the_async_twin(tmp_path: Path) -> None:
    twin = AsyncSqliteStore(tmp_path / "state.db")
    for i in range(600):
        twin.sync.compare_and_set(f"s{i}", "", str(i), "t1")

    async def run() -> dict[str, Versioned]:
        found = {name: value async for name, value in twin.sessions()}
        await twin.close()
        return found

    found = asyncio.run(run())
    assert len(found) == 600 and found["s599"] == Versioned(1, "599", "t1")


# -- the database file removed or replaced while open --------------------------------------------------------------


def _guard_steps(guard: Any, n: int) -> None:
    from loopwatch import ToolCall, ToolResult

    for _ in range(n):
        guard.observe("run", ToolCall("read_file", {"path": "notes.txt"}))
        guard.observe("run", ToolResult("the same notes"))


def test_a_database_file_removed_while_open_is_opened_afresh(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # deleted by hand while an agent runs: the guard's connection would write on into the unlinked file, which no
    # other process sees; it opens the path afresh instead, as a new process would
    from loopwatch import Guard
    from stored_state import stored_index

    path = tmp_path / "loops.db"
    guard = Guard(store=SqliteStore(path), clock=None)
    _guard_steps(guard, 2)
    for part in tmp_path.glob("loops.db*"):
        part.unlink()
    time.sleep(2 * FILE_CHECK_EVERY)  # a thread looks at the path at most that often
    _guard_steps(guard, 1)  # its session starts afresh in the new file
    other = SqliteStore(path)  # another process's view
    stored = other.load("run")
    assert stored is not None and stored_index(stored.state) == 2
    assert isinstance(guard.store, SqliteStore) and guard.store.reopened == 1
    assert "removed or replaced while open" in caplog.text
    _guard_steps(guard, 1)
    assert guard.store.reopened == 1 and stored_index(other.load("run").state) == 4  # type: ignore[union-attr]


def test_a_database_file_replaced_while_open_is_read_from_the_new_file(tmp_path: Path) -> None:
    path, copy = tmp_path / "loops.db", tmp_path / "restored.db"
    store = SqliteStore(path)
    store.compare_and_set("run", "", "before", "t1")
    backup = SqliteStore(copy)
    backup.compare_and_set("run", "", "restored", "t2")
    backup.close()
    os.replace(copy, path)  # a backup put back in place, say
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(path) + suffix)
    time.sleep(2 * FILE_CHECK_EVERY)
    loaded = store.load("run")
    assert loaded is not None and loaded.state == "restored" and store.reopened == 1


def test_reopening_after_a_removed_file_leaves_the_new_database_alone(tmp_path: Path) -> None:
    # the connection to the removed file is closed: closing the last connection of a WAL database checkpoints it and
    # deletes its -wal file by name, which by then is the new database's (SQLite sees the file moved and leaves it)
    path = tmp_path / "loops.db"
    old = SqliteStore(path)
    old.compare_and_set("a", "", "old", "t1")
    for part in tmp_path.glob("loops.db*"):
        part.unlink()
    new = SqliteStore(path)
    new.compare_and_set("b", "", "kept", "t2")
    time.sleep(2 * FILE_CHECK_EVERY)
    assert (
        old.load("b") is not None and old.reopened == 1
    )  # its connection to the removed file closed, the path reopened
    old.close()
    later = SqliteStore(path)  # another process, after
    loaded = later.load("b")
    assert loaded is not None and loaded.state == "kept"
    new.close()
    later.close()
