"""``loopwatch mcp-proxy``: real proxy processes in front of real MCP servers, driven by a real MCP client.

The client is the ``mcp`` SDK's ``ClientSession`` over its ``stdio_client`` (which starts the proxy the way
Claude Code or Claude Desktop start an MCP server); the server behind the proxy is ``tests/data/mcp_server.py``,
an SDK ``MCPServer`` whose tool bodies write a line to a file each time they run, so the tests can tell the
calls the server ran from those the proxy refused. ``tests/data/mcp_raw_server.py`` is a bare JSON-RPC peer
that logs the exact bytes it receives and sends, for the byte-for-byte checks, batches and malformed lines.
The last part drives :class:`~loopwatch.adapters.mcp.McpProxy` line by line, without processes.

No timing is asserted: the timeouts are safety nets against a hung test.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from loopwatch import Guard
from loopwatch.adapters import mcp as proxy_module
from loopwatch.adapters.mcp import SERVER_GONE, McpProxy, result_text, run_proxy
from loopwatch.cli import main as cli_main

try:
    import anyio
    import mcp_types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.shared.exceptions import MCPError
except ImportError:  # pragma: no cover - the tests needing the SDK are skipped
    ClientSession = None  # type: ignore[assignment,misc]

needs_sdk = pytest.mark.skipif(ClientSession is None, reason="the mcp package (test extra) is not installed")
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

DATA = Path(__file__).parent / "data"
SERVER = str(DATA / "mcp_server.py")
RAW_SERVER = str(DATA / "mcp_raw_server.py")
MODULE = "loopwatch.adapters.mcp"
SAFETY = 120  # seconds: only against a hung test
T = TypeVar("T")


# -- a real client, the proxy, a real server -----------------------------------------------------------


class Setup:
    """The files of one test: what the tool bodies ran, the proxy's stderr, the server's pid."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.runs_file = tmp_path / "runs.txt"
        self.stderr_file = tmp_path / "stderr.txt"
        self.pid_file = tmp_path / "server.pid"
        self.env = {
            "MCP_TEST_RUNS": str(self.runs_file),
            "MCP_TEST_PID": str(self.pid_file),
            "MCP_TEST_WIRE": str(tmp_path / "wire.bin"),
            "MCP_TEST_SENT": str(tmp_path / "sent.bin"),
        }

    def runs(self) -> list[str]:
        return self.runs_file.read_text(encoding="utf-8").splitlines() if self.runs_file.exists() else []

    def stderr(self) -> str:
        return self.stderr_file.read_text(encoding="utf-8") if self.stderr_file.exists() else ""

    def proxy_args(self, *options: str, server: str = SERVER) -> list[str]:
        return ["-m", MODULE, *options, "--", sys.executable, server]

    def params(self, *options: str, launcher: list[str] | None = None) -> Any:
        args = [*(launcher or ["-m", MODULE]), *options, "--", sys.executable, SERVER]
        return StdioServerParameters(command=sys.executable, args=args, env=self.env, cwd=str(self.tmp))

    def direct(self) -> Any:
        return StdioServerParameters(command=sys.executable, args=[SERVER], env=self.env, cwd=str(self.tmp))

    def drive(self, params: Any, script: Callable[[Any], Awaitable[T]], **session: Any) -> T:
        """Connect a ``ClientSession`` through ``params``, initialize, run ``script(session)``, disconnect."""

        async def go() -> T:
            with anyio.fail_after(SAFETY), self.stderr_file.open("a", encoding="utf-8") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write, **session) as client,
                ):
                    await client.initialize()
                    return await script(client)

        return anyio.run(go)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content]


def calls(*pairs: tuple[str, dict[str, Any]]) -> Callable[[Any], Awaitable[list[Any]]]:
    """A client script making these calls in order; their results."""

    async def script(client: Any) -> list[Any]:
        return [await client.call_tool(name, args) for name, args in pairs]

    return script


# -- loops are refused, the tool does not run ----------------------------------------------------------


@needs_sdk
def test_the_same_call_repeated_is_nudged_then_refused_then_stopped(setup: Setup) -> None:
    audit = setup.tmp / "audit.jsonl"
    script = calls(*[("search", {"query": "flaky test"})] * 10, ("lookup", {"key": "other"}))
    results = setup.drive(setup.params("--audit", str(audit)), script)
    searches, after_stop = results[:10], results[10]

    ran = [r for r in searches if not r.is_error]
    refusals = [r for r in searches if r.is_error]
    assert ran and refusals, [texts(r) for r in searches]
    # the tool body ran exactly for the calls that were not refused
    assert setup.runs() == ["search flaky test"] * len(ran)
    assert all(texts(r)[0] == "3 documents match 'flaky test': a.txt, b.txt, c.txt" for r in ran)
    # refused calls come after the ones that ran, with loopwatch's reason as the only content
    assert searches.index(refusals[0]) == len(ran)
    assert all(len(r.content) == 1 for r in refusals)
    assert texts(refusals[0])[0].startswith("Refused: search(")
    # a nudge rode on a result the model saw: the tool's text first, then loopwatch's message
    nudged = [r for r in ran if len(r.content) > 1]
    assert nudged, [texts(r) for r in ran]
    assert "3 times in a row" in " ".join(texts(nudged[0])[1:])
    assert nudged[0].structured_content == {"result": texts(nudged[0])[0]}  # kept as the server sent it
    # the stop: this call and every later one refused, whatever the tool, with the status
    assert "[loopwatch: LOOP_DETECTED (repeat)]" in texts(searches[-1])[0]
    assert after_stop.is_error and "LOOP_DETECTED" in texts(after_stop)[0]
    assert "lookup other" not in setup.runs()
    # logged on stderr and audited
    log = setup.stderr()
    assert "refused search: repeat x5" in log and "LOOP_DETECTED repeat x8" in log
    assert f"11 tool calls judged, {len(refusals) + 1} refused" in log
    events = [json.loads(line)["event"] for line in audit.read_text(encoding="utf-8").splitlines()]
    assert "loop.nudge" in events and "loop.block" in events and "loop.stop" in events


@needs_sdk
def test_an_a_b_cycle_is_refused(setup: Setup) -> None:
    pair = [("search", {"query": "config"}), ("lookup", {"key": "config.path"})]
    results = setup.drive(setup.params(), calls(*(pair * 10)))
    refusals = [(i, r) for i, r in enumerate(results) if r.is_error]
    assert refusals, [texts(r) for r in results]
    assert any("cycle" in texts(r)[0] or "sequence" in texts(r)[0] for _, r in refusals), texts(refusals[0][1])
    ran = [pair[i % 2] for i, r in enumerate(results) if not r.is_error]
    assert setup.runs() == [f"{name} {next(iter(args.values()))}" for name, args in ran]
    assert len(setup.runs()) < len(results)
    assert "LOOP_DETECTED" in texts(results[-1])[0]


@needs_sdk
def test_polling_with_changing_results_is_never_refused(setup: Setup) -> None:
    results = setup.drive(setup.params(), calls(*[("poll", {"job": "build-7"})] * 25))
    assert not [texts(r) for r in results if r.is_error]
    assert [texts(r)[0] for r in results] == [f"job build-7: running, {n} of 1000 steps done" for n in range(1, 26)]
    assert setup.runs() == ["poll build-7"] * 25
    assert "refused" not in setup.stderr().replace("0 refused", "")


@needs_sdk
def test_a_failing_call_retried_is_refused_before_the_tool_runs_again(setup: Setup) -> None:
    failure = "Error executing tool fail: cannot do it: disk full"
    results = setup.drive(setup.params(), calls(*[("fail", {"reason": "disk full"})] * 10))
    assert all(r.is_error for r in results)
    server_errors = [r for r in results if texts(r)[0] == failure]
    refusals = [r for r in results if texts(r)[0] != failure]
    assert server_errors and refusals
    assert setup.runs() == ["fail disk full"] * len(server_errors)
    # the server's isError results were seen as failures: the error-retry advice rode on one of them
    advice = [text for r in server_errors for text in texts(r)[1:]]
    assert any("has failed 2 times in a row with the same error" in text for text in advice), advice


# -- everything else passes through ---------------------------------------------------------------------


@needs_sdk
def test_lists_resources_prompts_progress_logs_and_server_requests_pass_through(setup: Setup) -> None:
    def session(seen: dict[str, list[Any]]) -> dict[str, Any]:
        async def roots(context: Any) -> Any:
            seen["roots"].append(True)
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///work/project")])

        async def logged(params: Any) -> None:
            seen["logs"].append(params.data)

        return {"list_roots_callback": roots, "logging_callback": logged}

    async def script(client: Any) -> dict[str, Any]:
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        return {
            "tools": (await client.list_tools()).model_dump(),
            "resources": (await client.list_resources()).model_dump(),
            "read": (await client.read_resource("data://greeting")).model_dump(),
            "prompts": (await client.list_prompts()).model_dump(),
            "prompt": (await client.get_prompt("review", {"code": "x = 1"})).model_dump(),
            "roots": texts(await client.call_tool("ask_roots", {})),
            "slow": texts(await client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)),
            "progress": progress,
            "ping": (await client.send_ping()).model_dump(),
        }

    direct_seen: dict[str, list[Any]] = {"roots": [], "logs": []}
    proxied_seen: dict[str, list[Any]] = {"roots": [], "logs": []}
    direct = setup.drive(setup.direct(), script, **session(direct_seen))
    proxied = setup.drive(setup.params(), script, **session(proxied_seen))
    assert proxied == direct
    assert [t["name"] for t in proxied["tools"]["tools"]][:3] == ["search", "lookup", "poll"]
    assert proxied["read"]["contents"][0]["text"] == "hello from the test server"
    assert "x = 1" in proxied["prompt"]["messages"][0]["content"]["text"]
    assert proxied["roots"] == ["file:///work/project"]  # a server -> client request and its answer
    assert proxied["progress"] == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert proxied_seen == direct_seen == {"roots": [True], "logs": ["slow is done"]}


class Raw:
    """The proxy as a subprocess, driven line by line (for exact bytes, batches, malformed lines, exits)."""

    def __init__(self, setup: Setup, *options: str, server: str = SERVER) -> None:
        env = {**os.environ, **setup.env}
        env.pop("LOOPWATCH_STORE", None)
        self.setup = setup
        self.stderr = setup.stderr_file.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, *setup.proxy_args(*options, server=server)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=setup.tmp,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, *lines: bytes) -> None:
        assert self.process.stdin is not None
        for line in lines:
            self.process.stdin.write(line)
        self.process.stdin.flush()

    def receive(self) -> bytes:
        return self.lines.get(timeout=SAFETY)

    def request(self, line: bytes) -> dict[str, Any]:
        self.send(line)
        answer: dict[str, Any] = json.loads(self.receive())
        return answer

    def initialize(self) -> None:
        answer = self.request(INITIALIZE)
        assert answer["id"] == 1 and "result" in answer, answer
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.wait()

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=SAFETY)
        finally:
            self.stderr.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n'
)


@pytest.fixture
def raw(setup: Setup) -> Iterator[Callable[..., Raw]]:
    started: list[Raw] = []

    def start(*options: str, server: str = SERVER) -> Raw:
        started.append(Raw(setup, *options, server=server))
        return started[-1]

    yield start
    for proxy in started:
        proxy.kill()


def test_every_line_but_a_judged_call_passes_byte_for_byte(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw(server=RAW_SERVER)
    client_lines = [
        b'{ "jsonrpc" : "2.0", "id" : "init-\\u00e9", "method" : "initialize", "params" : {"z": 1, "a": [1.50, 2]} }\n',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\r\n',
        b'{"method":"resources/list","id":7,"jsonrpc":"2.0","params":{"cursor":"caf\xc3\xa9"}}\n',
        b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"b":2,"a":1}}}\n',
        b'[{"jsonrpc":"2.0","id":9,"method":"ping"}, {"jsonrpc":"2.0","id":10,"method":"prompts/list"}]\n',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}\n',
        b"this is not JSON-RPC at all\n",
        b"[]\n",
    ]
    answers = []
    for line in client_lines:
        proxy.send(line)
        if line.startswith((b"{ ", b'{"method', b'{"jsonrpc":"2.0","id"', b"[{", b"this")):
            answers.append(proxy.receive())
    # the ask tool: the server asks the client, the client answers (its answer passes through too)
    proxy.send(b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"ask","arguments":{}}}\n')
    server_request = proxy.receive()
    client_answer = b'{"jsonrpc":"2.0","id":"s-1","result":{"content":{"type":"text","text":"yes"}}}\n'
    proxy.send(client_answer)
    ask_answer = proxy.receive()
    assert proxy.close() == 0

    wire = (setup.tmp / "wire.bin").read_bytes()
    sent = (setup.tmp / "sent.bin").read_bytes()
    call_11 = b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"ask","arguments":{}}}\n'
    assert wire == b"".join([*client_lines, call_11, client_answer])  # what the server got: exactly our bytes
    assert b"".join([*answers, server_request, ask_answer]) == sent  # what we got: exactly the server's bytes
    assert json.loads(ask_answer)["result"]["content"][0]["text"] == "the client said yes"
    assert json.loads(answers[3]) == [
        {"jsonrpc": "2.0", "id": 9, "result": {"echo": "ping"}},
        {"jsonrpc": "2.0", "id": 10, "result": {"echo": "prompts/list"}},
    ]
    log = setup.stderr()
    assert "not a JSON-RPC message: this is not JSON-RPC at all" in log and "message: []" in log
    assert "2 lines that are not JSON-RPC passed on" in log


def test_a_malformed_line_to_a_real_server_does_not_break_the_session(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw()
    proxy.send(b"{this is broken\n")
    proxy.initialize()
    call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"q"}}}\n'
    answer = proxy.request(call)
    assert answer["result"]["content"][0]["text"] == "3 documents match 'q': a.txt, b.txt, c.txt"
    assert proxy.close() == 0
    assert "from the client that is not a JSON-RPC message: {this is broken" in setup.stderr()
    assert setup.runs() == ["search q"]


def test_a_noisy_server_line_and_batches_with_refused_calls(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw(server=RAW_SERVER)
    proxy.initialize()
    noisy = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noisy","arguments":{}}}\n'
    proxy.send(noisy)
    assert proxy.receive() == b"this line is not JSON\n"
    assert json.loads(proxy.receive())["params"]["data"] == "caf\u00e9"
    assert json.loads(proxy.receive())["result"]["content"][0]["text"] == "echo {}"
    # a batch of the same call over and over: once refused, refusals come back as a batch of their own
    seen: list[Any] = []
    for n in range(10, 60, 2):
        batch = [
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"x": 1}}},
            {"jsonrpc": "2.0", "id": n + 1, "method": "ping"},
        ]
        proxy.send(json.dumps(batch).encode() + b"\n")
        first = json.loads(proxy.receive())
        seen.append(first)
        if len(first) == 1 and first[0]["id"] == n:  # the refusal first, then the server's ping answer
            second = json.loads(proxy.receive())
            assert second == [{"jsonrpc": "2.0", "id": n + 1, "result": {"echo": "ping"}}]
            break
    refusal = seen[-1][0]
    assert refusal["result"]["isError"] is True and refusal["result"]["content"][0]["text"].startswith("Refused")
    assert proxy.close() == 0
    forwarded = [json.loads(line) for line in (setup.tmp / "wire.bin").read_bytes().splitlines()[3:]]
    assert all(len(batch) == 2 for batch in forwarded[:-1]) and forwarded[-1] == [batch[1]]


# -- the child's lifecycle ------------------------------------------------------------------------------


@needs_sdk
def test_a_server_crash_answers_the_pending_call_and_the_proxy_exits_with_its_code(
    setup: Setup, raw: Callable[..., Raw]
) -> None:
    async def crash(client: Any) -> MCPError:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("crash", {"code": 3})
        return caught.value

    error = setup.drive(setup.params(), crash)
    assert error.code == SERVER_GONE
    assert error.message == "the MCP server exited (exit code 3) before answering"

    proxy = raw()
    proxy.initialize()
    search = b'{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"search","arguments":{"query":"q"}}}\n'
    assert proxy.request(search)["result"]["content"][0]["text"] == "3 documents match 'q': a.txt, b.txt, c.txt"
    answer = proxy.request(
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash","arguments":{"code":7}}}\n'
    )
    assert answer == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": answer["error"]["message"]}}
    assert "exit code 7" in answer["error"]["message"]
    assert proxy.wait() == 7
    assert setup.runs() == ["crash 3", "search q", "crash 7"]


@posix_only
def test_requests_the_dead_server_left_unanswered_get_errors(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw(server=RAW_SERVER)
    proxy.initialize()
    proxy.send(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}\n')
    proxy.send(b'{"jsonrpc":"2.0","id":3,"method":"resources/list"}\n')
    assert json.loads(proxy.receive()) == {"jsonrpc": "2.0", "id": 3, "result": {"echo": "resources/list"}}
    os.kill(int(setup.pid_file.read_text()), signal.SIGKILL)
    answer = json.loads(proxy.receive())
    assert answer["id"] == 2 and answer["error"]["code"] == SERVER_GONE
    assert "exit code -9" in answer["error"]["message"]
    assert proxy.receive() == b""  # then the proxy ends
    assert proxy.wait() == 128 + 9


@needs_sdk
def test_closing_stdin_ends_the_server_and_the_proxy(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw()
    proxy.initialize()
    pid = int(setup.pid_file.read_text())
    assert proxy.close() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@posix_only
def test_sigterm_to_the_proxy_ends_the_server(setup: Setup, raw: Callable[..., Raw]) -> None:
    proxy = raw()
    proxy.initialize()
    pid = int(setup.pid_file.read_text())
    proxy.process.send_signal(signal.SIGTERM)
    code = proxy.wait()
    assert code in (0, 128 + signal.SIGTERM)  # the server's own exit (its SIGTERM handling decides)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@posix_only
def test_a_server_that_ignores_eof_and_sigterm_is_killed(tmp_path: Path) -> None:
    stubborn = textwrap.dedent(
        """
        import signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        sys.stdin.read()
        time.sleep(600)
        """
    )
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    notes: list[str] = []
    done: list[int] = []
    stdin, stdout = os.fdopen(read_in, "rb"), os.fdopen(write_out, "wb")
    proxy = McpProxy(Guard(), note=notes.append)
    thread = threading.Thread(
        target=lambda: done.append(
            run_proxy([sys.executable, "-c", stubborn], proxy, stdin=stdin, stdout=stdout, grace=0.2)
        ),
        daemon=True,
    )
    thread.start()
    with os.fdopen(read_out, "rb") as out:
        assert out.readline() == b"ready\n"  # the child ignores SIGTERM from now on
        os.close(write_in)  # the client goes away
        thread.join(SAFETY)
        assert done == [128 + signal.SIGKILL]
    stdin.close()
    stdout.close()
    assert "lines that are not JSON-RPC passed on" in notes[-1]


def test_a_command_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["mcp-proxy", "--", str(tmp_path / "no-such-server")])
    assert code == 127
    assert "cannot start the MCP server" in capsys.readouterr().err


# -- state, the command line ----------------------------------------------------------------------------


@needs_sdk
def test_a_sqlite_store_keeps_the_stop_across_proxies_until_reset(setup: Setup) -> None:
    store = f"sqlite:///{setup.tmp / 'mcp.db'}"
    options = ("--store", store, "--session", "agent-1")
    first = setup.drive(setup.params(*options), calls(*[("search", {"query": "x"})] * 9))
    assert "LOOP_DETECTED" in texts(first[-1])[0]
    ran = len(setup.runs())

    again = setup.drive(setup.params(*options), calls(("lookup", {"key": "k"})))
    assert again[0].is_error and "LOOP_DETECTED" in texts(again[0])[0]
    other = setup.drive(setup.params("--store", store, "--session", "agent-2"), calls(("lookup", {"key": "k"})))
    assert not other[0].is_error
    assert len(setup.runs()) == ran + 1

    assert cli_main(["sessions", "--store", store, "--reset", "agent-1"]) == 0
    after = setup.drive(setup.params(*options), calls(("lookup", {"key": "k"})))
    assert not after[0].is_error and texts(after[0]) == ["k = 42"]


@needs_sdk
def test_the_console_script_and_the_cli(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    script = Path(sys.executable).with_name("loopwatch")
    launch = ["-m", "loopwatch.cli", "mcp-proxy"]
    results = [setup.drive(setup.params("--preset", "default", launcher=launch), calls(("poll", {"job": "j"})))]
    if script.exists():
        params = StdioServerParameters(
            command=str(script), args=["mcp-proxy", "--", sys.executable, SERVER], env=setup.env, cwd=str(setup.tmp)
        )
        results.append(setup.drive(params, calls(("poll", {"job": "j"}))))
    assert [texts(r[0])[0] for r in results] == ["job j: running, 1 of 1000 steps done"] * len(results)

    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "mcp-proxy" in capsys.readouterr().out
    assert cli_main(["mcp-proxy"]) == 2
    assert "give the MCP server's command after --" in capsys.readouterr().err
    assert cli_main(["mcp-proxy", "--preset", "no-such-preset", "--", sys.executable, SERVER]) == 2
    assert "no-such-preset" in capsys.readouterr().err
    assert cli_main(["mcp-proxy", "--store", "nosuch://x", "--", sys.executable, SERVER]) == 2
    assert proxy_module.main(["--help"]) == 0
    assert "SERVER COMMAND" in capsys.readouterr().out


def test_the_proxy_needs_no_third_party_package() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["mcp"] = None
        sys.modules["mcp_types"] = None
        from loopwatch import Guard
        from loopwatch.adapters.mcp import McpProxy
        proxy = McpProxy(Guard(), note=lambda text: None)
        line = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}\\n'
        assert proxy.from_client(line) == (line, None)
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY, check=False)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


# -- McpProxy, line by line ------------------------------------------------------------------------------


def call_line(request_id: object, name: str = "search", args: object = None, **params: Any) -> bytes:
    body = {"name": name, "arguments": {"q": "x"} if args is None else args, **params}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}).encode() + b"\n"


def result_line(request_id: object, text: str, *, is_error: bool = False, **extra: Any) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": is_error, **extra}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"


class Line:
    """McpProxy with a guard, and the notes it wrote."""

    def __init__(self, guard: Guard | None = None) -> None:
        self.notes: list[str] = []
        self.guard = guard or Guard()
        self.proxy = McpProxy(self.guard, "s", note=self.notes.append)

    def round(self, request_id: object, text: str = "same", **call: Any) -> tuple[bytes | None, bytes | None, bytes]:
        forward, answer = self.proxy.from_client(call_line(request_id, **call))
        back = self.proxy.from_server(result_line(request_id, text)) if forward is not None else b""
        return forward, answer, back


def test_lines_that_are_not_tool_calls_come_back_as_the_same_object() -> None:
    lines = Line()
    for line in [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n',
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n',
        b'{"jsonrpc":"2.0","id":"x","result":{"roots":[]}}\n',
        b"\n",
        b"  \r\n",
        b"not json",
        b"42\n",
        b'"a string"\n',
    ]:
        assert lines.proxy.from_client(line) == (line, None)
        assert lines.proxy.from_server(line) is line
    assert lines.proxy.stats["malformed"] == 6 and lines.proxy.stats["calls"] == 0


def test_results_without_verdict_are_not_reencoded_and_nudges_are_appended() -> None:
    lines = Line()
    outs = [lines.round(n) for n in range(1, 5)]
    assert outs[0][2] == result_line(1, "same")  # untouched bytes
    nudged = [json.loads(back) for _, _, back in outs if back != result_line(json.loads(back)["id"], "same")]
    assert nudged and nudged[0]["result"]["content"][0] == {"type": "text", "text": "same"}
    assert "3 times in a row" in nudged[0]["result"]["content"][1]["text"]
    assert nudged[0]["result"]["isError"] is False


def test_refusal_answers_with_the_request_id_and_nothing_is_forwarded() -> None:
    lines = Line()
    for n in range(1, 20):
        forward, answer, _ = lines.round(f"id-{n}")
        if answer is not None:
            assert forward is None
            refusal = json.loads(answer)
            assert refusal["id"] == f"id-{n}" and refusal["jsonrpc"] == "2.0"
            assert refusal["result"]["isError"] is True and refusal["result"]["resultType"] == "complete"
            break
    else:
        raise AssertionError("never refused")
    assert lines.proxy.stats["refused"] == 1


def test_a_retry_with_input_responses_is_not_a_new_call_and_input_required_is_not_a_result() -> None:
    lines = Line()
    proxy = lines.proxy
    proxy.from_client(call_line(1))
    pending = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "requestState": "s"}})
    assert proxy.from_server(pending.encode()) == pending.encode()
    proxy.from_client(call_line(2, requestState="s", inputResponses={"a": {}}))
    proxy.from_server(result_line(2, "done"))
    assert proxy.stats["calls"] == 1
    snapshot = lines.guard.snapshot("s")["state"]
    assert snapshot["index"] == 2  # one call, one result


def test_a_task_result_is_observed_through_tasks_result() -> None:
    lines = Line()
    proxy = lines.proxy
    results = []
    for n in range(1, 8):
        proxy.from_client(call_line(f"c{n}", task={"ttl": 1000}))
        handle = {"jsonrpc": "2.0", "id": f"c{n}", "result": {"task": {"taskId": f"t{n}", "status": "working"}}}
        proxy.from_server(json.dumps(handle).encode())
        fetch = {"jsonrpc": "2.0", "id": f"r{n}", "method": "tasks/result", "params": {"taskId": f"t{n}"}}
        proxy.from_client(json.dumps(fetch).encode())
        results.append(json.loads(proxy.from_server(result_line(f"r{n}", "same"))))
    assert any(len(r["result"]["content"]) > 1 for r in results)  # results seen: a nudge was added
    assert lines.guard.snapshot("s")["state"]["index"] >= 8


def test_a_nudge_whose_result_is_a_jsonrpc_error_rides_on_the_next_result() -> None:
    lines = Line()
    proxy = lines.proxy
    for n in range(1, 3):
        lines.round(n)
    proxy.from_client(call_line(3))  # the third same call: nudged
    error = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"boom"}}\n'
    assert proxy.from_server(error) is error
    proxy.from_client(call_line(4, name="other"))
    out = json.loads(proxy.from_server(result_line(4, "fine")))
    assert len(out["result"]["content"]) >= 2 and "3 times in a row" in out["result"]["content"][1]["text"]


def test_cancelled_and_unanswered_requests() -> None:
    lines = Line()
    proxy = lines.proxy
    proxy.from_client(call_line(1))
    proxy.from_client(b'{"jsonrpc":"2.0","id":2,"method":"resources/list"}\n')
    proxy.from_client(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n')
    gone = proxy.server_gone("the MCP server exited (exit code 1) before answering")
    assert gone is not None
    answers = [json.loads(line) for line in gone.splitlines()]
    assert answers == [
        {"jsonrpc": "2.0", "id": 2, "error": {"code": SERVER_GONE, "message": answers[0]["error"]["message"]}}
    ]
    forward, answer = proxy.from_client(b'{"jsonrpc":"2.0","id":"late","method":"ping"}\n')
    assert forward is None and answer is not None and json.loads(answer)["error"]["code"] == SERVER_GONE
    assert proxy.from_client(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')[1] is None


def test_a_broken_guard_lets_calls_through() -> None:
    class Broken(Guard):
        def observe(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("store on fire")

    lines = Line(Broken())
    forward, answer, back = lines.round(1)
    assert forward == call_line(1) and answer is None and back == result_line(1, "same")
    assert lines.proxy.stats["unjudged"] == 2 and "store on fire" in lines.notes[0]


def test_result_text() -> None:
    assert result_text({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "a\nb"
    assert result_text({"content": [], "structuredContent": {"b": 1, "a": 2}}) == '{"a":2,"b":1}'
    embedded = {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}}
    assert result_text({"content": [embedded, {"type": "image", "data": "AA==", "mimeType": "image/png"}]}) == (
        'body\n{"data":"AA==","mimeType":"image/png","type":"image"}'
    )
