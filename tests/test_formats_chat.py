"""Chat-API traces (OpenAI Chat Completions and Responses, Anthropic Messages) and Claude Code transcripts.

The files under ``tests/data/formats/`` are written after each format's public documentation (and, for Claude
Code, the shape of real ``~/.claude/projects/`` transcripts): parallel tool calls, error results, a loop, a file
broken halfway. Detections must point at the user's own records (message, item, transcript line).
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch import formats
from loopwatch._presets import preset
from loopwatch.cli import main
from loopwatch.cli._scan import scan_events, to_records
from loopwatch.core._engine import Engine
from loopwatch.core._events import Event, Message, ToolCall, ToolResult, Usage
from loopwatch.core._verdict import Verdict
from loopwatch.errors import InputError
from loopwatch.readers import FORMATS, Run, read_file, read_runs, run_id_from_path, sniff_format

DATA = Path(__file__).resolve().parent / "data" / "formats"
CHAT_LOOP = DATA / "openai" / "chat-loop.json"
CHAT_CONVERSATIONS = DATA / "openai" / "chat-conversations.jsonl"
CHAT_MESSAGES = DATA / "openai" / "chat-messages.jsonl"
CHAT_MALFORMED = DATA / "openai" / "chat-malformed.jsonl"
RESPONSES_LOOP = DATA / "openai-responses" / "responses-loop.json"
RESPONSES = DATA / "openai-responses" / "responses.jsonl"
ANTHROPIC_LOOP = DATA / "anthropic" / "messages-loop.json"
ANTHROPIC_GZ = DATA / "anthropic" / "conversations.jsonl.gz"
SESSION_ID = "7f3c2a9e-4b1d-4e8a-9c55-2d0f6b8e1a37"
CC_PROJECT = DATA / "claude-code" / "-home-dev-shop"
CC_SESSION = CC_PROJECT / f"{SESSION_ID}.jsonl"
CC_SUBAGENT = CC_PROJECT / SESSION_ID / "subagents" / "agent-a3f9c21.jsonl"
CC_CRASHED = DATA / "claude-code" / "crashed" / "0b6e1d52-93c4-4f0a-b7de-5a1c2e3f4d60.jsonl"

SHIPMENT_TIMEOUT = "Error: shipment service timed out after 30s (upstream 504)"


def read(path: Path, **kwargs: Any) -> tuple[list[Run], list[InputError]]:
    errors: list[InputError] = []
    runs = list(read_file(str(path), on_error=errors.append, **kwargs))
    return runs, errors


def read_one(path: Path, **kwargs: Any) -> Run:
    runs, errors = read(path, **kwargs)
    assert errors == []
    assert len(runs) == 1
    return runs[0]


def pairs(run: Run) -> list[tuple[int, Event]]:
    assert run.indices is not None and len(run.indices) == len(run.events)
    return list(zip(run.indices, run.events, strict=True))


def name_of(value: Any) -> str | None:
    return value.name if isinstance(value, Path) else None


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    capsys.readouterr()
    code = main(["scan", *args])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines() if line.strip()], captured.err


def first_line(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[0])


# -- OpenAI Chat Completions ------------------------------------------------------------------------------


def test_chat_tool_calls_results_and_content_parts() -> None:
    runs, errors = read(CHAT_CONVERSATIONS)
    assert errors == []
    events = pairs(runs[0])
    user = events[1][1]
    assert isinstance(user, Message) and user.role == "user"
    text, digest = user.text.split("\n[image_url ")
    assert text == "Weather in Paris and Berlin?"
    assert len(digest) == 13 and digest.endswith("]")  # an image is summarised by a digest of its data
    assert events[:1] + events[2:] == [
        (0, Message(role="system", text="Answer weather questions with the tools.")),  # developer
        (2, ToolCall("get_weather", {"city": "Paris", "unit": "c"}, id="call_paris", thought="Checking both cities.")),
        (2, ToolCall("get_weather", {"input": '{"city": "Berlin"'}, id="call_berlin")),  # unparsable arguments
        (3, ToolResult(output="18C, light rain", tool="get_weather", id="call_paris")),
        (4, ToolResult(output="error: invalid arguments", tool="get_weather", id="call_berlin")),
        (5, Message(role="assistant", text="Paris: 18C and light rain. Berlin: unknown.")),
    ]


def test_chat_legacy_function_calling() -> None:
    runs, _ = read(CHAT_CONVERSATIONS)
    assert pairs(runs[1]) == [
        (0, Message(role="user", text="What's 2+2?")),
        (1, ToolCall("calculator", {"expression": "2+2"})),
        (2, ToolResult(output="4", tool="calculator")),
        (3, Message(role="assistant", text="2 + 2 = 4.")),
    ]


def test_chat_run_ids_are_own_ids_else_the_file_name_and_line() -> None:
    runs, _ = read(CHAT_CONVERSATIONS)
    assert [r.id for r in runs] == ["weather-1", "legacy-2", "chat-conversations:3"]
    assert all(r.path == str(CHAT_CONVERSATIONS) for r in runs)


def test_chat_messages_one_per_line_are_one_conversation() -> None:
    run = read_one(CHAT_MESSAGES)
    weather = read(CHAT_CONVERSATIONS)[0][0]
    assert run.id == "chat-messages"
    assert pairs(run) == pairs(weather)  # the same messages, the same events at the same indices


def test_chat_bare_list_pretty_printed(tmp_path: Path) -> None:
    messages = json.loads(CHAT_CONVERSATIONS.read_text(encoding="utf-8").splitlines()[0])["messages"]
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(messages, indent=2), encoding="utf-8")
    run = read_one(path)
    assert run.id == "weather"
    assert pairs(run) == pairs(read(CHAT_CONVERSATIONS)[0][0])


def test_chat_single_conversation_document() -> None:
    run = read_one(CHAT_LOOP)
    assert run.id == "chatcmpl-order-7"
    assert run.indices is not None
    assert run.indices[:6] == [0, 1, 2, 2, 3, 4]  # message 2 holds two tool calls: both report index 2
    calls = [(i, e) for i, e in pairs(run) if isinstance(e, ToolCall)]
    assert [i for i, _ in calls] == [2, 2, 5, 7, 9, 11, 13, 15, 17]
    assert calls[0][1].thought == "I'll look up the order and its shipment."
    assert all(e.thought is None for _, e in calls[1:])  # "content": null
    results = [e for e in run.events if isinstance(e, ToolResult)]
    assert [r.tool for r in results] == ["get_order"] + ["get_shipment"] * 8  # looked up from tool_call_id
    assert results[1].output == SHIPMENT_TIMEOUT  # a list of text parts


def test_chat_odd_messages(tmp_path: Path) -> None:
    records = [
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": ""},  # nothing said, nothing called: no event
        {"role": "tool", "tool_call_id": "call_unknown", "content": "orphan"},
        {"role": "tool", "content": "no id at all"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "patch", "input": "*** Begin Patch"}}],
        },
    ]
    run = read_conversation(records, tmp_path)
    assert pairs(run) == [
        (0, Message(role="assistant", text="I can't help with that.")),
        (1, Message(role="assistant", text="a\nb")),
        (3, ToolResult(output="orphan", tool=None, id="call_unknown")),
        (4, ToolResult(output="no id at all", tool="tool")),
        (5, Message(role="user", text="hi")),
        (6, ToolCall("patch", {"input": "*** Begin Patch"}, id="c1")),
    ]


def read_conversation(messages: list[Any], folder: Path) -> Run:
    path = folder / "conversation.json"
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return read_one(path)


# -- OpenAI Responses ------------------------------------------------------------------------------------


def test_responses_items() -> None:
    run = read_one(RESPONSES_LOOP)
    assert run.id == "responses-loop"
    events = pairs(run)
    assert events[:4] == [
        (0, Message(role="system", text="You are a database maintenance agent.")),  # developer
        (1, Message(role="user", text="Vacuum the orders table and report its size.")),
        # item 2 is reasoning: no event
        (3, ToolCall("run_sql", {"sql": "VACUUM ANALYZE orders"}, id="call_vacuum01")),
        (
            4,
            ToolResult(
                output='{"error": "ECONNREFUSED 127.0.0.1:5432", "ok": false}', tool="run_sql", id="call_vacuum01"
            ),
        ),
    ]
    assert events[-1] == (
        19,
        Message(role="assistant", text="The database refuses connections; I cannot vacuum the table."),
    )
    assert [i for i, e in events if isinstance(e, ToolCall)] == [3, 5, 7, 9, 11, 13, 15, 17]


def test_responses_stored_responses_with_built_in_tools() -> None:
    runs, errors = read(RESPONSES)
    assert errors == []
    assert [r.id for r in runs] == ["resp_shell_01", "resp_mcp_02"]
    shell, mcp = runs
    assert pairs(shell) == [
        (0, Message(role="user", text="List the Python files in src/.")),  # "input" as a string
        (1, ToolCall("shell", {"action": {"commands": ["ls src/*.py"], "timeout_ms": 10000}}, id="call_sh01")),
        (
            2,
            ToolResult(
                output="ls: cannot access 'src/*.py': No such file or directory\n",
                tool="shell",
                id="call_sh01",
                exit_code=2,
            ),
        ),
        (3, Message(role="assistant", text="There are no Python files in src/.")),
    ]
    assert pairs(mcp) == [
        (0, Message(role="user", text="Roll 2d4+1 and search the web for dice odds.")),
        (1, ToolCall("roll", {"diceRollExpression": "2d4 + 1"}, id="mcp_02")),
        (1, ToolResult(output="4", tool="roll", id="mcp_02")),  # the call carries its result: same item
        (2, ToolCall("web_search", {"action": {"type": "search", "query": "2d4 dice odds"}}, id="ws_02")),
        (3, ToolCall("code_exec", {"input": "print(sum([2, 2]) + 1)"}, id="call_ctc02")),
        (4, ToolResult(output="5", tool="code_exec", id="call_ctc02")),
        (5, Message(role="assistant", text="You rolled 4.")),
    ]


def test_responses_items_one_per_line(tmp_path: Path) -> None:
    items = json.loads(RESPONSES_LOOP.read_text(encoding="utf-8"))
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    assert pairs(read_one(path)) == pairs(read_one(RESPONSES_LOOP))


def test_responses_failed_call_and_error_item(tmp_path: Path) -> None:
    items = [
        {"type": "function_call", "call_id": "c1", "name": "fetch", "arguments": ""},
        {"type": "function_call_output", "call_id": "c1", "output": "boom", "status": "failed"},
        {"type": "mcp_call", "id": "m1", "name": "lookup", "arguments": "{}", "error": "server unavailable"},
    ]
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    assert pairs(read_one(path)) == [
        (0, ToolCall("fetch", {}, id="c1")),
        (1, ToolResult(output="boom", tool="fetch", id="c1", is_error=True)),
        (2, ToolCall("lookup", {}, id="m1")),
        (2, ToolResult(output="server unavailable", tool="lookup", id="m1", is_error=True)),
    ]


# -- Anthropic Messages ----------------------------------------------------------------------------------


def test_anthropic_blocks() -> None:
    run = read_one(ANTHROPIC_LOOP)
    assert run.id == "conv-migrations"
    events = pairs(run)
    assert events[:6] == [
        (0, Message(role="user", text="Run the pending database migrations and check the app still starts.")),
        (
            1,
            ToolCall(
                "bash",
                {"command": "alembic current"},
                id="toolu_01A09q90qw90lq917835lq9",
                thought="Let me look at the migration status and the database config.",  # thinking is left out
            ),
        ),
        (
            1,
            ToolCall(
                "str_replace_based_edit_tool",
                {"command": "view", "path": "config/db.yaml"},
                id="toolu_01B7nVbQ2CqfWn3kLxUb8Pz",
            ),
        ),
        (2, ToolResult(output="3f2a1c (head)", tool="bash", id="toolu_01A09q90qw90lq917835lq9")),
        (
            2,
            ToolResult(
                output="url: postgres://localhost/shop",
                tool="str_replace_based_edit_tool",
                id="toolu_01B7nVbQ2CqfWn3kLxUb8Pz",
            ),
        ),
        (3, ToolCall("bash", {"command": "alembic upgrade head"}, id="toolu_01Mig00Rtry8s7KxQ")),
    ]
    retries = [e for _, e in events if isinstance(e, ToolResult) and e.is_error]
    assert len(retries) == 7 and all(r.output == 'psql: error: relation "users_v2" does not exist' for r in retries)
    assert events[-2:] == [
        (17, Message(role="user", text="Stop retrying. What is wrong?")),
        (18, Message(role="assistant", text="The users_v2 table the migration alters is missing.")),
    ]


def test_anthropic_server_tools_images_usage_and_text_after_results() -> None:
    runs, errors = read(ANTHROPIC_GZ)
    assert errors == []
    assert [r.id for r in runs] == ["search-1", "calc-2"]
    search, calc = pairs(runs[0]), pairs(runs[1])
    user = search[0][1]
    assert isinstance(user, Message) and user.text.startswith("What does this screenshot show?\n[image ")
    assert search[1:] == [
        (
            1,
            ToolCall(
                "web_search",
                {"query": "error dialog 0x80070005"},
                id="srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                thought="It is an access-denied error from Windows Update.",
            ),
        ),
        (1, search[2][1]),
        (1, Usage(input_tokens=2048 + 1024, output_tokens=96)),  # an API reply's usage; cache reads are input
    ]
    result = search[2][1]
    assert isinstance(result, ToolResult) and result.id == "srvtoolu_014hJH82Qum7Td6UV8gDXThB"
    assert result.tool == "web_search" and result.output.startswith("[web_search_result ")
    assert calc == [
        (0, Message(role="user", text="Add 12 and 30.")),
        (1, ToolCall("add", {"a": 12, "b": 30}, id="toolu_calc1")),
        (2, ToolResult(output="42", tool="add", id="toolu_calc1")),
        (2, Message(role="user", text="Also, round it to tens.")),  # text beside results: a new prompt
        (3, Message(role="assistant", text="42, or 40 rounded to tens.")),
    ]


def test_different_images_give_different_results(tmp_path: Path) -> None:
    def shot(data: str) -> dict[str, Any]:
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}

    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "screenshot", "input": {}}]}
        if i % 2 == 0
        else {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": [shot(d)]}]}
        for i, d in enumerate(["", "AAAA", "", "BBBB", "", "AAAA"])
    ]
    outputs = [e.output for e in read_conversation(messages, tmp_path).events if isinstance(e, ToolResult)]
    assert outputs[0] != outputs[1] and outputs[0] == outputs[2]  # same image, same output


def test_system_reminders_beside_tool_results_are_not_a_new_prompt(tmp_path: Path) -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"},
                {"type": "text", "text": "<system-reminder>Todo list is empty.</system-reminder>"},
            ],
        },
    ]
    events = read_conversation(messages, tmp_path).events
    assert events[-1] == Message(role="system", text="<system-reminder>Todo list is empty.</system-reminder>")


# -- Claude Code transcripts -----------------------------------------------------------------------------


def test_claude_code_session() -> None:
    run = read_one(CC_SESSION)
    assert run.id == SESSION_ID
    events = pairs(run)
    # lines 0 and 1 (summary, file-history-snapshot) and 8 (a system entry) are no conversation
    assert {i for i, _ in events}.isdisjoint({0, 1, 8})
    assert events[:6] == [
        (2, Message(role="system", text=events[0][1].text)),  # isMeta: a note of the harness, not a prompt
        (3, Message(role="user", text="The payment tests fail since yesterday. Please fix them.")),
        (4, Usage(input_tokens=4 + 312 + 14210, output_tokens=180)),  # once per reply, at its first line
        (
            6,  # the tool_use line; the reply's text (line 5) is its thought, its thinking (line 4) is skipped
            ToolCall(
                "Bash",
                {"command": "pytest tests/test_payments.py -x -q", "description": "Run payment tests"},
                id="toolu_01Vd3kQ8wX2pL5mN7bR9tY4z",
                thought="I'll run the payment tests to see what fails.",
            ),
        ),
        (7, events[4][1]),
        (9, ToolCall("Read", {"file_path": "/home/dev/shop/requirements.txt"}, id="toolu_01Aa1Bb2Cc3Dd4Ee5Ff6Gg7H")),
    ]
    assert isinstance(events[0][1], Message) and events[0][1].text.startswith("<command-message>")
    result = events[4][1]
    assert isinstance(result, ToolResult) and result.is_error is True and result.tool == "Bash"
    assert "ModuleNotFoundError: No module named 'stripe'" in result.output
    # the parallel calls of one reply, one line each, and their results, one line each
    assert [(i, e.tool) for i, e in events if i in (10, 11, 12) and isinstance(e, (ToolCall, ToolResult))] == [
        (10, "Grep"),
        (11, "Read"),
        (12, "Grep"),
    ]
    calls = [(i, e) for i, e in events if isinstance(e, ToolCall) and e.tool == "Bash"][1:]
    assert [i for i, _ in calls] == [14, 17, 20, 23, 26, 29, 32]
    assert {e.thought for _, e in calls} == {"Let me install the dependencies from requirements.txt."}
    assert events[-1] == (39, Message(role="assistant", text="Fixed the typo; the dependency now resolves."))
    assert (34, Message(role="user", text="[Request interrupted by user for tool use]")) in events


def test_claude_code_sub_agent_is_a_run_of_its_own() -> None:
    run = read_one(CC_SUBAGENT)
    assert run.id == f"{SESSION_ID}/agent-a3f9c21"
    assert [(i, type(e).__name__) for i, e in pairs(run)] == [
        (0, "Message"),
        (1, "ToolCall"),
        (1, "Usage"),
        (2, "ToolResult"),
        (3, "Usage"),
        (3, "Message"),
    ]


def test_claude_code_inline_sidechains_and_resumed_sessions(tmp_path: Path) -> None:
    lines = [
        {"type": "user", "sessionId": "s-old", "isSidechain": False, "message": {"role": "user", "content": "go"}},
        {"type": "user", "sessionId": "s-old", "isSidechain": True, "message": {"role": "user", "content": "sub"}},
        {"type": "user", "sessionId": "s-new", "isSidechain": False, "message": {"role": "user", "content": "again"}},
    ]
    path = tmp_path / "s-new.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    runs, errors = read(path)
    assert errors == []
    assert [(r.id, r.indices) for r in runs] == [("s-old", [0, 2]), ("s-old/sidechain", [1])]


def test_claude_code_project_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, reports, err = scan(capsys, str(CC_PROJECT), "--json")
    assert code == 0, err  # sessions-index.json holds no conversation: no run, no error
    assert [r["id"] for r in reports] == [SESSION_ID, f"{SESSION_ID}/agent-a3f9c21"]


def test_claude_code_crashed_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, reports, err = scan(capsys, str(CC_CRASHED), str(CC_SUBAGENT), "--json")
    assert code == 2
    assert f"{CC_CRASHED}:6: invalid JSON" in err
    assert [(r["id"], r["events"]) for r in reports] == [
        ("0b6e1d52-93c4-4f0a-b7de-5a1c2e3f4d60", 3),  # the lines before the half-written one
        (f"{SESSION_ID}/agent-a3f9c21", 6),  # the next file is still scanned
    ]


# -- loops: detections point at records -----------------------------------------------------------------


LOOPS = [
    # (file, run id, loop_start, first detection's index)
    (CHAT_LOOP, "chatcmpl-order-7", 2, 7),  # message 2 holds the first get_shipment call (beside get_order)
    (RESPONSES_LOOP, "responses-loop", 3, 7),  # item 3: the first run_sql call (item 2 is reasoning)
    (ANTHROPIC_LOOP, "conv-migrations", 3, 7),  # message 3: the first `alembic upgrade head`
    (CC_SESSION, SESSION_ID, 14, 20),  # line 14: the first `pip install` (its text on line 13)
]


@pytest.mark.parametrize(("path", "run_id", "loop_start", "first_index"), LOOPS, ids=name_of)
def test_loop_is_reported_at_record_indices(
    capsys: pytest.CaptureFixture[str], path: Path, run_id: str, loop_start: int, first_index: int
) -> None:
    code, reports, err = scan(capsys, str(path), "--json")
    assert code == 0, err
    report = reports[0]
    assert report["id"] == run_id
    detections = report["detections"]
    assert detections, "the loop was not detected"
    assert (detections[0]["index"], detections[0]["loop_start"]) == (first_index, loop_start)
    # the call rules all see the loop from its first call; the rephrase rule counts from the first reworded
    # intent after which nothing new came back (the first failure was news), so it may start later
    assert {d["loop_start"] for d in detections if d["pattern"] != "rephrase"} == {loop_start}
    assert all(d["loop_start"] >= loop_start for d in detections)
    # every detection is the engine's verdict on an event, reported at the record the event came from
    run = read_one(path)
    assert run.indices is not None
    _, verdicts = scan_events(Engine(preset("default"), replay=True), run.events)
    assert [(d["index"], d["action"], d["pattern"]) for d in detections] == [
        (run.indices[v.index], v.action, v.pattern) for v in verdicts
    ]
    assert report["events"] == len(run.events)


def test_blocks_point_at_the_repeated_call(capsys: pytest.CaptureFixture[str]) -> None:
    _, reports, _ = scan(capsys, str(CHAT_LOOP), "--json")
    messages = json.loads(CHAT_LOOP.read_text(encoding="utf-8"))["messages"]
    blocks = [d for d in reports[0]["detections"] if d["action"] in ("block", "stop")]
    assert blocks
    for detection in blocks:  # "the call at index would be refused": index is the assistant message calling it
        message = messages[detection["index"]]
        assert message["role"] == "assistant"
        assert message["tool_calls"][0]["function"]["name"] == "get_shipment"


def test_to_records_maps_index_loop_start_and_evidence() -> None:
    verdict = Verdict(action="nudge", index=4, loop_start=1, evidence={"indices": [1, 3, 4], "tool": "x"})
    mapped = to_records(verdict, [0, 2, 2, 5, 9])
    assert (mapped.index, mapped.loop_start, dict(mapped.evidence)) == (9, 2, {"indices": [2, 5, 9], "tool": "x"})
    assert to_records(Verdict(index=0), [7]).loop_start is None


# -- detection, forcing, layouts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (CHAT_LOOP, "openai"),
        (CHAT_CONVERSATIONS, "openai"),
        (CHAT_MESSAGES, "openai"),
        (RESPONSES_LOOP, "openai-responses"),
        (RESPONSES, "openai-responses"),
        (ANTHROPIC_LOOP, "anthropic"),
        (ANTHROPIC_GZ, "anthropic"),
        (CC_SESSION, "claude-code"),
        (CC_SUBAGENT, "claude-code"),
    ],
    ids=name_of,
)
def test_every_format_is_detected(capsys: pytest.CaptureFixture[str], path: Path, name: str) -> None:
    assert sniff_format(first_line(path), str(path)) == name
    detected = scan(capsys, str(path), "--json")
    forced = scan(capsys, str(path), "--format", name, "--json")
    assert detected[0] == forced[0] == 0
    assert detected[1] == forced[1] and detected[1]


def test_sniffing_tells_the_apis_apart() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert sniff_format(plain) == "openai"  # nothing specific: read the same way by any of them
    assert sniff_format({"system": "be brief", "messages": plain}) == "anthropic"
    assert (
        sniff_format({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}]}) == "openai"
    )
    assert sniff_format(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}
    ) == ("anthropic")
    assert sniff_format({"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}) == "openai-responses"
    assert sniff_format({"id": "resp_1", "object": "response", "output": []}) == "openai-responses"
    assert sniff_format({"type": "summary", "summary": "x", "leafUuid": "u"}) == "claude-code"
    # the canonical formats come first: an event whose type is "message" is still an event
    assert sniff_format({"type": "message", "role": "user", "text": "hi"}) == "events"
    assert sniff_format({"messages": "not a list", "x": 1}) is None


def test_forced_format_reads_what_detection_would_not(tmp_path: Path) -> None:
    # Anthropic messages without tool use look like plain OpenAI messages; forcing says which API they are
    path = tmp_path / "plain.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n', encoding="utf-8")
    run = read_one(path, format="anthropic")
    assert pairs(run) == [(0, Message(role="user", text="hi")), (1, Message(role="assistant", text="hello"))]


@pytest.mark.parametrize(
    ("path", "forced"),
    [(CC_SESSION, "openai"), (CHAT_LOOP, "claude-code"), (CHAT_CONVERSATIONS, "events"), (RESPONSES, "trajectory")],
    ids=name_of,
)
def test_forcing_the_wrong_format_is_an_input_error(
    capsys: pytest.CaptureFixture[str], path: Path, forced: str
) -> None:
    code, reports, err = scan(capsys, str(path), "--format", forced, "--json")
    assert code == 2
    assert f"{path}:1" in err
    assert reports == []


def test_a_format_without_a_registered_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(formats, "REGISTRY", {k: v for k, v in formats.REGISTRY.items() if k != "otel"})
    assert "otel" in FORMATS
    assert formats.reader("otel") is None
    runs, errors = read(CHAT_LOOP, format="otel")
    assert runs == []
    assert len(errors) == 1 and "no reader is registered for format 'otel'" in str(errors[0])
    runs, errors = read(CHAT_LOOP, format="csv")
    assert runs == [] and "unknown format 'csv'" in str(errors[0])


def test_formats_are_imported_only_when_needed() -> None:
    import subprocess

    code = (
        "import sys; from loopwatch.readers import read_runs; "
        f"list(read_runs([{str(Path(__file__).parents[1] / 'examples')!r}])); "
        "print(sorted(m for m in sys.modules if m.startswith('loopwatch.formats.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    # the reading itself (files, loopwatch's own formats, the dispatch), and no format reader of the registry
    reading = [f"loopwatch.formats.{name}" for name in ("_canonical", "_dispatch", "_files", "_run")]
    assert done.stdout.strip() == str(reading)


def test_gzip_and_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = scan(capsys, str(CHAT_LOOP), "--json")
    packed = tmp_path / "chat-loop"  # gzip is recognised by content, not by name
    packed.write_bytes(gzip.compress(CHAT_LOOP.read_bytes()))
    assert scan(capsys, str(packed), "--json") == plain
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CHAT_LOOP.read_bytes()), encoding="utf-8"))
    assert scan(capsys, "-", "--json") == plain


def test_stdin_without_an_id_is_named_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = CHAT_MESSAGES.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, reports, _ = scan(capsys, "-", "--json")
    assert code == 0 and [r["id"] for r in reports] == ["stdin"]


def test_malformed_chat_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, reports, err = scan(capsys, str(CHAT_MALFORMED), str(CHAT_LOOP), "--json")
    assert code == 2
    assert f"{CHAT_MALFORMED}:3: message 1:" in err and "role" in err
    # the conversations before the bad one, the bad one up to its bad message, then the next file
    assert [(r["id"], r["events"]) for r in reports] == [
        ("weather-1", 7),
        ("legacy-2", 4),
        ("broken-3", 1),
        ("chatcmpl-order-7", 21),
    ]
    assert reports[-1]["detections"]


def test_malformed_pretty_printed_document_names_its_line(tmp_path: Path) -> None:
    text = CHAT_LOOP.read_text(encoding="utf-8").splitlines()
    text[9] = text[9].rstrip(",")  # the comma ending line 10
    path = tmp_path / "broken.json"
    path.write_text("\n".join(text), encoding="utf-8")
    runs, errors = read(path)
    assert runs == []
    assert [(e.path, e.line) for e in errors] == [(str(path), 11)]  # where the parser found the mistake


def test_messages_after_conversations_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"id": "a", "messages": []}\n{"role": "user", "content": "x"}\n', encoding="utf-8")
    runs, errors = read(path)
    assert [(r.id, r.events) for r in runs] == [("a", [])]
    assert [e.line for e in errors] == [2]


def test_run_id_from_path() -> None:
    assert run_id_from_path("/runs/x.traj.json") == "x"
    assert run_id_from_path("x.jsonl.gz") == "x"
    assert run_id_from_path("2024.05.01-run.jsonl") == "2024.05.01-run"
    assert run_id_from_path("session.JSONL") == "session"
    assert run_id_from_path("-") == "stdin"
    assert run_id_from_path(None) == "run"


def test_read_runs_across_formats() -> None:
    errors: list[InputError] = []
    runs = list(read_runs([str(DATA / "openai-responses"), str(ANTHROPIC_GZ)], on_error=errors.append))
    assert errors == []
    assert [r.id for r in runs] == ["responses-loop", "resp_shell_01", "resp_mcp_02", "search-1", "calc-2"]


def test_claude_code_stream_json_output(tmp_path: Path) -> None:
    # `claude -p --output-format stream-json --verbose`: one event per line, session_id in snake case
    sid = "2d6f3c1e-0a8b-4c7d-9e5f-1b2a3c4d5e6f"
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": sid, "cwd": "/repo", "model": "claude-sonnet-4-5"},
        {
            "type": "user",
            "message": {"role": "user", "content": "fix it"},
            "session_id": sid,
            "parent_tool_use_id": None,
        },
    ]
    for i in range(2):
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{i}",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Task", "input": {"prompt": "look"}}],
                },
                "parent_tool_use_id": None,
                "session_id": sid,
            }
        )
    lines.append(
        {
            "type": "assistant",
            "message": {"id": "msg_sub", "role": "assistant", "content": [{"type": "text", "text": "sub-agent here"}]},
            "parent_tool_use_id": "toolu_1",
            "session_id": sid,
        }
    )
    lines.append({"type": "result", "subtype": "success", "is_error": False, "session_id": sid, "num_turns": 3})
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert sniff_format(lines[0], str(path)) == "claude-code"
    runs, errors = read(path)
    assert errors == []
    assert [(r.id, r.indices) for r in runs] == [(sid, [1, 2, 3]), (f"{sid}/agent-toolu_1", [4])]
