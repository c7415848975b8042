"""The Claude Code hook: a scripted Claude Code drives real hook processes against real SQLite files.

The fake Claude Code below plays a session the way Claude Code does: for each tool call it runs the hook with
the exact ``PreToolUse`` JSON, obeys the answer (a denied call never runs; ``continue: false`` ends the
session), runs the tool's body, then sends ``PostToolUse`` (or ``PostToolUseFailure``) and gives the model any
``additionalContext``. The model is scripted and loops on purpose.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.adapters import claude_code as cc
from loopwatch.adapters.claude_code_daemon import stop_servers
from loopwatch.core._events import Message, ToolCall, ToolResult
from loopwatch.core._verdict import Verdict

MODULE = "loopwatch.adapters.claude_code"
REPEAT_STOP = (
    "loopwatch: LOOP_DETECTED (repeat): Bash called 8 times in a row with the same arguments and no new result"
    " (after 1 nudge at step 5 went unheeded); refused 3 times and called again each time"
)
CYCLE_STOP = (
    "loopwatch: LOOP_DETECTED (cycle): the same 2-call sequence repeated 7 times"
    " (after 1 nudge at step 11 went unheeded)"
)


# -- running the hook -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The hook processes' environment: a private HOME, cache and socket directory (the installed hook starts a
    hook server there, stopped at the end), and a bytecode cache outside the repository (each hook is a new
    interpreter: without it, every run would compile loopwatch again)."""
    root = tmp_path_factory.mktemp("hook-env")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LOOPWATCH_STORE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    env["HOME"] = str(root / "home")
    env["XDG_CACHE_HOME"] = str(root / "cache")
    (root / "run").mkdir(mode=0o700)
    env["XDG_RUNTIME_DIR"] = str(root / "run")
    yield env
    stop_servers(str(root / "run" / "loopwatch"))


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.out) if self.out.strip() else {}


def run_hook(
    payload: object, env: dict[str, str], *args: str, cwd: Path | None = None, raw: bytes | None = None
) -> Ran:
    data = raw if raw is not None else json.dumps(payload).encode()
    done = subprocess.run(
        [sys.executable, "-m", MODULE, *args], input=data, capture_output=True, env=env, cwd=cwd, timeout=60
    )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'hooks.db'}?ttl=604800"


class ToolFailed(Exception):
    """Raised by a tool body: Claude Code reports it with PostToolUseFailure."""


@dataclass
class FakeClaudeCode:
    """Claude Code as far as hooks go: one session, hooks run as processes, their answers obeyed."""

    store: str
    env: dict[str, str]
    session_id: str = "7c1de0a2-5b6e-4d8e-9f3a-2b1c0d9e8f7a"
    model_sees: list[str] = field(default_factory=list)  # tool results, added context, denial reasons
    user_sees: list[str] = field(default_factory=list)  # systemMessage and stopReason
    executed: list[str] = field(default_factory=list)  # tool_use_ids whose body ran
    denied: list[str] = field(default_factory=list)
    stopped: dict[str, Any] | None = None  # the output that ended the session
    judged: int = 0  # hook runs that gave the guard an event
    calls: int = 0

    def _hook(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.stopped is None, "the session has ended"
        full = {
            "session_id": self.session_id,
            "transcript_path": f"/home/user/.claude/projects/-home-user-app/{self.session_id}.jsonl",
            "cwd": "/home/user/app",
            "permission_mode": "default",
            **payload,
        }
        ran = run_hook(full, self.env, "--store", self.store)
        assert ran.code == 0, ran.err
        response = ran.json
        if response.get("continue") is False:
            self.stopped = response
            self.user_sees.append(response["stopReason"])
        if "systemMessage" in response:
            self.user_sees.append(response["systemMessage"])
        return response

    def prompt(self, text: str) -> None:
        response = self._hook({"hook_event_name": "UserPromptSubmit", "prompt": text})
        self.judged += 1
        context = response.get("hookSpecificOutput", {}).get("additionalContext")
        if context:
            self.model_sees.append(context)

    def tool(self, name: str, tool_input: dict[str, Any], body: Callable[[], Any]) -> bool:
        """One tool call; False once the session has ended."""
        self.calls += 1
        call_id = f"toolu_01{self.calls:06d}"
        common = {"tool_name": name, "tool_input": tool_input, "tool_use_id": call_id}
        pre = self._hook({"hook_event_name": "PreToolUse", **common})
        self.judged += 1
        specific = pre.get("hookSpecificOutput", {})
        assert specific.get("permissionDecision") in (None, "deny")  # loopwatch never allows on its own
        if specific.get("permissionDecision") == "deny":
            self.denied.append(call_id)
            self.model_sees.append(specific["permissionDecisionReason"])
            return self.stopped is None
        assert self.stopped is None  # a stop on PreToolUse always denies the call too
        if specific.get("additionalContext"):
            self.model_sees.append(specific["additionalContext"])
        self.executed.append(call_id)
        try:
            response = body()
        except ToolFailed as exc:
            post = self._hook(
                {"hook_event_name": "PostToolUseFailure", **common, "error": str(exc), "is_interrupt": False}
            )
            self.model_sees.append(str(exc))
        else:
            post = self._hook({"hook_event_name": "PostToolUse", **common, "tool_response": response, "duration_ms": 7})
            self.model_sees.append(json.dumps(response))
        self.judged += 1
        context = post.get("hookSpecificOutput", {}).get("additionalContext")
        if context:
            self.model_sees.append(context)
        return self.stopped is None

    def finish(self, text: str) -> None:
        self._hook(
            {
                "hook_event_name": "Stop",
                "stop_hook_active": False,
                "last_assistant_message": text,
                "background_tasks": [],
                "session_crons": [],
            }
        )
        self.judged += 1

    def guard_index(self, session: str | None = None) -> int:
        """How many events the guard has counted for the session (read from the store)."""
        index: int = Guard(store=self.store, clock=None).snapshot(session or self.session_id)["state"]["index"]
        return index


def bash(stdout: str, stderr: str = "") -> dict[str, Any]:
    return {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False}


# -- scenarios --------------------------------------------------------------------------------------------


def test_the_same_bash_call_again_and_again_is_nudged_then_denied_then_stopped(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    claude = FakeClaudeCode(sqlite_url(tmp_path), base_env)
    ran: list[int] = []

    def npm_test() -> dict[str, Any]:
        ran.append(1)
        return bash("FAIL src/app.test.js\n  expected 200, received 500\nTests: 1 failed, 12 passed")

    claude.prompt("Make the test suite pass")
    for _ in range(20):
        if not claude.tool("Bash", {"command": "npm test", "description": "Run the tests"}, npm_test):
            break
    nudge = next(text for text in claude.model_sees if "3 times in a row" in text)
    # the description does not change what a Bash call does: it is not part of the call the model is shown
    assert nudge.startswith('You have called Bash({"command":"npm test"}) 3 times')
    assert claude.model_sees.index(nudge) < len(claude.model_sees) - 1  # the model saw it before going on
    assert any(text.startswith("Refused: Bash(") for text in claude.model_sees)
    assert claude.calls == 8 and len(claude.executed) == 4 and len(claude.denied) == 4
    assert len(ran) == len(claude.executed)  # denied calls never ran their body
    assert claude.stopped == {
        "continue": False,
        "stopReason": REPEAT_STOP,
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "Stopping this run: Bash called 8 times in a row with the same arguments "
            "and no new result (after 1 nudge at step 5 went unheeded); refused 3 times and called again each "
            "time. The loop was not going to end by itself.",
        },
    }
    assert claude.user_sees == [REPEAT_STOP]
    assert claude.guard_index() == claude.judged == 1 + 4 * 2 + 4  # every event reached the guard

    # the person types again: the stopped session starts afresh
    claude.stopped = None
    claude.prompt("Stop running the tests, read the handler instead")
    assert claude.tool("Bash", {"command": "npm test", "description": "Run the tests"}, npm_test)
    assert claude.executed[-1] == "toolu_01000009" and claude.stopped is None
    assert claude.guard_index() == claude.judged


def test_an_a_b_cycle_is_caught(tmp_path: Path, base_env: dict[str, str]) -> None:
    claude = FakeClaudeCode(sqlite_url(tmp_path), base_env)
    bodies: list[str] = []

    def read() -> dict[str, Any]:
        bodies.append("Read")
        content = "1\timport os\n2\t\n3\tdef handler(request):\n4\t    return None\n"
        return {"type": "text", "file": {"filePath": "/home/user/app/handler.py", "content": content, "numLines": 4}}

    def grep() -> dict[str, Any]:
        bodies.append("Grep")
        return {"mode": "files_with_matches", "filenames": [], "numFiles": 0, "durationMs": len(bodies)}

    claude.prompt("Find where the 500 comes from")
    for _ in range(20):
        if not claude.tool("Read", {"file_path": "/home/user/app/handler.py"}, read):
            break
        if not claude.tool("Grep", {"pattern": "status_code=500", "path": "/home/user/app"}, grep):
            break
    assert any(text.startswith("You are going round in a cycle") for text in claude.model_sees)
    assert claude.denied and len(bodies) == len(claude.executed)
    # the cycle (the same calls, the same results) is the hard evidence that stops the run; the look-ups that
    # find nothing are nudged, never stopped
    assert claude.stopped is not None
    assert claude.stopped["stopReason"] == CYCLE_STOP
    assert claude.stopped["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert claude.guard_index() == claude.judged


def test_polling_with_changing_output_is_never_denied_or_stopped(tmp_path: Path, base_env: dict[str, str]) -> None:
    claude = FakeClaudeCode(sqlite_url(tmp_path), base_env)
    claude.prompt("Wait for CI and tell me when the build is done")
    for step in range(1, 13):
        assert claude.tool(
            "Bash",
            {"command": "gh run view 9141 --json status,conclusion", "description": "Check the CI run"},
            partial(bash, f'{{"status":"in_progress","steps_done":{step},"steps":40}}'),
        )
        assert claude.tool(
            "Bash",
            {"command": "sleep 30 && tail -n 2 build.log", "description": "Wait, then read the log"},
            partial(bash, f"[{step * 30}s] compiling module {step}/40\n[{step * 30}s] ok"),
        )
    claude.finish("CI is still running: 12 of 40 steps done after 6 minutes.")
    assert claude.denied == [] and claude.stopped is None and claude.user_sees == []
    assert len(claude.executed) == 24
    assert claude.guard_index() == claude.judged == 1 + 24 * 2 + 1


def test_a_failing_command_retried_gets_the_error_retry_nudge(tmp_path: Path, base_env: dict[str, str]) -> None:
    claude = FakeClaudeCode(sqlite_url(tmp_path), base_env)

    def build() -> None:
        raise ToolFailed(
            'Exit code 1\nTraceback (most recent call last):\n  File "build.py", line 3, in <module>\n'
            "    import yaml\nModuleNotFoundError: No module named 'yaml'"
        )

    for _ in range(3):
        assert claude.tool("Bash", {"command": "python build.py"}, build)
    retry = [
        text for text in claude.model_sees if text.startswith("Bash has failed 2 times in a row with the same error")
    ]
    assert len(retry) == 1 and "No module named 'yaml'" in retry[0]
    assert claude.guard_index() == claude.judged == 6


def test_subagents_have_sessions_of_their_own(tmp_path: Path, base_env: dict[str, str]) -> None:
    url = sqlite_url(tmp_path)
    call = {"hook_event_name": "PreToolUse", "tool_name": "Grep", "tool_input": {"pattern": "TODO"}}
    for n in range(3):
        ran = run_hook(
            {**call, "session_id": "main-1", "agent_id": "a7", "agent_type": "Explore"}, base_env, "--store", url
        )
        assert ran.code == 0 and (n < 2) == (ran.out == "")
    assert "additionalContext" in ran.out  # the third identical call of the subagent
    guard = Guard(store=url, clock=None)
    assert guard.snapshot("main-1/agent-a7")["state"]["index"] == 3
    assert guard.snapshot("main-1")["state"]["index"] == 0
    assert sorted(guard.sessions()) == ["main-1/agent-a7"]


# -- concurrency ------------------------------------------------------------------------------------------


def _spawn(payload: dict[str, Any], env: dict[str, str], url: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", MODULE, "--store", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(payload).encode())
    process.stdin.close()
    return process


def _outputs(processes: list[subprocess.Popen[bytes]]) -> Iterator[dict[str, Any]]:
    for process in processes:
        assert process.stdout is not None and process.stderr is not None
        out, err = process.stdout.read(), process.stderr.read()
        assert process.wait(timeout=60) == 0, err
        assert b"store" not in err, err  # no store error, no contention left unresolved
        yield json.loads(out) if out.strip() else {}


def test_parallel_hook_processes_of_one_session_lose_no_update(tmp_path: Path, base_env: dict[str, str]) -> None:
    url = sqlite_url(tmp_path) + "&timeout=30"
    FakeClaudeCode(url, base_env, session_id="par").prompt("Look at every module")  # the file exists, warm
    calls = [
        {
            "session_id": "par",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": f"/home/user/app/mod{n}.py"},
            "tool_use_id": f"toolu_par_{n}",
        }
        for n in range(8)
    ]
    assert list(_outputs([_spawn(call, base_env, url) for call in calls])) == [{}] * 8
    results = [
        {**call, "hook_event_name": "PostToolUse", "tool_response": f"module {n}"} for n, call in enumerate(calls)
    ]
    assert list(_outputs([_spawn(result, base_env, url) for result in results])) == [{}] * 8
    assert Guard(store=url, clock=None).snapshot("par")["state"]["index"] == 1 + 16


def test_the_same_call_in_parallel_gets_each_verdict_of_the_ladder_once(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    url = sqlite_url(tmp_path) + "&timeout=30"
    FakeClaudeCode(url, base_env, session_id="same").prompt("Run it")
    call = {
        "session_id": "same",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
    }
    outputs = list(_outputs([_spawn({**call, "tool_use_id": f"t{n}"}, base_env, url) for n in range(8)]))
    kinds = sorted(
        "stop"
        if o.get("continue") is False
        else o.get("hookSpecificOutput", {}).get("permissionDecision", "nudge")
        if o
        else "ok"
        for o in outputs
    )
    # counted once each, in some order: calls 1, 2 and 4 ok, 3 nudged, 5 to 7 denied, 8 stopped
    assert kinds == ["deny", "deny", "deny", "nudge", "ok", "ok", "ok", "stop"]
    assert Guard(store=url, clock=None).snapshot("same")["state"]["index"] == 9


# -- failing open -----------------------------------------------------------------------------------------

PRE = {
    "session_id": "s1",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "ls"},
    "tool_use_id": "toolu_1",
}


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[1, 2]", b'{"hook_event_name": "PreToolUse", "tool_name": "Bash"}', b"\xff\xfe{"],
    ids=["empty", "not-json", "array", "no-session", "bad-bytes"],
)
def test_malformed_input_goes_ahead_with_a_note(tmp_path: Path, base_env: dict[str, str], raw: bytes) -> None:
    ran = run_hook(None, base_env, "--store", sqlite_url(tmp_path), raw=raw)
    assert (ran.code, ran.out) == (0, "")
    assert ran.err.startswith("loopwatch hook: ") and "nothing judged" in ran.err


def test_a_store_that_cannot_be_opened_fails_open(tmp_path: Path, base_env: dict[str, str]) -> None:
    missing = f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'x.db'}"
    ran = run_hook(PRE, base_env, "--store", missing)
    assert (ran.code, ran.out) == (0, "") and "does not exist" in ran.err
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    ran = run_hook(PRE, base_env, "--store", f"sqlite:///{garbage}")
    assert (ran.code, ran.out) == (0, "") and "store" in ran.err
    ran = run_hook(PRE, base_env, "--store", "nosuch://x")
    assert (ran.code, ran.out) == (0, "") and "unknown store URL scheme" in ran.err
    ran = run_hook(PRE, base_env, "--preset", "no-such-preset")
    assert (ran.code, ran.out) == (0, "") and "unknown preset" in ran.err
    ran = run_hook(PRE, base_env, "--bogus-option")
    assert (ran.code, ran.out) == (0, "") and "nothing judged" in ran.err


def test_fail_closed_denies_tool_calls_only(tmp_path: Path, base_env: dict[str, str]) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    for store in (f"sqlite:///{tmp_path / 'missing' / 'x.db'}", f"sqlite:///{garbage}"):
        ran = run_hook(PRE, base_env, "--store", store, "--fail-closed")
        assert ran.code == 0
        specific = ran.json["hookSpecificOutput"]
        assert specific["permissionDecision"] == "deny" and "loop guard" in specific["permissionDecisionReason"]
        post = {**PRE, "hook_event_name": "PostToolUse", "tool_response": bash("x")}
        ran = run_hook(post, base_env, "--store", store, "--fail-closed")
        assert (ran.code, ran.out) == (0, "")


def test_the_default_store_lives_in_the_cache_and_loopwatch_store_overrides_it(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    env = {**base_env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert run_hook(PRE, env).code == 0
    default = tmp_path / "cache" / "loopwatch" / "claude-code.db"
    assert default.is_file()
    assert Guard(store=f"sqlite:///{default}", clock=None).snapshot("s1")["state"]["index"] == 1
    other = tmp_path / "other.db"
    assert run_hook(PRE, {**env, "LOOPWATCH_STORE": f"sqlite:///{other}"}).code == 0
    assert Guard(store=f"sqlite:///{other}", clock=None).snapshot("s1")["state"]["index"] == 1
    assert Guard(store=f"sqlite:///{default}", clock=None).snapshot("s1")["state"]["index"] == 1


# -- install / uninstall ----------------------------------------------------------------------------------

EXISTING: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(.env)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/check-bash.sh"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send 'Claude needs you'"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "say done", "timeout": 5}]}],
    },
    "env": {"FOO": "1"},
    "unknownFutureKey": {"nested": [1, 2, {"x": None}]},
}


def _settings(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", MODULE, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def _ours(settings: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [h["command"] for g in groups for h in g["hooks"] if cc.is_loopwatch_hook(h)]
        for event, groups in settings.get("hooks", {}).items()
    }


def test_install_keeps_everything_else_is_idempotent_and_uninstall_removes_exactly_ours(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    path.write_text(json.dumps(EXISTING, indent=2) + "\n")

    url = sqlite_url(tmp_path)
    done = _settings(["claude-code", "--install", "--store", url], base_env, project)
    assert done.returncode == 0, done.stderr
    assert f"installed in {path}" in done.stdout
    installed = json.loads(path.read_text())
    assert path.read_text() == json.dumps(installed, indent=2, ensure_ascii=False) + "\n"
    assert {k: v for k, v in installed.items() if k != "hooks"} == {k: v for k, v in EXISTING.items() if k != "hooks"}
    assert installed["hooks"]["Notification"] == EXISTING["hooks"]["Notification"]
    assert installed["hooks"]["PreToolUse"][0] == EXISTING["hooks"]["PreToolUse"][0]
    assert installed["hooks"]["Stop"][0] == EXISTING["hooks"]["Stop"][0]
    command = installed["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
    assert "--store" in shlex.split(command) and url in shlex.split(command)
    expected = {event: [command] for event in cc.HOOK_EVENTS}
    assert _ours(installed) == {"Notification": [], **expected}
    assert installed["hooks"]["PreToolUse"][1] == {
        "matcher": "*",
        "hooks": [{"type": "command", "command": command, "timeout": 10}],
    }
    assert installed["hooks"]["Stop"][1] == {"hooks": [{"type": "command", "command": command, "timeout": 10}]}

    before = path.read_bytes()
    again = _settings(["claude-code", "--install", "--project", "--store", url], base_env, project)
    assert again.returncode == 0 and "already installed" in again.stdout
    assert path.read_bytes() == before  # no duplicates, not even rewritten

    gone = _settings(["claude-code", "--uninstall"], base_env, project)
    assert gone.returncode == 0 and "removed 5 loopwatch hook(s)" in gone.stdout
    assert json.loads(path.read_text()) == EXISTING
    nothing = _settings(["claude-code", "--uninstall"], base_env, project)
    assert nothing.returncode == 0 and "no loopwatch hooks" in nothing.stdout
    assert json.loads(path.read_text()) == EXISTING


def test_install_user_honours_home_and_the_installed_command_runs(tmp_path: Path, base_env: dict[str, str]) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    env = {**base_env, "HOME": str(home)}
    url = sqlite_url(tmp_path)
    done = _settings(["claude-code", "--install", "--user", "--store", url, "--preset", "doom-loop"], env, project)
    assert done.returncode == 0, done.stderr
    path = home / ".claude" / "settings.json"
    assert not (project / ".claude").exists()
    settings = json.loads(path.read_text())
    assert list(settings) == ["hooks"] and list(settings["hooks"]) == list(cc.HOOK_EVENTS)
    command = settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    assert command == cc.hook_command(store=url, preset="doom-loop")
    for n in range(3):  # what Claude Code does: the command through a shell, the event on stdin
        shell = subprocess.run(
            ["/bin/sh", "-c", command],
            input=json.dumps({**PRE, "tool_use_id": f"t{n}"}),
            capture_output=True,
            text=True,
            env=env,
        )
        assert shell.returncode == 0, shell.stderr
    assert "additionalContext" in shell.stdout  # doom-loop nudges the third identical call
    assert Guard("doom-loop", store=url, clock=None).snapshot("s1")["state"]["index"] == 3
    assert _settings(["claude-code", "--uninstall", "--user"], env, project).returncode == 0
    assert json.loads(path.read_text()) == {}


def test_install_local_and_a_malformed_settings_file_is_left_untouched(
    tmp_path: Path, base_env: dict[str, str]
) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    done = _settings(["claude-code", "--install", "--local"], base_env, project)
    assert done.returncode == 0 and (project / ".claude" / "settings.local.json").is_file()
    assert not (project / ".claude" / "settings.json").exists()

    path = project / ".claude" / "settings.json"
    broken = b'{"hooks": {"PreToolUse": [ }\n'
    path.write_bytes(broken)
    done = _settings(["claude-code", "--install"], base_env, project)
    assert done.returncode == 2 and "not valid JSON" in done.stderr and "untouched" in done.stderr
    assert path.read_bytes() == broken
    done = _settings(["claude-code", "--uninstall"], base_env, project)
    assert done.returncode == 2 and path.read_bytes() == broken
    path.write_text('{"hooks": []}')
    done = _settings(["claude-code", "--install"], base_env, project)
    assert done.returncode == 2 and "'hooks' is a list" in done.stderr
    assert path.read_text() == '{"hooks": []}'
    done = _settings(["claude-code", "--install", "--preset", "nope"], base_env, project)
    assert done.returncode == 2 and "unknown preset" in done.stderr


def test_install_follows_a_symlinked_settings_file(tmp_path: Path, base_env: dict[str, str]) -> None:
    project, dotfiles = tmp_path / "project", tmp_path / "dotfiles"
    (project / ".claude").mkdir(parents=True)
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text('{"model": "sonnet"}')
    (project / ".claude" / "settings.json").symlink_to(dotfiles / "settings.json")
    assert _settings(["claude-code", "--install"], base_env, project).returncode == 0
    assert (project / ".claude" / "settings.json").is_symlink()
    assert json.loads((dotfiles / "settings.json").read_text())["model"] == "sonnet"
    assert "hooks" in json.loads((dotfiles / "settings.json").read_text())


def test_help_exits_zero(base_env: dict[str, str], tmp_path: Path) -> None:
    done = _settings(["--help"], base_env, tmp_path)
    assert done.returncode == 0 and "--install" in done.stdout


# -- in-process units -------------------------------------------------------------------------------------


def test_install_and_uninstall_of_odd_shapes() -> None:
    ours = {"type": "command", "command": "/v/bin/loopwatch hook claude-code", "timeout": 10}
    mixed = {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "lint"}, ours]}],
            "PostToolUse": [{"matcher": "*", "hooks": [ours]}],
            "Stop": [{"hooks": []}],
            "Weird": "not a list",
        }
    }
    cleaned, removed = cc.uninstall_hooks(mixed)
    assert removed == 2
    assert cleaned == {
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "lint"}]}],
            "Stop": [{"hooks": []}],
            "Weird": "not a list",
        }
    }
    assert cc.uninstall_hooks({"model": "x"}) == ({"model": "x"}, 0)
    twice = cc.install_hooks(
        cc.install_hooks({}, "A -m loopwatch.adapters.claude_code"), "B -m loopwatch.adapters.claude_code"
    )
    assert _ours(twice) == {event: ["B -m loopwatch.adapters.claude_code"] for event in cc.HOOK_EVENTS}
    with pytest.raises(cc.SettingsError):
        cc.install_hooks({"hooks": {"Stop": {}}}, "x")


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/home/u/.venv/bin/loopwatch hook claude-code", True),
        ("'/home/u/my venv/bin/loopwatch' hook claude-code --store 'sqlite:////tmp/x.db'", True),
        ("loopwatch hook claude-code", True),
        ("C:\\tools\\loopwatch.exe hook claude-code", True),
        ("/usr/bin/python3 -m loopwatch.adapters.claude_code --preset doom-loop", True),
        ("loopwatch scan ~/.claude/projects", False),
        ("my-loopwatch-wrapper hook claude-code-ish", False),
        ("echo loopwatch", False),
    ],
)
def test_what_counts_as_our_hook(command: str, ours: bool) -> None:
    assert cc.is_loopwatch_hook({"type": "command", "command": command}) is ours
    assert not cc.is_loopwatch_hook({"type": "http", "url": "http://x", "command": command})


def test_tool_responses_as_text() -> None:
    assert cc.response_text(None) == ("", False)
    assert cc.response_text("plain") == ("plain", False)
    assert cc.response_text(bash("out", "err")) == ("out\nerr", False)
    assert cc.response_text(bash("", "only err")) == ("only err", False)
    assert cc.response_text({**bash("partial"), "interrupted": True}) == ("partial", True)
    assert cc.response_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == ("a\nb", False)
    assert cc.response_text({"content": [{"type": "text", "text": "boom"}], "isError": True}) == ("boom", True)
    read = {"type": "text", "file": {"filePath": "/a.py", "content": "1\tx = 1\n", "numLines": 1}}
    assert cc.response_text(read) == ("1\tx = 1\n", False)
    one = cc.response_text({"filenames": ["a"], "numFiles": 1, "durationMs": 3})
    assert one == cc.response_text({"numFiles": 1, "durationMs": 99, "filenames": ["a"]})  # volatile keys dropped
    assert one == ('{"filenames":["a"],"numFiles":1}', False)
    assert cc.response_text([{"type": "image", "source": {}}])[0] == '[{"source":{},"type":"image"}]'


def test_hook_inputs_as_events() -> None:
    assert cc.event_of(PRE) == ToolCall("Bash", {"command": "ls"}, id="toolu_1")
    failure = {**PRE, "hook_event_name": "PostToolUseFailure", "error": "Exit code 127\nsh: nope: not found"}
    assert cc.event_of(failure) == ToolResult(
        "Exit code 127\nsh: nope: not found", tool="Bash", is_error=True, exit_code=127, id="toolu_1"
    )
    no_code = cc.event_of({**failure, "error": "Tool timed out"})
    assert isinstance(no_code, ToolResult) and no_code.exit_code is None and no_code.is_error
    post = cc.event_of({**PRE, "hook_event_name": "PostToolUse", "tool_response": bash("ok")})
    assert post == ToolResult("ok", tool="Bash", is_error=False, id="toolu_1")
    assert cc.event_of({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}) == Message("user", "hi")
    assert cc.event_of({"hook_event_name": "Stop", "last_assistant_message": "Done."}) == Message("assistant", "Done.")
    assert cc.event_of({"hook_event_name": "Stop", "last_assistant_message": "  "}) is None
    assert cc.event_of({"hook_event_name": "SessionStart"}) is None
    with pytest.raises(cc.HookInputError):
        cc.event_of({"hook_event_name": "PreToolUse", "tool_input": {}})
    assert cc.session_of({"session_id": "s", "agent_id": "a1"}) == "s/agent-a1"
    assert cc.session_of({"session_id": "s", "agent_id": ""}) == "s"
    with pytest.raises(cc.HookInputError):
        cc.session_of({"session_id": 3})


def test_verdicts_as_hook_output() -> None:
    nudge = Verdict("nudge", pattern="repeat", message="You called it 3 times.", reason="r")
    block = Verdict("block", pattern="repeat", message="Refused.", reason="r")
    stop = Verdict("stop", pattern="cycle", status="LOOP_DETECTED", message="Stopping.", reason="a cycle of 2")
    assert cc.response_for("PreToolUse", Verdict()) is None
    assert cc.response_for("PostToolUse", nudge) == {
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "You called it 3 times."}
    }
    assert cc.response_for("PostToolUseFailure", block) == {
        "hookSpecificOutput": {"hookEventName": "PostToolUseFailure", "additionalContext": "Refused."}
    }
    assert cc.response_for("Stop", nudge) == {"systemMessage": "loopwatch: You called it 3 times."}
    assert cc.response_for("PreToolUse", block) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "Refused.",
        }
    }
    assert cc.response_for("Stop", stop) == {
        "continue": False,
        "stopReason": "loopwatch: LOOP_DETECTED (cycle): a cycle of 2",
    }
    assert cc.response_for("PreToolUse", stop)["hookSpecificOutput"]["permissionDecisionReason"] == "Stopping."  # type: ignore[index]
    long = cc.response_for("UserPromptSubmit", Verdict("nudge", message="x" * 20_000))
    assert long is not None and len(long["hookSpecificOutput"]["additionalContext"]) == cc.MAX_TEXT


def test_a_stop_hook_loop_is_stopped_and_nudges_go_to_the_user(tmp_path: Path) -> None:
    """Another Stop hook keeps Claude going and Claude says the same thing each time: in-process, real SQLite."""
    guard = Guard(store=sqlite_url(tmp_path), clock=None)
    said = "I have finished the task. All tests pass and the code is ready for review. Let me know if you need more."
    outputs = [
        cc.handle(
            guard,
            {"session_id": "s", "hook_event_name": "Stop", "stop_hook_active": n > 0, "last_assistant_message": said},
        )
        for n in range(10)
    ]
    nudges = [o for o in outputs if o and "systemMessage" in o]
    stops = [o for o in outputs if o and o.get("continue") is False]
    assert nudges and all(set(o) == {"systemMessage"} for o in nudges)  # never additionalContext on Stop
    assert stops and stops[0]["stopReason"].startswith("loopwatch: LOOP_DETECTED")
    assert not any("decision" in o or "hookSpecificOutput" in o for o in outputs if o)


def test_main_in_process_and_the_fast_option_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = sqlite_url(tmp_path)
    for n in range(3):
        out = io.StringIO()
        assert (
            cc.main(
                ["claude-code", f"--store={url}"],
                stdin=io.StringIO(json.dumps({**PRE, "tool_use_id": str(n)})),
                stdout=out,
            )
            == 0
        )
    assert json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"].startswith("You have called Bash(")
    assert cc._hook_options(["claude-code", "--store", "u", "--preset=p", "--fail-closed"]) == {
        "store": "u",
        "preset": "p",
        "config": None,
        "fail_closed": True,
        "no_config": False,
    }
    assert cc._hook_options(["--no-config"])["no_config"] is True  # type: ignore[index]
    assert cc._hook_options(["--install"]) is None and cc._hook_options(["--store"]) is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.default_store_path() == str(tmp_path / "xdg" / "loopwatch" / "claude-code.db")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    expected = ("Library", "Caches") if sys.platform == "darwin" else (".cache",)
    assert cc.default_store_path() == str(Path(tmp_path / "h", *expected, "loopwatch", "claude-code.db"))


def test_a_config_file_sets_the_policy(tmp_path: Path, base_env: dict[str, str]) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text('preset = "default"\n[ladders.repeat]\nnudge = 2\nblock = 3\nstop = 4\n')
    url = sqlite_url(tmp_path)
    answers = [
        run_hook({**PRE, "tool_use_id": f"t{n}"}, base_env, "--store", url, "--config", str(config)).json
        for n in range(4)
    ]
    assert answers[0] == {} and "additionalContext" in answers[1]["hookSpecificOutput"]
    assert answers[2]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert answers[3]["continue"] is False
