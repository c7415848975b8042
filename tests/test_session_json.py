"""A session's whole snapshot JSON (its counters, ladders, call records, limits' warnings, stop and refusals, and its
rules' states) is written byte for byte as before the session state was typed, and read back.

``tests/data/session_json.json`` was recorded with the release whose session state was a plain JSON dict in memory.
It holds, per policy, a SHA-256 digest of ``json.dumps(engine.dump(session))`` after every event of the same runs as
``test_state_json.py`` (example traces, two corpus files, the format samples, scripted runs, 40 benchmark sessions)
plus runs with spend and limits, a session loaded back from its snapshot every 7th event and judged on from the
loaded state; and a few whole snapshots. To record again (only when the JSON changes on purpose, with a migration
for the old form)::

    PYTHONPATH=src python tests/test_session_json.py record
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch._presets import preset
from loopwatch.core._engine import Engine
from loopwatch.core._events import Event, Message, ToolCall, ToolResult, Usage
from loopwatch.core._limits import max_consecutive_failures, max_cost, max_iterations, max_tokens
from loopwatch.core._policy import Policy
from loopwatch.core.detectors._state import flat_values
from loopwatch.errors import StateError

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "session_json.json"
KEPT = 4
"""Whole snapshots kept per policy (the first ones with ladders and call records in them)."""


def _state_json_module() -> Any:
    spec = importlib.util.spec_from_file_location("state_json_runs", ROOT / "tests" / "test_state_json.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spending() -> list[list[Event]]:
    """Runs with spend, time stamps and failures (the limits' counters, a warning, a stop by a limit), and the same
    call again and again (refused, then called again)."""
    runs: list[list[Event]] = []
    for n in range(3):
        events: list[Event] = []
        for i in range(30):
            ts = 1_000.0 + 7.5 * i
            events.append(ToolCall("bash", {"command": f"pytest -x tests/test_{i % (n + 2)}.py"}, id=f"c{i}", ts=ts))
            events.append(ToolResult(f"FAILED test_{i % 3}\nError: boom {i % 2}", id=f"c{i}", exit_code=1, ts=ts + 1))
            events.append(Usage(cost=0.07 * (n + 1), input_tokens=900, output_tokens=120 + i, ts=ts + 2))
            if i % 9 == 8:
                events.append(Message("user", "please keep going", ts=ts + 3))
        runs.append(events)
    same = [ToolCall("search", {"query": "refund policy"}, id=f"s{i}") for i in range(14)]
    runs.append([e for call in same for e in (call, ToolResult("no results", id=call.id))])
    return runs


def _limited(name: str) -> Policy:
    limits = max_iterations(25) | max_cost(1.5, warn_at=0.5) | max_tokens(60_000) | max_consecutive_failures(40)
    return dataclasses.replace(preset(name), name=f"{name}+limits", limits=limits)


POLICIES = ("default-lexical", "doom-loop", "behavioral", "jaccard-turns", "call-cycles", "ralph", "limited")


def _policy(name: str) -> Policy:
    return _limited("default-lexical") if name == "limited" else preset(name)


def digests(name: str, runs: list[list[Event]], *, replay: bool) -> dict[str, Any]:
    """The digest of the session's whole JSON after every event of every run, and a few whole snapshots."""
    engine = Engine(_policy(name), replay=replay)
    digest = hashlib.sha256()
    finals: list[Any] = []
    for events in runs:
        session = engine.new_session()
        for i, event in enumerate(events):
            engine.observe(session, event, now=float(i))
            data = engine.dump(session)
            written = json.dumps(data)
            digest.update(written.encode())
            if i % 7 == 6:
                session = engine.load(json.loads(written))
        data = engine.dump(session)
        if len(finals) < KEPT and data["ladders"] and data["calls"]["last"] is not None:
            finals.append(data)
    return {"digest": digest.hexdigest(), "finals": finals}


def _all_runs() -> list[list[Event]]:
    runs: list[list[Event]] = _state_json_module()._runs()
    return [*runs, *_spending()]


def _record_all(runs: list[list[Event]]) -> dict[str, Any]:
    return {
        f"{name} replay={replay}": digests(name, runs, replay=replay)
        for name in POLICIES
        for replay in (True, False)
        if replay or name in ("default-lexical", "limited")
    }


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return _record_all(_all_runs())


def test_every_session_writes_the_json_it_wrote_before(found: dict[str, Any], recorded: dict[str, Any]) -> None:
    assert set(found) == set(recorded)
    for key, before in recorded.items():
        assert found[key]["digest"] == before["digest"], key


def test_snapshots_recorded_before_load_and_write_back_the_same(recorded: dict[str, Any]) -> None:
    kept = 0
    for key, before in recorded.items():
        engine = Engine(_policy(key.split()[0].removesuffix("+limits")))
        for data in before["finals"]:
            expected = dict(data, detectors=_state_json_module().without_retired(engine.policy, data["detectors"]))
            assert json.dumps(engine.dump(engine.load(json.loads(json.dumps(data))))) == json.dumps(expected)
            kept += 1
    assert kept >= 10


def test_the_limits_runs_leave_warnings_refusals_and_a_stop(recorded: dict[str, Any]) -> None:
    """The recorded runs reach every part of a session's state (else the digests pin less than they say)."""
    engine = Engine(_limited("default-lexical"))
    seen: dict[str, bool] = {"warned": False, "stopped": False, "refused": False, "last_user": False, "ids": False}
    for events in _spending():
        session = engine.new_session()
        for i, event in enumerate(events):
            engine.observe(session, event, now=float(i))
            data = engine.dump(session)
            seen["warned"] |= bool(data["warned"])
            seen["stopped"] |= data["stopped"] is not None
            seen["refused"] |= data["refused"] is not None
            seen["last_user"] |= bool(data["last_user"])
            seen["ids"] |= bool(data["calls"]["ids"])
    assert all(seen.values()), seen


def test_a_snapshot_in_an_older_form_loads() -> None:
    """Snapshots taken before ``last`` and ``refused`` were kept, before a ladder kept its nudges and the streak
    before, and when one user reply was kept (a string) load, and judging goes on from them."""
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    same = ToolCall("search", {"query": "refund policy"})
    for _ in range(4):
        engine.observe(session, same)
        engine.observe(session, ToolResult("no results"))
    data = json.loads(json.dumps(engine.dump(session)))
    assert data["ladders"] and data["last"] is not None
    del data["last"], data["refused"]
    for ladder in data["ladders"].values():
        del ladder["nudges"], ladder["previous"]
    data["last_user"] = "an old reply's signature"
    old = engine.load(data)
    assert old.last is None and old.refused is None and old.last_user == ("an old reply's signature",)
    assert all(ladder.nudges == () and ladder.previous is None for ladder in flat_values(old.ladders))
    again = json.loads(json.dumps(engine.dump(old)))
    assert again["last_user"] == ["an old reply's signature"] and again["last"] is None
    assert engine.observe(old, same).action != "ok"  # the streak goes on from the loaded state


@pytest.mark.parametrize(
    ("part", "damaged"),
    [
        ("index", -1),
        ("index", "3"),
        ("usage", {"iterations": "1", "cost": 0.0, "tokens": 0, "failures": 0, "first_ts": None, "last_ts": None}),
        ("usage", {"iterations": 1}),
        ("ladders", {"repeat": {"key": "k", "emitted": "0", "detections": 1, "last": None, "previous": None}}),
        ("ladders", {"repeat": {"key": "k", "emitted": 0, "detections": 1, "last": None, "nudges": [[1]]}}),
        ("ladders", ["repeat"]),
        ("calls", {"last": [1, "bash"], "ids": {}}),
        ("calls", {"last": None, "ids": {"c1": [1, "bash", "bash", "fp", 7]}}),
        ("calls", {"last": None}),
        ("warned", "max_cost"),
        ("last", [1, "nudge"]),
        ("refused", [1, "fp", "2"]),
        ("stopped", ["stop"]),
    ],
)
def test_a_damaged_session_is_refused_with_a_state_error(part: str, damaged: object) -> None:
    engine = Engine(preset("default-lexical"))
    data = json.loads(json.dumps(engine.dump(engine.new_session())))
    data[part] = damaged
    with pytest.raises(StateError):
        engine.load(data)


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    RECORDED.write_text(json.dumps(_record_all(_all_runs()), indent=1) + "\n")
    print(f"wrote {RECORDED}")
