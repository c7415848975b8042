"""Readers (loopwatch.readers): trace files -> runs of events (docs/formats.md, sections 1 and 2)."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import Guard
from loopwatch.core._events import Message, Reset, ToolCall, ToolResult, Usage
from loopwatch.errors import EventError, InputError
from loopwatch.readers import Run, expand_paths, read_file, read_runs, sniff_format, step_event, trajectory_run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CORPUS_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "swe_agent_java.jsonl.gz"


def errors_list() -> tuple[list[InputError], Any]:
    errors: list[InputError] = []
    return errors, errors.append


def read(path: Path, **kwargs: Any) -> tuple[list[Run], list[InputError]]:
    errors, on_error = errors_list()
    runs = list(read_file(str(path), on_error=on_error, **kwargs))
    return runs, errors


def jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def trajectory(run_id: str | None = "run-1", steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"steps": steps if steps is not None else STEPS, "source": "tests"}
    if run_id is not None:
        record["id"] = run_id
    return record


STEPS: list[dict[str, Any]] = [
    {"role": "system", "text": "You are a coding agent."},
    {"role": "user", "text": "Fix the parser."},
    {"role": "assistant", "text": "Let me look.", "tool": "bash", "args": {"command": "ls"}, "is_error": None},
    {"role": "tool", "text": "src\ntests", "tool": "bash", "args": None, "is_error": False},
    {"role": "assistant", "text": "", "tool": "bash", "args": {"command": "cd srcc"}},
    {"role": "tool", "text": "cd: srcc: No such file or directory", "tool": "bash", "is_error": True},
    {"role": "assistant", "text": "I am done."},
]


# -- step_event: one step -> one event ---------------------------------------------------------------------


def test_assistant_step_with_a_tool_is_a_call_with_its_thought() -> None:
    event = step_event({"role": "assistant", "text": "Let me list.", "tool": "bash", "args": {"command": "ls -la"}})
    assert event == ToolCall(tool="bash", args={"command": "ls -la"}, thought="Let me list.")


def test_call_without_text_has_no_thought_and_null_args_are_empty() -> None:
    event = step_event({"role": "assistant", "text": "", "tool": "submit", "args": None})
    assert isinstance(event, ToolCall)
    assert event.thought is None
    assert dict(event.args) == {}


def test_call_with_non_object_args_keeps_them_under_input() -> None:
    event = step_event({"role": "assistant", "text": "", "tool": "python", "args": "print(1)"})
    assert isinstance(event, ToolCall)
    assert dict(event.args) == {"input": "print(1)"}


def test_assistant_step_without_a_tool_is_a_message() -> None:
    for step in (
        {"role": "assistant", "text": "All done."},
        {"role": "assistant", "text": "All done.", "tool": None, "args": None},
        {"role": "assistant", "text": "All done.", "tool": ""},
    ):
        assert step_event(step) == Message(role="assistant", text="All done.")


@pytest.mark.parametrize(("is_error", "expected"), [(True, True), (False, False), (None, None), ("yes", None)])
def test_tool_step_is_a_result_with_is_error(is_error: Any, expected: bool | None) -> None:
    event = step_event({"role": "tool", "text": "boom", "tool": "bash", "args": None, "is_error": is_error})
    assert isinstance(event, ToolResult)
    assert (event.output, event.tool, event.is_error) == ("boom", "bash", expected)


def test_tool_step_without_a_tool_name_still_is_a_result() -> None:
    event = step_event({"role": "tool", "text": "ok"})
    assert isinstance(event, ToolResult)
    assert event.output == "ok"
    assert event.tool  # some name, so the result is usable without a call id


@pytest.mark.parametrize("role", ["user", "system"])
def test_user_and_system_steps_are_messages(role: str) -> None:
    assert step_event({"role": role, "text": "hello"}) == Message(role=role, text="hello")  # type: ignore[arg-type]


def test_a_system_step_starting_a_fresh_context_is_a_reset() -> None:
    assert step_event({"role": "system", "text": "Start verify conversation", "new_context": True}) == Reset()
    assert isinstance(step_event({"role": "system", "text": "note", "new_context": "yes"}), Message)


def test_the_same_call_in_a_fresh_conversation_does_not_repeat_the_last_one() -> None:
    # a harness that restarts its agent with a fresh context: the model never saw its earlier attempt
    call = {"role": "assistant", "text": "", "tool": "submit", "args": {"command": "./mvnw -q package"}}
    crash = {"role": "system", "text": "!!! Exception: the container is gone"}
    steps: list[dict[str, Any]] = []
    for _ in range(4):
        steps += [{"role": "system", "text": "Start rebuild conversation", "new_context": True}, call, crash]
    guard = Guard(preset="default-lexical", clock=None)
    run = trajectory_run({"id": "r", "steps": steps})
    assert {guard.observe("r", event).action for event in run.events} == {"ok"}
    for step in steps:
        step.pop("new_context", None)
    again = Guard(preset="default-lexical", clock=None)
    assert "repeat" in {again.observe("r", e).pattern for e in trajectory_run({"id": "r", "steps": steps}).events}


@pytest.mark.parametrize(
    "step",
    [
        {"role": "assistant", "text": "t", "tool": "bash", "args": {"command": "ls"}},
        {"role": "assistant", "text": "t"},
        {"role": "tool", "text": "out", "tool": "bash"},
        {"role": "user", "text": "u"},
        {"role": "system", "text": "s"},
    ],
)
def test_agent_names_the_worker(step: dict[str, Any]) -> None:
    assert step_event({**step, "agent": "planner"}).worker == "planner"
    assert step_event(step).worker is None


def test_text_that_is_not_a_string() -> None:
    assert step_event({"role": "user", "text": None}) == Message(role="user", text="")
    event = step_event({"role": "tool", "text": {"rows": [1, 2]}, "tool": "sql"})
    assert isinstance(event, ToolResult)
    assert json.loads(event.output) == {"rows": [1, 2]}


@pytest.mark.parametrize("step", [{"role": "narrator", "text": "x"}, {"text": "no role"}, "a string", None, [1]])
def test_bad_steps_raise_event_error(step: Any) -> None:
    with pytest.raises(EventError):
        step_event(step)


# -- trajectory_run: a record -> a run ---------------------------------------------------------------------


def test_step_i_is_event_i() -> None:
    run = trajectory_run(trajectory())
    assert [type(e) for e in run.events] == [Message, Message, ToolCall, ToolResult, ToolCall, ToolResult, Message]
    # a tool step is the result of the call right before it: the reader links the two with an id of its own
    assert [dataclasses.replace(e, id=None) if hasattr(e, "id") else e for e in run.events] == [
        step_event(s) for s in STEPS
    ]
    assert run.events[2].id == run.events[3].id == "step-2" and run.events[4].id == run.events[5].id == "step-4"
    assert run.id == "run-1"
    assert run.source == "tests"


def test_only_a_tool_step_right_after_a_call_is_linked_to_it() -> None:
    call = {"role": "assistant", "text": "", "tool": "bash", "args": {"command": "ls"}}
    tool = {"role": "tool", "text": "a.txt", "tool": "bash"}
    said = {"role": "assistant", "text": "Now I look."}
    steps = [call, call, tool, said, tool, tool, call, said, call]
    ids = [getattr(e, "id", None) for e in trajectory_run({"id": "r", "steps": steps}).events]
    assert ids == [None, "step-1", "step-1", None, None, None, None, None, None]


def test_labels_are_kept_as_meta_and_never_become_events() -> None:
    record = {**trajectory(), "labels": {"outcome": {"resolved": True}}}
    run = trajectory_run(record)
    assert run.meta["labels"] == {"outcome": {"resolved": True}}
    assert len(run.events) == len(STEPS)


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/data/runs/issue-42.jsonl.gz", "issue-42"), ("issue-7.jsonl", "issue-7"), (None, "run")],
)
def test_id_from_the_file_name_when_the_record_has_none(path: str | None, expected: str) -> None:
    assert trajectory_run(trajectory(run_id=None), path=path).id == expected
    assert trajectory_run({**trajectory(), "id": 17}, path=path).id == expected  # not a string: ignored


def test_a_bad_step_names_its_index() -> None:
    steps = [*STEPS[:3], {"role": "narrator", "text": "?"}]
    with pytest.raises(EventError, match="step 3"):
        trajectory_run(trajectory(steps=steps))


@pytest.mark.parametrize("record", [{"id": "x"}, {"id": "x", "steps": "none"}, ["steps"], "text"])
def test_records_that_are_not_trajectories(record: Any) -> None:
    with pytest.raises(EventError):
        trajectory_run(record)


# -- read_file / read_runs: files -> runs -----------------------------------------------------------------


def test_trajectory_file(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "runs.jsonl", [trajectory("a"), trajectory("b", STEPS[:2])])
    runs, errors = read(path)
    assert errors == []
    assert [(r.id, len(r.events), r.path) for r in runs] == [("a", 7, str(path)), ("b", 2, str(path))]


def test_gzip_file_reads_like_the_plain_one(tmp_path: Path) -> None:
    plain = jsonl(tmp_path / "runs.jsonl", [trajectory("a"), trajectory("b", STEPS[2:4])])
    packed = tmp_path / "runs.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    (plain_runs, _), (gz_runs, gz_errors) = read(plain), read(packed)
    assert gz_errors == []
    assert [(r.id, r.events) for r in gz_runs] == [(r.id, r.events) for r in plain_runs]


def test_event_stream_groups_sessions_in_order_of_appearance(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "events.jsonl",
        [
            {"type": "message", "session": "b", "role": "user", "text": "hi b"},
            {"type": "tool_call", "session": "a", "tool": "ls", "args": {"path": "."}},
            {"type": "usage", "cost": 0.5},
            {"type": "tool_result", "session": "b", "tool": "ls", "output": "x"},
            {"type": "tool_result", "session": "a", "tool": "ls", "output": "y", "is_error": True},
        ],
    )
    runs, errors = read(path)
    assert errors == []
    assert [r.id for r in runs] == ["b", "a", "default"]
    by_id = {r.id: r.events for r in runs}
    assert by_id["b"] == [Message(role="user", text="hi b"), ToolResult(output="x", tool="ls")]
    assert by_id["a"] == [ToolCall(tool="ls", args={"path": "."}), ToolResult(output="y", tool="ls", is_error=True)]
    assert by_id["default"] == [Usage(cost=0.5)]


def test_format_is_sniffed_and_can_be_forced(tmp_path: Path) -> None:
    assert sniff_format({"steps": []}) == "trajectory"
    assert sniff_format({"type": "message"}) == "events"
    assert sniff_format({"id": "x"}) is None
    assert sniff_format([1, 2]) is None
    path = jsonl(tmp_path / "events.jsonl", [{"type": "message", "role": "user", "text": "x", "steps": 2}])
    runs, errors = read(path, format="events")
    assert errors == []
    assert [r.events for r in runs] == [[Message(role="user", text="x")]]


def test_a_file_in_neither_format(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "other.jsonl", [{"name": "x"}])
    runs, errors = read(path)
    assert runs == []
    assert [(e.path, e.line) for e in errors] == [(str(path), 1)]


def test_empty_and_blank_files_give_no_runs(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "blank.jsonl").write_text("\n  \n\n", encoding="utf-8")
    assert read(tmp_path / "empty.jsonl") == ([], [])
    assert read(tmp_path / "blank.jsonl") == ([], [])


# -- errors: file and line, partial files, bad bytes -----------------------------------------------------


def test_invalid_json_names_file_and_line_and_keeps_the_runs_before(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    good = json.dumps(trajectory("a"))
    path.write_text(f"{good}\n\n{json.dumps(trajectory('b'))}\n{{broken\n{json.dumps(trajectory('c'))}\n", "utf-8")
    runs, errors = read(path)
    assert [r.id for r in runs] == ["a", "b"]  # the runs before the bad line (4; blank lines count)
    assert len(errors) == 1
    assert (errors[0].path, errors[0].line) == (str(path), 4)
    assert f"{path}:4" in str(errors[0])


def test_a_bad_trajectory_record_names_its_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "runs.jsonl", [trajectory("a"), trajectory("b", [{"role": "alien", "text": "x"}])])
    runs, errors = read(path)
    assert [r.id for r in runs] == ["a"]
    assert [(e.path, e.line) for e in errors] == [(str(path), 2)]
    assert "alien" in str(errors[0])


def test_unknown_event_type_names_its_line_and_keeps_what_came_before(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "events.jsonl",
        [
            {"type": "message", "session": "s", "role": "user", "text": "one"},
            {"type": "warp", "session": "s"},
            {"type": "message", "session": "s", "role": "user", "text": "three"},
        ],
    )
    runs, errors = read(path)
    assert [(r.id, r.events) for r in runs] == [("s", [Message(role="user", text="one")])]
    assert [(e.path, e.line) for e in errors] == [(str(path), 2)]
    assert "warp" in str(errors[0])


def test_read_runs_raises_by_default_and_reports_to_on_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(trajectory("a")) + "\n[oops\n", encoding="utf-8")
    good = jsonl(tmp_path / "good.jsonl", [trajectory("z")])
    with pytest.raises(InputError) as raised:
        list(read_runs([str(bad), str(good)]))
    assert (raised.value.path, raised.value.line) == (str(bad), 2)
    errors, on_error = errors_list()
    runs = list(read_runs([str(bad), str(good)], on_error=on_error))
    assert [r.id for r in runs] == ["a", "z"]  # the next file is still read
    assert [(e.path, e.line) for e in errors] == [(str(bad), 2)]


def test_missing_file_is_an_input_error_without_a_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    runs, errors = read(missing)
    assert runs == []
    assert [(e.path, e.line) for e in errors] == [(str(missing), None)]


def test_truncated_gzip_is_an_error_not_a_crash(tmp_path: Path) -> None:
    data = gzip.compress("".join(json.dumps(trajectory(f"r{i}")) + "\n" for i in range(50)).encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    runs, errors = read(path)
    assert len(errors) == 1 and errors[0].path == str(path)
    assert len(runs) < 50


@pytest.mark.parametrize("packed", [False, True])
def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path, packed: bool) -> None:
    line = json.dumps(trajectory("u", [{"role": "tool", "text": "caf@", "tool": "cat"}])).encode()
    data = line.replace(b"caf@", b"caf\xff\xfe") + b"\n" + json.dumps(trajectory("v")).encode() + b"\n"
    path = tmp_path / ("bytes.jsonl.gz" if packed else "bytes.jsonl")
    path.write_bytes(gzip.compress(data) if packed else data)
    runs, errors = read(path)
    assert errors == []
    assert [r.id for r in runs] == ["u", "v"]
    result = runs[0].events[0]
    assert isinstance(result, ToolResult)
    assert result.output.startswith("caf") and "\ufffd" in result.output


# -- paths ------------------------------------------------------------------------------------------------


def test_expand_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("b.jsonl", "a.json.gz", "sub/c.ndjson", "notes.md", "sub/data.csv"):
        (tmp_path / name).write_text("", encoding="utf-8")
    walked = expand_paths([str(tmp_path)])
    assert walked == [str(tmp_path / "a.json.gz"), str(tmp_path / "b.jsonl"), str(tmp_path / "sub" / "c.ndjson")]
    assert expand_paths([str(tmp_path / "*.jsonl")]) == [str(tmp_path / "b.jsonl")]
    assert expand_paths(["-", "given.txt"]) == ["-", "given.txt"]  # stdin and plain names as given


def test_bundled_examples_read_without_errors() -> None:
    errors, on_error = errors_list()
    runs = list(read_runs([str(EXAMPLES)], on_error=on_error))
    assert errors == []
    ids = [r.id for r in runs]
    assert ids == [
        "examples/abab-agent",
        "examples/batch-reader",
        "agent-a",
        "agent-b",
        "examples/looping-coding-agent",
        "examples/polling-agent",
        "examples/repeated-reply",
    ]


# -- the real corpus ------------------------------------------------------------------------------------


@pytest.mark.skipif(not CORPUS_SAMPLE.exists(), reason="the corpus is not available")
def test_corpus_sample_parses_with_one_event_per_step() -> None:
    with gzip.open(CORPUS_SAMPLE, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in itertools.islice(handle, 20)]
    errors, on_error = errors_list()
    runs = list(itertools.islice(read_file(str(CORPUS_SAMPLE), on_error=on_error), 20))
    assert errors == []
    assert len(runs) == len(records) == 20
    kinds = {"assistant": (ToolCall, Message), "tool": (ToolResult,), "user": (Message,), "system": (Message,)}
    for record, run in zip(records, runs, strict=True):
        assert run.id == record["id"]
        assert len(run.events) == len(record["steps"])
        for step, event in zip(record["steps"], run.events, strict=True):
            assert isinstance(event, kinds[step["role"]])
            assert isinstance(event, ToolCall) == (step["role"] == "assistant" and bool(step.get("tool")))


# -- file layouts: JSONL streamed, one JSON document, several documents ------------------------------------


def test_pretty_printed_trajectory_is_one_document(tmp_path: Path) -> None:
    path = tmp_path / "run-7.json"
    path.write_text(json.dumps(trajectory(None), indent=2), encoding="utf-8")
    runs, errors = read(path)
    assert errors == []
    assert [(r.id, r.events) for r in runs] == [("run-7", trajectory_run(trajectory()).events)]
    assert runs[0].indices is None  # step i is event i


def test_json_lists_of_trajectories_and_of_events(tmp_path: Path) -> None:
    runs_path = tmp_path / "runs.json"
    runs_path.write_text(json.dumps([trajectory("a"), trajectory("b", STEPS[:2])], indent=1), encoding="utf-8")
    runs, errors = read(runs_path)
    assert errors == []
    assert [(r.id, len(r.events)) for r in runs] == [("a", 7), ("b", 2)]
    events_path = tmp_path / "events.json"
    events = [{"type": "tool_call", "tool": "ls"}, {"type": "tool_result", "tool": "ls", "output": "x"}]
    events_path.write_text(json.dumps(events, indent=2), encoding="utf-8")
    runs, errors = read(events_path)
    assert errors == []
    assert [r.events for r in runs] == [[ToolCall(tool="ls"), ToolResult(output="x", tool="ls")]]


def test_concatenated_documents_are_numbered_by_their_first_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    first = json.dumps(trajectory("a"), indent=2)
    path.write_text(f'\n{first}\n{json.dumps(trajectory("b"), indent=2)}\n{{\n  "id": oops\n}}\n', encoding="utf-8")
    runs, errors = read(path)
    assert [r.id for r in runs] == ["a", "b"]
    bad_line = 2 + 2 * len(first.splitlines()) + 1  # the line of `"id": oops`
    assert [(e.path, e.line) for e in errors] == [(str(path), bad_line)]
    assert "invalid JSON" in str(errors[0])


def test_a_broken_first_line_is_not_taken_for_a_document(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text('{"id": "a", "steps": [}\n' + json.dumps(trajectory("b")) + "\n", encoding="utf-8")
    runs, errors = read(path)
    assert runs == []
    assert [(e.line, "column 23" in str(e)) for e in errors] == [(1, True)]


def test_jsonl_is_read_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(f"{json.dumps(trajectory('a'))}\n{json.dumps(trajectory('b'))}\n{{broken\n", encoding="utf-8")
    errors, on_error = errors_list()
    runs = read_file(str(path), on_error=on_error)
    assert next(runs).id == "a"
    assert errors == []  # the bad line 3 is not read yet
    assert [r.id for r in runs] == ["b"]
    assert [e.line for e in errors] == [3]


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(trajectory("a")).encode() + b"\n")
    runs, errors = read(path)
    assert errors == []
    assert [r.id for r in runs] == ["a"]


def test_directories_include_swe_agent_trajectories(tmp_path: Path) -> None:
    for name in ("a.traj", "b.traj.json", "c.traj.gz", "d.log", "e.trajectory"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / n) for n in ("a.traj", "b.traj.json", "c.traj.gz")]


def test_sniffing_falls_back_to_events_after_the_foreign_formats() -> None:
    assert sniff_format({"type": "warp"}) == "events"  # an unknown event type: reported by the event reader
    assert sniff_format({"type": "message", "role": "user", "content": "hi"}) != "events"  # a chat message
    assert sniff_format([{"steps": []}]) == "trajectory"


# -- an event stream's session read from its line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "session"),
    [
        ('{"type": "message", "session": "agent-a", "text": "hi"}', "agent-a"),
        ('  {"session":"b","type":"reset"}', "b"),
        ('{"type": "message", "session": "a", "text": "the \\"session\\" key"}', "a"),  # inside a string, escaped
        ('{"type": "tool_call", "args": {"session": "x"}, "tool": "t"}', None),  # not the top level's
        ('{"type": "tool_call", "args": {"q": 1}, "session": "s", "tool": "t"}', None),  # an object before it
        ('{"session": "a", "session": "b", "type": "reset"}', None),  # the last one counts: parse it
        ('{"\\u0073ession": "b", "session": "a", "type": "reset"}', None),  # an escape may spell the key
        ('{"type": "message", "session": "a\\"b"}', None),  # an escape in the value
        ('{"type": "message", "session": null}', None),
        ('{"type": "message", "session": 7}', None),
        ('{"type": "message", "text": "a \\\\", "session": "a"}', None),  # a backslash before it
        ('{"type": "message", "text": "odd \\" quote", "session": "a"}', None),
        ('{"type": "message"}', None),
        ('["session", {"session": "a"}]', None),
    ],
)
def test_a_line_names_its_session_only_when_it_leaves_no_doubt(line: str, session: str | None) -> None:
    from loopwatch.formats._canonical import raw_session

    assert raw_session(line) == session


_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-9, 9), st.text(max_size=6))
_KEYS = st.sampled_from(["session", "type", "text", "args", "session ", "Session", "s"])
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.dictionaries(_KEYS, inner, max_size=3) | st.lists(inner, max_size=2))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_KEYS, _JSON, max_size=5), st.booleans(), st.booleans())
def test_a_session_read_from_the_line_is_the_one_parsing_gives(
    record: dict[str, Any], ascii: bool, tight: bool
) -> None:
    from loopwatch.core._events import session_of
    from loopwatch.formats._canonical import raw_session

    line = json.dumps(record, ensure_ascii=ascii, separators=(",", ":") if tight else None)
    found = raw_session(line)
    if found is not None:
        assert found == session_of(json.loads(line))
