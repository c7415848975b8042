"""The local hook server behind :mod:`loopwatch.adapters.claude_code_hook`: one per user and interpreter, started
by the hook itself, gone after an idle time.

    python -m loopwatch.adapters.claude_code_daemon [--idle-exit SECONDS]   # what the hook starts, detached
    loopwatch hook claude-code --status | --stop

It listens on a Unix socket (mode 0600, in a directory only its owner can enter: see
:func:`~loopwatch.adapters.claude_code_hook.runtime_dir`) and judges each event it is handed with
:func:`~loopwatch.adapters.claude_code.answer`, the hook process's own code: a guard built from the hook's options,
the configuration file found from the hook's working directory (read again when it changes) and the hook's session
store, so a served event gets the verdict an in-process hook run would, and both write the same SQLite sessions
(nothing held only in this process: a server that dies loses nothing). The notes a hook run would print on its
stderr go back to the hook, which prints them.

Next to the socket: ``.json`` (this server's process id, version and socket, mode 0600), ``.lock`` (held while it
runs: a second server started at the same time sees it and leaves; a file left by a server that died is replaced)
and ``.log`` (its own errors). A server only answers hooks of the same loopwatch (version, installation and
Python): a hook of another one is refused, judges its event itself and starts its own server, which asks this one
to stop first. It exits after ``--idle-exit`` seconds without an event (default
:data:`~loopwatch.adapters.claude_code_hook.IDLE_EXIT`), on ``--stop``, or on SIGTERM, removing its files.

The protocol (one request per connection, the client then shuts its side): ``loopwatch-hook/1 judge N\\n``, ``N``
bytes of NUL-separated fields (identity, working directory, ``$LOOPWATCH_STORE``, ``$XDG_CACHE_HOME``, ``$HOME``,
the hook's options), the hook input; answered ``ok OUT ERR\\n`` with the hook's stdout and stderr, or ``refused``
/ ``declined`` (judge it yourself). ``loopwatch-hook/1 status``, ``stop`` and ``replace\nIDENTITY`` (stop unless
of that identity) answer JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from .claude_code import _guard, _hook_options, _seconds, answer, decode_input
from .claude_code_hook import (
    _MAX_SOCKET_PATH,
    _PROTOCOL,
    IDLE_EXIT,
    _connect,
    _exchange,
    _identity,
    _private_dir,
    _server_path,
    runtime_dir,
)

if TYPE_CHECKING:
    from .._guard import Guard

__all__ = ["main", "server_status", "stop_servers"]

MAX_REQUEST: Final = 16 * 1024 * 1024
"""Bytes of one request read at most (a bigger hook input is left to the hook)."""
READ_TIMEOUT: Final = 2.0
"""Seconds a connected hook has to send its request."""
MAX_GUARDS: Final = 8
"""Policies (options, configuration file, store) kept built at once; the least recently used is closed."""
LOCK_WAIT: Final = 10.0
"""Seconds a new server waits for a server it asked to stop to leave."""
DRAIN: Final = 0.2
"""Seconds a server leaving still accepts connections made before it removed its socket."""
_MAX_LOG: Final = 1 << 20


class _Daemon:
    """The server's state: its listening socket, the guards it built (by policy), what it has done."""

    def __init__(self, listener: socket.socket, path: str, idle_exit: float) -> None:
        self.listener = listener
        self.path = path
        self.idle_exit = idle_exit
        self.identity = _identity()
        self.guards: OrderedDict[tuple[Any, ...], tuple[Guard, list[tuple[int, int] | None]]] = OrderedDict()
        self.handled = 0
        self.started = time.time()
        self.last = time.monotonic()
        self.stopping = False
        self.waiting = False  # in accept(): where SIGTERM may interrupt

    def __repr__(self) -> str:
        return f"_Daemon({self.path!r}, handled={self.handled})"

    # -- serving ---------------------------------------------------------------------------------------

    def run(self) -> None:
        """Answer hooks until idle for :attr:`idle_exit` seconds or asked to stop; then answer the connections
        already made and return."""
        while not self.stopping:
            remaining = self.idle_exit - (time.monotonic() - self.last)
            if remaining <= 0:
                break
            self.listener.settimeout(remaining)
            self.waiting = True
            try:
                connection, _ = self.listener.accept()
            except (TimeoutError, InterruptedError):
                continue
            finally:
                self.waiting = False
            self.serve_one(connection)
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # new hooks find no server from now on and judge their events themselves
        self.listener.settimeout(DRAIN)
        while True:  # those that connected before the socket went still get their answer
            try:
                connection, _ = self.listener.accept()
            except OSError:
                break
            self.serve_one(connection)
        self.listener.close()
        for guard, _ in self.guards.values():
            self._close(guard)

    def serve_one(self, connection: socket.socket) -> None:
        with connection:
            try:
                connection.settimeout(READ_TIMEOUT)
                request = _receive(connection)
                if request is not None:
                    connection.sendall(self.reply(request))
            except Exception as exc:  # one hook's trouble: the server goes on
                print(f"loopwatch hook server: a hook's request failed: {exc!r}", file=sys.stderr, flush=True)

    def reply(self, request: bytes) -> bytes:
        first, _, rest = request.partition(b"\n")
        words = first.split()
        if words[:1] != [_PROTOCOL] or len(words) < 2:
            return b"declined not a hook request\n"
        if words[1] == b"status":
            return b"status\n" + json.dumps(self.status()).encode()
        if words[1] == b"stop" or (words[1] == b"replace" and rest.decode(errors="replace") != self.identity):
            self.stopping = True  # (replace: a server of another loopwatch is taking over; not one of ours)
            return b"stopping\n" + json.dumps(self.status()).encode()
        if words[1] == b"replace":
            return b"status\n" + json.dumps(self.status()).encode()
        if words[1] != b"judge" or len(words) != 3 or not words[2].isdigit():
            return b"declined unknown request\n"
        size = int(words[2])
        fields = rest[:size].decode("utf-8", "surrogateescape").split("\0")
        body = rest[size:]
        if len(fields) < 5:
            return b"declined malformed request\n"
        if fields[0] != self.identity:
            return b"refused another loopwatch\n"
        options = _hook_options(fields[5:])
        if options is None:  # options only the full command line understands: its messages come from the hook
            return b"declined options\n"
        self.handled += 1
        self.last = time.monotonic()
        out, err = self.judge(body, options, cwd=fields[1], store_env=fields[2], cache_env=fields[3], home=fields[4])
        return b"ok %d %d\n%s%s" % (len(out), len(err), out, err)

    def judge(
        self, body: bytes, options: dict[str, Any], *, cwd: str, store_env: str, cache_env: str, home: str
    ) -> tuple[bytes, bytes]:
        """The hook's stdout and stderr for one input, as ``run_hook`` in the hook's own process writes them."""
        notes = io.StringIO()
        with contextlib.redirect_stderr(notes):
            payload = decode_input(body)
            response = None
            if payload is not None:
                fail_closed = bool(options["fail_closed"])
                response = answer(
                    payload,
                    lambda: self.guard_for(
                        options, cwd, {"LOOPWATCH_STORE": store_env, "XDG_CACHE_HOME": cache_env, "HOME": home}
                    ),
                    fail_closed=fail_closed,
                )
        out = json.dumps(response, ensure_ascii=True) + "\n" if response is not None else ""
        return out.encode(), notes.getvalue().encode("utf-8", "replace")

    def guard_for(self, options: dict[str, Any], cwd: str, environ: dict[str, str]) -> Guard:
        """The guard a hook run in ``cwd`` with ``options`` and ``environ`` would build (built once, kept while
        its configuration file is unchanged)."""
        from .._policy_spec import config_path

        config = options["config"]
        if config and not os.path.isabs(config):
            config = os.path.join(cwd, config)
        found = config_path(config, bool(options["no_config"]), start=cwd)
        stamp: tuple[int, int] | None = None
        if found is not None:
            with contextlib.suppress(OSError):
                info = os.stat(found)
                stamp = (info.st_mtime_ns, info.st_size)
        store = options["store"] or environ["LOOPWATCH_STORE"] or None
        relative = store is not None and store.startswith("sqlite:///") and not store[10:].startswith("/")
        fail_closed, scope = bool(options["fail_closed"]), cwd if relative else None
        key = (store, environ["XDG_CACHE_HOME"], environ["HOME"], options["preset"], found, stamp, fail_closed, scope)
        held = self.guards.get(key)
        if held is not None and _same_file(held):
            self.guards.move_to_end(key)
            return held[0]
        if held is not None:  # its SQLite file was deleted or replaced: hook processes use the new one
            self._close(self.guards.pop(key)[0])
        with _within(cwd):  # a relative store path means the hook's directory
            guard = _guard(store, options["preset"], found, fail_closed, True, environ=environ)
        self.guards[key] = (guard, [_file_of(guard)])
        while len(self.guards) > MAX_GUARDS:
            self._close(self.guards.popitem(last=False)[1][0])
        return guard

    @staticmethod
    def _close(guard: Guard) -> None:
        with contextlib.suppress(Exception):
            if guard.store is not None:
                guard.store.close()

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "identity": self.identity,
            "socket": self.path,
            "started": self.started,
            "idle_exit": self.idle_exit,
            "idle_for": round(time.monotonic() - self.last, 3),
            "handled": self.handled,
            "policies": len(self.guards),
            "cpu_seconds": time.process_time(),  # user + system, of this whole process
        }


def _file_of(guard: Guard) -> tuple[int, int] | None:
    """The device and inode of the guard's SQLite file (None for another store, or before the file exists)."""
    path = getattr(guard.store, "path", None)
    if not isinstance(path, str):
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _same_file(held: tuple[Guard, list[tuple[int, int] | None]]) -> bool:
    """Is the guard's SQLite file still the one it opened? (Remembered on its first use after it was created.)"""
    guard, seen = held
    if getattr(guard.store, "path", None) is None:
        return True
    now = _file_of(guard)
    if seen[0] is None:
        seen[0] = now
        return True
    return now == seen[0]


@contextlib.contextmanager
def _within(directory: str) -> Iterator[None]:
    here = os.getcwd()
    try:
        os.chdir(directory)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.chdir(here)


def _receive(connection: socket.socket) -> bytes | None:
    """The whole request (the client shuts its side when done); None when too big."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = connection.recv(1 << 16)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_REQUEST:
            connection.sendall(b"declined too big\n")
            return None


# -- starting and stopping ----------------------------------------------------------------------------------


def _request(path: str, command: bytes, timeout: float = 5.0) -> dict[str, Any] | None:
    """A ``status``, ``stop`` or ``replace\nIDENTITY`` request to the server at ``path``: its status, None when none
    answers."""
    connection = _connect(path, timeout)
    if connection is None:
        return None
    try:
        answer = _exchange(connection, _PROTOCOL + b" " + command + (b"" if b"\n" in command else b"\n"))
    except Exception:
        return None
    head, _, body = answer.partition(b"\n")
    if head not in (b"status", b"stopping"):
        return None
    try:
        status: dict[str, Any] = json.loads(body)
    except ValueError:
        return None
    return status


def _lock(lock_path: str, sock_path: str) -> int | None:
    """The lock file's descriptor, held (for as long as this process runs); None when a server of this
    loopwatch already runs. A server of another one is asked to stop, and waited for."""
    import fcntl

    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        pass
    running = _request(sock_path, b"status")
    if running is not None and running.get("identity") == _identity():
        os.close(fd)
        return None  # ours already runs (two hooks started one each at the same time)
    # another loopwatch's (or one starting): ask it to leave, unless it is ours by now (started meanwhile)
    _request(sock_path, b"replace\n" + _identity().encode("utf-8", "surrogateescape"))
    deadline = time.monotonic() + LOCK_WAIT
    while time.monotonic() < deadline:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            time.sleep(0.05)
    os.close(fd)
    return None


def _write_private(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def _log_to(path: str) -> None:
    """This process's stderr to the log file (0600; emptied when over 1 MB)."""
    with contextlib.suppress(OSError):
        if os.path.getsize(path) > _MAX_LOG:
            os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115


def _serve(idle_exit: float = IDLE_EXIT, *, log: bool = True) -> int:
    """Run this user's hook server until idle for ``idle_exit`` seconds: 0, or 1 when it cannot (another one of
    this loopwatch already runs; a socket directory others could use; no Unix sockets)."""
    if not hasattr(socket, "AF_UNIX"):
        print("loopwatch: no Unix sockets on this system: the hook judges events in its own process", file=sys.stderr)
        return 1
    directory = runtime_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not _private_dir(directory):
        print(f"loopwatch: {directory} can be used by other users: no hook server there", file=sys.stderr)
        return 1
    sock_path, state_path = _server_path("sock", directory), _server_path("json", directory)
    if len(os.fsencode(sock_path)) > _MAX_SOCKET_PATH:
        print(f"loopwatch: {sock_path} is too long for a socket (set XDG_RUNTIME_DIR)", file=sys.stderr)
        return 1
    held = _lock(_server_path("lock", directory), sock_path)
    if held is None:
        return 1
    if log:
        _log_to(_server_path("log", directory))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_path)  # we hold the lock: whatever is there was left by a server that is gone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(sock_path)
    finally:
        os.umask(old_mask)
    os.chmod(sock_path, 0o600)
    listener.listen(128)
    daemon = _Daemon(listener, sock_path, idle_exit)

    def leave(signum: int, frame: object) -> None:
        daemon.stopping = True
        if daemon.waiting:  # else the event being judged is finished first
            raise InterruptedError

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGINT, leave)
    _write_private(state_path, json.dumps({"pid": os.getpid(), "identity": daemon.identity, "socket": sock_path}))
    os.chdir(directory)
    print(f"loopwatch hook server {os.getpid()} on {sock_path}", file=sys.stderr, flush=True)
    try:
        daemon.run()
    finally:
        for leftover in (sock_path, state_path):  # still ours: the lock is held until the next line
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        os.close(held)
    print(f"loopwatch hook server {os.getpid()} left after {daemon.handled} events", file=sys.stderr, flush=True)
    return 0


def server_status(directory: str | None = None) -> list[dict[str, Any]]:
    """The hook servers of this user (any loopwatch's) in ``directory`` (default: :func:`runtime_dir`), each as
    it reports itself; files of servers that are gone are removed."""
    directory = directory or runtime_dir()
    found = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        if not (name.startswith("claude-code-") and name.endswith(".json")):
            continue
        stem = os.path.join(directory, name[: -len(".json")])
        status = _request(stem + ".sock", b"status")
        if status is not None:
            found.append(status)
        elif not _locked(stem + ".lock"):
            for suffix in (".json", ".sock"):
                with contextlib.suppress(OSError):
                    os.unlink(stem + suffix)
    return found


def _locked(path: str) -> bool:
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def stop_servers(directory: str | None = None, wait: float = LOCK_WAIT) -> list[dict[str, Any]]:
    """Stop this user's hook servers (in ``directory``, default :func:`runtime_dir`), waiting up to ``wait``
    seconds for each to leave; the status each gave when asked to stop."""
    stopped = []
    for status in server_status(directory):
        sock_path = str(status["socket"])
        answer = _request(sock_path, b"stop")
        if answer is None:
            continue
        stopped.append(answer)
        lock = sock_path[: -len(".sock")] + ".lock"
        deadline = time.monotonic() + wait
        while _locked(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
    return stopped


def _status_command(stdout: Any, *, stop: bool = False) -> int:
    """``loopwatch hook claude-code --status`` (``--stop``): one line per server."""
    servers = stop_servers() if stop else server_status()
    if not servers:
        print(f"no loopwatch hook server running (socket directory {runtime_dir()})", file=stdout)
        return 0
    for status in servers:
        verb = "stopped" if stop else "running"
        print(
            f"{verb}: pid {status['pid']}, {status['identity']}, socket {status['socket']}, {status['handled']} "
            f"events, idle {status['idle_for']:.0f} s of {status['idle_exit']:.0f}, {status['cpu_seconds']:.2f} s CPU",
            file=stdout,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m loopwatch.adapters.claude_code_daemon [--idle-exit SECONDS] [--foreground]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m loopwatch.adapters.claude_code_daemon", description=main.__doc__)
    parser.add_argument("--idle-exit", type=_seconds, default=IDLE_EXIT, metavar="SECONDS", help="exit when idle")
    parser.add_argument("--foreground", action="store_true", help="errors on this terminal, not in the log file")
    args = parser.parse_args(argv)
    return _serve(args.idle_exit, log=not args.foreground)


if __name__ == "__main__":
    sys.exit(main())
