"""``benchmarks/bench_peers.py`` runs end to end in its smallest mode, peers installed or not, and says what it did.

No timing is asserted: the figures are the benchmark's to report. What is checked is the shape of its JSON, that a
peer missing here is skipped with the reason, that loopwatch saw the traffic it was meant to see (the loop
sessions flagged, the working ones not), and that the table prints the target line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_peers.py"
PEERS = {"aura-guard": "aura_guard", "runbound": "runbound", "agent-watchdog": "agent_watchdog"}
PEERS["trajectory-fuse"] = "trajectory_fuse"
LOOPWATCH = ("loopwatch-lexical", "loopwatch-lexical-pure")
KINDS = ("tool_call", "tool_result", "message")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    only = [item for name in (*LOOPWATCH, *PEERS) for item in ("--only", name)]
    command = [sys.executable, str(SCRIPT), "--sessions", "5", "--rounds", "1", *only, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def output() -> dict[str, Any]:
    done = _run("--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_every_contender_is_measured_or_skipped_with_its_reason(output: dict[str, Any]) -> None:
    results, skipped = output["results"], output["skipped"]
    assert set(results) | set(skipped) == {*LOOPWATCH, *PEERS}
    assert "loopwatch-lexical-pure" in results  # the pure-Python twins need nothing
    for name, reason in skipped.items():
        assert name in PEERS or "compiled kernels" in reason
        if name in PEERS:
            assert reason == f"not installed (pip install {name})"
    assert output["config"] == {
        "sessions": 5,
        "events": 50,
        "wave": 500,
        "rounds": 1,
        "seed": 1,
        "python": sys.version.split()[0],
    }


def test_each_result_has_figures_for_the_hooks_it_has(output: dict[str, Any]) -> None:
    for name, result in output["results"].items():
        assert result["rounds"] == 1 and result["version"]
        measured = [kind for kind in KINDS if result["per_type"][kind] is not None]
        assert "tool_result" in measured, name  # every contender looks at a call and its result
        for kind in measured:
            stats = result["per_type"][kind]
            assert stats["count"] > 0 and 0 < stats["median_us"] <= stats["p99_us"]
            assert len(stats["rounds_median_us"]) == 1
        assert result["call_result"]["count"] == result["per_type"]["tool_result"]["count"]
        sessions = result["sessions_flagged"]
        assert sum(row["sessions"] for row in sessions.values()) == 5
        assert result["errors"] == {}, name


def test_loopwatch_sees_every_event_and_flags_the_loop_sessions_only(output: dict[str, Any]) -> None:
    for name in LOOPWATCH:
        if name not in output["results"]:
            continue
        result = output["results"][name]
        counts = {kind: result["per_type"][kind]["count"] for kind in KINDS}
        assert sum(counts.values()) == 5 * 50
        assert counts["tool_call"] == counts["tool_result"]
        flagged = result["sessions_flagged"]
        assert flagged["repeat"] == {"sessions": 1, "flagged": 1}
        assert flagged["retry"] == {"sessions": 1, "flagged": 1}
        assert flagged["working"] == {"sessions": 3, "flagged": 0}
        assert set(result["decisions"]) <= {"nudge", "block", "stop"}


def test_the_target_is_stated_against_aura_guard(output: dict[str, Any]) -> None:
    targets = {t["contender"]: t for t in output["targets"]}
    if "loopwatch-lexical" not in output["results"]:
        pytest.skip("the compiled kernels are not built here")
    target = targets["loopwatch-lexical"]
    assert target["target"] == "call + result <= 0.6x aura-guard's"
    if "aura-guard" in output["results"]:
        assert target["met"] == (target["ratio"] <= 0.6)
        assert output["results"]["aura-guard"]["to_aura_guard"]["call_result"] == 1.0
    else:
        assert target["met"] is None and target["ratio"] is None


def test_the_table_names_every_contender_and_the_target() -> None:
    done = _run()
    assert done.returncode == 0, done.stderr
    for name in (*LOOPWATCH, *PEERS):
        assert name in done.stdout
    target = "target, loopwatch-lexical: call + result <= 0.6x aura-guard's"
    assert target in done.stdout or "loopwatch-lexical        skipped: the compiled kernels" in done.stdout
