"""The command line's conventions, as a user outside the repository meets them: exit statuses for CI
(``scan --fail-on``), ``explain`` without ``--id``, a quiet end on a closed pipe, the configuration found in the
working directory or its parents, the same option names everywhere, unknown session ids, progress bars on a
terminal only, the summary saying what ran, and bad configuration or labels reported with file, line and setting,
nothing half-written."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopwatch.cli import main
from loopwatch.config import setting_line

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus"
TAU = CORPUS / "tau_bench.jsonl.gz"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def loopwatch(*args: str, cwd: Path | None = None, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwatch", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


# -- scan --fail-on -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("level", "code"), [("nudge", 1), ("block", 1), ("stop", 1)])
def test_fail_on_fails_the_job_on_findings(capsys: pytest.CaptureFixture[str], level: str, code: int) -> None:
    got, out, err = run(capsys, "scan", str(EXAMPLES), "--fail-on", level, "--no-config")
    assert got == code
    assert "runs with loops" in out  # the summary is still printed
    assert f"(--fail-on {level})" in err


def test_fail_on_passes_below_the_level(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "repeated-reply.jsonl", tmp_path / "only-a-nudge.jsonl")
    assert run(capsys, "scan", str(tmp_path), "--fail-on", "nudge", "--no-config")[0] == 1
    assert run(capsys, "scan", str(tmp_path), "--fail-on", "block", "--no-config")[0] == 0
    assert run(capsys, "scan", str(tmp_path), "--no-config")[0] == 0  # no --fail-on: findings are not failures


def test_fail_on_with_bad_input_is_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "abab-agent.jsonl", tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text("{not json\n", encoding="utf-8")
    assert run(capsys, "scan", str(tmp_path), "--fail-on", "nudge", "--no-config")[0] == 2


def test_fail_on_takes_only_the_three_actions() -> None:
    done = loopwatch("scan", str(EXAMPLES), "--fail-on", "loud")
    assert done.returncode == 2 and "argument --fail-on" in done.stderr and "'nudge', 'block', 'stop'" in done.stderr


# -- explain ------------------------------------------------------------------------------------------------


def test_explain_needs_no_id_for_a_one_run_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", str(EXAMPLES / "abab-agent.jsonl"), "--no-config")
    assert code == 0, err
    assert "cycle" in out and "rule:" in out


def test_explain_without_id_on_several_runs_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", str(EXAMPLES / "events-stream.jsonl"), "--no-config")
    assert code == 2 and out == ""
    assert "the input holds 2 runs ('agent-a', 'agent-b'): name one with --id RUN" in err


# -- a closed pipe -------------------------------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    lines = []
    for session in range(400):
        for k in range(12):
            lines.append(json.dumps({"type": "tool_call", "session": f"s{session}", "tool": "ls", "args": {"p": k}}))
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwatch", "scan", str(big), "--json", "--no-config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()  # what `head -1` reads, then it goes away
    process.stdout.close()
    err = process.stderr.read().decode("utf-8")
    assert process.wait(timeout=120) == 141
    assert err == "", err  # no "Broken pipe", no traceback


# -- configuration discovered --------------------------------------------------------------------------------


def _cycle_config(folder: Path, name: str = "loopwatch.toml", table: str = "") -> Path:
    path = folder / name
    path.write_text(f"{table}[ladders.cycle]\nnudge = 2\nblock = 20\nstop = 30\n", encoding="utf-8")
    return path


def test_the_configuration_is_found_in_the_working_directory_and_its_parents(tmp_path: Path) -> None:
    plain = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), "--json", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    config = _cycle_config(tmp_path)
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    found = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), "--json", cwd=nested)
    assert found.returncode == 0, found.stderr
    assert found.stdout != plain.stdout  # the cycle's ladder changed what was reported
    assert [d["action"] for d in json.loads(found.stdout)["detections"]].count("block") == 0
    summary = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), cwd=nested)
    assert str(config) in summary.stdout  # the summary says which file it used
    ignored = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), "--json", "--no-config", cwd=nested)
    assert ignored.stdout == plain.stdout


def test_a_pyproject_table_is_found_too(tmp_path: Path) -> None:
    plain = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), "--json", cwd=tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "mine"\n\n[tool.loopwatch.ladders.cycle]\nnudge = 2\nblock = 20\nstop = 30\n',
        encoding="utf-8",
    )
    found = loopwatch("scan", str(EXAMPLES / "abab-agent.jsonl"), "--json", cwd=tmp_path)
    assert found.returncode == 0 and found.stdout != plain.stdout


def test_a_typo_in_a_found_configuration_names_file_line_and_setting(tmp_path: Path) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text('preset = "default"\n\n[ladders.repeat]\nnudge = 3\nnudgee = 4\n', encoding="utf-8")
    report = tmp_path / "report.html"
    done = loopwatch("scan", str(EXAMPLES), "--html", str(report), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert f"{config}:5: ladders.repeat.nudgee: unknown ladder setting 'nudgee'; did you mean 'nudge'?" in done.stderr
    assert not report.exists()  # nothing half-written
    assert "Traceback" not in done.stderr


def test_a_typo_in_a_pyproject_table_is_located_there(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.loopwatch.limits]\nmax_cots = 5\n', encoding="utf-8")
    done = loopwatch("scan", str(EXAMPLES), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{pyproject}:5: limits.max_cots: unknown limit 'max_cots'; did you mean 'max_cost'?" in done.stderr


def test_setting_line_finds_tables_keys_and_inline_tables() -> None:
    text = (
        'preset = "default"\n'
        "[ladders.repeat]\n"
        "nudge = 3\n"
        "\n"
        "[tools.read_output]\n"
        "ladders.polling = { nudge = 0 }\n"
        '[tools."my tool"]\n'
        "exempt = 1\n"
    )
    assert setting_line(text, "preset") == 1
    assert setting_line(text, "ladders.repeat") == 2
    assert setting_line(text, "ladders.repeat.nudge") == 3
    assert setting_line(text, "tools.read_output.ladders.polling.nudge") == 6
    assert setting_line(text, "tools.my tool.exempt") == 8
    assert setting_line(text, "limits.max_cost") is None


# -- the same option names everywhere -------------------------------------------------------------------------


def _options(*command: str) -> dict[str, str]:
    done = loopwatch(*command, "--help")
    assert done.returncode == 0, done.stderr
    return dict(re.findall(r"(--[a-z-]+)(?: ([A-Z][A-Z.=:]*))?", done.stdout))


def test_shared_options_have_one_name_and_one_metavar() -> None:
    commands = [("scan",), ("eval",), ("explain",), ("sessions",), ("serve",), ("hook",), ("mcp-proxy",)]
    expected = {"--preset": "NAME", "--config": "FILE", "--no-config": "", "--store": "URL", "--audit": "FILE"}
    expected |= {"--json": "", "--host": "HOST", "--port": "PORT", "--format": "NAME", "--jobs": "N"}
    seen: dict[str, set[str]] = {}
    for command in commands:
        options = _options(*command)
        assert {"--preset", "--config", "--no-config"} <= set(options), command
        for name, metavar in options.items():
            seen.setdefault(name, set()).add(metavar)
    for name, metavar in expected.items():
        assert seen.get(name) == {metavar}, (name, seen.get(name))


# -- sessions ---------------------------------------------------------------------------------------------------


def test_unknown_session_ids_are_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from loopwatch import Guard, ToolCall

    url = f"sqlite:///{tmp_path / 'loops.db'}"
    guard = Guard(store=url)
    guard.observe("run-42", ToolCall("bash", {"command": "ls"}))
    guard.store.close()  # type: ignore[union-attr]
    for action in ("--reset", "--forget"):
        code, out, err = run(capsys, "sessions", "--store", url, action, "run-24", "--no-config")
        assert code == 2 and out == ""
        assert "no session 'run-24'" in err and "did you mean 'run-42'?" in err
    code, _, _ = run(capsys, "sessions", "--store", url, "--no-config")
    assert code == 0
    code, out, _ = run(capsys, "sessions", "--store", url, "--json", "--no-config")
    assert [row["session"] for row in json.loads(out)] == ["run-42"]  # nothing was created
    code, out, _ = run(capsys, "sessions", "--store", url, "--reset", "run-42", "--no-config")
    assert code == 0 and out.strip() == "reset run-42"


# -- the summary and progress -----------------------------------------------------------------------------------


def test_the_summary_says_what_ran(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scan", str(EXAMPLES), "--preset", "default-lexical", "--no-config")
    assert code == 0
    assert re.search(r"preset\W+default-lexical", out)
    assert re.search(r"embedder\W+none \(reworded intents compared by their words\)", out)
    assert re.search(r"config\W+none", out)
    assert re.search(r"took\s+\d+\.\d s", out)


def test_no_progress_bar_without_a_terminal(tmp_path: Path) -> None:
    done = loopwatch("scan", str(EXAMPLES), "--json", "--no-config")
    assert done.returncode == 0 and done.stderr == ""


def _on_a_terminal(*args: str, seconds: float = 240) -> str:
    """Run loopwatch with its standard error on a pseudo-terminal; what it drew there."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "loopwatch", *args], stdout=subprocess.DEVNULL, stderr=slave, env=env
    )
    os.close(slave)
    drawn = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=60)
    os.close(master)
    assert process.returncode == 0, drawn[-2000:]
    return drawn.decode("utf-8", "replace")


@pytest.mark.skipif(not TAU.exists(), reason="the shared corpus is not next to the repository")
def test_scan_draws_a_progress_bar_with_bytes_and_time_left_on_a_terminal() -> None:
    drawn = _on_a_terminal("scan", str(TAU), "--preset", "default-lexical", "--json", "--no-config")
    assert "scanning" in drawn
    assert re.search(r"\d+%", drawn) and re.search(r"[\d.]+/[\d.]+ [KM]iB", drawn)
    assert "left" in drawn and "elapsed" in drawn


@pytest.mark.skipif(not TAU.exists(), reason="the shared corpus is not next to the repository")
def test_eval_draws_a_progress_bar_counting_runs_on_a_terminal(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    lines = (CORPUS / "labels" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    labels.write_text("\n".join(line for line in lines if '"tau_bench/' in line) + "\n", encoding="utf-8")
    runs = sum(1 for line in lines if '"tau_bench/' in line)
    drawn = _on_a_terminal("eval", str(TAU), "--labels", str(labels), "--preset", "default-lexical", "--no-config")
    assert "judging" in drawn and "reading" in drawn
    assert re.search(rf"\d+/{runs}\b", drawn), drawn[-500:]


# -- eval: what cannot mislead ----------------------------------------------------------------------------------


def _labels(tmp_path: Path, *ids: str) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "".join(json.dumps({"id": i, "verdict": "clean", "episodes": []}) + "\n" for i in ids), encoding="utf-8"
    )
    return path


def test_eval_with_no_label_matching_is_exit_2_showing_an_id_from_each_side(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    labels = _labels(tmp_path, "swe_agent_java/x/abab-agent", "other")
    page = tmp_path / "eval.html"
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(labels), "--html", str(page), "--no-config")
    assert code == 2 and out == ""
    assert "none of the 2 labelled runs is in the input (7 runs read)" in err
    assert "'examples/abab-agent'" in err and "'swe_agent_java/x/abab-agent'" in err
    assert not page.exists()


def test_eval_reports_partial_matches(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    labels = _labels(tmp_path, "examples/polling-agent", "examples/batch-reader", "not-here")
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(labels), "--no-config")
    assert code == 0, err
    assert out.startswith("2 of 3 labelled runs found")
    assert "labels without a run: 'not-here'" in err
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(labels), "--json", "--no-config")
    assert json.loads(out)["overall"]["runs"] == 2 and "2 of 3 labelled runs found" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"id": "a", "verdict": "clean", "episodes": [], "notes": ""}\n',
            ":1: run 'a': notes: unknown field; did you mean 'note'?",
        ),
        (
            '{"id": "a", "verdict": "stuck", "episodes": [{"start": 1, "detectable": 2, "end": 3, '
            '"pattern": "repeat"}]}\n',
            ":1: run 'a': episodes[0].detectable: unknown field; did you mean 'detectable_at'?",
        ),
        ('\n{"id": "a", "verdict": "cleen", "episodes": []}\n', ":2: run 'a': verdict: must be one of"),
        ('{"id": "a", "verdict": "clean", "episodes": []}\n{oops\n', ":2: invalid JSON"),
    ],
)
def test_bad_labels_name_the_file_line_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(text, encoding="utf-8")
    page = tmp_path / "eval.html"
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(labels), "--html", str(page), "--no-config")
    assert code == 2 and out == ""
    assert f"loopwatch: {labels}{expected}" in err, err
    assert not page.exists()


def test_a_missing_or_unreadable_labels_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    code, _, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(missing), "--no-config")
    assert code == 2 and err.strip() == f"loopwatch: {missing}: labels file not found"
    code, _, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(tmp_path), "--no-config")
    assert code == 2 and "is a directory, not a labels file" in err
    binary = tmp_path / "labels.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(binary), "--no-config")
    assert code == 2 and str(binary) in err and "Traceback" not in err


# -- eval --rules and --sweep --loso keep working ------------------------------------------------------------------


def _four_labels(tmp_path: Path) -> Path:
    episode = {"unit_len": 1, "reps": 5, "note": ""}
    labels = [
        {
            "id": "examples/abab-agent",
            "verdict": "stuck",
            "episodes": [{**episode, "start": 0, "detectable_at": 10, "end": 20, "pattern": "cycle"}],
        },
        {"id": "examples/polling-agent", "verdict": "clean", "episodes": []},
        {
            "id": "agent-a",
            "verdict": "stuck",
            "episodes": [{**episode, "start": 1, "detectable_at": 5, "end": 14, "pattern": "error_retry"}],
        },
        {"id": "agent-b", "verdict": "clean", "episodes": []},
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(label) + "\n" for label in labels), encoding="utf-8")
    return path


def test_eval_rules_and_loso(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    labels = str(_four_labels(tmp_path))
    common = ["--preset", "default-lexical", "--no-config"]
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", labels, "--rules", *common)
    assert code == 0, err
    assert out.startswith("4 of 4 labelled runs found, preset default-lexical")
    assert re.search(r"^error_retry\s", out, re.MULTILINE) and "agent-a" in out.splitlines()[1]
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", labels, "--rules", "--json", *common)
    assert code == 0 and {share["rule"] for share in json.loads(out)} >= {"repeat", "cycle", "error_retry"}
    sweep = ["--sweep", "error_retry.threshold=2:4:1", "--loso"]
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", labels, *sweep, *common)
    assert code == 0, err
    assert "left out (error_retry.threshold chosen on the rest)" in out
    assert {line.split()[0] for line in out.splitlines()[-3:]} == {"agent-a", "agent-b", "examples"}
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", labels, *sweep, "--json", *common)
    assert code == 0 and {h["source"] for h in json.loads(out)["held_out"]} == {"agent-a", "agent-b", "examples"}
    code, _, err = run(capsys, "eval", str(EXAMPLES), "--labels", labels, "--loso", *common)
    assert code == 2 and "--loso needs --sweep" in err


def test_scan_json_lines_survive_a_line_reader(tmp_path: Path) -> None:
    """JSON leaves U+2028, U+2029 and NEL raw; str.splitlines takes them for line ends: they are written escaped."""
    import json as _json
    import subprocess
    import sys

    path = tmp_path / "events.jsonl"
    event = {"type": "tool_call", "session": "run\u2028a\x85b\u2029", "tool": "cat", "args": {"p": "x"}}
    path.write_text(_json.dumps(event, ensure_ascii=False) + "\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "loopwatch", "scan", str(path), "--json", "--no-config"],
        capture_output=True, text=True, encoding="utf-8", check=False,
    ).stdout  # fmt: skip
    lines = out.splitlines()
    assert len(lines) == 1 and _json.loads(lines[0])["id"] == "run\u2028a\x85b\u2029"
