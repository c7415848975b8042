"""The Claude Code hook as a local HTTP service (``--serve``, for ``http`` hook handlers): the same answers as the
command hook, over real HTTP; installed and uninstalled as ``http`` handlers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.adapters.claude_code import handle, install_hooks, is_loopwatch_hook, uninstall_hooks
from loopwatch.adapters.claude_code_server import PATH, HookServer

SESSION = "7c1de0a2-5b6e-4d8e-9f3a-2b1c0d9e8f7a"


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _events(rounds: int) -> Iterator[dict[str, Any]]:
    """Claude Code's hook inputs for the same failing ``pip install`` again and again."""
    common = {"session_id": SESSION, "cwd": "/home/user/app", "permission_mode": "default"}
    yield {**common, "hook_event_name": "UserPromptSubmit", "prompt": "install the dependencies"}
    for n in range(rounds):
        call = {"tool_name": "Bash", "tool_input": {"command": "pip install -r requirements.txt"}}
        yield {**common, "hook_event_name": "PreToolUse", **call, "tool_use_id": f"toolu_{n}"}
        error = "Exit code 1\nERROR: Could not find a version that satisfies the requirement torch==9.9"
        yield {**common, "hook_event_name": "PostToolUseFailure", **call, "tool_use_id": f"toolu_{n}", "error": error}


def test_the_service_answers_exactly_as_the_command_hook(server: HookServer, tmp_path: Path) -> None:
    direct = Guard("default-lexical", store=f"sqlite:///{tmp_path}/direct.db", clock=None)
    served, expected = [], []
    for payload in _events(10):
        status, answer = _post(server.url, json.dumps(payload).encode())
        assert status == 200
        served.append(answer)
        expected.append(handle(direct, payload) or {})
    assert served == expected
    decisions = [a.get("hookSpecificOutput", {}).get("permissionDecision") for a in served]
    assert "deny" in decisions  # refused calls...
    assert any(a.get("continue") is False for a in served)  # ...then the stop
    assert any("additionalContext" in a.get("hookSpecificOutput", {}) for a in served)  # after a nudge
    assert server.handled == len(served)


def test_bad_requests_get_an_answer_that_lets_claude_code_go_on(server: HookServer) -> None:
    assert _post(server.url, b"{not json") == (200, {})
    assert _post(server.url, b"[1, 2]") == (200, {})
    assert _post(server.url, json.dumps({"hook_event_name": "Notification"}).encode()) == (200, {})
    other = server.url.replace(PATH, "/elsewhere")
    assert _post(other, b"{}") == (404, {})


def test_the_service_from_the_command_line(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "loopwatch.adapters.claude_code", "--serve", "--port", "0"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        url = line.split(" on ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith(PATH)
        payload = next(_events(1))
        assert _post(url, json.dumps(payload).encode()) == (200, {})
        assert (tmp_path / "cache" / "loopwatch" / "claude-code.db").exists()  # the command hook's store
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_install_writes_http_handlers_and_uninstall_removes_exactly_them() -> None:
    url = "http://127.0.0.1:7349" + PATH
    theirs = {"type": "http", "url": "http://127.0.0.1:9000/audit"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [theirs]}]}, "model": "opus"}
    installed = install_hooks(settings, url=url)
    handlers = [h for groups in installed["hooks"].values() for g in groups for h in g["hooks"]]
    ours = [h for h in handlers if is_loopwatch_hook(h)]
    assert len(ours) == 5 and all(h == {"type": "http", "url": url, "timeout": 10} for h in ours)
    assert theirs in handlers and installed["model"] == "opus"
    removed, count = uninstall_hooks(installed)
    assert count == 5 and removed == settings
    with pytest.raises(ValueError):
        install_hooks(settings)


def test_install_refuses_a_url_that_is_not_the_service(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "loopwatch.adapters.claude_code", "--install", "--http", "http://localhost/x"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and PATH in done.stderr
    assert not (tmp_path / ".claude" / "settings.json").exists()
