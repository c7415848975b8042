"""Several processes guarding the same session and the same swarm through one store: nothing is lost."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

import pytest

from loopwatch import Guard
from loopwatch.cli import main
from loopwatch.core._events import Message, ToolCall, ToolResult

TESTS = Path(__file__).resolve().parent


def _hammer(url: str, worker: int, events: int) -> int:
    guard = Guard(store=url, clock=None, on_store_error="raise")
    for i in range(events):
        guard.observe("shared", ToolCall("search", {"query": f"w{worker} q{i}"}), swarm="crew")
        guard.observe("shared", ToolResult(f"result {worker} {i}"))
        guard.observe(f"own-{worker}", ToolCall("lookup", {"id": "same"}), swarm="crew")
    return guard.stats["store_errors"]


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}?timeout=30"


def _redis_url(tmp_path: Path) -> str:
    pytest.importorskip("loopwatch.stores.redis", reason="the Redis store is not built yet")
    sys.path.insert(0, str(TESTS))
    from redis_server import shared_server  # type: ignore[import-not-found]

    server = shared_server()
    server.flush()
    return server.url + "?prefix=processes&timeout=10"  # a loaded 2-core machine: no spurious timeouts


@pytest.mark.parametrize("make_url", [_sqlite_url, _redis_url], ids=["sqlite", "redis"])
def test_every_event_of_every_process_is_counted_once(tmp_path: Path, make_url: object) -> None:
    url = make_url(tmp_path)  # type: ignore[operator]
    workers, events = 4, 25
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        errors = pool.starmap(_hammer, [(url, w, events) for w in range(workers)])
    assert errors == [0] * workers
    guard = Guard(store=url, clock=None)
    assert guard.snapshot("shared")["state"]["index"] == 2 * workers * events
    counts = guard.swarm_snapshot("crew")["counts"]
    same = [c for c in counts.values() if c[2] == "lookup"]
    assert len(same) == 1 and same[0][0] == workers * events  # one fingerprint, every call counted
    assert sorted(same[0][1]) == [f"own-{w}" for w in range(workers)]
    assert sum(c[0] for c in counts.values()) == 2 * workers * events


def test_the_sessions_command_lists_resets_and_clears(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _sqlite_url(tmp_path)
    guard = Guard(store=url, clock=None)
    for _ in range(4):
        guard.observe("looping", ToolCall("read_file", {"path": "a.txt"}), swarm="crew")
        guard.observe("looping", ToolResult("same"))
    guard.observe("calm", Message("assistant", "hello"))
    assert main(["sessions", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 sessions")
    looping = next(line for line in out.splitlines() if "looping" in line)
    assert "8 events" in looping and "repeat L1" in looping and "last nudge repeat L1 at 4" in looping
    assert "calm  1 events  no streak  no verdict" in out
    assert main(["sessions", "--store", url, "--reset", "looping"]) == 0
    assert "reset looping" in capsys.readouterr().out
    assert main(["sessions", "--store", url, "--json"]) == 0
    import json

    rows = {r["session"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["looping"]["streaks"] == {} and rows["looping"]["events"] == 8
    assert main(["sessions", "--store", url, "--swarm", "crew"]) == 0
    assert "4 calls" in capsys.readouterr().out
    assert main(["sessions", "--store", url, "--swarm", "crew", "--clear"]) == 0
    assert guard.swarm_snapshot("crew")["counts"] == {}
    assert main(["sessions", "--store", url, "--clear"]) == 2
    assert "--clear needs --swarm" in capsys.readouterr().err
    assert main(["sessions", "--store", url, "--forget", "calm"]) == 0
    assert guard.sessions() == ["looping"]
