"""Readers of agent trace formats (loopwatch.formats): SWE-agent, mini-swe-agent, OpenHands, tau-bench, OTel GenAI.

Real files from ``../shared/corpus/samples`` are checked against their converted twins in the corpus (the same
steps, texts clipped at 8,000 characters there); the OpenHands, OTel and tau-bench JSON Lines fixtures under
``tests/data/formats`` were built from those formats' public documentation and source. Each loop fixture is
scanned with the default policy: its detections must point at records of the user's own file.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from loopwatch import formats, readers
from loopwatch._presets import default
from loopwatch.cli._scan import scan_events, scan_runs
from loopwatch.core._engine import Engine
from loopwatch.core._events import Event, Message, ToolCall, ToolResult, Usage
from loopwatch.core._verdict import Verdict
from loopwatch.errors import InputError
from loopwatch.formats import mini_swe_agent, openhands, otel, swe_agent, tau_bench
from loopwatch.readers import Run, open_text, step_event

DATA = Path(__file__).resolve().parent / "data" / "formats"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SAMPLES = CORPUS / "samples"
CLIP = 8000
MINE: tuple[ModuleType, ...] = (swe_agent, mini_swe_agent, openhands, tau_bench, otel)

needs_corpus = pytest.mark.skipif(
    not (SAMPLES / "README.md").is_file(),
    reason="the shared corpus (../shared/corpus) is not checked out next to the repo",
)

SWE_AGENT_SAMPLES = {
    "20240825_SWE-agent_deepseek-chat-v2__apache__dubbo-10638.traj": "apache__dubbo-10638",
    "20240825_SWE-agent_deepseek-chat-v2__apache__dubbo-11781.traj": "apache__dubbo-11781",
    "20240825_SWE-agent_deepseek-chat-v2__fasterxml__jackson-core-174.traj": "fasterxml__jackson-core-174",
    "20240825_SWE-agent_deepseek-chat-v2__fasterxml__jackson-databind-3371.traj": "fasterxml__jackson-databind-3371",
}
MINI_SAMPLES = ("astropy__astropy-13236", "astropy__astropy-13453")
TAU_TASKS = (0, 1, 2, 4)


# -------------------------------------------------------------------------------------------------- helpers


def records_of(path: Path) -> list[tuple[int, Any]]:
    """What a reader is given: ``(1, document)`` for a JSON document, else ``(line, value)`` per JSON line."""
    with open_text(str(path)) as handle:
        text = handle.read()
    try:
        return [(1, json.loads(text))]
    except json.JSONDecodeError:
        return [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def read(module: ModuleType, path: Path) -> tuple[list[Run], list[InputError]]:
    records = records_of(path)
    name = module.sniff(records[0][1], str(path))
    assert name in module.NAMES, f"{module.__name__} does not recognise {path.name}"
    errors: list[InputError] = []
    runs = list(module.read(name, iter(records), str(path), errors.append))
    return runs, errors


def read_one(module: ModuleType, path: Path) -> Run:
    runs, errors = read(module, path)
    assert errors == []
    assert len(runs) == 1
    return runs[0]


def check_indices(run: Run) -> list[int]:
    assert run.indices is not None and len(run.indices) == len(run.events)
    assert run.indices == sorted(run.indices), "record indices never go back"
    return run.indices


def detections(run: Run) -> list[tuple[Verdict, int, int | None]]:
    """``scan``'s detections on ``run`` with the default policy: (verdict, index, loop_start), both of which
    are indices of the records of the user's file."""
    indices = check_indices(run)
    (report,) = scan_runs(default(), [run])
    _, verdicts = scan_events(Engine(default(), replay=True), run.events)  # the same verdicts, in event positions
    assert [(v.index, v.loop_start) for v in report.verdicts] == [
        (indices[v.index], None if v.loop_start is None else indices[v.loop_start]) for v in verdicts
    ]
    return [(v, v.index, v.loop_start) for v in report.verdicts]


def same_text(mine: str | None, twin: str | None) -> bool:
    """Equal, allowing for the corpus's clipping (``text[:8000]`` + a ``...[truncated N chars]`` marker)."""
    if mine == twin or mine is None or twin is None:
        return mine == twin
    return len(mine) > CLIP and twin[:CLIP] == mine[:CLIP] and twin[CLIP:].startswith("\n...[truncated")


def assert_same_events(mine: list[Event], twin_steps: list[dict[str, Any]]) -> None:
    """``mine`` (without usage events) are the events of the twin's steps: same kinds, tools, args, texts."""
    mine = [e for e in mine if not isinstance(e, Usage)]
    expected = [step_event(step) for step in twin_steps]
    assert len(mine) == len(expected)
    for n, (got, want) in enumerate(zip(mine, expected, strict=True)):
        assert type(got) is type(want), n
        g, w = dataclasses.asdict(got), dataclasses.asdict(want)
        for key in ("id", "exit_code", "ts"):  # what the raw file adds to the converted steps
            g.pop(key, None)
            w.pop(key, None)
        for key in ("text", "output", "thought"):
            if key in g:
                assert same_text(g.pop(key), w.pop(key)), (n, key)
        assert g == w, n


@cache
def twins(source: str) -> dict[str, dict[str, Any]]:
    """The converted runs of the corpus source ``source`` whose raw files are among the samples."""
    wanted = {
        "swe_agent_java": {
            f"swe_agent_java/20240825_SWE-agent_deepseek-chat-v2/{i}" for i in SWE_AGENT_SAMPLES.values()
        },
        "mini_swe_agent_gemini3": {f"mini_swe_agent_gemini3/{i}" for i in MINI_SAMPLES},
        "tau_bench": {f"tau_bench/airline/gpt-4o/task{t}_trial0" for t in TAU_TASKS},
    }[source]
    out: dict[str, dict[str, Any]] = {}
    with gzip.open(CORPUS / f"{source}.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            if any(f'"{run_id}"' in line[:300] for run_id in wanted):
                record = json.loads(line)
                if record["id"] in wanted:
                    out[record["id"]] = record
    assert set(out) == wanted
    return out


def kinds(run: Run) -> list[str]:
    return [type(e).__name__ for e in run.events]


# ------------------------------------------------------------------------------------------------ SWE-agent


@needs_corpus
@pytest.mark.parametrize("name", sorted(SWE_AGENT_SAMPLES))
def test_swe_agent_sample_matches_its_twin(name: str) -> None:
    path = SAMPLES / "swe-agent" / name
    run = read_one(swe_agent, path)
    twin = twins("swe_agent_java")[f"swe_agent_java/20240825_SWE-agent_deepseek-chat-v2/{SWE_AGENT_SAMPLES[name]}"]
    assert run.id == name.removesuffix(".traj")
    assert run.source == "swe-agent"
    assert_same_events(run.events, twin["steps"])
    # each turn is one record: its call and its result both point at it
    turns = json.loads(path.read_text(encoding="utf-8"))["trajectory"]
    assert check_indices(run) == [i // 2 for i in range(len(run.events))]
    for event, index in zip(run.events, run.indices or [], strict=True):
        if isinstance(event, ToolCall):
            assert event.args == {"command": turns[index]["action"].strip()}
    assert run.meta["labels"]["outcome"]["exit_status"] == twin["labels"]["outcome"]["exit_status"]


@needs_corpus
def test_swe_agent_stuck_sample_is_caught_on_its_own_turns() -> None:
    path = SAMPLES / "swe-agent" / "20240825_SWE-agent_deepseek-chat-v2__fasterxml__jackson-core-174.traj"
    turns = json.loads(path.read_text(encoding="utf-8"))["trajectory"]
    run = read_one(swe_agent, path)
    assert turns[-1]["action"] == "exit_cost" and len(run.events) == 2 * (len(turns) - 1)  # the exit is dropped
    found = detections(run)
    assert found, "the `cd fastjson/` loop is caught"
    verdict, turn, start = found[0]
    assert verdict.pattern is not None
    assert turns[turn]["action"].startswith("cd fastjson")
    assert start is not None and start <= turn and turns[start]["action"].startswith("cd fastjson")
    assert all(index < len(turns) for _, index, _ in found)


def test_swe_agent_unparsed_turn_and_bad_turn(tmp_path: Path) -> None:
    doc = {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "ls -a\n",
                "observation": "src\n",
                "response": "DISCUSSION\nLook.\n```\nls -a\n```",
                "thought": "",
            },
            {"action": "", "observation": "", "response": "```\nDISCUSSION\nbroken", "thought": ""},
            {"action": "cd fastxml/\n", "observation": "/bin/bash: line 7: cd: fastxml/: No such file or directory"},
            ["not", "a", "turn"],
            {"action": "ls", "observation": ""},
        ],
        "history": [],
        "info": {"exit_status": "submitted"},
    }
    path = tmp_path / "run-7.traj"
    path.write_text(json.dumps(doc), encoding="utf-8")
    runs, errors = read(swe_agent, path)
    assert [(e.line, "trajectory[3]" in str(e)) for e in errors] == [(1, True)]
    (run,) = runs  # read up to the bad turn
    assert run.id == "run-7"
    assert kinds(run) == ["ToolCall", "ToolResult", "Message", "ToolResult", "ToolCall", "ToolResult"]
    assert run.indices == [0, 0, 1, 1, 2, 2]
    cd = run.events[5]
    assert isinstance(cd, ToolResult) and cd.tool == "cd" and cd.is_error is True
    listing = run.events[1]
    assert isinstance(listing, ToolResult) and listing.is_error is None  # SWE-agent has no exit codes


# ------------------------------------------------------------------------------------------- mini-swe-agent


@needs_corpus
@pytest.mark.parametrize("instance", MINI_SAMPLES)
def test_mini_swe_agent_sample_matches_its_twin(instance: str) -> None:
    path = SAMPLES / "mini-swe-agent" / f"{instance}.traj.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    run = read_one(mini_swe_agent, path)
    twin = twins("mini_swe_agent_gemini3")[f"mini_swe_agent_gemini3/{instance}"]
    assert run.id == instance
    assert_same_events(run.events, twin["steps"])
    indices = check_indices(run)
    assert indices[0] == 2  # messages 0 and 1 are the system prompt and the task
    for event, index in zip(run.events, indices, strict=True):
        role = doc["messages"][index]["role"]
        assert role == (
            "user" if isinstance(event, ToolResult) or getattr(event, "role", "") == "user" else "assistant"
        )
        if isinstance(event, ToolResult) and event.exit_code is not None:
            assert doc["messages"][index]["content"].startswith(f"<returncode>{event.exit_code}</returncode>")
            assert event.is_error is (event.exit_code != 0)
    # the spend of each reply, as recorded by the run itself
    usage = [e for e in run.events if isinstance(e, Usage)]
    assert len(usage) == doc["info"]["model_stats"]["api_calls"]
    assert sum(u.cost or 0.0 for u in usage) == pytest.approx(doc["info"]["model_stats"]["instance_cost"])


def test_mini_swe_agent_2_tool_calls() -> None:
    path = DATA / "mini-swe-agent" / "toolcall_v2.traj.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    run = read_one(mini_swe_agent, path)
    assert run.id == "python-humanize__humanize-212"
    plain = [e for e in run.events if not isinstance(e, Usage)]
    assert [type(e).__name__ for e in plain] == ["ToolCall", "ToolResult", "Message", "Message"] + [
        "ToolCall",
        "ToolResult",
    ] * 6
    first = plain[0]
    assert isinstance(first, ToolCall) and first.tool == "bash"
    assert first.args == {"command": "grep -rn 'def naturalsize' src/"}
    assert first.id == doc["messages"][2]["tool_calls"][0]["id"]
    assert isinstance(plain[2], Message) and plain[2].role == "assistant"  # a reply without a tool call
    assert isinstance(plain[3], Message) and plain[3].role == "user" and "No tool calls found" in plain[3].text
    failed = plain[5]
    assert isinstance(failed, ToolResult) and failed.exit_code == 1 and failed.is_error is True
    assert failed.output.startswith("Traceback") and "<returncode>" not in failed.output
    submitted = plain[-1]
    assert isinstance(submitted, ToolResult) and submitted.is_error is None and submitted.id == plain[-2].id
    found = detections(run)
    assert found
    loop = range(6, 16)  # messages 6-15: the same failing command, five times
    for _, index, start in found:
        assert index in loop and doc["messages"][index]["role"] in ("assistant", "tool")
        assert start is not None and start in loop and start <= index


def test_mini_swe_agent_bad_message_ends_the_run(tmp_path: Path) -> None:
    doc = json.loads((DATA / "mini-swe-agent" / "toolcall_v2.traj.json").read_text(encoding="utf-8"))
    doc["messages"][5] = {"content": "no role"}
    path = tmp_path / "broken.traj.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)
    runs, errors = read(mini_swe_agent, path)
    assert [(e.line, "messages[5]" in str(e) and "role" in str(e)) for e in errors] == [(1, True)]
    assert runs[0].indices is not None and max(runs[0].indices) == 4


# ---------------------------------------------------------------------------------------------- tau-bench


@needs_corpus
def test_tau_bench_sample_matches_its_twins() -> None:
    path = SAMPLES / "tau-bench" / "gpt-4o-airline-sample.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    runs, errors = read(tau_bench, path)
    assert errors == []
    assert [r.id for r in runs] == [f"task{t}_trial0" for t in TAU_TASKS]
    for run, result in zip(runs, results, strict=True):
        twin = twins("tau_bench")[f"tau_bench/airline/gpt-4o/{run.id}"]
        assert_same_events(run.events, twin["steps"])
        assert check_indices(run)[0] == 1  # message 0 is the system prompt
        assert run.meta["labels"]["outcome"]["reward"] == result["reward"] == twin["labels"]["outcome"]["reward"]
        for event, index in zip(run.events, run.indices or [], strict=True):
            message = result["traj"][index]
            if isinstance(event, ToolCall):
                assert event.id in [c["id"] for c in message["tool_calls"]]
            else:
                assert message["role"] == ("tool" if isinstance(event, ToolResult) else event.role)


def test_tau_bench_jsonl_loop() -> None:
    path = DATA / "tau-bench" / "results.jsonl"
    results = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    runs, errors = read(tau_bench, path)
    assert errors == []
    assert [r.id for r in runs] == ["task3_trial0", "task17_trial2"]
    assert detections(runs[0]) == []
    failed = [e for e in runs[1].events if isinstance(e, ToolResult) and e.is_error]
    assert len(failed) == 6 and all(e.tool == "get_reservation_details" for e in failed)
    found = detections(runs[1])
    assert found
    traj = results[1]["traj"]
    loop = range(4, 16)  # the six look-ups of ZFA04Y and their errors
    assert all("get_reservation_details" in json.dumps(traj[i]) for i in loop)
    for _, index, start in found:
        assert index in loop
        assert start is not None and start in loop and traj[start]["role"] == "assistant" and start <= index


def test_tau_bench_bad_message_is_reported_with_its_line() -> None:
    runs, errors = read(tau_bench, DATA / "tau-bench" / "malformed.jsonl")
    assert len(errors) == 1 and errors[0].line == 2 and "traj[7]" in str(errors[0])
    assert [r.id for r in runs] == ["task3_trial0", "task17_trial2"]  # line 3 is never read
    assert runs[1].indices is not None and max(runs[1].indices) == 6


# ---------------------------------------------------------------------------------------------- OpenHands


def test_openhands_saved_trajectory() -> None:
    path = DATA / "openhands" / "stuck_trajectory.json"
    events = json.loads(path.read_text(encoding="utf-8"))
    run = read_one(openhands, path)
    assert run.id == "stuck_trajectory"
    indices = check_indices(run)
    # the system prompt, the recall and the agent state changes give no event; the user's task comes first
    assert isinstance(run.events[0], Message) and run.events[0].role == "user" and indices[0] == 1
    assert {events[i].get("action", events[i].get("observation")) for i in indices} <= {
        "message",
        "run",
        "read",
        "edit",
    }
    calls = [(e, i) for e, i in zip(run.events, indices, strict=True) if isinstance(e, ToolCall)]
    assert [c.tool for c, _ in calls] == ["execute_bash", "str_replace_editor", "str_replace_editor"] + [
        "execute_bash"
    ] * 6
    read_call = calls[1][0]
    assert read_call.args == {"command": "view", "path": "/workspace/textkit/textkit/slug.py"}  # as the model sent it
    assert read_call.id == events[calls[1][1]]["tool_call_metadata"]["tool_call_id"]
    assert calls[0][0].thought == "Let me first run the failing test to see the error."
    results = [e for e in run.events if isinstance(e, ToolResult)]
    assert [r.exit_code for r in results if r.tool == "execute_bash"] == [1] * 7
    assert [r.is_error for r in results if r.tool == "str_replace_editor"] == [False, False]
    spent = sum(e.cost or 0.0 for e in run.events if isinstance(e, Usage))
    last_metrics = [e["llm_metrics"] for e in events if "llm_metrics" in e][-1]
    assert spent == pytest.approx(last_metrics["accumulated_cost"])
    assert all(e.ts is not None for e in run.events)
    found = detections(run)
    assert found
    for _, index, start in found:
        assert events[index].get("action", events[index].get("observation")) == "run"
        assert "pytest tests/test_slugify.py" in events[index]["message"]
        assert start is not None and start <= index and events[start].get("action") == "run"


def test_openhands_event_lines_with_error_observations() -> None:
    path = DATA / "openhands" / "events.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    run = read_one(openhands, path)
    indices = check_indices(run)
    errors = [e for e in run.events if isinstance(e, ToolResult)]
    assert len(errors) == 6 and all(e.is_error is True and e.tool == "str_replace_editor" for e in errors)
    assert all("No replacement was performed" in e.output for e in errors)
    last = run.events[-1]
    assert isinstance(last, Message) and last.role == "assistant" and indices[-1] == len(lines) - 1
    found = detections(run)
    assert found
    for _, index, _start in found:
        assert lines[index].get("action") == "edit" or lines[index].get("observation") == "error"


def test_openhands_evaluation_output() -> None:
    path = DATA / "openhands" / "output.jsonl"
    runs, errors = read(openhands, path)
    assert errors == []
    assert [r.id for r in runs] == ["django__django-11099", "sympy__sympy-20590"]
    assert runs[1].meta["labels"]["outcome"]["error"].startswith("AgentStuckInLoopError")
    clean, stuck = runs
    finish = [e for e in clean.events if isinstance(e, ToolCall)][-1]
    assert finish.tool == "finish"
    assert detections(clean) == []
    history = json.loads(path.read_text(encoding="utf-8").splitlines()[1])["history"]
    found = detections(stuck)
    assert found
    for _, index, _start in found:
        assert history[index].get("action", history[index].get("observation")) == "run"


def test_openhands_bad_event_is_reported_with_its_line() -> None:
    runs, errors = read(openhands, DATA / "openhands" / "malformed.jsonl")
    assert len(errors) == 1 and errors[0].line == 7 and "neither an action nor an observation" in str(errors[0])
    (run,) = runs
    assert check_indices(run)[-1] == 5  # lines 1-6 were read
    assert kinds(run) == ["Message"] + ["Usage", "ToolCall", "ToolResult"] * 2


def test_openhands_old_history_pairs() -> None:
    action = {"id": 3, "timestamp": "2024-06-01T10:00:00", "source": "agent", "action": "run", "message": "Running",
              "args": {"command": "ls", "background": False, "thought": "look"}}  # fmt: skip
    observation = {"id": 4, "timestamp": "2024-06-01T10:00:01", "source": "agent", "observation": "run", "cause": 3,
                   "content": "a.py", "extras": {"command_id": -1, "command": "ls", "exit_code": 0}}  # fmt: skip
    read_action = {"id": 5, "source": "agent", "action": "read", "args": {"path": "a.py", "start": 0, "end": -1}}
    read_observation = {"id": 6, "source": "agent", "observation": "read", "cause": 5, "content": "print(1)"}
    lost = {"id": 7, "source": "agent", "observation": "error", "content": "The agent hit an internal error"}
    record = {"instance_id": "x-1", "history": [[action, observation], [read_action, read_observation], [lost]]}
    name = openhands.sniff(record, "output.jsonl")
    assert name == "openhands"
    (run,) = openhands.read(name, iter([(1, record)]), "output.jsonl", pytest.fail)
    assert run.indices == [0, 0, 1, 1, 2]
    call, result, read_call, read_result, error = run.events
    assert call == ToolCall(
        tool="execute_bash", args={"command": "ls", "background": False}, thought="look", ts=call.ts
    )
    assert isinstance(result, ToolResult) and result.exit_code == 0 and result.tool == "execute_bash"
    assert read_call == ToolCall(tool="str_replace_editor", args={"path": "a.py", "start": 0, "end": -1})
    # matched to its action through `cause`: the result of a call, and not a failed one
    assert read_result == ToolResult(output="print(1)", tool="str_replace_editor", is_error=False)
    assert isinstance(error, ToolResult) and error.is_error is True


# -------------------------------------------------------------------------------------------------- OTel


def test_otel_export_document() -> None:
    path = DATA / "otel" / "agent_traces.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    runs, errors = read(otel, path)
    assert errors == []
    traces = [r["scopeSpans"][0]["spans"] for r in doc["resourceSpans"]]
    assert [r.id for r in runs] == ["conv_5j66UpCpwteGg4YSxUnt7lPY", traces[1][0]["traceId"]]
    stuck, clean = runs
    # records are the trace's spans in start order: the agent span (exported last) is record 0
    ordered = sorted(traces[0], key=lambda s: int(s["startTimeUnixNano"]))
    assert ordered[0]["name"] == "invoke_agent TravelAssistant"
    indices = check_indices(stuck)
    first = stuck.events[0]
    assert isinstance(first, Message) and first.role == "user" and first.text.startswith("Will it rain in Lyon")
    calls = [e for e in stuck.events if isinstance(e, ToolCall)]
    assert len(calls) == 7 and {json.dumps(c.args, sort_keys=True) for c in calls} == {
        '{"city": "Lyon", "date": "2025-03-11"}'
    }
    assert calls[0].thought == "Let me check the forecast for Lyon."  # the model's text that came with the call
    results = [e for e in stuck.events if isinstance(e, ToolResult)]
    assert all(
        r.is_error is True and r.output == "weather service unavailable: 503 Service Unavailable" for r in results
    )
    assert [e.input_tokens for e in stuck.events if isinstance(e, Usage)] == [180 + 95 * n for n in range(7)] + [900]
    assert isinstance(stuck.events[-1], Message) and stuck.events[-1].role == "assistant"
    for event, index in zip(stuck.events, indices, strict=True):
        if isinstance(event, ToolCall):
            assert ordered[index]["name"] == "execute_tool get_weather"
    found = detections(stuck)
    assert found
    for _, index, start in found:
        assert ordered[index]["name"] == "execute_tool get_weather"
        assert start is not None and start <= index and ordered[start]["name"] == "execute_tool get_weather"
    assert detections(clean) == []
    assert kinds(clean) == ["Message", "Usage", "ToolCall", "ToolResult", "Usage", "Message"]
    assert check_indices(clean) == [1, 1, 3, 3, 4, 4]  # record 2 is an HTTP span


def test_otel_collector_lines_make_one_run_per_conversation() -> None:
    path = DATA / "otel" / "collector.jsonl"
    run = read_one(otel, path)
    assert run.id == "8c0e2f1a-52d4-4b07-9f5e-0d7d1c3e6a90"  # two traces (two turns), one conversation
    users = [e.text for e in run.events if isinstance(e, Message) and e.role == "user"]
    assert users == ["Book me a table for two at Chez Paul tonight at 8pm.", "Actually make it 8:30."]
    assert [e.tool for e in run.events if isinstance(e, ToolCall)] == ["book_table", "update_booking"]
    assert check_indices(run)[0] == 1 and run.indices is not None and run.indices[-1] == 7  # 2 x 4 spans
    assert detections(run) == []


def test_otel_bad_span_is_reported_with_its_line() -> None:
    runs, errors = read(otel, DATA / "otel" / "malformed.jsonl")
    assert len(errors) == 1 and errors[0].line == 2
    assert "spans[1]" in str(errors[0]) and "traceId" in str(errors[0])
    (run,) = runs  # line 1 and the first span of line 2 were read
    assert kinds(run) == ["Message", "Usage", "ToolCall", "ToolResult", "Usage", "Message"]


def test_otel_attribute_values_and_errors() -> None:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "execute_tool run_sql",
        "startTimeUnixNano": 1700000000000000000,
        "endTimeUnixNano": "1700000000500000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.call.arguments", "value": {"kvlistValue": {"values": [
                {"key": "query", "value": {"stringValue": "SELECT 1"}},
                {"key": "limit", "value": {"intValue": "10"}},
                {"key": "tags", "value": {"arrayValue": {"values": [{"boolValue": True}, {"doubleValue": 0.5}]}}},
            ]}}},
            {"key": "error.type", "value": {"stringValue": "TimeoutError"}},
        ],
        "status": {"code": "STATUS_CODE_ERROR"},
    }  # fmt: skip
    failed = {
        "traceId": "1bf7651916cd43dd8448eb211c80319d",
        "spanId": "c7ad6b7169203332",
        "name": "execute_tool fetch",
        "startTimeUnixNano": "1700000001000000000",
        "attributes": {"gen_ai.tool.name": "fetch", "gen_ai.tool.call.result": "HTTP 404"},  # a flat object
        "status": {"code": 2, "message": "not found"},
    }
    ok = {**failed, "traceId": "2cf7651916cd43dd8448eb211c80319e", "status": {}}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span, failed, ok]}]}]}
    first, second, third = otel.read("otel", iter([(1, doc)]), "t.json", pytest.fail)
    assert second.events[1] == ToolResult(output="HTTP 404", tool="fetch", is_error=True, ts=1700000001.0)
    assert third.events[1] == ToolResult(output="HTTP 404", tool="fetch", is_error=False, ts=1700000001.0)
    call, result = first.events
    assert call == ToolCall(
        tool="run_sql", args={"query": "SELECT 1", "limit": 10, "tags": [True, 0.5]}, ts=1700000000.0
    )
    assert result == ToolResult(output="TimeoutError", tool="run_sql", is_error=True, ts=1700000000.5)


# ------------------------------------------------------------------------------------------ sniffing, gzip


OTHER_FORMATS: list[Any] = [
    {"type": "tool_call", "tool": "ls", "session": "s1"},
    {"id": "run-1", "steps": [{"role": "assistant", "text": "hi"}]},
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    {"messages": [{"role": "user", "content": "hi"}]},
    {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
    {"type": "user", "message": {"role": "user", "content": "hi"}, "sessionId": "abc", "uuid": "u1"},
    {"question": "q", "history": [{"content": "hi", "role": "user", "name": "Orchestrator"}]},
    [],
    {},
    "text",
]


@pytest.mark.parametrize("value", OTHER_FORMATS, ids=repr)
def test_sniffers_ignore_other_formats(value: Any) -> None:
    assert [m.sniff(value, "x.json") for m in MINE] == [None] * len(MINE)


def fixture_files() -> Iterator[tuple[ModuleType, Path]]:
    for module, folder in ((mini_swe_agent, "mini-swe-agent"), (openhands, "openhands"), (tau_bench, "tau-bench"),
                           (otel, "otel")):  # fmt: skip
        for path in sorted((DATA / folder).iterdir()):
            yield module, path
    if (SAMPLES / "README.md").is_file():
        for module, folder in ((swe_agent, "swe-agent"), (mini_swe_agent, "mini-swe-agent"), (tau_bench, "tau-bench")):
            for path in sorted((SAMPLES / folder).iterdir()):
                yield module, path


@pytest.mark.parametrize(("module", "path"), list(fixture_files()), ids=lambda v: getattr(v, "name", ""))
def test_each_file_is_sniffed_by_its_reader_only(module: ModuleType, path: Path) -> None:
    first = records_of(path)[0][1]
    assert [m.sniff(first, str(path)) for m in MINE] == [module.NAMES[0] if m is module else None for m in MINE]


def other_files() -> Iterator[Path]:
    """Files of the other readers' fixtures, and the corpus samples of formats read elsewhere (Who&When)."""
    mine = {"mini-swe-agent", "openhands", "otel", "tau-bench", "swe-agent"}
    for folder in sorted(DATA.iterdir()):
        if folder.is_dir() and folder.name not in mine:
            yield from sorted(p for p in folder.rglob("*") if p.is_file())
    if (SAMPLES / "who-and-when").is_dir():
        yield from sorted((SAMPLES / "who-and-when").iterdir())


@pytest.mark.parametrize("path", list(other_files()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniffers_ignore_the_other_readers_files(path: Path) -> None:
    with open_text(str(path)) as handle:
        text = handle.read()
    try:
        first = json.loads(text)
    except json.JSONDecodeError:  # JSON Lines (whose last line may be cut short)
        first = json.loads(next(line for line in text.splitlines() if line.strip()))
    assert [m.sniff(first, str(path)) for m in MINE] == [None] * len(MINE)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], tuple[list[Run], list[InputError]]]:
    """``read_file`` with these readers registered before the chat formats (the order the registry needs)."""
    mine = {m.__name__.rsplit(".", 1)[1]: m.__name__ for m in MINE}
    monkeypatch.setattr(formats, "REGISTRY", {**mine, **{k: v for k, v in formats.REGISTRY.items() if k not in mine}})

    def read_file(path: str) -> tuple[list[Run], list[InputError]]:
        errors: list[InputError] = []
        return list(readers.read_file(path, on_error=errors.append)), errors

    return read_file


@pytest.mark.parametrize(("module", "path"), list(fixture_files()), ids=lambda v: getattr(v, "name", ""))
def test_read_file_sniffs_and_reads_gzip(
    module: ModuleType, path: Path, tmp_path: Path, registry: Callable[[str], tuple[list[Run], list[InputError]]]
) -> None:
    direct, direct_errors = read(module, path)
    packed = tmp_path / (path.name + ".gz")
    with open(path, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    for target in (path, packed):
        runs, errors = registry(str(target))
        assert [(r.id, r.source, r.events, r.indices) for r in runs] == [
            (r.id, r.source, r.events, r.indices) for r in direct
        ]
        assert [(e.line, str(e).split(": ", 1)[1]) for e in errors] == [
            (e.line, str(e).split(": ", 1)[1]) for e in direct_errors
        ]
