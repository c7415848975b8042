"""One conformance suite for every store: a guard keeping its sessions in a store gives exactly the
verdicts of the in-process guard, shares state between guards (processes) and counts swarms together."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.core._events import Event, Message, ToolCall, ToolResult
from loopwatch.readers import read_runs
from loopwatch.stores import MemoryStore, Store, store_from_url
from stored_state import stored_index

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus" / "swe_agent_java.jsonl.gz"

STUCK = ("fasterxml__jackson-core-174", "apache__dubbo-7041", "fasterxml__jackson-databind-3371")
StoreFactory = Callable[[Path], Store]


def _memory(tmp_path: Path) -> Store:
    return MemoryStore()


def _sqlite(tmp_path: Path) -> Store:
    pytest.importorskip("loopwatch.stores.sqlite", reason="the SQLite store is not built yet")
    return store_from_url(f"sqlite:///{tmp_path / 'state.db'}")


def _redis(tmp_path: Path) -> Store:
    pytest.importorskip("loopwatch.stores.redis", reason="the Redis store is not built yet")
    from redis_server import shared_server  # type: ignore[import-not-found]

    server = shared_server()
    server.flush()
    return store_from_url(server.url + "?prefix=conformance")


STORES: dict[str, StoreFactory] = {"memory": _memory, "sqlite": _sqlite, "redis": _redis}


@pytest.fixture(params=sorted(STORES))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    made: list[Store] = []

    def make() -> Store:
        store = STORES[request.param](tmp_path)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def _runs() -> list[tuple[str, list[Event]]]:
    runs = [(r.id, r.events) for r in read_runs([str(EXAMPLES)])]
    if CORPUS.exists():
        wanted = {f"swe_agent_java/20240825_SWE-agent_deepseek-chat-v2/{name}" for name in STUCK}
        runs += [(r.id, r.events) for r in read_runs([str(CORPUS)]) if r.id in wanted]
    return runs


def _verdicts(guard: Guard, session: str, events: list[Event]) -> list[dict[str, Any]]:
    return [guard.observe(session, event).to_json() for event in events]


def test_a_stored_guard_gives_the_in_process_verdicts(make_store: Callable[[], Store]) -> None:
    store = make_store()
    actions = set()
    for run_id, events in _runs():
        expected = _verdicts(Guard(clock=None), run_id, events)
        got = _verdicts(Guard(clock=None, store=store), run_id, events)
        assert got == expected, run_id
        actions.update(v["action"] for v in got)
    assert actions == {"ok", "nudge", "block", "stop"}


def test_guards_sharing_a_store_share_the_session(make_store: Callable[[], Store]) -> None:
    store = make_store()
    first, second = Guard(clock=None, store=store), Guard(clock=None, store=make_store_again(store))
    run_id, events = next((r, e) for r, e in _runs() if r.endswith("looping-coding-agent"))
    expected = _verdicts(Guard(clock=None), run_id, events)
    # events alternate between two guards (two processes, one session): the shared state sees them all
    got = [(first if i % 2 else second).observe(run_id, e).to_json() for i, e in enumerate(events)]
    assert got == expected
    assert first.snapshot(run_id)["state"]["index"] == len(events)


def make_store_again(store: Store) -> Store:
    """A second handle on the same store (what another process would open)."""
    return store if isinstance(store, MemoryStore) else store_from_url(store.url)


def test_snapshot_restore_reset_and_forget_go_through_the_store(make_store: Callable[[], Store]) -> None:
    store = make_store()
    guard = Guard(clock=None, store=store)
    events = next(e for r, e in _runs() if r.endswith("abab-agent"))
    for event in events[:9]:
        guard.observe("s", event)
    saved = guard.snapshot("s")
    assert saved["state"]["index"] == 9
    other = Guard(clock=None, store=make_store_again(store))
    other.restore(saved, session="copy")
    rest = events[9:]
    assert _verdicts(guard, "s", rest) == _verdicts(other, "copy", rest)
    assert set(guard.sessions()) >= {"s", "copy"}
    guard.reset("s", limits=True)
    assert (
        other.snapshot("s")["state"]["detectors"]
        == Guard(clock=None).engine.dump(Guard(clock=None).engine.new_session())["detectors"]
    )
    guard.forget("copy")
    assert "copy" not in other.sessions()


def test_a_swarm_is_counted_across_guards(make_store: Callable[[], Store]) -> None:
    store = make_store()
    guards = [Guard(clock=None, store=make_store_again(store)) for _ in range(3)]
    call = ToolCall("web_search", {"query": "latest release notes"})
    verdicts = []
    for i in range(12):
        worker = f"worker-{i % 3}"
        verdicts.append(guards[i % 3].observe(worker, call, swarm="crew-1"))
        guards[i % 3].observe(worker, ToolResult(f"result page {i}: {'new text ' * i}"))
        guards[i % 3].observe(worker, Message("assistant", f"step {i}"))
    swarm_hits = [v for v in verdicts if v.pattern == "swarm_repeat"]
    assert swarm_hits and swarm_hits[0].count == 10  # the 10th call of the swarm, from 3 workers
    counts = guards[0].swarm_snapshot("crew-1")["counts"]
    assert [(c[0], sorted(c[1])) for c in counts.values()] == [(12, ["worker-0", "worker-1", "worker-2"])]
    guards[1].clear_swarm("crew-1")
    assert guards[2].swarm_snapshot("crew-1")["counts"] == {}
    guards[0].restore_swarm({"swarm": "crew-2", "counts": {"fp": [3, ["a"], "t"]}})
    assert guards[1].swarm_snapshot("crew-2")["counts"] == {"fp": [3, ["a"], "t"]}


def test_stored_state_is_json_and_bounded(make_store: Callable[[], Store]) -> None:
    store = make_store()
    guard = Guard(clock=None, store=store)
    run_id, events = next((r, e) for r, e in _runs() if r.endswith("looping-coding-agent"))
    for event in events:
        guard.observe(run_id, event)
    stored = store.load(run_id)
    assert stored is not None and stored.version == len(events)
    assert stored_index(stored.state) == len(events)
    assert len(stored.state) < 10_000  # a few KB (bounded windows), as in memory


def test_the_async_guard_gives_the_same_verdicts_through_a_store(make_store: Callable[[], Store]) -> None:
    import asyncio

    from loopwatch import AsyncGuard

    store = make_store()
    run_id, events = next((r, e) for r, e in _runs() if r.endswith("looping-coding-agent"))
    expected = _verdicts(Guard(clock=None), run_id, events)

    async def judge() -> list[dict[str, Any]]:
        guard = AsyncGuard(clock=None, store=store)
        out = [(await guard.observe(run_id, e)).to_json() for e in events]
        assert (await guard.snapshot(run_id))["state"]["index"] == len(events)
        assert run_id in await guard.sessions()
        return out

    assert asyncio.run(judge()) == expected


def _scenario(guard: Guard) -> dict[str, Any]:
    """Every session method of the guard, on two workers of one swarm: one stopped (and calling on), one working;
    what a caller can see of it (verdicts, records, snapshots, the swarm's counts, the sessions)."""
    records: list[dict[str, Any]] = []
    guard.listeners.append(records.append)
    guard.redact_listeners = False
    verdicts = []
    for i in range(12):  # stopped at its 8th call, it calls on: the swarm made those calls too
        verdicts.append(guard.observe("stuck", ToolCall("read_file", {"path": "x"}), swarm="crew").to_json())
        verdicts.append(guard.observe("stuck", ToolResult("the same text")).to_json())
        verdicts.append(guard.observe("busy", ToolCall("read_file", {"path": "x"}), swarm="crew").to_json())
        verdicts.append(guard.observe("busy", ToolResult(f"new text {i}")).to_json())
    guard.reset("never-seen")  # a reset of an unknown session leaves it unknown
    saved = guard.snapshot("busy")
    guard.restore({**saved, "swarm": None}, session="copy")  # restored as the snapshot says: in no swarm
    verdicts.append(guard.observe("copy", ToolCall("read_file", {"path": "x"})).to_json())
    guard.reset("stuck", limits=True)
    return {
        "verdicts": verdicts,
        "records": records,
        "busy": json.loads(json.dumps(saved)),
        "copy": guard.snapshot("copy")["swarm"],
        "stuck": guard.snapshot("stuck")["state"]["stopped"],
        "crew": guard.swarm_snapshot("crew"),
        "sessions": sorted(guard.sessions()),
    }


def test_every_session_method_behaves_as_in_process(make_store: Callable[[], Store]) -> None:
    expected = _scenario(Guard(clock=None))
    got = _scenario(Guard(clock=None, store=make_store()))
    assert got == expected
    assert expected["crew"]["counts"] == {
        next(iter(expected["crew"]["counts"])): [24, ["stuck", "busy"], "read_file"]  # every call, once
    }
    assert expected["sessions"] == ["busy", "copy", "stuck"] and expected["copy"] is None
    assert expected["stuck"] is None  # reset: no longer stopped
    assert [r["event"] for r in expected["records"]].count("session.terminated") == 1  # the stop, written once
    assert {r["swarm"] for r in expected["records"]} == {"crew"}


def test_evict_idle_with_a_store_is_unsupported_and_says_what_to_do(make_store: Callable[[], Store]) -> None:
    import asyncio

    from loopwatch import AsyncGuard
    from loopwatch.errors import LoopwatchError, UnsupportedError

    store = make_store()
    guard = Guard(store=store)
    guard.observe("s", ToolCall("read_file", {"path": "x"}))
    with pytest.raises(UnsupportedError, match=r"ttl") as raised:
        guard.evict_idle(0)
    assert isinstance(raised.value, LoopwatchError)
    assert guard.sessions() == ["s"]  # nothing was dropped

    async def evict() -> int:
        return await AsyncGuard(store=store).evict_idle(0)

    with pytest.raises(UnsupportedError):
        asyncio.run(evict())
