"""``benchmarks/golden.py``: recorded verdicts are checked run by run, and a change in a verdict, a run or the golden
itself is reported (exit status and the first difference), on a tiny trace file and a few benchmark sessions."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopwatch.core._events import ToolCall, ToolResult, event_to_json

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden", BENCHMARKS / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["golden"] = module
    spec.loader.exec_module(module)
    return module


def _write_trace(path: Path, *, stuck_calls: int = 6, break_at: int | None = None) -> None:
    """Two sessions: ``stuck`` lists the same directory ``stuck_calls`` times (another one at ``break_at``),
    ``working`` runs other commands."""
    lines = []
    for n in range(stuck_calls):
        command = "ls -la /srv/app" if n != break_at else f"cat /srv/app/file{n}.txt"
        lines.append({**event_to_json(ToolCall("bash", {"command": command}, id=f"s{n}")), "session": "stuck"})
        lines.append(
            {**event_to_json(ToolResult("app.py\nconfig.toml\n", tool="bash", id=f"s{n}")), "session": "stuck"}
        )
    for n in range(4):
        call = ToolCall("bash", {"command": f"python step_{n}.py"}, id=f"w{n}")
        lines.append({**event_to_json(call), "session": "working"})
        lines.append({**event_to_json(ToolResult(f"done {n * 7919}", tool="bash", id=f"w{n}")), "session": "working"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _run(golden: ModuleType, *args: str) -> int:
    return int(golden.main([*args, "--preset", "default-lexical", "-q"]))


@pytest.fixture
def recorded(golden: ModuleType, tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace)
    results = tmp_path / "results"
    status = _run(golden, "record", str(trace), "--results", str(results), "--sessions", "6", "--events", "20")
    assert status == 0
    return trace, results


def test_record_keeps_each_run_and_its_verdicts(golden: ModuleType, recorded: tuple[Path, Path]) -> None:
    _trace, results = recorded
    document = golden.read_golden(results / "golden-default-lexical.json.gz")
    runs = document["runs"]
    assert runs["trace.jsonl/working"] == [8, []]
    events, stuck = runs["trace.jsonl/stuck"]
    assert events == 12
    assert stuck[0][:4] == [4, "nudge", "repeat", "repeat"]  # the third identical call: nudged by the repeat rule
    assert {row[1] for row in stuck} >= {"nudge", "block"}
    assert sorted(k for k in runs if k.startswith("bench_guard/")) == [f"bench_guard/session-{n:06d}" for n in range(6)]
    assert document["bench_guard"] == {"sessions": 6, "events": 20, "wave": 500, "seed": 1}
    assert document["digest"] == golden.digest(runs, [])


def test_check_passes_on_the_same_verdicts(
    golden: ModuleType, recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, results = recorded
    assert _run(golden, "check", str(trace), "--results", str(results)) == 0
    assert "the same verdicts on all 8 runs" in capsys.readouterr().out


def test_check_fails_when_a_run_is_judged_otherwise(
    golden: ModuleType, recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, results = recorded
    _write_trace(trace, break_at=2)  # the loop is broken by another call: the nudge comes later
    assert _run(golden, "check", str(trace), "--results", str(results)) == 1
    out = capsys.readouterr().out
    assert "1 of 8 runs differ" in out
    assert "trace.jsonl/stuck: verdict 1: expected event 4: nudge repeat by repeat" in out
    assert "trace.jsonl/working" not in out


def test_check_fails_when_a_run_disappears(
    golden: ModuleType, recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, results = recorded
    trace.write_text("".join(line + "\n" for line in trace.read_text().splitlines() if '"stuck"' not in line))
    assert _run(golden, "check", str(trace), "--results", str(results)) == 1
    assert "trace.jsonl/stuck: missing: the golden has this run" in capsys.readouterr().out


def test_check_names_the_files_when_others_are_read(
    golden: ModuleType, recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, results = recorded
    other = trace.with_name("other.jsonl")
    trace.rename(other)
    assert _run(golden, "check", str(other), "--results", str(results)) == 1
    out = capsys.readouterr().out
    assert "files read: other.jsonl; the golden's: trace.jsonl" in out
    assert "trace.jsonl/stuck: missing" in out and "other.jsonl/stuck: a run the golden does not have" in out


def test_a_damaged_golden_is_not_compared(
    golden: ModuleType, recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, results = recorded
    path = results / "golden-default-lexical.json.gz"
    document = json.loads(gzip.decompress(path.read_bytes()))
    document["runs"]["trace.jsonl/stuck"][1][0][1] = "stop"  # edited by hand, digest left as it was
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert _run(golden, "check", str(trace), "--results", str(results)) == 2
    assert "damaged" in capsys.readouterr().err


def test_a_missing_golden_is_reported(golden: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace)
    assert _run(golden, "check", str(trace), "--results", str(tmp_path / "none")) == 2
    assert "no golden" in capsys.readouterr().err


def test_compare_shows_the_first_difference_of_each_run(golden: ModuleType) -> None:
    a = [3, "nudge", "repeat", "repeat", 1, 3, 1]
    b = [5, "block", "repeat", "repeat", 2, 5, 1]
    recorded = {"same": [9, [a]], "later": [9, [a, b]], "shorter": [9, [a]], "gone": [4, []], "cut": [9, []]}
    found = {"same": [9, [a]], "later": [9, [a, [6, *b[1:]]]], "shorter": [7, [a]], "cut": [9, [a]], "new": [2, []]}
    assert golden.compare(recorded, found) == [
        ("later", "verdict 2: expected " + golden.show(b) + "; got " + golden.show([6, *b[1:]])),
        ("shorter", "7 events, the golden has 9"),
        ("gone", "missing: the golden has this run"),
        ("cut", "verdict 1: expected nothing; got " + golden.show(a)),
        ("new", "a run the golden does not have"),
    ]
    assert golden.show(b) == "event 5: block repeat by repeat (level 2, count 5, loop from 1)"
