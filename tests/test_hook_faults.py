"""The Claude Code hook under faults: input nested deeper than a parser goes, a state file another process keeps
locked, a damaged state row. The hook always answers (exit 0) before the time-out ``--install`` writes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch._guard import Guard
from loopwatch.adapters import claude_code as cc
from loopwatch.adapters.claude_code_server import make_server
from loopwatch.stores.sqlite import SqliteStore
from stored_state import stored_index

MODULE = "loopwatch.adapters.claude_code"
SESSION = "9d2c1b0a-1111-4222-8333-444455556666"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LOOPWATCH_STORE", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def _hook(raw: bytes, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    # Claude Code cancels a hook after HOOK_TIMEOUT seconds: a run that takes longer fails this test
    return subprocess.run(
        [sys.executable, "-m", MODULE, *args], input=raw, capture_output=True, env=env, timeout=cc.HOOK_TIMEOUT
    )


def _pre_tool_use(command: str = "ls") -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_1",
    }


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_input_is_a_clean_answer_not_a_traceback(tmp_path: Path, depth: int) -> None:
    for raw in (
        b"[" * depth + b"]" * depth,
        json.dumps({**_pre_tool_use(), "tool_input": {"command": "ls"}}).encode()[:-1]
        + b', "extra": '
        + b'{"a":' * depth
        + b"1"
        + b"}" * depth
        + b"}",
    ):
        done = _hook(raw, _env(tmp_path))
        assert done.returncode == 0 and done.stdout == b""
        assert b"Traceback" not in done.stderr and b"nested too deeply" in done.stderr


def test_deeply_nested_tool_input_is_judged(tmp_path: Path) -> None:
    """Nested within what the parser reads, deeper than what a fingerprint walks: judged, bounded."""
    nested: Any = "leaf"
    for _ in range(500):
        nested = {"n": nested}
    payload = {**_pre_tool_use(), "tool_input": {"command": "ls", "nested": nested}}
    done = _hook(json.dumps(payload).encode(), _env(tmp_path))
    assert done.returncode == 0 and b"Traceback" not in done.stderr and b"could not judge" not in done.stderr


def _locked(path: Path) -> sqlite3.Connection:
    """Another process writing to the state file for longer than anyone waits (an exclusive lock that also
    keeps readers out)."""
    store = SqliteStore(path)
    assert store.health()  # the file with its tables
    store.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE loopwatch_meta SET value = value WHERE key = 'schema'")
    return holder


@pytest.mark.parametrize("event", ["UserPromptSubmit", "PreToolUse"])
def test_a_locked_state_file_fails_open_within_the_hooks_lock_wait(tmp_path: Path, event: str) -> None:
    """A prompt hook waited for the lock on each of its four store operations (5 s each by default): over
    Claude Code's 10 s time-out. Now every wait of one run together is at most LOCK_WAIT."""
    path = tmp_path / "hooks.db"
    holder = _locked(path)
    payload = (
        _pre_tool_use() if event == "PreToolUse" else {"session_id": SESSION, "hook_event_name": event, "prompt": "go"}
    )
    try:
        done = _hook(json.dumps(payload).encode(), _env(tmp_path), "--store", f"sqlite:///{path}?timeout=5")
    finally:
        holder.close()
    assert done.returncode == 0 and done.stdout == b"" and b"Traceback" not in done.stderr
    assert b"locked" in done.stderr  # said on stderr (Claude Code's debug log): the event went ahead unjudged


def test_a_locked_state_file_fails_closed_for_calls_with_fail_closed(tmp_path: Path) -> None:
    path = tmp_path / "hooks.db"
    holder = _locked(path)
    try:
        done = _hook(
            json.dumps(_pre_tool_use()).encode(), _env(tmp_path), "--store", f"sqlite:///{path}", "--fail-closed"
        )
    finally:
        holder.close()
    assert done.returncode == 0
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny" and "locked" in answer["permissionDecisionReason"]


def test_the_hook_service_bounds_each_requests_wait_for_a_locked_file(tmp_path: Path) -> None:
    path = tmp_path / "hooks.db"
    guard = Guard(store=SqliteStore(path, timeout=30), clock=None)
    server = make_server(guard, port=0)
    holder = _locked(path)
    try:
        answered = server.answer(json.dumps(_pre_tool_use()).encode())  # 30 s without the per-request deadline
    finally:
        holder.close()
        server.server_close()
    assert answered == {} and guard.stats["store_errors"] == 1


def test_a_damaged_state_row_does_not_stop_the_prompt_hook(tmp_path: Path) -> None:
    path = tmp_path / "hooks.db"
    url = f"sqlite:///{path}"
    env = _env(tmp_path)
    for _ in range(2):
        assert _hook(json.dumps(_pre_tool_use()).encode(), env, "--store", url).returncode == 0
    with sqlite3.connect(path) as db:
        db.execute("UPDATE loopwatch_sessions SET state = '{broken'")
    prompt = {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "try again"}
    done = _hook(json.dumps(prompt).encode(), env, "--store", url)
    assert done.returncode == 0 and b"Traceback" not in done.stderr and b"could not judge" not in done.stderr
    assert b"damaged" in done.stderr  # logged, and the session started afresh (fail open)
    stored = SqliteStore(path).load(SESSION)
    assert stored is not None and stored_index(stored.state) == 1
