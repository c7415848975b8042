"""``loopwatch scan -j``, ``loopwatch eval`` and ``loopwatch explain``, run in-process on real runs."""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from loopwatch.cli import _batch as batch
from loopwatch.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus"
SWE = CORPUS / "swe_agent_java.jsonl.gz"
STUCK = "swe_agent_java/20240825_SWE-agent_deepseek-chat-v2/fasterxml__jackson-core-174"

needs_corpus = pytest.mark.skipif(not SWE.exists(), reason="the shared corpus is not next to the repository")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _subset(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """A trajectory file with ``count`` labelled SWE-agent runs (half of them with loops) and its labels."""
    lines = (CORPUS / "labels" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    mine = [json.loads(line) for line in lines if line.startswith('{"id": "swe_agent_java/')]
    picked = [lab for lab in mine if lab["episodes"]][: count // 2]
    picked += [lab for lab in mine if not lab["episodes"]][: count - len(picked)]
    ids = {lab["id"] for lab in picked}
    runs = tmp_path / "runs.jsonl.gz"
    with gzip.open(SWE, "rt", encoding="utf-8") as source, gzip.open(runs, "wt", encoding="utf-8") as out:
        for line in source:
            if json.loads(line)["id"] in ids:
                out.write(line)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(lab) + "\n" for lab in picked), encoding="utf-8")
    return runs, labels


# -- scan -j --------------------------------------------------------------------------------------------


@needs_corpus
def test_parallel_scan_gives_the_same_output_in_the_same_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    runs, _ = _subset(tmp_path, 24)
    paths = [str(tmp_path / "examples"), str(runs)]
    code, single, _ = run(capsys, "scan", *paths, "--json")
    assert code == 0
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)  # share every file between the workers
    code, double, err = run(capsys, "scan", *paths, "--json", "-j", "2")
    assert code == 0, err
    assert double == single
    assert len(single.splitlines()) == 7 + 24
    assert any(json.loads(line)["detections"] for line in single.splitlines())


def test_parallel_scan_reports_bad_input_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(EXAMPLES / "abab-agent.jsonl", tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text('{"id": "x", "steps": []}\n{not json\n', encoding="utf-8")
    shutil.copy(EXAMPLES / "polling-agent.jsonl", tmp_path / "c.jsonl")
    code, out, err = run(capsys, "scan", str(tmp_path), "--json", "-j", "2")
    assert code == 2
    assert [json.loads(line)["id"] for line in out.splitlines()] == [
        "examples/abab-agent",
        "x",
        "examples/polling-agent",
    ]
    assert f"{tmp_path / 'b.jsonl'}:2: invalid JSON" in err


def _event_stream(tmp_path: Path, bad_at: int | None = None) -> Path:
    """The example trajectories as one event stream, a session each, their events interleaved (round robin), with
    the example event stream's sessions ahead; ``bad_at``: an event without a tool name at that line."""
    from loopwatch.core._events import event_to_json
    from loopwatch.formats._dispatch import read_runs

    queues = [
        [json.dumps(event_to_json(event, run.id)) for event in run.events]
        for run in read_runs(sorted(str(p) for p in EXAMPLES.glob("*.jsonl") if p.name != "events-stream.jsonl"))
    ]
    lines = (EXAMPLES / "events-stream.jsonl").read_text(encoding="utf-8").splitlines()
    while any(queues):
        lines += [queue.pop(0) for queue in queues if queue]
    if bad_at is not None:
        lines.insert(bad_at, json.dumps({"type": "tool_call", "session": "late", "args": {}}))
    path = tmp_path / "stream.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_parallel_scan_shares_an_event_stream_between_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _event_stream(tmp_path)
    code, single, err = run(capsys, "scan", str(stream), "--json", "--format", "events")
    assert code == 0, err
    sessions = [json.loads(line)["id"] for line in single.splitlines()]
    assert len(sessions) == 2 + 5 and sessions[:2] == ["agent-a", "agent-b"]  # in the order of their first events
    assert sum(bool(json.loads(line)["detections"]) for line in single.splitlines()) >= 4
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)  # share the file between the workers
    for jobs in ("2", "3"):
        code, shared, err = run(capsys, "scan", str(stream), "--json", "-j", jobs)
        assert code == 0, err
        assert shared == single  # every session once, in its place, judged on all its events


def test_each_worker_reads_its_share_of_an_event_streams_sessions(tmp_path: Path) -> None:
    from loopwatch.errors import InputError
    from loopwatch.formats._dispatch import read_file

    def sessions(path: Path, part: tuple[int, int] | None) -> tuple[list[tuple[str, int]], list[InputError]]:
        errors: list[InputError] = []
        runs = read_file(str(path), on_error=errors.append, part=part)
        return [(r.id, len(r.events)) for r in runs], errors

    stream = _event_stream(tmp_path)
    whole, errors = sessions(stream, None)
    assert len(whole) == 7 and not errors
    first, second = sessions(stream, (0, 2))[0], sessions(stream, (1, 2))[0]
    assert first == whole[0::2] and second == whole[1::2]  # every other session, each with all its events
    thirds = [sessions(stream, (k, 3))[0] for k in range(3)]
    assert [thirds[k] for k in range(3)] == [whole[k::3] for k in range(3)]
    # a bad record: the share whose session it is reports it and stops there; the other goes on (the scan reads such
    # a file again in one piece)
    (tmp_path / "bad").mkdir()
    bad = _event_stream(tmp_path / "bad", bad_at=40)
    before, errors = sessions(bad, None)
    assert len(errors) == 1 and errors[0].line == 41
    shares = [sessions(bad, (k, 2)) for k in range(2)]
    assert [error.line for _, met in shares for error in met] == [41]
    stopped = 0 if shares[0][1] else 1
    assert shares[stopped][0] == before[stopped::2]
    assert shares[1 - stopped][0] != before[1 - stopped :: 2]  # read past the bad record


def test_workers_parse_only_their_own_sessions_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loopwatch.formats import _files
    from loopwatch.formats._dispatch import read_file

    stream = _event_stream(tmp_path)
    lines = [line for line in stream.read_text(encoding="utf-8").splitlines() if line.strip()]
    parsed: list[str] = []
    loads = _files._loads

    def counted(text: str) -> object:
        parsed.append(text)
        return loads(text)

    monkeypatch.setattr(_files, "_loads", counted)
    shares = [[run.id for run in read_file(str(stream), on_error=pytest.fail, part=(k, 2))] for k in range(2)]
    assert shares[0] and shares[1]
    # the first line is every share's (its format is sniffed), the others each share's own
    assert len(parsed) == len(lines) + 1


def test_an_event_streams_lines_whose_session_takes_parsing_are_parsed_by_every_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _event_stream(tmp_path)
    lines = stream.read_text(encoding="utf-8").splitlines()
    # every third event with its session after its arguments (an object before it: the line must be parsed)
    moved = []
    for n, line in enumerate(lines):
        record = json.loads(line)
        if n % 3 == 0:
            session = record.pop("session")
            record = {**record, "args": {"session": "not this one"}, "session": session}
            if record["type"] != "tool_call":
                record.pop("args")
                record = {"meta": {"session": "nor this"}, **record}
        moved.append(json.dumps(record))
    stream.write_text("\n".join(moved) + "\n", encoding="utf-8")
    code, single, err = run(capsys, "scan", str(stream), "--json", "-j", "1")
    assert code == 0, err
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)
    code, shared, err = run(capsys, "scan", str(stream), "--json", "-j", "2")
    assert code == 0, err
    assert shared == single


@pytest.mark.parametrize(
    "bad",
    [
        '{"type": "message", "session": "agent-a", "text": "cut sh',  # parsed by the share of agent-a only
        "{not json",  # parsed by every share: no session to read
    ],
    ids=["one share's line", "every share's line"],
)
def test_workers_sharing_an_event_stream_report_a_line_that_does_not_parse_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    stream = _event_stream(tmp_path)
    lines = stream.read_text(encoding="utf-8").splitlines()
    lines.insert(30, bad)
    stream.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, single, err = run(capsys, "scan", str(stream), "--json", "-j", "1")
    assert code == 2 and err.count("invalid JSON") == 1, err
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)
    code, shared, err = run(capsys, "scan", str(stream), "--json", "-j", "2")
    assert code == 2 and err.count("invalid JSON") == 1, err
    assert shared == single


def test_workers_sharing_an_event_stream_stop_at_the_same_bad_record_and_report_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _event_stream(tmp_path, bad_at=40)
    code, single, err = run(capsys, "scan", str(stream), "--json")
    assert code == 2 and err.count(f"{stream}:41:") == 1
    assert len(single.splitlines()) >= 3  # the sessions read before the bad record are judged
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)
    code, shared, err = run(capsys, "scan", str(stream), "--json", "-j", "2")
    assert code == 2
    assert shared == single
    assert err.count(f"{stream}:41:") == 1, err


def _trajectories(tmp_path: Path, copies: int) -> list[dict[str, object]]:
    """The example trajectories, ``copies`` times each under other ids."""
    runs = []
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
        if "steps" in first:
            runs += [{**first, "id": f"{first['id']}-{n}"} for n in range(copies)]
    return runs


@pytest.mark.parametrize("pretty", [False, True], ids=["jsonl", "pretty-printed documents"])
def test_workers_sharing_a_trajectory_file_report_a_bad_record_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, pretty: bool
) -> None:
    runs = _trajectories(tmp_path, 2)
    texts = [json.dumps(run, indent=1 if pretty else None) for run in runs]
    texts.insert(4, '{"id": "broken", "steps": [' if pretty else "{not json")  # a record of share 1 of 3
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "scan", str(path), "--json")
    assert code == 2 and err.count("invalid JSON") == 1, err
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)
    code, out, err = run(capsys, "scan", str(path), "--json", "-j", "3")
    assert code == 2
    assert err.count("invalid JSON") == 1, err  # by the share that parses it (each parses every document)
    assert [json.loads(line)["id"] for line in out.splitlines()][:4] == [run["id"] for run in runs[:4]]


def test_jobs_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "scan", str(EXAMPLES), "-j", "0")
    assert code == 2 and "-j must be at least 1" in err


def test_without_jobs_a_large_input_is_shared_between_the_cpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    code, alone, _ = run(capsys, "scan", str(tmp_path / "examples"), "--json", "-j", "1")
    assert code == 0
    workers: list[int] = []
    parallel = batch._parallel

    def counted(files: list[str], spec: object, format: object, jobs: int, *rest: object) -> object:
        workers.append(jobs)
        return parallel(files, spec, format, jobs, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(batch, "_parallel", counted)
    monkeypatch.setattr(batch, "AUTO_BYTES", 1)  # the examples count as a large input
    monkeypatch.setattr(batch, "_SPLIT_BYTES", 1)
    monkeypatch.setattr(batch, "_cpus", lambda: 2)
    code, shared, err = run(capsys, "scan", str(tmp_path / "examples"), "--json")
    assert code == 0, err
    assert workers == [2]
    assert shared == alone  # the same output, in the same order


def test_a_scan_goes_on_in_one_process_where_processes_cannot_be_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    code, alone, _ = run(capsys, "scan", str(tmp_path / "examples"), "--json", "-j", "1")

    def no_processes(*args: object, **kwargs: object) -> None:  # a sandbox without process-shared locks
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_processes)  # where the scan imports it from
    code, out, err = run(capsys, "scan", str(tmp_path / "examples"), "--json", "-j", "2")
    assert code == 0
    assert out == alone
    assert "cannot start 2 processes" in err and "Function not implemented" in err


def test_the_processes_chosen_follow_the_input_size_and_the_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_text("{}\n", encoding="utf-8")
    with large.open("wb") as out:
        out.truncate(5 * batch.AUTO_BYTES // 4)  # 5 MB (sparse): two workers' worth
    monkeypatch.setattr(batch, "_cpus", lambda: 8)
    assert batch.auto_jobs([str(small)]) == 1  # not worth a worker's start
    assert batch.auto_jobs([str(large)]) == 2  # one per 2 MB of input, though there are 8 CPUs
    assert batch.auto_jobs([str(large), "-"]) == 1  # standard input is read here
    assert batch.auto_jobs([str(large), str(tmp_path / "gone.jsonl")]) == 2  # a missing file is reported when read
    monkeypatch.setattr(batch, "_cpus", lambda: 1)
    assert batch.auto_jobs([str(large)]) == 1


def test_summary_shows_loop_spans_and_cost_inside_loops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scan", str(EXAMPLES))
    assert code == 0
    assert "steps inside loops" in out
    assert "loops at steps 0-18 cycle/no_progress (block)" in out  # the A-B-A-B agent
    assert "agent-a (15 events, 13 steps inside loops, 0.01 of 0.02 USD inside loops)" in out
    assert "embedder" in out and "took" in out


# -- eval -------------------------------------------------------------------------------------------------


@needs_corpus
def test_eval_prints_metrics_missed_episodes_and_false_alarms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, labels = _subset(tmp_path, 20)
    code, out, err = run(capsys, "eval", str(runs), "--labels", str(labels))
    assert code == 0, err
    assert out.startswith("20 of 20 labelled runs found (preset default; embedder ")
    assert "episode recall" in out and "swe_agent_java" in out
    lines = out.splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("missed episodes (")), None)
    count = 0 if heading is None else int(lines[heading].split("(")[1].split(")")[0])
    missed = [] if heading is None else lines[heading + 1 : heading + 1 + count]
    for line in missed:
        assert line.startswith("  swe_agent_java/") and " [" in line
    code, out, _ = run(capsys, "eval", str(runs), "--labels", str(labels), "--json")
    data = json.loads(out)
    assert data["overall"]["episode_recall"]["total"] > 0
    assert len(data["episodes"]) - sum(e["detected"] for e in data["episodes"]) == len(missed)


@needs_corpus
def test_eval_reads_several_label_files_and_refuses_a_run_labelled_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, labels = _subset(tmp_path, 12)
    lines = labels.read_text(encoding="utf-8").splitlines()
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[5:]) + "\n", encoding="utf-8")
    code, whole, _ = run(capsys, "eval", str(runs), "--labels", str(labels), "--json")
    code, split, err = run(capsys, "eval", str(runs), "--labels", str(first), "--labels", str(second), "--json")
    assert code == 0, err
    assert json.loads(split)["overall"] == json.loads(whole)["overall"]
    code, _, err = run(capsys, "eval", str(runs), "--labels", str(labels), "--labels", str(second))
    assert code == 2 and "labelled in another labels file too" in err


@needs_corpus
def test_eval_compares_presets_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, labels = _subset(tmp_path, 12)
    code, out, err = run(capsys, "eval", str(runs), "--labels", str(labels), "--compare", "doom-loop", "behavioral")
    assert code == 0, err
    header = out.splitlines()[1]
    assert header.split()[-3:] == ["default", "doom-loop", "behavioral"]
    code, out, _ = run(capsys, "eval", str(runs), "--labels", str(labels), "--compare", "ralph", "--json")
    assert set(json.loads(out)) == {"default", "ralph"}


@needs_corpus
def test_eval_sweep_prints_one_row_per_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, labels = _subset(tmp_path, 12)
    code, out, err = run(
        capsys, "eval", str(runs), "--labels", str(labels), "--sweep", "repeat.loose_min_chars=16:48:16"
    )
    assert code == 0, err
    rows = out.splitlines()
    assert rows[0].split()[0] == "repeat.loose_min_chars"
    assert [row.split()[0] for row in rows[2:]] == ["16", "32", "48"]
    code, out, _ = run(capsys, "eval", str(runs), "--labels", str(labels), "--sweep", "repeat.x=1:2:1")
    assert code == 2 and out == ""


def test_eval_with_bad_labels_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "a", "verdict": "clean", "episodes": []}\n{"id": "b"}\n', encoding="utf-8")
    code, out, err = run(capsys, "eval", str(EXAMPLES), "--labels", str(labels))
    assert code == 2 and out == ""
    assert f"{labels}:2: run 'b': verdict" in err


# -- explain ----------------------------------------------------------------------------------------------


@needs_corpus
def test_explain_prints_a_runs_detections_with_their_steps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", str(SWE), "--id", STUCK, "--index", "22")
    assert code == 0, err
    assert "[22] NUDGE level 1: error_retry x3, loop from step 18" in out
    assert "rule:    ErrorRetryDetector(" in out
    code, out, _ = run(capsys, "explain", str(SWE), "--id", STUCK, "--index", "22", "--json")
    assert json.loads(out)["detections"][0]["verdict"]["pattern"] == "error_retry"


def test_explain_names_unknown_and_ambiguous_ids(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "explain", str(EXAMPLES), "--id", "nope")
    assert code == 2 and "no run with id 'nope'" in err
    code, _, err = run(capsys, "explain", str(EXAMPLES), "--id", "agent")
    assert code == 2 and "runs (" in err and "with id 'agent'" in err
    code, out, _ = run(capsys, "explain", str(EXAMPLES), "--id", "abab-agent")
    assert code == 0 and "cycle" in out


# -- --html -----------------------------------------------------------------------------------------------


def test_scan_writes_an_html_report_also_with_several_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = []
    for jobs in ("1", "2"):
        page = tmp_path / f"report-{jobs}.html"
        code, _, err = run(capsys, "scan", str(EXAMPLES), "--json", "-j", jobs, "--html", str(page))
        assert code == 0, err
        assert f"wrote {page}" in err
        text = page.read_text(encoding="utf-8")
        assert text.count('<svg class="timeline"') == 7  # every run: 4 with loops, 3 clean (reachable by the filter)
        assert text.count('data-action="clean"') == 2 * 3  # their table row and their timeline
        assert "examples/abab-agent" in text and "examples/polling-agent" in text.split('id="timelines"')[1]
        pages.append(text)
    took = re.compile(r"took <b>[^<]*</b>")
    assert took.sub("", pages[0]) == took.sub("", pages[1])


@needs_corpus
def test_eval_sweep_writes_its_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, labels = _subset(tmp_path, 10)
    page = tmp_path / "sweep.html"
    args = ["eval", str(runs), "--labels", str(labels), "--sweep", "error_retry.threshold=2:4:1", "--html", str(page)]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert 'id="sweeps"' in text and text.count('<svg class="sweep-chart"') == 1
    assert "error_retry.threshold" in text
