"""Readers for the logs people already have: Magentic-One / AG2 runs in the Who&When layout (the raw samples beside
the corpus, checked against their converted runs), AutoGen AgentChat results (written by the real
``autogen-agentchat`` with a scripted model), LangSmith runs and Langfuse observations (files built from their
documented export formats)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from loopwatch._presets import preset
from loopwatch.cli import main
from loopwatch.cli._scan import scan_runs
from loopwatch.core._events import Message, ToolCall, ToolResult, Usage
from loopwatch.errors import InputError
from loopwatch.readers import Run, read_runs, sniff_format, trajectory_run

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SAMPLES = CORPUS / "samples" / "who-and-when"


def write(path: Path, value: Any, *, lines: bool = False) -> Path:
    text = "".join(json.dumps(v) + "\n" for v in value) if lines else json.dumps(value, indent=2)
    path.write_text(text, encoding="utf-8")
    return path


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


# -- Who&When: Magentic-One and AG2 ---------------------------------------------------------------------------


@pytest.mark.skipif(not SAMPLES.exists(), reason="the shared corpus is not next to the repository")
@pytest.mark.parametrize(
    ("sample", "corpus_id"), [("hand-crafted-7", "Hand-Crafted/7"), ("hand-crafted-15", "Hand-Crafted/15")]
)
def test_raw_magentic_one_logs_read_as_their_converted_runs(sample: str, corpus_id: str) -> None:
    (raw,) = read_runs([str(SAMPLES / f"{sample}.json")])
    assert sniff_format(json.loads((SAMPLES / f"{sample}.json").read_text(encoding="utf-8"))) == "who-and-when"
    with gzip.open(CORPUS / "who_and_when.jsonl.gz", "rt", encoding="utf-8") as source:
        record = next(r for r in map(json.loads, source) if r["id"] == f"who_and_when/{corpus_id}")
    converted = trajectory_run(record)
    assert raw.id == sample and len(raw.events) == len(converted.events) == len(record["steps"])
    for mine, theirs in zip(raw.events, converted.events, strict=True):
        assert type(mine) is type(theirs)
        for attribute in ("tool", "role", "is_error", "worker"):
            assert getattr(mine, attribute, None) == getattr(theirs, attribute, None)
        if isinstance(mine, ToolCall):
            assert mine.args["instruction"][:8000] == theirs.args["instruction"]
    # the converted runs clip every text at 8,000 characters: clipped the same, the raw run is judged the same
    clipped = Run(id=raw.id, events=[_clipped(e) for e in raw.events], indices=raw.indices)
    policy = preset("default-lexical")
    (mine_report,) = scan_runs(policy, [clipped])
    (theirs_report,) = scan_runs(policy, [converted])
    assert [(v.index, v.action, v.pattern) for v in mine_report.verdicts] == [
        (v.index, v.action, v.pattern) for v in theirs_report.verdicts
    ]


def _clipped(event: Any) -> Any:
    if isinstance(event, Message):
        return Message(role=event.role, text=event.text[:8000], worker=event.worker)
    if isinstance(event, ToolResult):
        return ToolResult(output=event.output[:8000], tool=event.tool, is_error=event.is_error, worker=event.worker)
    if isinstance(event, ToolCall):
        text = event.args["instruction"][:8000]
        return ToolCall(tool=event.tool, args={"instruction": text}, thought=text, worker=event.worker)
    return event


def test_who_and_when_layout_with_ag2_experts_and_a_terminal(tmp_path: Path) -> None:
    run = {
        "question": "How many even street numbers?",
        "question_ID": "q-1",
        "is_correct": False,
        "history": [
            {"content": "Solve the task with the data file.", "role": "user", "name": "Excel_Expert"},
            {
                "content": "exitcode: 1 (execution failed)\nCode output: KeyError: 'Street'",
                "role": "user",
                "name": "Computer_terminal",
            },
            {"content": "Let me try again with the same column.", "role": "assistant", "name": "Excel_Expert"},
            {
                "content": "exitcode: 0 (execution succeeded)\nCode output: 4",
                "role": "user",
                "name": "Computer_terminal",
            },
            {"content": "Please scan the page again.", "role": "Orchestrator (-> WebSurfer)"},
            {"content": "I scrolled down one page.", "role": "WebSurfer"},
            {"content": "What is the answer?", "role": "human"},
        ],
    }
    (read,) = read_runs([str(write(tmp_path / "7.json", run))])
    assert read.id == "7" and read.source == "who-and-when"
    assert kinds(read.events) == ["Message", "ToolResult", "Message", "ToolResult", "ToolCall", "ToolResult", "Message"]
    assert read.events[1].is_error is True and read.events[3].is_error is False  # type: ignore[union-attr]
    instruction = "Please scan the page again."
    assert read.events[4] == ToolCall(
        tool="WebSurfer", args={"instruction": instruction}, thought=instruction, worker="Orchestrator"
    )
    assert read.events[5].is_error is None  # type: ignore[union-attr]
    assert read.events[6] == Message(role="user", text="What is the answer?", worker="human")
    assert read.meta["labels"]["outcome"] == {"is_correct": False}
    (jsonl,) = list(read_runs([str(write(tmp_path / "runs.jsonl", [run], lines=True))]))
    assert jsonl.id == "runs" and jsonl.events == read.events


def test_who_and_when_bad_entry_names_its_place(tmp_path: Path) -> None:
    errors: list[InputError] = []
    path = write(tmp_path / "bad.json", {"history": [{"content": "x", "role": "human"}, {"content": "y"}]})
    runs = list(read_runs([str(path)], on_error=errors.append))
    assert len(runs) == 1 and len(runs[0].events) == 1
    assert errors and "history[1]" in errors[0].reason and errors[0].line == 1


# -- AutoGen AgentChat ----------------------------------------------------------------------------------------


def _agentchat_result() -> Any:
    """A real AgentChat team run: an assistant calling the same failing search again and again, then stopping."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.replay import ReplayChatCompletionClient

    def search(q: str) -> str:
        raise ValueError("search backend unavailable")

    def call(k: int) -> CreateResult:
        return CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id=f"call-{k}", name="search", arguments=json.dumps({"q": "flaky test"}))],
            usage=RequestUsage(prompt_tokens=12, completion_tokens=4),
            cached=False,
        )

    info: Any = {
        "vision": False,
        "function_calling": True,
        "json_output": False,
        "family": "unknown",
        "structured_output": False,
    }
    model = ReplayChatCompletionClient([call(k) for k in range(6)] + ["DONE"], model_info=info)
    agent = AssistantAgent("coder", model, tools=[FunctionTool(search, description="search")])
    stop = TextMentionTermination("DONE", sources=["coder"]) | MaxMessageTermination(40)
    team = RoundRobinGroupChat([agent], termination_condition=stop)
    return asyncio.run(team.run(task="why is the test flaky?"))


def test_agentchat_results_are_read_and_their_loop_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("autogen_agentchat")
    result = _agentchat_result()
    path = tmp_path / "result.json"
    path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    (run,) = read_runs([str(path)])
    assert run.source == "autogen" and run.id == "result"
    calls = [e for e in run.events if isinstance(e, ToolCall)]
    results = [e for e in run.events if isinstance(e, ToolResult)]
    assert len(calls) == len(results) == 6
    assert calls[0].args == {"q": "flaky test"} and calls[0].id == "call-0"
    assert all(r.is_error is True and "unavailable" in r.output for r in results)
    assert run.events[0] == Message(role="user", text="why is the test flaky?", worker="user")
    assert calls[0].worker == "coder"
    assert any(isinstance(e, Usage) and e.input_tokens == 12 for e in run.events)
    # the same messages as a bare list, and as JSON Lines, read the same
    messages = json.loads(result.model_dump_json())["messages"]
    (listed,) = read_runs([str(write(tmp_path / "list.json", messages))])
    (lined,) = read_runs([str(write(tmp_path / "lines.jsonl", messages, lines=True))])
    assert listed.events == lined.events == run.events
    assert main(["scan", str(path), "--json", "--no-config"]) == 0
    detections = json.loads(capsys.readouterr().out)["detections"]
    assert {"error_retry"} <= {d["pattern"] for d in detections}


# -- LangSmith --------------------------------------------------------------------------------------------------

_TRACE = "1b64098b-4ab7-43f6-afee-992304f198d8"


def _lc_message(kind: str, **kwargs: Any) -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind], "kwargs": kwargs}


def _langsmith_runs() -> list[dict[str, Any]]:
    """A LangGraph agent's trace as LangSmith stores it (docs: the run data format): a root chain, model calls and
    the same failing tool call four times."""
    start = "20240914T223155"
    runs: list[dict[str, Any]] = [
        {
            "id": _TRACE,
            "name": "LangGraph",
            "run_type": "chain",
            "trace_id": _TRACE,
            "dotted_order": f"{start}000000Z{_TRACE}",
            "start_time": "2024-09-14T22:31:55.000000",
            "inputs": {"messages": [_lc_message("HumanMessage", content="Deploy the service")]},
            "outputs": {},
            "parent_run_id": None,
            "status": "success",
        }
    ]
    for k in range(4):
        llm, tool = f"aaaaaaaa-0000-0000-0000-00000000000{k}", f"bbbbbbbb-0000-0000-0000-00000000000{k}"
        runs.append(
            {
                "id": llm,
                "name": "ChatOpenAI",
                "run_type": "llm",
                "trace_id": _TRACE,
                "parent_run_id": _TRACE,
                "dotted_order": f"{start}000000Z{_TRACE}.{start}{k}10000Z{llm}",
                "inputs": {"messages": [[_lc_message("HumanMessage", content="Deploy the service")]]},
                "outputs": {
                    "generations": [
                        [
                            {
                                "text": "",
                                "type": "ChatGeneration",
                                "message": _lc_message("AIMessage", content=f"Deploying, attempt {k + 1}."),
                            }
                        ]
                    ],
                    "llm_output": None,
                },
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "total_tokens": 120,
                "total_cost": "0.00125",
                "status": "success",
            }
        )
        runs.append(
            {
                "id": tool,
                "name": "deploy",
                "run_type": "tool",
                "trace_id": _TRACE,
                "parent_run_id": _TRACE,
                "dotted_order": f"{start}000000Z{_TRACE}.{start}{k}20000Z{tool}",
                "inputs": {"input": '{"service": "api", "env": "prod"}'},
                "outputs": None,
                "error": "PermissionError: deploy token expired\nTraceback (most recent call last): ...",
                "status": "error",
            }
        )
    return runs


def test_langsmith_runs_in_every_layout_read_the_same(tmp_path: Path) -> None:
    runs = _langsmith_runs()
    shuffled = [runs[0], *reversed(runs[1:])]  # order comes from dotted_order, not the file
    nested = {**runs[0], "child_runs": [{k: v for k, v in r.items() if k != "trace_id"} for r in runs[1:]]}
    layouts = [
        write(tmp_path / "list.json", shuffled),
        write(tmp_path / "lines.jsonl", runs, lines=True),
        write(tmp_path / "page.json", {"runs": runs}),
        write(tmp_path / "nested.json", nested),
    ]
    read = [list(read_runs([str(p)])) for p in layouts]
    assert all(len(r) == 1 for r in read)
    first = read[0][0]
    assert all(r[0].events == first.events and r[0].indices == first.indices for r in read[1:])
    assert first.id == _TRACE and first.source == "langsmith"
    assert first.events[0] == Message(role="user", text="Deploy the service")
    assert kinds(first.events[1:5]) == ["Usage", "Message", "ToolCall", "ToolResult"]
    usage, call, result = first.events[1], first.events[3], first.events[4]
    assert usage == Usage(cost=0.00125, input_tokens=100, output_tokens=20)
    assert call == ToolCall(
        tool="deploy", args={"service": "api", "env": "prod"}, id="bbbbbbbb-0000-0000-0000-000000000000"
    )
    assert isinstance(result, ToolResult) and result.is_error is True and "token expired" in result.output
    assert first.indices[:5] == [0, 1, 1, 2, 2]


def test_langsmith_loop_is_found_with_its_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "trace.json", _langsmith_runs())
    assert main(["scan", str(path), "--json", "--no-config"]) == 0
    detections = json.loads(capsys.readouterr().out)["detections"]
    assert any(d["pattern"] == "error_retry" for d in detections)
    assert main(["scan", str(path), "--no-config"]) == 0
    assert "of 0.01 USD" in capsys.readouterr().out  # 4 model calls at 0.00125


def test_langsmith_tool_message_outputs_and_retrievers(tmp_path: Path) -> None:
    runs = [
        {
            "id": "t",
            "trace_id": "t",
            "run_type": "chain",
            "name": "agent",
            "inputs": {"input": "find docs"},
            "dotted_order": "1",
        },
        {
            "id": "r",
            "trace_id": "t",
            "run_type": "retriever",
            "name": "kb",
            "inputs": {"query": "loops"},
            "dotted_order": "2",
            "outputs": {
                "documents": [
                    {"lc": 1, "type": "constructor", "id": ["Document"], "kwargs": {"page_content": "Loops are..."}}
                ]
            },
        },
        {
            "id": "x",
            "trace_id": "t",
            "run_type": "tool",
            "name": "run",
            "inputs": {"cmd": "make"},
            "dotted_order": "3",
            "outputs": {
                "output": _lc_message("ToolMessage", content="make: *** failed", tool_call_id="c", status="error")
            },
        },
    ]
    (run,) = read_runs([str(write(tmp_path / "t.json", runs))])
    assert run.events[0] == Message(role="user", text="find docs")
    assert run.events[1] == ToolCall(tool="kb", args={"query": "loops"}, id="r")
    assert run.events[2] == ToolResult(output="Loops are...", tool="kb", id="r", is_error=False)
    assert run.events[4] == ToolResult(output="make: *** failed", tool="run", id="x", is_error=True)


# -- Langfuse -----------------------------------------------------------------------------------------------------


def _observation(n: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"obs-{n}",
        "traceId": "trace-1",
        "type": kind,
        "startTime": f"2025-06-01T10:00:{n:02d}.000Z",
        "endTime": f"2025-06-01T10:00:{n:02d}.500Z",
        "level": "DEFAULT",
        "parentObservationId": "obs-0" if n else None,
        **fields,
    }


def _langfuse_observations() -> list[dict[str, Any]]:
    """An agent's trace as Langfuse's observations API returns it: an agent span, generations and the same tool call
    failing four times."""
    out = [_observation(0, "AGENT", name="support-agent", input={"task": "refund"})]
    n = 1
    for k in range(4):
        out.append(
            _observation(
                n,
                "GENERATION",
                name="gpt-4o",
                model="gpt-4o",
                output={"role": "assistant", "content": f"Checking the order again ({k + 1})."},
                usageDetails={"input": 200, "output": 30, "total": 230},
                costDetails={"input": 0.0005, "output": 0.0003, "total": 0.0008},
            )
        )
        out.append(
            _observation(
                n + 1,
                "TOOL",
                name="get_order",
                input={"order_id": "A-17"},
                output=None,
                level="ERROR",
                statusMessage="404: order A-17 not found",
            )
        )
        n += 2
    return out


def test_langfuse_layouts_read_the_same(tmp_path: Path) -> None:
    observations = _langfuse_observations()
    trace = {"id": "trace-1", "name": "support", "input": "Refund order A-17", "observations": observations[::-1]}
    layouts = [
        write(tmp_path / "page.json", {"data": observations, "meta": {"page": 1, "limit": 50, "totalItems": 9}}),
        write(tmp_path / "list.json", observations[::-1]),
        write(tmp_path / "lines.jsonl", observations, lines=True),
    ]
    read = [list(read_runs([str(p)])) for p in layouts]
    first = read[0][0]
    assert all(len(r) == 1 and r[0].events == first.events for r in read)
    assert first.id == "trace-1" and first.source == "langfuse"
    assert kinds(first.events[:4]) == ["Usage", "Message", "ToolCall", "ToolResult"]
    assert first.events[0] == Usage(cost=0.0008, input_tokens=200, output_tokens=30)
    assert first.events[2] == ToolCall(tool="get_order", args={"order_id": "A-17"}, id="obs-2")
    result = first.events[3]
    assert isinstance(result, ToolResult) and result.is_error is True and result.output == "404: order A-17 not found"
    assert first.indices[:4] == [1, 1, 2, 2]  # record 0 is the agent span: no event
    (with_trace,) = read_runs([str(write(tmp_path / "trace.json", trace))])
    assert with_trace.events[0] == Message(role="user", text="Refund order A-17")
    assert with_trace.events[1:] == first.events


def test_langfuse_loop_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "observations.json", {"data": _langfuse_observations()})
    assert main(["scan", str(path), "--json", "--no-config", "--fail-on", "nudge"]) == 1
    detections = json.loads(capsys.readouterr().out)["detections"]
    assert any(d["pattern"] == "error_retry" for d in detections)


def test_langfuse_malformed_observation_names_its_line(tmp_path: Path) -> None:
    observations = _langfuse_observations()[:3]
    path = tmp_path / "bad.jsonl"
    bad = {**observations[0], "id": "broken", "traceId": 17}
    path.write_text("".join(json.dumps(o) + "\n" for o in [*observations, bad]), encoding="utf-8")
    errors: list[InputError] = []
    runs = list(read_runs([str(path)], on_error=errors.append))
    assert len(runs) == 1 and len(runs[0].events) == 4
    assert errors and errors[0].line == 4 and "traceId" in errors[0].reason
