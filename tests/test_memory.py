"""The behavioral preset's memory protocol (loopwatch.memory): after a force-done, a learnings entry in the design's
format (tool, count, final normalised arguments, root-cause hypothesis, recommendation); an issues entry when
force-done fires more than twice in a session; learnings read back into the first nudge of a later run looping on the
same tool. Real files in a temporary folder; any sink as the destination."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loopwatch import Guard, ToolCall, ToolResult
from loopwatch.memory import (
    DEFAULT_FOLDER,
    ForceDoneMemory,
    Learning,
    MarkdownMemory,
    RecallingGuard,
    SinkMemory,
    parse_learnings,
)
from loopwatch.sinks import JsonlAuditSink

SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
# the design's entry, line by line
ENTRY = re.compile(
    r"^## Behavioral Loop Detection — \d{4}-\d{2}-\d{2}\n"
    r"- Task (?P<task>[^:]+): (?P<tool>\S+) looped (?P<count>\d+) times\. Final normalized args: (?P<args>.+)\.\n"
    r"- Root cause hypothesis: .+\n"
    r"- Recommendation: .+\n$"
)


def loop(guard: Guard, session: str, tool: str = "browser_click", times: int = 9, swarm: str | None = None) -> list:
    verdicts = []
    for _ in range(times):
        call = {"selector": "#pay", "page": "/Users/me/shop/checkout.html", "api_key": SECRET}
        verdicts.append(guard.observe(session, ToolCall(tool, call), swarm=swarm))
        guard.observe(session, ToolResult("clicked, nothing happened", tool=tool), swarm=swarm)
    return verdicts


def entries(text: str) -> list[str]:
    return [block if block.endswith("\n") else block + "\n" for block in text.split("\n\n") if block.strip()]


def test_a_force_done_writes_a_learnings_entry_in_the_designs_format(tmp_path: Path) -> None:
    memory = MarkdownMemory(tmp_path / "memory")
    guard = Guard("behavioral", sinks=[ForceDoneMemory(memory)])
    verdicts = loop(guard, "task-7")
    assert verdicts[7].action == "stop" and verdicts[7].status == "FORCE_DONE"
    text = (tmp_path / "memory" / "learnings.md").read_text(encoding="utf-8")
    (entry,) = entries(text)
    match = ENTRY.match(entry)
    assert match is not None, entry
    assert (match["task"], match["tool"], match["count"]) == ("task-7", "browser_click", "8")
    args = json.loads(match["args"])
    assert args["page"] == "checkout.html" and args["selector"] == "#pay"  # normalised: basename, lower case
    assert SECRET not in text and "[redacted]" in text  # the audit record's redaction applies
    assert "4 nudges" in entry  # the nudges that went unheeded are part of the hypothesis
    assert not (tmp_path / "memory" / "issues.md").exists()


def test_an_issues_entry_when_force_done_fires_more_than_twice_in_a_session(tmp_path: Path) -> None:
    memory = MarkdownMemory(tmp_path)
    guard = Guard("behavioral", sinks=[ForceDoneMemory(memory)])
    loop(guard, "task-1", swarm="crew-1")
    loop(guard, "task-2", swarm="crew-1")
    assert not memory.path("issues").exists()  # twice is not more than twice
    loop(guard, "task-3", tool="search", swarm="crew-1")
    loop(guard, "task-4", swarm="crew-2")
    (issue,) = entries(memory.read("issues"))
    assert issue.startswith("## Behavioral Loop Detection — ")
    assert (
        "- Session crew-1: force-done fired 3 times (tasks task-1, task-2, task-3; tools browser_click, search)."
        in issue
    )
    loop(guard, "task-5", swarm="crew-1")
    assert len(entries(memory.read("issues"))) == 1  # one entry per session
    assert len(memory.learnings()) == 5


def test_learnings_come_back_in_the_first_nudge_of_a_later_run_on_the_same_tool(tmp_path: Path) -> None:
    memory = MarkdownMemory(tmp_path)
    first = RecallingGuard(memory=memory, clock=None)
    plain = loop(first, "task-1")
    assert all("earlier run" not in (v.message or "") for v in plain)  # nothing learned yet
    later = RecallingGuard(memory=memory, clock=None)  # another process, the same files
    verdicts = [v for v in loop(later, "task-2") if v.action == "nudge"]
    assert "An earlier run (task-1, " in (verdicts[0].message or "")
    assert "Recommendation: Say in the task prompt" in (verdicts[0].message or "")
    assert verdicts[0].evidence["recalled"]["task"] == "task-1"
    assert all("earlier run" not in (v.message or "") for v in verdicts[1:])  # the first nudge only
    other = [v for v in loop(later, "task-3", tool="read_file") if v.action == "nudge"]
    assert other and "earlier run" not in (other[0].message or "")  # another tool: nothing to recall
    assert [e.task for e in memory.learnings("browser_click")] == ["task-1", "task-2"]


def test_briefing_before_a_task(tmp_path: Path) -> None:
    memory = MarkdownMemory(tmp_path)
    assert memory.briefing() == ""
    guard = Guard("behavioral", sinks=[ForceDoneMemory(memory)])
    for k in range(7):
        loop(guard, f"task-{k}")
    briefing = memory.briefing(last=3)
    assert briefing.startswith("Loops detected in earlier tasks:")
    assert [m for m in re.findall(r"Task (task-\d)", briefing)] == ["task-4", "task-5", "task-6"]


def test_entries_go_to_any_sink(tmp_path: Path) -> None:
    audit = tmp_path / "memory.jsonl"
    guard = Guard("behavioral", sinks=[ForceDoneMemory(SinkMemory(JsonlAuditSink(str(audit))))])
    loop(guard, "task-1")
    (record,) = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert record["event"] == "memory.learnings"
    assert ENTRY.match(record["entry"]) is not None


def test_parse_learnings_round_trip() -> None:
    learning = Learning("2026-05-04", "run 42", "bash", 8, '{"command":"pytest"}', "It retried.", "Read the error.")
    text = "# notes\n\nsomething else\n\n" + learning.markdown() + "\n" + learning.markdown()
    assert parse_learnings(text) == [learning, learning]


def test_a_memory_that_cannot_be_written_is_counted_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "memory"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    guard = Guard("behavioral", sinks=[ForceDoneMemory(MarkdownMemory(blocker))])
    verdicts = loop(guard, "task-1")
    assert verdicts[7].action == "stop"
    assert guard.stats["audit_errors"] == 1


def test_the_default_folder_is_the_designs() -> None:
    assert Path(DEFAULT_FOLDER) == Path(".claude/context/memory")
    assert MarkdownMemory().path("learnings") == Path(".claude/context/memory/learnings.md")
    with pytest.raises(ValueError):
        ForceDoneMemory(MarkdownMemory(), issues_after=-1)
