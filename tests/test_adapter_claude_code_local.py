"""The installed Claude Code hook (``python -m loopwatch.adapters.claude_code_hook``) and the local hook server it
starts itself: real hook processes fed Claude Code's JSON, a real server process in the background, real SQLite
files. Each test has its own socket directory and stops the servers it started."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch.adapters import claude_code as cc
from loopwatch.adapters.claude_code import handle
from loopwatch.adapters.claude_code_daemon import server_status, stop_servers
from loopwatch.adapters.claude_code_hook import _identity, _server_path

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="the hook server listens on a Unix socket")

CLIENT = "loopwatch.adapters.claude_code_hook"
IN_PROCESS = "loopwatch.adapters.claude_code"
SRC = Path(__file__).resolve().parent.parent / "src"
SESSION = "5a0c3e9f-2d4b-4f6a-8c1e-7b9d0f2a4c6e"


@dataclass
class Ran:
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.out) if self.out.strip() else {}


@dataclass
class Home:
    """A user's environment for hook processes: its own socket directory (``run/loopwatch``), cache and home."""

    env: dict[str, str]
    sockets: Path
    root: Path

    def run(self, module: str, payload: object, *args: str, cwd: Path | None = None, raw: bytes | None = None) -> Ran:
        data = raw if raw is not None else json.dumps(payload).encode()
        if module == CLIENT:
            args = ("--idle-exit", "120", *args)  # a server a failed test leaves behind goes soon
        done = subprocess.run(
            [sys.executable, "-m", module, *args],
            input=data,
            capture_output=True,
            env=self.env,
            cwd=cwd or self.root,
            timeout=60,
            check=True,
        )
        return Ran(done.stdout.decode(), done.stderr.decode())

    def hook(self, payload: object, *args: str, cwd: Path | None = None) -> Ran:
        return self.run(CLIENT, payload, *args, cwd=cwd)

    def status(self) -> list[dict[str, Any]]:
        return server_status(str(self.sockets))

    def server(self) -> dict[str, Any]:
        """The status of the server the hook started in the background, once it answers."""
        for _ in range(1200):
            servers = self.status()
            if servers:
                return servers[0]
            time.sleep(0.05)
        raise AssertionError(f"no hook server answered in {self.sockets}")


@pytest.fixture(scope="module")
def pycache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("pycache"))


@pytest.fixture
def home(tmp_path: Path, pycache: str) -> Iterator[Home]:
    run = Path(tempfile.mkdtemp(prefix="lw-run-"))  # short: a socket's path has at most 107 bytes
    run.chmod(0o700)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LOOPWATCH_STORE", None)
    env.update(
        PYTHONPYCACHEPREFIX=pycache,
        XDG_RUNTIME_DIR=str(run),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HOME=str(tmp_path / "home"),
    )
    project = tmp_path / "project"
    project.mkdir()
    yield Home(env, run / "loopwatch", project)
    stop_servers(str(run / "loopwatch"))
    shutil.rmtree(run, ignore_errors=True)


def _events(rounds: int, session: str = SESSION) -> list[dict[str, Any]]:
    """A prompt, then the same failing migration again and again."""
    common = {"session_id": session, "cwd": "/home/user/app", "permission_mode": "default"}
    events: list[dict[str, Any]] = [{**common, "hook_event_name": "UserPromptSubmit", "prompt": "run the migrations"}]
    for n in range(rounds):
        call = {"tool_name": "Bash", "tool_input": {"command": "python manage.py migrate"}}
        events.append({**common, "hook_event_name": "PreToolUse", **call, "tool_use_id": f"toolu_{n}"})
        error = "Exit code 1\ndjango.db.utils.OperationalError: could not connect to server: Connection refused"
        events.append(
            {**common, "hook_event_name": "PostToolUseFailure", **call, "tool_use_id": f"toolu_{n}", "error": error}
        )
    return events


def _expected(events: list[dict[str, Any]], store: Path) -> list[dict[str, Any]]:
    direct = Guard("default-lexical", store=f"sqlite:///{store}", clock=None)
    return [handle(direct, payload) or {} for payload in events]


def test_the_first_run_judges_itself_and_starts_the_server_which_answers_the_rest_the_same(
    home: Home, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(8)
    assert home.status() == []
    answers = [home.hook(events[0], "--store", store).json]  # no server yet: judged in the hook's process
    server = home.server()  # ...which started one in the background
    assert server["identity"] == _identity() and server["handled"] == 0
    answers += [home.hook(payload, "--store", store).json for payload in events[1:]]
    assert answers == _expected(events, tmp_path / "direct.db")
    assert any(a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny" for a in answers)
    assert answers[-1]["continue"] is False
    after = home.server()
    assert after["pid"] == server["pid"] and after["handled"] == len(events) - 1  # all the others were served


def test_in_process_and_served_runs_share_one_session(home: Home, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    home.hook({**_events(0, "warm-up")[0]}, "--store", store)  # starts the server
    home.server()
    events = _events(8)
    answers = []
    for n, payload in enumerate(events):  # every other event judged in a hook process of its own
        module = IN_PROCESS if n % 2 else CLIENT
        answers.append(home.run(module, payload, "--store", store).json)
    assert answers == _expected(events, tmp_path / "direct.db")
    assert answers[-1]["continue"] is False
    assert home.server()["handled"] == (len(events) + 1) // 2
    shared = Guard("default-lexical", store=store, clock=None).snapshot(SESSION)["state"]
    direct = Guard("default-lexical", store=f"sqlite:///{tmp_path / 'direct.db'}", clock=None).snapshot(SESSION)[
        "state"
    ]
    assert shared["index"] == direct["index"] > 0  # every event counted once, in one session


def test_the_server_leaves_after_its_idle_time_and_the_next_run_starts_another(home: Home, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(2)
    subprocess.run(
        [sys.executable, "-m", CLIENT, "--idle-exit", "3", "--store", store],
        input=json.dumps(events[0]).encode(),
        env=home.env,
        cwd=home.root,
        capture_output=True,
        timeout=60,
        check=True,
    )
    first = home.server()
    assert first["idle_exit"] == 3
    log = next(home.sockets.glob("*.log"))
    for _ in range(1200):  # gone by itself: no --stop
        if "left after" in log.read_text():
            break
        time.sleep(0.05)
    assert f"hook server {first['pid']} left after 0 events" in log.read_text()
    assert home.status() == [] and sorted(p.suffix for p in home.sockets.iterdir()) == [".lock", ".log"]
    assert home.hook(events[1], "--store", store).out == ""  # judged, and another server started
    assert home.server()["pid"] != first["pid"]


@pytest.mark.parametrize("left", ["a socket nobody listens on", "a plain file"])
def test_files_left_by_a_server_that_died_are_replaced(home: Home, tmp_path: Path, left: str) -> None:
    home.sockets.mkdir(mode=0o700)
    path = _server_path("sock", str(home.sockets))
    if left == "a plain file":
        Path(path).write_text("left over")
    else:
        with socket.socket(socket.AF_UNIX) as dead:
            dead.bind(path)
    Path(_server_path("json", str(home.sockets))).write_text('{"pid": 999999999}')
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(4)
    answers = [home.hook(events[0], "--store", store).json]  # nobody answered: judged here, a server started
    server = home.server()
    assert server["socket"] == path and server["pid"] != 999999999
    answers += [home.hook(payload, "--store", store).json for payload in events[1:]]
    assert answers == _expected(events, tmp_path / "direct.db")
    assert home.server()["handled"] == len(events) - 1
    assert json.loads(Path(_server_path("json", str(home.sockets))).read_text())["pid"] == server["pid"]


def test_a_deleted_store_file_is_opened_afresh_as_the_hook_processes_do(home: Home, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(4)
    home.hook(events[0], "--store", store)
    home.server()
    first = [home.hook(payload, "--store", store).json for payload in events[1:]]
    (tmp_path / "hooks.db").unlink()  # the user clears loopwatch's memory
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"hooks.db{suffix}").unlink(missing_ok=True)
    again = [home.hook(payload, "--store", store).json for payload in events]
    assert again == _expected(events, tmp_path / "direct.db")  # a fresh session, as in a new file
    assert first == _expected(events, tmp_path / "direct-2.db")[1:]
    assert (tmp_path / "hooks.db").exists()


def test_a_socket_path_too_long_for_the_system_is_not_used(home: Home, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(2)
    ran: list[Ran] = []
    env = {**home.env, "XDG_RUNTIME_DIR": str(deep)}
    for payload in events:
        done = subprocess.run(
            [sys.executable, "-m", CLIENT, "--store", store],
            input=json.dumps(payload).encode(),
            env=env,
            cwd=home.root,
            capture_output=True,
            timeout=60,
            check=True,
        )
        ran.append(Ran(done.stdout.decode(), done.stderr.decode()))
    assert [r.json for r in ran] == _expected(events, tmp_path / "direct.db")  # judged in each hook's process
    assert all("too long for a socket" in r.err for r in ran)
    assert not (deep / "loopwatch").exists()  # no server was started


def test_the_socket_and_its_files_are_the_users_alone(home: Home, tmp_path: Path) -> None:
    home.hook(_events(0)[0], "--store", f"sqlite:///{tmp_path / 'hooks.db'}")
    server = home.server()
    assert stat.S_IMODE(home.sockets.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(server["socket"]).st_mode)
    modes = {p.suffix: stat.S_IMODE(p.stat().st_mode) for p in home.sockets.iterdir()}
    assert modes == {".sock": 0o600, ".json": 0o600, ".lock": 0o600, ".log": 0o600}


def test_a_socket_directory_others_can_use_is_not_used(home: Home, tmp_path: Path) -> None:
    home.sockets.mkdir(mode=0o700)
    home.sockets.chmod(0o777)
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    events = _events(4)
    ran = [home.hook(payload, "--store", store) for payload in events]
    assert [r.json for r in ran] == _expected(events, tmp_path / "direct.db")  # judged in each hook's process
    assert all("not a directory only you can use" in r.err for r in ran)
    assert list(home.sockets.iterdir()) == []  # no server was started there


def test_a_server_of_another_loopwatch_is_refused_and_replaced(home: Home, tmp_path: Path) -> None:
    other = tmp_path / "other"  # the same interpreter, another loopwatch (an upgrade in place, say)
    shutil.copytree(SRC / "loopwatch", other / "loopwatch", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "loopwatch" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.0.0-other-', 1))
    old = subprocess.Popen(
        [sys.executable, "-m", "loopwatch.adapters.claude_code_daemon", "--idle-exit", "120"],
        env={**home.env, "PYTHONPATH": str(other)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert "0.0.0-other-" in home.server()["identity"]
        store = f"sqlite:///{tmp_path / 'hooks.db'}"
        events = _events(3)
        answers = [home.hook(events[0], "--store", store).json]  # refused: judged here, our server started
        assert old.wait(timeout=60) == 0  # the other one was asked to leave
        for _ in range(1200):
            servers = home.status()
            if servers and servers[0]["identity"] == _identity():
                break
            time.sleep(0.05)
        assert home.server()["identity"] == _identity()
        answers += [home.hook(payload, "--store", store).json for payload in events[1:]]
        assert answers == _expected(events, tmp_path / "direct.db")
        assert home.server()["handled"] == len(events) - 1
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()


def test_of_two_servers_started_at_once_one_serves_and_the_other_leaves(home: Home) -> None:
    command = [sys.executable, "-m", "loopwatch.adapters.claude_code_daemon", "--idle-exit", "120", "--foreground"]
    started = [subprocess.Popen(command, env=home.env, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        server = home.server()
        serving = [p for p in started if p.pid == server["pid"]]
        (other,) = [p for p in started if p.pid != server["pid"]]
        assert len(serving) == 1 and other.wait(timeout=60) == 1  # it saw ours running and left
        assert [s["pid"] for s in home.status()] == [server["pid"]]
        serving[0].terminate()  # SIGTERM: it leaves as after its idle time, removing its socket and state file
        assert serving[0].wait(timeout=60) == 0
        assert [p.suffix for p in home.sockets.iterdir()] == [".lock"]  # (--foreground: no log file)
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=60)


def _silent_server(path: str) -> threading.Thread:
    """A socket at the server's path that takes one request and closes without an answer."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)

    def take() -> None:
        with listener:
            connection, _ = listener.accept()
            with connection:
                connection.recv(1 << 20)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("fail_closed", [False, True])
def test_an_event_the_server_took_but_did_not_answer_is_not_judged_twice(
    home: Home, tmp_path: Path, fail_closed: bool
) -> None:
    home.sockets.mkdir(mode=0o700)
    thread = _silent_server(_server_path("sock", str(home.sockets)))
    options = ["--store", f"sqlite:///{tmp_path / 'never.db'}", *(["--fail-closed"] if fail_closed else [])]
    ran = home.hook(_events(1)[1], *options)  # a PreToolUse
    thread.join(timeout=60)
    assert "the hook server gave no answer" in ran.err
    assert not (tmp_path / "never.db").exists()  # not judged here: the server already had the event
    if fail_closed:
        assert ran.json["hookSpecificOutput"]["permissionDecision"] == "deny"
    else:
        assert ran.out == ""


def test_the_hook_processs_notes_come_back_from_the_server(home: Home, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    home.hook(_events(0)[0], "--store", store)
    home.server()
    bad = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}  # no session_id
    served = home.hook(bad, "--store", store)
    here = home.run(IN_PROCESS, bad, "--store", store)
    assert served.out == here.out == ""
    assert served.err == here.err and "no session_id in the hook input; nothing judged" in served.err
    assert home.server()["handled"] == 1


def test_each_projects_configuration_is_found_from_the_hooks_directory(home: Home, tmp_path: Path) -> None:
    strict = tmp_path / "strict"
    strict.mkdir()
    (strict / "loopwatch.toml").write_text('preset = "default"\n[ladders.repeat]\nnudge = 2\nblock = 3\nstop = 4\n')
    plain = home.root
    call = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    home.hook({**call, "session_id": "start"}, "--store", f"sqlite:///{tmp_path / 'start.db'}")
    home.server()
    results = []
    for n, project in enumerate((strict, plain, strict)):
        session = {**call, "session_id": f"cfg-{n}"}
        served = [
            home.hook(
                {**session, "tool_use_id": f"t{k}"}, "--store", f"sqlite:///{project}/served.db", cwd=project
            ).json
            for k in range(4)
        ]
        here = [
            home.run(
                IN_PROCESS, {**session, "tool_use_id": f"t{k}"}, "--store", f"sqlite:///{project}/here.db", cwd=project
            ).json
            for k in range(4)
        ]
        assert served == here
        results.append(served)
    assert results[0][3]["continue"] is False and results[2] == results[0]  # strict's ladder: stopped at the 4th
    assert all("continue" not in answer for answer in results[1])  # the default ladder: not yet
    assert home.server()["policies"] == 2  # one guard per policy and store, kept (the first event: judged here)


def test_install_writes_the_self_starting_hook_and_status_and_stop_show_the_server(home: Home, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"

    def cli(*args: str) -> str:
        return home.run(IN_PROCESS, None, *args, raw=b"").out

    cli("--install", "--store", store, "--idle-exit", "600")
    settings = json.loads((home.root / ".claude" / "settings.json").read_text())
    handlers = [h for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    assert len(handlers) == 5 and all(cc.is_loopwatch_hook(h) for h in handlers)
    command = handlers[0]["command"]
    assert shlex.split(command) == [sys.executable, "-c", cc.LOCAL_CODE, "--idle-exit", "600", "--store", store]
    assert command == cc.hook_command(store=store, idle_exit=600)
    assert "no loopwatch hook server running" in cli("--status")
    shell = subprocess.run(  # as Claude Code runs it: through a shell, the event on stdin
        ["/bin/sh", "-c", command],
        input=json.dumps(_events(0)[0]).encode(),
        env=home.env,
        cwd=home.root,
        timeout=60,
        check=True,
    )
    assert shell.returncode == 0
    server = home.server()
    assert server["idle_exit"] == 600
    shown = cli("--status")
    assert f"running: pid {server['pid']}" in shown and server["socket"] in shown
    assert f"stopped: pid {server['pid']}" in cli("--stop")
    assert home.status() == [] and not Path(server["socket"]).exists()

    cli("--install", "--in-process", "--store", store)
    settings = json.loads((home.root / ".claude" / "settings.json").read_text())
    commands = {h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]}
    assert commands == {cc.hook_command(in_process=True, store=store)}
    in_process = commands.pop()
    assert CLIENT not in in_process
    for n in range(3):  # judged in the hook's own process: no server started
        denied = subprocess.run(
            ["/bin/sh", "-c", in_process],
            input=json.dumps({**_events(1, "own")[1], "tool_use_id": f"own-{n}"}).encode(),
            env=home.env,
            cwd=home.root,
            capture_output=True,
            timeout=60,
            check=True,
        )
    assert "additionalContext" in json.loads(denied.stdout)["hookSpecificOutput"]  # the third same call: a nudge
    assert home.status() == []
    cli("--uninstall")
    assert json.loads((home.root / ".claude" / "settings.json").read_text()) == {}


def test_a_served_event_loads_neither_the_rules_nor_the_standard_librarys_heavy_modules(
    home: Home, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'hooks.db'}"
    home.hook(_events(0)[0], "--store", store)
    home.server()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", CLIENT, "--store", store],
        input=json.dumps(_events(1)[1]).encode(),
        env=home.env,
        cwd=home.root,
        capture_output=True,
        timeout=60,
        check=True,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    assert "_socket" in loaded  # it did talk to the server
    heavy = {"loopwatch._guard", "loopwatch.core._engine", IN_PROCESS, "json", "sqlite3", "re", "typing", "dataclasses"}
    assert loaded & heavy == set()
    assert home.server()["handled"] == 1
