"""The ``loopwatch scan`` command line, in-process (``main([...])``) and as a subprocess.

The ``--json`` output is checked against docs/formats.md, section 3 (a public contract), on the bundled
``examples/`` and on event streams written here.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwatch._presets import PRESETS
from loopwatch.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REPORT_KEYS = {"id", "events", "detections"}
DETECTION_KEYS = {"index", "action", "level", "pattern", "loop_start", "reason", "message"}
ACTIONS = {"nudge", "block", "stop"}
# directory walk order (file names sorted); events-stream.jsonl holds two sessions
EXAMPLE_IDS = [
    "examples/abab-agent",
    "examples/batch-reader",
    "agent-a",
    "agent-b",
    "examples/looping-coding-agent",
    "examples/polling-agent",
    "examples/repeated-reply",
]


@dataclass
class Result:
    code: int | str | None
    out: str
    err: str

    def reports(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.reports()}


Runner = Callable[..., Result]


@pytest.fixture(params=["in-process", "subprocess"])
def cli(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Runner:
    """``cli(*args, stdin=bytes)`` runs ``loopwatch`` one way or the other and returns its exit code and output."""

    def run(*args: str, stdin: bytes | None = None) -> Result:
        if request.param == "subprocess":
            done = subprocess.run(
                [sys.executable, "-m", "loopwatch.cli", *args],
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=120,
                check=False,
            )
            return Result(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        capsys.readouterr()
        try:
            code: int | str | None = main(list(args))
        except SystemExit as exc:  # argparse errors
            code = exc.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def check_format(reports: list[dict[str, Any]]) -> None:
    """Every report and detection follows docs/formats.md, section 3 to the letter."""
    assert reports, "no output"
    for report in reports:
        assert set(report) == REPORT_KEYS, report.keys()
        assert isinstance(report["id"], str) and report["id"]
        assert isinstance(report["events"], int) and report["events"] >= 0
        assert isinstance(report["detections"], list)
        previous = -1
        for i, detection in enumerate(report["detections"]):
            assert set(detection) == DETECTION_KEYS, detection.keys()
            assert detection["action"] in ACTIONS  # never "ok"
            index, start = detection["index"], detection["loop_start"]
            assert isinstance(index, int) and not isinstance(index, bool)
            assert previous < index < report["events"]  # one verdict per event, in order
            previous = index
            assert isinstance(detection["level"], int) and detection["level"] >= 1
            assert isinstance(detection["pattern"], str) and detection["pattern"]
            assert start is None or (isinstance(start, int) and 0 <= start <= index)
            assert isinstance(detection["reason"], str) and detection["reason"]
            assert isinstance(detection["message"], str) and detection["message"]
            if detection["action"] == "stop":  # a stop ends the run: nothing is reported after it
                assert i == len(report["detections"]) - 1


def steps_of(path: Path) -> int:
    return len(json.loads(path.read_text(encoding="utf-8"))["steps"])


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- event streams written here --------------------------------------------------------------------------


def stuck_session(session: str, n: int = 6) -> list[dict[str, Any]]:
    """A session that calls the same failing tool ``n`` times (a loop by every preset)."""
    events: list[dict[str, Any]] = [{"type": "message", "session": session, "role": "user", "text": "Fetch order 7."}]
    for i in range(n):
        call_id = f"{session}-{i}"
        events.append(
            {"type": "tool_call", "session": session, "id": call_id, "tool": "http_get", "args": {"url": "/orders/7"}}
        )
        events.append(
            {
                "type": "tool_result",
                "session": session,
                "id": call_id,
                "tool": "http_get",
                "output": "HTTP 503 Service Unavailable: orders backend is down",
                "is_error": True,
            }
        )
    return events


def healthy_session(session: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "message", "session": session, "role": "user", "text": "List files."}]
    for i, path in enumerate(["a.py", "b.py", "c.py", "d.py"]):
        events.append(
            {
                "type": "tool_call",
                "session": session,
                "id": f"{session}-{i}",
                "tool": "read_file",
                "args": {"path": path},
            }
        )
        events.append(
            {"type": "tool_result", "session": session, "id": f"{session}-{i}", "output": f"contents of {path}: {i}"}
        )
    events.append({"type": "message", "session": session, "role": "assistant", "text": "Done: four files read."})
    return events


def interleave(*sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(max(len(s) for s in sessions)):
        out.extend(s[i] for s in sessions if i < len(s))
    return out


@pytest.fixture
def stream(tmp_path: Path) -> Path:
    """Two interleaved sessions: ``stuck`` loops, ``healthy`` does not."""
    return write_jsonl(tmp_path / "stream.jsonl", interleave(stuck_session("stuck"), healthy_session("healthy")))


# -- the JSON output (docs/formats.md, section 3) ---------------------------------------------------------------


def test_examples_json_follows_the_format(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES), "--json")
    assert result.code == 0, result.err  # loops were found: still 0
    assert result.err == ""
    reports = result.reports()
    check_format(reports)
    assert [r["id"] for r in reports] == EXAMPLE_IDS  # input order; README.md is not a trace file
    for name in ("abab-agent", "batch-reader", "looping-coding-agent", "polling-agent", "repeated-reply"):
        # one event per trajectory step
        assert result.by_id()[f"examples/{name}"]["events"] == steps_of(EXAMPLES / f"{name}.jsonl")
    assert result.by_id()["agent-a"]["events"] + result.by_id()["agent-b"]["events"] == len(
        (EXAMPLES / "events-stream.jsonl").read_text(encoding="utf-8").splitlines()
    )


def test_in_process_and_subprocess_print_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    inside = run_in_process(capsys, "scan", str(EXAMPLES), "--json")
    outside = subprocess.run(
        [sys.executable, "-m", "loopwatch.cli", "scan", str(EXAMPLES), "--json"], capture_output=True, check=False
    )
    assert outside.returncode == inside.code == 0
    assert outside.stdout.decode("utf-8") == inside.out


def test_examples_with_and_without_loops(cli: Runner) -> None:
    runs = cli("scan", str(EXAMPLES), "--json").by_id()
    # healthy agents: the same tool over and over, but with progress
    assert runs["examples/polling-agent"]["detections"] == []
    assert runs["examples/batch-reader"]["detections"] == []
    assert runs["agent-b"]["detections"] == []

    looping = runs["examples/looping-coding-agent"]["detections"]
    assert {"nudge", "block", "stop"} <= {d["action"] for d in looping}
    assert (
        looping[-1]["action"] == "stop" and looping[-1]["index"] < runs["examples/looping-coding-agent"]["events"] - 1
    )
    assert any(d["pattern"] in ("repeat", "error_retry") and d["loop_start"] == 8 for d in looping)

    abab = runs["examples/abab-agent"]["detections"]
    cycle = [d for d in abab if d["pattern"] == "cycle"]
    assert cycle and cycle[0]["action"] == "nudge"
    assert all(d["loop_start"] == 0 for d in cycle)
    assert any(d["action"] in ("block", "stop") for d in abab if d["index"] > cycle[0]["index"])  # it escalates

    repeated = runs["examples/repeated-reply"]["detections"]
    assert [(d["index"], d["action"], d["pattern"]) for d in repeated] == [(12, "nudge", "repeat_message")]

    agent_a = runs["agent-a"]["detections"]
    assert agent_a and all(d["loop_start"] == 1 for d in agent_a)
    assert agent_a[0]["pattern"] in ("repeat", "error_retry")


def test_event_stream_indices_count_each_sessions_own_events(cli: Runner, stream: Path, tmp_path: Path) -> None:
    result = cli("scan", str(stream), "--json")
    assert result.code == 0, result.err
    reports = result.reports()
    check_format(reports)
    assert [r["id"] for r in reports] == ["stuck", "healthy"]  # the session ids, in order of appearance
    runs = result.by_id()
    assert runs["stuck"]["events"] == len(stuck_session("stuck"))
    assert runs["healthy"]["events"] == len(healthy_session("healthy"))
    assert runs["stuck"]["detections"], "the stuck session's loop was missed"
    assert runs["healthy"]["detections"] == []
    # the same session alone gives the same indices: interleaving neither shifts them nor mixes state
    alone = cli("scan", str(write_jsonl(tmp_path / "alone.jsonl", stuck_session("stuck"))), "--json").reports()
    assert alone == [runs["stuck"]]
    # an index points at the session's own event (a call or a result of the loop), not at a file line
    own = stuck_session("stuck")
    for detection in runs["stuck"]["detections"]:
        assert own[detection["index"]]["type"] in ("tool_call", "tool_result")
        assert own[detection["loop_start"]]["type"] == "tool_call"


def test_events_without_session_form_the_default_session(cli: Runner, tmp_path: Path) -> None:
    events = [{k: v for k, v in e.items() if k != "session"} for e in stuck_session("x")]
    reports = cli("scan", str(write_jsonl(tmp_path / "anon.jsonl", events)), "--json").reports()
    assert [r["id"] for r in reports] == ["default"]
    assert reports[0]["detections"]


# -- inputs: plain, .gz, directories, globs, stdin, --format -------------------------------------------


def test_gzip_input_gives_the_same_output(cli: Runner, tmp_path: Path, stream: Path) -> None:
    for source in (EXAMPLES / "abab-agent.jsonl", stream):
        packed = tmp_path / (source.name + ".gz")
        packed.write_bytes(gzip.compress(source.read_bytes()))
        plain, gz = cli("scan", str(source), "--json"), cli("scan", str(packed), "--json")
        assert plain.code == gz.code == 0
        assert gz.out == plain.out and gz.reports()


def test_gzip_input_without_gz_suffix_is_detected(cli: Runner, tmp_path: Path) -> None:
    packed = tmp_path / "run.jsonl"
    packed.write_bytes(gzip.compress((EXAMPLES / "abab-agent.jsonl").read_bytes()))
    result = cli("scan", str(packed), "--json")
    assert result.code == 0, result.err
    assert [r["id"] for r in result.reports()] == ["examples/abab-agent"]


def test_directory_is_walked_recursively_in_name_order(cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    shutil.copy(EXAMPLES / "polling-agent.jsonl", tmp_path / "b" / "1.jsonl")
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress((EXAMPLES / "abab-agent.jsonl").read_bytes()))
    (tmp_path / "notes.txt").write_text("not a trace\n", encoding="utf-8")
    result = cli("scan", str(tmp_path), "--json")
    assert result.code == 0, result.err
    assert [r["id"] for r in result.reports()] == ["examples/abab-agent", "examples/polling-agent"]


def test_glob(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES / "*-agent.jsonl"), "--json")
    assert result.code == 0, result.err
    ids = ["examples/abab-agent", "examples/looping-coding-agent", "examples/polling-agent"]
    assert [r["id"] for r in result.reports()] == ids


def test_several_paths_in_the_order_given(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES / "polling-agent.jsonl"), str(EXAMPLES / "abab-agent.jsonl"), "--json")
    assert [r["id"] for r in result.reports()] == ["examples/polling-agent", "examples/abab-agent"]


@pytest.mark.parametrize("name", ["looping-coding-agent.jsonl", "events-stream.jsonl"])
def test_stdin(cli: Runner, name: str) -> None:
    path = EXAMPLES / name
    from_file = cli("scan", str(path), "--json")
    from_stdin = cli("scan", "-", "--json", stdin=path.read_bytes())
    assert from_stdin.code == 0, from_stdin.err
    assert from_stdin.out == from_file.out
    assert any(r["detections"] for r in from_stdin.reports())


def test_format_forced_where_detection_would_guess_wrong(cli: Runner, tmp_path: Path) -> None:
    # extra fields are allowed on input (docs/formats.md): an event that happens to carry "steps"
    events = stuck_session("s")
    events[0] = {**events[0], "steps": 3}
    path = write_jsonl(tmp_path / "odd.jsonl", events)
    result = cli("scan", str(path), "--format", "events", "--json")
    assert result.code == 0, result.err
    assert [r["id"] for r in result.reports()] == ["s"]
    assert result.reports()[0]["detections"]


def test_format_forced_to_the_right_format_changes_nothing(cli: Runner) -> None:
    trajectory, events = str(EXAMPLES / "abab-agent.jsonl"), str(EXAMPLES / "events-stream.jsonl")
    assert cli("scan", trajectory, "--format", "trajectory", "--json").out == cli("scan", trajectory, "--json").out
    assert cli("scan", events, "--format", "events", "--json").out == cli("scan", events, "--json").out


@pytest.mark.parametrize(("name", "forced"), [("abab-agent.jsonl", "events"), ("events-stream.jsonl", "trajectory")])
def test_format_forced_to_the_wrong_format_is_an_input_error(cli: Runner, name: str, forced: str) -> None:
    path = EXAMPLES / name
    result = cli("scan", str(path), "--format", forced, "--json")
    assert result.code == 2
    assert f"{path}:1" in result.err


def test_unknown_format_is_a_usage_error(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES), "--format", "csv")
    assert result.code == 2
    assert "csv" in result.err


# -- policies: --preset and --config ---------------------------------------------------------------------


def test_preset_changes_the_output(cli: Runner) -> None:
    default = cli("scan", str(EXAMPLES), "--json")
    doom = cli("scan", str(EXAMPLES), "--preset", "doom-loop", "--json")
    assert doom.code == 0, doom.err
    check_format(doom.reports())
    assert [r["id"] for r in doom.reports()] == EXAMPLE_IDS
    assert doom.out != default.out
    # doom-loop counts identical calls whatever they return: the polling agent trips it, not the default
    assert default.by_id()["examples/polling-agent"]["detections"] == []
    assert doom.by_id()["examples/polling-agent"]["detections"]
    assert cli("scan", str(EXAMPLES), "--preset", "default", "--json").out == default.out


def test_every_preset_runs(capsys: pytest.CaptureFixture[str]) -> None:
    for name in PRESETS:
        result = run_in_process(capsys, "scan", str(EXAMPLES), "--preset", name, "--json")
        assert result.code == 0, (name, result.err)
        check_format(result.reports())


def test_unknown_preset_lists_the_presets(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES), "--preset", "no-such-preset", "--json")
    assert result.code == 2
    assert result.out == ""
    assert "no-such-preset" in result.err
    for name in PRESETS:
        assert name in result.err


def test_config_file_changes_the_output(cli: Runner, tmp_path: Path) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text("[ladders.repeat]\nnudge = 2\n", encoding="utf-8")
    path = str(EXAMPLES / "events-stream.jsonl")
    default = cli("scan", path, "--json").by_id()["agent-a"]["detections"]
    configured = cli("scan", path, "--config", str(config), "--json")
    assert configured.code == 0, configured.err
    check_format(configured.reports())
    repeats = [d for d in configured.by_id()["agent-a"]["detections"] if d["pattern"] == "repeat"]
    default_repeats = [d for d in default if d["pattern"] == "repeat"]
    assert repeats and default_repeats
    # nudged after the 2nd identical call instead of the 3rd
    assert repeats[0]["action"] == "nudge"
    assert repeats[0]["index"] < default_repeats[0]["index"]


def test_config_in_a_pyproject(cli: Runner, tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[project]\nname = "x"\n\n[tool.loopwatch.ladders.repeat]\nnudge = 2\n', encoding="utf-8")
    path = str(EXAMPLES / "events-stream.jsonl")
    default = cli("scan", path, "--json")
    configured = cli("scan", path, "--config", str(config), "--json")
    assert configured.code == 0, configured.err
    assert configured.out != default.out


def test_config_choosing_a_preset(cli: Runner, tmp_path: Path) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text('preset = "doom-loop"\n', encoding="utf-8")
    configured = cli("scan", str(EXAMPLES), "--config", str(config), "--json")
    assert configured.code == 0, configured.err
    assert configured.out == cli("scan", str(EXAMPLES), "--preset", "doom-loop", "--json").out


@pytest.mark.parametrize(
    ("text", "where"),
    [('[ladders.repeat]\nnudge = "two"\n', "ladders.repeat.nudge"), ("[ladders.repeat\n", "invalid TOML")],
)
def test_invalid_config_is_exit_2_naming_the_setting(cli: Runner, tmp_path: Path, text: str, where: str) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text(text, encoding="utf-8")
    result = cli("scan", str(EXAMPLES), "--config", str(config), "--json")
    assert result.code == 2
    assert result.out == ""
    assert where in result.err


def test_missing_config_file_is_exit_2(cli: Runner, tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    result = cli("scan", str(EXAMPLES), "--config", str(missing), "--json")
    assert result.code == 2
    assert "nope.toml" in result.err


# -- bad input: exit 2, the file and line named, the other files still scanned --------------------------


def test_malformed_lines_are_reported_and_the_rest_is_scanned(cli: Runner, tmp_path: Path) -> None:
    abab = (EXAMPLES / "abab-agent.jsonl").read_text(encoding="utf-8").strip()
    batch = (EXAMPLES / "batch-reader.jsonl").read_text(encoding="utf-8").strip()
    bad_json = tmp_path / "bad-json.jsonl"
    bad_json.write_text(f"{abab}\n{batch}\n{{not json\n{abab}\n", encoding="utf-8")  # invalid JSON on line 3
    bad_type = write_jsonl(
        tmp_path / "bad-type.jsonl",
        [
            {"type": "message", "session": "first", "role": "user", "text": "hello"},
            {"type": "teleport", "session": "first"},  # an unknown event type on line 2
            {"type": "message", "session": "later", "role": "user", "text": "never read"},
        ],
    )
    good = EXAMPLES / "looping-coding-agent.jsonl"
    result = cli("scan", str(bad_json), str(bad_type), str(good), "--json")
    assert result.code == 2
    assert f"{bad_json}:3" in result.err and "JSON" in result.err
    assert f"{bad_type}:2" in result.err and "teleport" in result.err
    reports = result.reports()
    check_format(reports)
    # what came before each bad line, then the good file, with its loop
    assert [r["id"] for r in reports] == [
        "examples/abab-agent",
        "examples/batch-reader",
        "first",
        "examples/looping-coding-agent",
    ]
    assert result.by_id()["first"]["events"] == 1
    assert result.by_id()["examples/looping-coding-agent"]["detections"]


def test_bad_trajectory_record_names_its_line(cli: Runner, tmp_path: Path) -> None:
    abab = (EXAMPLES / "abab-agent.jsonl").read_text(encoding="utf-8").strip()
    path = tmp_path / "runs.jsonl"
    step = {"role": "narrator", "text": "?"}
    path.write_text(f"{abab}\n{json.dumps({'id': 'x', 'steps': [step]})}\n", encoding="utf-8")
    result = cli("scan", str(path), "--json")
    assert result.code == 2
    assert f"{path}:2" in result.err and "narrator" in result.err
    assert [r["id"] for r in result.reports()] == ["examples/abab-agent"]


def test_missing_file_is_exit_2_and_the_others_are_scanned(cli: Runner, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = cli("scan", str(missing), str(EXAMPLES / "abab-agent.jsonl"), "--json")
    assert result.code == 2
    assert str(missing) in result.err
    assert [r["id"] for r in result.reports()] == ["examples/abab-agent"]


def test_errors_do_not_go_to_stdout(cli: Runner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n", encoding="utf-8")
    result = cli("scan", str(bad), "--json")
    assert result.code == 2
    assert result.out == ""
    assert f"{bad}:1" in result.err


# -- the human summary -----------------------------------------------------------------------------------


def check_summary(out: str) -> None:
    for looping in ("examples/looping-coding-agent", "examples/abab-agent", "examples/repeated-reply", "agent-a"):
        assert looping in out
    for healthy in ("examples/polling-agent", "examples/batch-reader", "agent-b"):
        assert healthy not in out  # only runs with loops are listed
    for pattern in ("cycle", "error_retry", "repeat", "repeat_message"):
        assert pattern in out
    assert "default" in out  # the preset


def test_summary_names_runs_with_loops_and_patterns(cli: Runner) -> None:
    result = cli("scan", str(EXAMPLES))
    assert result.code == 0, result.err
    check_summary(result.out)
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.out.splitlines()[0])


def test_plain_summary_without_rich(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich.console", None)  # as if rich were not installed
    result = run_in_process(capsys, "scan", str(EXAMPLES))
    assert result.code == 0, result.err
    check_summary(result.out)
    assert "runs with loops" in result.out
    assert "┌" not in result.out  # no rich table


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    from loopwatch import __version__, _native
    from loopwatch.core import _kernels

    out = capsys.readouterr().out
    if _kernels.COMPILED and _native.compiled():
        assert out == f"loopwatch {__version__} (compiled: text kernels, engine, rules and step features)\n"
    else:
        assert out.startswith(f"loopwatch {__version__} (")
    pure = subprocess.run(
        [sys.executable, "-m", "loopwatch", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "LOOPWATCH_PURE_PYTHON": "1"},
        check=True,
        timeout=120,
    )
    assert pure.stdout == f"loopwatch {__version__} (pure Python)\n"


def test_top_shows_the_worst_runs(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_in_process(capsys, "scan", str(EXAMPLES), "--top", "1")
    assert result.code == 0, result.err
    # the worst run: stopped, with the most detections
    assert "examples/looping-coding-agent" in result.out
    assert "examples/abab-agent" not in result.out
