"""Running the MCP proxy: the MCP server as the proxy's child process, one thread per direction carrying lines
through an :class:`~loopwatch.adapters.mcp.McpProxy`, and the MCP stdio shutdown sequence (stdin closed, then
SIGTERM, then SIGKILL); see :mod:`loopwatch.adapters.mcp`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Final

from ._mcp_messages import McpProxy

GRACE: Final = 5.0
"""Seconds the child has to exit after its stdin closes (then SIGTERM, and as long again before SIGKILL)."""
_CHUNK: Final = 65536


def _reader(stream: IO[bytes]) -> Callable[[int], bytes]:
    """A read function that returns what is there (up to n bytes), b"" at the end. A real file descriptor is
    read with ``os.read``: no Python-level lock is held by a thread blocked in it when the proxy exits."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        read1 = getattr(stream, "read1", None)
        return read1 if callable(read1) else stream.read
    return lambda n: os.read(fd, n)


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``stream`` with their line ending (the last one without, when the stream ends mid-line)."""
    read = _reader(stream)
    parts: list[bytes] = []
    while True:
        try:
            chunk = read(_CHUNK)
        except OSError:
            break
        if not chunk:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start : end + 1])
            yield b"".join(parts)
            parts.clear()
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts:
        yield b"".join(parts)


class _Writer:
    """Writes whole messages to a stream from several threads; gives up quietly once the reader is gone."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._lock = threading.Lock()
        self.broken = False

    def write(self, data: bytes) -> bool:
        with self._lock:
            if self.broken:
                return False
            try:
                if self._fd is not None:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(self._fd, view) :]
                else:
                    self._stream.write(data)
                    self._stream.flush()
            except (OSError, ValueError):
                self.broken = True
                return False
            return True

    def close(self) -> None:
        with self._lock:
            self.broken = True
            with contextlib.suppress(OSError, ValueError):
                self._stream.close()


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


class _Relay:
    """One run of the proxy: the child, a thread per direction, and the shutdown sequence."""

    def __init__(self, proxy: McpProxy, stdin: IO[bytes], stdout: IO[bytes], grace: float) -> None:
        self.proxy = proxy
        self.stdin = stdin
        self.out = _Writer(stdout)
        self.grace = grace
        self.wake = threading.Event()
        self.client_closed = threading.Event()
        self.server_closed = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        self.to_child: _Writer | None = None

    def start(self, command: list[str], on_start: Callable[[_Relay], None] | None = None) -> None:
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert self.child.stdin is not None
        self.to_child = _Writer(self.child.stdin)
        if on_start is not None:  # before any message goes through
            on_start(self)
        threading.Thread(target=self._from_client, name="mcp-proxy-client", daemon=True).start()
        threading.Thread(target=self._from_server, name="mcp-proxy-server", daemon=True).start()

    def _from_client(self) -> None:
        assert self.to_child is not None
        try:
            for line in _lines(self.stdin):
                try:
                    forward, answer = self.proxy.from_client(line)
                except Exception as exc:  # a bug must not cut the client off: pass the line on
                    self.proxy.note(f"internal error on a client line ({exc!r}); passed on")
                    forward, answer = line, None
                if answer is not None:
                    self.out.write(answer)
                if forward is not None:
                    self.to_child.write(forward)  # a dead child: server_gone answers what waits
        finally:
            self.to_child.close()
            self.client_closed.set()
            self.wake.set()

    def _from_server(self) -> None:
        assert self.child is not None and self.child.stdout is not None
        try:
            for line in _lines(self.child.stdout):
                try:
                    out = self.proxy.from_server(line)
                except Exception as exc:
                    self.proxy.note(f"internal error on a server line ({exc!r}); passed on")
                    out = line
                self.out.write(out)
        finally:
            self.server_closed.set()
            self.wake.set()

    def terminate(self) -> None:
        """Pass a termination request on to the child (from a signal handler: no locks taken)."""
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(OSError):
                self.child.terminate()

    def _reap(self) -> int:
        """Wait for the child; SIGTERM after the grace period, SIGKILL after another one."""
        assert self.child is not None
        for step in (None, self.child.terminate, self.child.kill):
            if step is not None:
                with contextlib.suppress(OSError):
                    step()
            try:
                return self.child.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                continue
        return self.child.wait()

    def run(self) -> int:
        self.wake.wait()
        # the client went away (the child's stdin is closed), or the child closed its stdout
        code = self._reap()
        self.server_closed.wait(self.grace)  # what the child wrote before it exited reaches the client first
        answers = self.proxy.server_gone(f"the MCP server exited (exit code {code}) before answering")
        if answers is not None:
            self.out.write(answers)
        return _exit_code(code)


def run_proxy(
    command: list[str],
    proxy: McpProxy,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    grace: float = GRACE,
    on_start: Callable[[_Relay], None] | None = None,
) -> int:
    """Run the MCP server ``command`` behind ``proxy`` until the client or the server ends; the exit code."""
    relay = _Relay(proxy, stdin if stdin is not None else sys.stdin.buffer, stdout or sys.stdout.buffer, grace)
    try:
        relay.start(command, on_start)
    except FileNotFoundError as exc:
        proxy.note(f"cannot start the MCP server {command[0]!r}: {exc.strerror or exc}")
        return 127
    except OSError as exc:
        proxy.note(f"cannot start the MCP server {command[0]!r}: {exc.strerror or exc}")
        return 126
    try:
        return relay.run()
    finally:
        proxy.note(proxy.summary())
