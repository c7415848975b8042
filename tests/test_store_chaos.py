"""Store chaos: two processes guard one session through a store while it fails under them (a valkey server
killed with SIGKILL and restarted with or without its data, a session expiring or forgotten mid-run, a SQLite
file locked by another process or holding a damaged row). Each test reports the events observed, written,
lost and counted twice, and holds lost and double-counted at 0.

"Lost" and "twice" are measured against what each process was told: an event whose write was acknowledged
must be in the store (unless the fault itself drops the session's data: a server restarted empty, ``ttl``,
``--forget``, a damaged row; then only the events acknowledged after the fault count); an event whose write
failed (fail open: ``ok`` and a counted store error) may or may not have landed (a reply lost after the
write), but never twice. What is in the store is the session's event count (its state's ``index``), which
every judged event increments exactly once.

Run with ``pytest tests/test_store_chaos.py -s`` to see the reports.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.core._events import ToolCall, ToolResult
from loopwatch.stores import store_from_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_server import RedisServer, server_binary_or_fail  # type: ignore[import-not-found]
from stored_state import stored_index

if not sys.platform.startswith("linux"):
    pytest.skip("the chaos tests fork worker processes", allow_module_level=True)

CONTEXT: Any = multiprocessing.get_context("fork")
WORKERS = 2
EVENTS = 400  # per worker
PACE = 0.002  # seconds between a worker's events


def _worker(url: str, name: str, start: Any, pause: Any, results: Any) -> None:
    """Observe EVENTS events of the shared session; report (time, acknowledged) for each."""
    guard = Guard(store=url, clock=None, on_store_error="allow")
    start.wait(30)
    seen = []
    for i in range(EVENTS):
        while pause.is_set():
            time.sleep(0.005)
        errors = guard.stats["store_errors"]
        event = ToolCall("step", {"n": f"{name}-{i}"}) if i % 2 == 0 else ToolResult(f"done {i}", tool="step")
        guard.observe("shared", event)
        seen.append((time.monotonic(), guard.stats["store_errors"] == errors))
        time.sleep(PACE)
    results.put((name, seen, dict(guard.stats)))


@dataclass
class Report:
    scenario: str
    observed: int  # events the processes handed to their guards
    acknowledged: int  # events whose write the store confirmed
    failed: int  # events answered ok after a store error (fail open): outcome unknown
    in_store: int  # events the session's stored state counts
    expected_low: int  # acknowledged events the store must hold
    expected_high: int  # events the store may hold at most
    dropped_by_fault: int  # acknowledged events the fault itself drops (a server without data, ttl, --forget)
    damaged_states: int

    @property
    def lost(self) -> int:
        return max(0, self.expected_low - self.in_store)

    @property
    def double_counted(self) -> int:
        return max(0, self.in_store - self.expected_high)

    def __str__(self) -> str:
        return (
            f"{self.scenario}: observed {self.observed}, acknowledged {self.acknowledged}, failed open "
            f"{self.failed}, in the store {self.in_store} (expected {self.expected_low}..{self.expected_high}, "
            f"{self.dropped_by_fault} dropped by the fault itself), lost {self.lost}, "
            f"double-counted {self.double_counted}"
        )


def _run(
    scenario: str,
    url: str,
    fault: Callable[[Any], tuple[float, float]],
    *,
    drops_data: bool,
    count: Callable[[], int],
    may_heal: bool = False,
) -> Report:
    """Start the workers, run ``fault(pause)`` a quarter of the way in (it returns when it began and ended),
    wait for the workers, and compare what they were told with what the store holds (``count()``)."""
    start, pause, results = CONTEXT.Event(), CONTEXT.Event(), CONTEXT.Queue()
    workers = [CONTEXT.Process(target=_worker, args=(url, f"w{i}", start, pause, results)) for i in range(WORKERS)]
    for worker in workers:
        worker.start()
    start.set()
    time.sleep(EVENTS * PACE / 4)
    began, ended = fault(pause)
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
    seen = [entry for _, entries, _ in outcomes for entry in entries]
    acked = [t for t, ok in seen if ok]
    failed = [t for t, ok in seen if not ok]
    if drops_data:  # counting starts again at the fault: what was acknowledged before it is gone by design
        low = sum(1 for t in acked if t > ended)
        high = sum(1 for t in acked if t > began) + sum(1 for t in failed if t > began)
        if may_heal:  # a process holding the state as it was may write it back over the damage
            high = len(acked) + len(failed)
    else:
        low, high = len(acked), len(acked) + len(failed)
    report = Report(
        scenario,
        observed=len(seen),
        acknowledged=len(acked),
        failed=len(failed),
        in_store=count(),
        expected_low=low,
        expected_high=high,
        dropped_by_fault=len(acked) - sum(1 for t in acked if t > began) if drops_data else 0,
        damaged_states=sum(stats["damaged_states"] for _, _, stats in outcomes),
    )
    print(f"\n{report}")
    return report


def _count(url: str) -> Callable[[], int]:
    def count() -> int:
        store = store_from_url(url)
        try:
            stored = store.load("shared")
        finally:
            store.close()
        return 0 if stored is None else stored_index(stored.state)

    return count


@pytest.fixture
def redis() -> Iterator[Callable[..., RedisServer]]:
    binary = server_binary_or_fail()
    started: list[RedisServer] = []

    def start(**kwargs: Any) -> RedisServer:
        started.append(RedisServer(binary=binary, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _timed(action: Callable[[], object]) -> tuple[float, float]:
    began = time.monotonic()
    action()
    return began, time.monotonic()


# -- Redis ------------------------------------------------------------------------------------------------------------


def test_a_server_killed_and_restarted_with_its_data(redis: Callable[..., RedisServer]) -> None:
    server = redis(persistent=True)
    url = server.url + "?prefix=chaos&timeout=0.5"

    def kill_and_restart(pause: Any) -> tuple[float, float]:
        return _timed(lambda: (server.stop(), time.sleep(0.2), server.start()))

    report = _run("valkey SIGKILL, restarted with its data", url, kill_and_restart, drops_data=False, count=_count(url))
    assert report.failed > 0 and report.lost == 0 and report.double_counted == 0


def test_a_server_killed_and_restarted_empty(redis: Callable[..., RedisServer]) -> None:
    server = redis(persistent=False)
    url = server.url + "?prefix=chaos&timeout=0.5"

    def kill_and_restart(pause: Any) -> tuple[float, float]:
        return _timed(lambda: (server.stop(), time.sleep(0.2), server.start()))

    report = _run("valkey SIGKILL, restarted empty", url, kill_and_restart, drops_data=True, count=_count(url))
    assert report.dropped_by_fault > 0 and report.lost == 0 and report.double_counted == 0


def test_the_session_expiring_mid_run(redis: Callable[..., RedisServer]) -> None:
    server = redis()
    url = server.url + "?prefix=chaos&timeout=0.5&ttl=0.4"

    def go_quiet(pause: Any) -> tuple[float, float]:
        pause.set()  # nobody writes for longer than the ttl: the session expires
        began = time.monotonic()
        time.sleep(1.0)
        ended = time.monotonic()
        pause.clear()
        return began, ended

    report = _run("valkey ttl expiry during a pause", url, go_quiet, drops_data=True, count=_count(url))
    assert report.dropped_by_fault > 0 and report.lost == 0 and report.double_counted == 0


def test_forget_during_a_run(redis: Callable[..., RedisServer]) -> None:
    server = redis()
    url = server.url + "?prefix=chaos&timeout=2"

    def forget(pause: Any) -> tuple[float, float]:
        command = [sys.executable, "-m", "loopwatch.cli", "sessions", "--store", url, "--forget", "shared"]
        return _timed(lambda: subprocess.run(command, check=True, capture_output=True, timeout=60))

    report = _run("loopwatch sessions --forget mid-run (valkey)", url, forget, drops_data=True, count=_count(url))
    assert report.lost == 0 and report.double_counted == 0


# -- SQLite -----------------------------------------------------------------------------------------------------------


def test_a_sqlite_file_locked_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}?timeout=0.1"

    def lock(pause: Any) -> tuple[float, float]:
        holder = sqlite3.connect(path, isolation_level=None)
        began = time.monotonic()
        holder.execute("BEGIN IMMEDIATE")  # a writer holding the file for a second
        time.sleep(1.0)
        holder.execute("ROLLBACK")
        holder.close()
        return began, time.monotonic()

    report = _run("SQLite file locked for 1 s", url, lock, drops_data=False, count=_count(url))
    assert report.failed > 0 and report.lost == 0 and report.double_counted == 0


def test_a_damaged_sqlite_row(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}?timeout=5"

    def damage(pause: Any) -> tuple[float, float]:
        def write() -> None:
            with sqlite3.connect(path, timeout=5) as db:
                db.execute("UPDATE loopwatch_sessions SET state = 'not json {', token = 'garbage' WHERE id = 'shared'")

        return _timed(write)

    # the process that reads the damaged row starts the session afresh (fail open), unless another process,
    # holding the state as it was before the damage, writes it back first: either way nothing twice
    report = _run("SQLite row damaged mid-run", url, damage, drops_data=True, count=_count(url), may_heal=True)
    assert report.damaged_states >= 1 and report.lost == 0 and report.double_counted == 0


def test_forget_during_a_run_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}?timeout=5"

    def forget(pause: Any) -> tuple[float, float]:
        command = [sys.executable, "-m", "loopwatch.cli", "sessions", "--store", url, "--forget", "shared"]
        return _timed(lambda: subprocess.run(command, check=True, capture_output=True, timeout=60))

    report = _run("loopwatch sessions --forget mid-run (SQLite)", url, forget, drops_data=True, count=_count(url))
    assert report.lost == 0 and report.double_counted == 0
