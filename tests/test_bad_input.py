"""Bad input inside a live guard: never raises (by default), is counted, and corrupts nothing."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from loopwatch import EventError, Guard, Message, TextDelta, ToolCall, ToolResult, Verdict
from loopwatch.sinks import JsonlAuditSink, MemorySink
from raising_rule import RaisingRule

LOOP = "read_file"


def normal_loop(guard: Guard, session: str, n: int = 8) -> list[tuple[str, str | None, int, int, str | None]]:
    """The same call with the same result ``n`` times; the verdicts of the calls."""
    out = []
    for _ in range(n):
        v = guard.observe(session, ToolCall(LOOP, {"path": "src/loop.py"}))
        out.append((v.action, v.pattern, v.count, v.level, v.status))
        guard.observe(session, ToolResult("unchanged", tool=LOOP))
    return out


FRESH = normal_loop(Guard(), "fresh")


def test_the_reference_loop_escalates() -> None:
    assert [a for a, *_ in FRESH] == ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]


MALFORMED: list[Any] = [
    {"type": "bogus"},
    {"type": None},
    {},
    {"tool": "bash"},
    {"type": "tool_call"},
    {"type": "tool_call", "tool": 5},
    {"type": "tool_call", "tool": "bash", "args": "ls"},
    {"type": "tool_call", "tool": "bash", "args": [1, 2]},
    {"type": "tool_result", "output": "orphan"},
    {"type": "tool_result", "tool": "bash", "output": 12},
    {"type": "tool_result", "tool": "bash", "is_error": "no"},
    {"type": "tool_result", "tool": "bash", "exit_code": False},
    {"type": "message", "text": "no role"},
    {"type": "message", "role": "wizard", "text": "hi"},
    {"type": "message", "role": "user", "text": ["a"]},
    {"type": "text_delta"},
    {"type": "usage", "cost": math.nan},
    {"type": "usage", "cost": math.inf},
    {"type": "usage", "cost": -1.0},
    {"type": "usage", "input_tokens": True},
    {"type": "usage", "cost": 10**400},
    {"type": "reset", "ts": math.nan},
    {"type": "tool_call", "tool": "bash", "ts": -1},
    None,
    "tool_call",
    42,
    ["type", "tool_call"],
    object(),
]


def test_malformed_events_are_skipped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard()
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        verdicts = [guard.observe("s", bad) for bad in MALFORMED]
    assert all(isinstance(v, Verdict) and v.ok for v in verdicts)
    assert all("malformed" in (v.reason or "") for v in verdicts)
    assert guard.stats["skipped"] == len(MALFORMED)
    assert guard.stats["events"] == 0
    assert guard.stats["errors"] == 0
    assert "skipped a malformed event" in caplog.text
    # nothing about the session changed: the same loop is seen exactly as in a fresh session
    assert guard.snapshot("s")["state"]["index"] == 0
    assert normal_loop(guard, "s") == FRESH


def test_malformed_events_interleaved_with_a_loop_change_nothing() -> None:
    guard = Guard()
    out = []
    for i in range(8):
        guard.observe("s", MALFORMED[i % len(MALFORMED)])
        v = guard.observe("s", ToolCall(LOOP, {"path": "src/loop.py"}))
        guard.observe("s", MALFORMED[(i + 7) % len(MALFORMED)])
        guard.observe("s", ToolResult("unchanged", tool=LOOP))
        out.append((v.action, v.pattern, v.count, v.level, v.status))
    assert out == FRESH
    assert guard.stats["skipped"] == 16


@pytest.mark.parametrize("bad", MALFORMED[:23], ids=lambda b: repr(b)[:40])
def test_on_error_raise_raises_the_event_error(bad: Any) -> None:
    guard = Guard(on_error="raise")
    with pytest.raises(EventError):
        guard.observe("s", bad)
    assert guard.stats["skipped"] == 1


def test_on_error_raise_for_non_objects() -> None:
    guard = Guard(on_error="raise")
    for bad in (None, "tool_call", 42):
        with pytest.raises(EventError):
            guard.observe("s", bad)


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"path": "a.py"}
    value["me"] = value
    value["list"] = [value]
    return value


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("broken")


def odd_but_valid_events() -> list[Any]:
    """Events that are well formed but nasty: they are observed (not skipped) and must not break anything."""
    return [
        ToolCall("bash", {"command": "cat \ud800.txt"}),
        ToolResult("bad bytes: \ud800\udfff and \udcff", tool="bash"),
        {"type": "tool_result", "tool": "bash", "output": "lone \udc80 surrogate", "is_error": True},
        Message("assistant", "I think \ud83d is half an emoji"),
        TextDelta("\udfff" * 100),
        ToolCall("write_file", {"path": "big.txt", "content": "y" * 100_000_000}),
        ToolResult("wrote 100000000 bytes", tool="write_file"),
        ToolCall("configure", _cyclic()),
        ToolResult("ok", tool="configure"),
        {"type": "tool_call", "tool": "configure", "args": _cyclic()},
        ToolCall("odd", {"obj": BrokenRepr(), "b": b"\xff", "s": {1, 2}, "n": math.nan, 1: "int key"}),
        ToolResult("done", tool="odd"),
        {"type": "message", "role": "user", "text": "next task \ud800"},
    ]


def test_odd_but_valid_events_never_raise_and_corrupt_nothing() -> None:
    sink = MemorySink()
    guard = Guard(sinks=[sink])
    for event in odd_but_valid_events():
        verdict = guard.observe("s", event)
        assert isinstance(verdict, Verdict)
    assert guard.stats["errors"] == 0
    assert guard.stats["skipped"] == 0
    assert guard.stats["events"] == len(odd_but_valid_events())
    json.dumps(guard.snapshot("s"))  # still serialisable
    assert normal_loop(guard, "s") == FRESH


@pytest.mark.parametrize("which", ["cyclic", "huge", "surrogates", "non-json"])
def test_loops_of_odd_calls_are_still_detected_and_audited(which: str, tmp_path: Path) -> None:
    args: dict[str, Any] = {
        "cyclic": _cyclic(),
        "huge": {"content": "z" * 100_000_000, "api_key": "sk-" + "q" * 40},
        "surrogates": {"path": "\ud800/\udfff.py"},
        "non-json": {"obj": BrokenRepr(), "data": b"\x00\xff", "tags": {"b", "a"}, "x": math.nan, 7: "seven"},
    }[which]
    memory = MemorySink(redact=True)
    path = tmp_path / "audit.jsonl"
    jsonl = JsonlAuditSink(path, fsync=False)
    guard = Guard(sinks=[memory, jsonl])
    got = []
    for _ in range(8):
        v = guard.observe("s", ToolCall("tool", args))
        got.append((v.action, v.pattern, v.count, v.level, v.status))
        guard.observe("s", ToolResult("same \ud800 output", tool="tool"))
    jsonl.close()
    assert got == FRESH
    assert guard.stats["errors"] == 0 and guard.stats["audit_errors"] == 0
    assert memory.events()[-2:] == ["loop.stop", "session.terminated"]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records] == memory.events()
    assert path.stat().st_size < 10_000_000  # huge arguments are clipped in audit records
    if which == "huge":
        assert all(r["evidence"]["args"]["api_key"] == "[REDACTED]" for r in records)


def test_arguments_that_cannot_be_read_are_described_and_the_call_judged(caplog: pytest.LogCaptureFixture) -> None:
    class Exploding(Mapping[str, Any]):
        """Arguments that cannot even be read."""

        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("kaboom")

        def __iter__(self) -> Iterator[str]:
            raise RuntimeError("kaboom")

        def __len__(self) -> int:
            return 1

    call = ToolCall("tool", Exploding())
    assert call.args == {"<unreadable>": "<Exploding: RuntimeError>"}
    for on_error in ("allow", "raise"):
        guard = Guard(on_error=on_error)  # type: ignore[arg-type]
        with caplog.at_level(logging.ERROR, logger="loopwatch"):
            verdicts = [guard.observe("s", ToolCall("tool", Exploding())).action for _ in range(4)]
        assert verdicts[:3] == ["ok", "ok", "nudge"]  # judged as calls: the same unreadable call again
        assert guard.stats["errors"] == 0 and "internal error" not in caplog.text
        assert normal_loop(guard, "other") == FRESH


def _with_breakable(**options: Any) -> tuple[Guard, RaisingRule]:
    rule = RaisingRule(message="kaboom", broken=False)
    base = Guard().policy
    return Guard(dataclasses.replace(base, name="breakable", detectors=(*base.detectors, rule)), **options), rule


def test_internal_errors_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    guard, rule = _with_breakable()
    assert normal_loop(guard, "before") == FRESH
    rule.broken = True
    with caplog.at_level(logging.ERROR, logger="loopwatch"):
        verdict = guard.observe("s", ToolCall("tool", {}))
    assert verdict.ok and "internal error" in (verdict.reason or "")
    assert guard.stats["errors"] == 1
    assert "internal error" in caplog.text
    rule.broken = False
    assert normal_loop(guard, "s") == FRESH
    raising, rule = _with_breakable(on_error="raise")
    rule.broken = True
    with pytest.raises(RuntimeError, match="kaboom"):
        raising.observe("s", ToolCall("tool", {}))


def test_sessions_with_odd_names() -> None:
    guard = Guard()
    for name in ("", "\ud800", "s" * 10_000, "default"):
        assert normal_loop(guard, name) == FRESH
    assert len(guard.sessions()) == 4
