"""A real ``loopwatch serve`` process for tests and benchmarks, on a free loopback port.

    with ServiceProcess("--store", url, token="alice-token-0123456789") as service:
        status, body = service.call("POST", "/v1/sessions/s/events", {"event": {...}})
        service.kill()      # SIGKILL: a replica dies in the middle of a run

The process is killed when the test process dies (PR_SET_PDEATHSIG), like tests/redis_server.py's servers.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from redis_server import _LIBC, _die_with_parent, free_port

HOST = "127.0.0.1"


class ServiceProcess:
    """``loopwatch serve ARGS...`` with ``--port`` chosen here; ``tokens``: ``{name: token}`` put in a token file."""

    def __init__(self, *args: str, tokens: dict[str, str] | None = None, env: dict[str, str] | None = None) -> None:
        self.args = list(args)
        self.port = free_port()
        self.tokens = tokens or {}
        self.dir = Path(tempfile.mkdtemp(prefix="loopwatch-service-"))
        self.log = self.dir / "service.log"
        self.env = env or {}
        self._proc: subprocess.Popen[bytes] | None = None
        self.token = next(iter(self.tokens.values()), None)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> ServiceProcess:
        command = [sys.executable, "-m", "loopwatch", "serve", "--port", str(self.port), *self.args]
        if self.tokens:
            token_file = self.dir / "tokens"
            token_file.write_text("".join(f"{name} {token}\n" for name, token in self.tokens.items()))
            command += ["--token-file", str(token_file)]
        env = {**os.environ, **self.env}
        env.pop("LOOPWATCH_TOKENS", None)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                preexec_fn=_die_with_parent if _LIBC is not None else None,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"loopwatch serve exited with {self._proc.returncode}:\n{self.log_text()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, _ = self.call("GET", "/v1/health", timeout=2)
                if status in (200, 503):
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"loopwatch serve did not answer in {timeout} s:\n{self.log_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM to the process group (uvicorn's workers too), SIGKILL after 10 s."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def kill(self) -> None:
        """SIGKILL the whole process group at once: the replica dies mid-run."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- talking to it ---------------------------------------------------------------------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "default",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """(status, decoded JSON or text) of one request; ``token="default"``: the first token, if any."""
        status, _, data = self.call_full(method, path, body, token=token, raw=raw, headers=headers, timeout=timeout)
        return status, data

    def call_full(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "default",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, dict[str, str], Any]:
        sent = dict(headers or {})
        bearer = self.token if token == "default" else token
        if bearer:
            sent["Authorization"] = f"Bearer {bearer}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            answer_headers = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        text = payload.decode("utf-8", "replace")
        try:
            decoded: Any = json.loads(text) if text else None
        except ValueError:
            decoded = text
        return response.status, answer_headers, decoded


# -- traffic ------------------------------------------------------------------------------------------------------


def session_events(n: int, steps: int, *, start: float = 1_750_000_000.0) -> list[dict[str, Any]]:
    """The events of session number ``n``: every third session loops (the same failing command again and again,
    to a stop), the others make progress (a new file each step)."""
    events: list[dict[str, Any]] = [{"type": "message", "role": "user", "text": f"task {n}", "ts": start}]
    looping = n % 3 == 0
    for step in range(steps):
        ts = start + 1 + step * 2
        if looping:
            args = {"command": "pytest tests/test_parser.py -x"}
            output = "FAILED tests/test_parser.py::test_quotes - AssertionError: 'a' != 'b'\n1 failed"
            result = {"type": "tool_result", "tool": "bash", "output": output, "exit_code": 1}
        else:
            args = {"command": f"cat src/module_{step}.py"}
            result = {"type": "tool_result", "tool": "bash", "output": f"def f{step}(): return {step}", "exit_code": 0}
        events.append({"type": "tool_call", "tool": "bash", "args": args, "id": f"c{step}", "ts": ts})
        events.append({**result, "id": f"c{step}", "ts": ts + 1})
    return events
