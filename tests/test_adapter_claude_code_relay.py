"""The relay command hook (``python -m loopwatch.adapters.claude_code_relay URL``): each event handed to a running
``--serve`` service, the service's answer written as the command hook's; judged in its own process when the
service is down; installed and uninstalled like the other command hooks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwatch import Guard
from loopwatch.adapters.claude_code import handle, is_loopwatch_hook
from loopwatch.adapters.claude_code_relay import _address
from loopwatch.adapters.claude_code_server import PATH, HookServer

SESSION = "0f4e6c1a-9d2b-4c7e-8a1f-3b5d7e9f1a2c"


def _events(rounds: int) -> Iterator[dict[str, Any]]:
    common = {"session_id": SESSION, "cwd": "/home/user/app", "permission_mode": "default"}
    yield {**common, "hook_event_name": "UserPromptSubmit", "prompt": "run the migrations"}
    for n in range(rounds):
        call = {"tool_name": "Bash", "tool_input": {"command": "python manage.py migrate"}}
        yield {**common, "hook_event_name": "PreToolUse", **call, "tool_use_id": f"toolu_{n}"}
        error = "Exit code 1\ndjango.db.utils.OperationalError: could not connect to server: Connection refused"
        yield {**common, "hook_event_name": "PostToolUseFailure", **call, "tool_use_id": f"toolu_{n}", "error": error}


def _relay(url: str, payload: dict[str, Any], *options: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.adapters.claude_code_relay", url, *options],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    return done.stdout


def test_the_relay_answers_exactly_as_the_command_hook(server: HookServer, tmp_path: Path) -> None:
    direct = Guard("default-lexical", store=f"sqlite:///{tmp_path}/direct.db", clock=None)
    relayed, expected = [], []
    for payload in _events(8):
        out = _relay(server.url, payload)
        relayed.append(json.loads(out) if out.strip() else {})
        expected.append(handle(direct, payload) or {})
    assert relayed == expected
    assert any(a.get("continue") is False for a in relayed)  # the loop was stopped, by the service
    assert server.handled == len(relayed)  # every event went through the service


def test_with_the_service_down_the_relay_judges_the_event_itself(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}{PATH}"
    store = f"sqlite:///{tmp_path}/fallback.db"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    answers = [_relay(url, payload, "--store", store, env=env) for payload in _events(8)]
    assert any('"continue": false' in a for a in answers)  # judged in the relay's own process, on its store
    assert (tmp_path / "fallback.db").exists()


def test_an_event_the_service_took_but_did_not_answer_is_not_judged_twice(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}{PATH}"

    def answer_badly() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
        connection.close()

    thread = threading.Thread(target=answer_badly, daemon=True)
    thread.start()
    store = f"sqlite:///{tmp_path}/never.db"
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.adapters.claude_code_relay", url, "--store", store],
        input=json.dumps(next(_events(0))),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    thread.join(timeout=30)
    listener.close()
    assert done.stdout == "" and "no answer" in done.stderr
    assert not (tmp_path / "never.db").exists()  # not judged here: the service already had the event


def test_install_writes_relay_commands_and_uninstall_removes_them(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    url = "http://127.0.0.1:7349" + PATH
    base = [sys.executable, "-m", "loopwatch.adapters.claude_code"]
    subprocess.run([*base, "--install", "--relay", url], env=env, cwd=tmp_path, check=True, timeout=60)
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    handlers = [h for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(handlers) == 5 and all(is_loopwatch_hook(h) for h in handlers)
    assert all("loopwatch.adapters.claude_code_relay" in h["command"] and url in h["command"] for h in handlers)
    subprocess.run([*base, "--uninstall"], env=env, cwd=tmp_path, check=True, timeout=60)
    assert json.loads((tmp_path / ".claude" / "settings.json").read_text()).get("hooks", {}) == {}


def test_only_a_plain_http_address_is_relayed_to() -> None:
    assert _address("http://127.0.0.1:7349" + PATH) == ("127.0.0.1", 7349, PATH)
    assert _address("http://[::1]:7349/x") == ("::1", 7349, "/x")
    assert _address("http://localhost/x") == ("localhost", 80, "/x")
    assert _address("https://127.0.0.1:7349/x") is None
    assert _address("http://127.0.0.1:99999/x") is None


def test_a_relayed_event_loads_none_of_the_rules_nor_json(server: HookServer) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "loopwatch.adapters.claude_code_relay", server.url],
        input=json.dumps(next(_events(0))),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "loopwatch.adapters" in loaded  # the relay itself runs as __main__
    assert not loaded & {
        "loopwatch._guard",
        "loopwatch.core._engine",
        "loopwatch.adapters.claude_code",
        "json",
        "sqlite3",
    }
