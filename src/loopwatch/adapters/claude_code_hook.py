"""The command Claude Code runs for loopwatch's hook (what ``loopwatch hook claude-code --install`` writes).

    PYTHON -c 'import sys; from loopwatch.adapters.claude_code_hook import main; sys.exit(main())' \
        [--store URL] [--preset NAME] [--config FILE] [--no-config] [--fail-closed] [--idle-exit SECONDS]

(``python -m loopwatch.adapters.claude_code_hook`` does the same; ``-m`` costs a third of a bare interpreter's
start-up more, for its ``runpy``.)

Claude Code starts a command hook once per event. Judging in that process means loading the rules and the
standard library modules they use each time (:mod:`loopwatch.adapters.claude_code`), six to eight times a bare
``python -c pass``. This command instead hands the event to this user's local hook server
(:mod:`loopwatch.adapters.claude_code_daemon`) over a Unix socket and writes the server's answer, importing
nothing but the interpreter's socket module: about 1.2x a bare ``python -c pass`` in CPU, and the server's share
of about 1.3 ms per event (``benchmarks/bench_hook.py``). The server judges the event exactly as the hook process
would (the same options, the same configuration file found from the hook's working directory, the same session
store), so the verdicts are the same and sessions are shared with in-process hook runs.

When no server answers (none running yet, one that died, one of another loopwatch version), this run judges the
event itself, as ``loopwatch hook claude-code`` does, and starts the server in the background for the next events.
The server exits by itself after ``--idle-exit`` seconds without an event (default :data:`IDLE_EXIT`, 30 minutes;
the setting of the run that started it counts). ``loopwatch hook claude-code --status`` shows it, ``--stop`` stops
it. ``loopwatch hook claude-code --install --in-process`` writes a hook that never starts one.

The socket lives in ``$XDG_RUNTIME_DIR/loopwatch`` (else ``loopwatch/run`` in the cache directory of the default
session store), a directory only its owner can enter; one that other users could enter is not used (the event is
judged here, with a note on stderr), nor a socket path too long for the system.
When the server took the event but gave no answer in :data:`TIMEOUT` seconds, nothing is judged (judging here too
would count the event twice): the event goes ahead, or with ``--fail-closed`` a tool call is refused.
On a system without Unix sockets every event is judged in the hook's own process.
"""

from __future__ import annotations

import os
import sys

from .. import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported on a hook run
    from _socket import socket
    from collections.abc import Mapping

__all__ = ["IDLE_EXIT", "TIMEOUT", "main", "runtime_dir"]

IDLE_EXIT = 1800
"""Seconds without an event after which the hook server exits (``--idle-exit`` changes it)."""
TIMEOUT = 5.0
"""Seconds the hook waits for the server's answer before it gives up on the event (Claude Code allows 10)."""
_PROTOCOL = b"loopwatch-hook/1"
_SERVER_MODULE = "loopwatch.adapters.claude_code_daemon"
_MAX_ANSWER = 1 << 22
_MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103  # bytes of a socket's path, at most


def _cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """``CACHE/loopwatch``, ``CACHE`` being the user's cache directory (``$XDG_CACHE_HOME``, ``~/Library/Caches``
    on macOS, ``%LOCALAPPDATA%`` on Windows, else ``~/.cache``), as ``environ`` (default: this process's) says."""
    env = os.environ if environ is None else environ
    home = (environ.get("HOME") if environ is not None else None) or os.path.expanduser("~")
    cache = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        if sys.platform == "darwin":
            cache = os.path.join(home, "Library", "Caches")
        elif os.name == "nt" and env.get("LOCALAPPDATA"):
            cache = env["LOCALAPPDATA"]
        else:
            cache = os.path.join(home, ".cache")
    return os.path.join(cache, "loopwatch")


def runtime_dir() -> str:
    """The directory of the hook server's socket: ``$XDG_RUNTIME_DIR/loopwatch``, else ``CACHE/loopwatch/run``
    (``CACHE`` the cache directory of the default session store)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    return os.path.join(runtime, "loopwatch") if os.path.isabs(runtime) else os.path.join(_cache_dir(), "run")


def _identity() -> str:
    """What a server must be to judge this hook's events: this loopwatch's version, where it is installed, and
    the interpreter's version."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"loopwatch {__version__} at {package} on Python {sys.version.split()[0]}"


def _server_path(suffix: str, directory: str | None = None) -> str:
    """``DIR/claude-code-HASH.SUFFIX``: one server per interpreter (``HASH`` of its path), so that two
    installations never take each other's server."""
    digest = 0x811C9DC5  # FNV-1a, 32 bits: a file name, not a secret
    for byte in os.fsencode(sys.executable):
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return os.path.join(directory or runtime_dir(), f"claude-code-{digest:08x}.{suffix}")


def _private_dir(directory: str) -> bool:
    """Is ``directory`` a real directory of this user's that nobody else can write to (or read)?"""
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return (info.st_mode & 0o170000) == 0o040000 and info.st_uid == os.getuid() and not info.st_mode & 0o077


class _Unanswered(Exception):
    """The server took the event but gave no usable answer: judging it here too would count it twice."""


def _connect(path: str, timeout: float = TIMEOUT) -> socket | None:
    """A connected socket to the server at ``path``; None when no server listens there."""
    import _socket

    if not hasattr(_socket, "AF_UNIX"):
        return None
    try:
        connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        connection.settimeout(timeout)
        connection.connect(path)
    except (OSError, ValueError):  # no file, nobody listening, a path too long for a socket
        connection.close()
        return None
    return connection


def _exchange(connection: socket, request: bytes) -> bytes:
    """Send ``request``, read the whole answer; :class:`_Unanswered` when it does not come."""
    import _socket

    try:
        connection.sendall(request)
        connection.shutdown(_socket.SHUT_WR)
        parts = []
        size = 0
        while size <= _MAX_ANSWER:
            chunk = connection.recv(65536)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _Unanswered(str(exc) or type(exc).__name__) from None
    finally:
        connection.close()
    answer = b"".join(parts)
    if not answer:
        raise _Unanswered("the server closed the connection")
    return answer


def _ask(data: bytes, args: list[str]) -> tuple[str, bytes, bytes]:
    """Hand one hook input to the server: ``("ok", stdout, stderr)``; ``("absent", ...)`` when no server listens,
    ``("refused", ...)`` when the one listening is not this loopwatch (it is to be replaced), ``("declined", ...)``
    when it leaves the event to this process; :class:`_Unanswered` when it took the event and gave no answer."""
    directory = runtime_dir()
    path = _server_path("sock", directory)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        _note(f"{path} is too long for a socket (set XDG_RUNTIME_DIR): the event is judged here")
        return "declined", b"", b""
    if not _private_dir(directory):
        if not os.path.lexists(directory):
            return "absent", b"", b""  # the server creates it
        _note(f"{directory} is not a directory only you can use (chmod 700 it): the event is judged here")
        return "declined", b"", b""
    try:
        cwd = os.getcwd()
    except OSError:  # a directory deleted under the hook: the hook process says what it makes of it
        return "declined", b"", b""
    connection = _connect(path)
    if connection is None:
        return "absent", b"", b""
    env = os.environ
    fields = [_identity(), cwd, env.get("LOOPWATCH_STORE", ""), env.get("XDG_CACHE_HOME", ""), env.get("HOME", "")]
    header = "\0".join(fields + args).encode("utf-8", "surrogateescape")
    answer = _exchange(connection, b"%s judge %d\n%s%s" % (_PROTOCOL, len(header), header, data))
    first, _, rest = answer.partition(b"\n")
    words = first.split()
    if words[:1] == [b"ok"] and len(words) == 3 and words[1].isdigit() and words[2].isdigit():
        out_size, err_size = int(words[1]), int(words[2])
        if len(rest) == out_size + err_size:
            return "ok", rest[:out_size], rest[out_size:]
    if words[:1] in ([b"refused"], [b"declined"]):
        return words[0].decode(), b"", b""
    raise _Unanswered(f"the hook server answered {first[:60]!r}")


def _start_server(idle_exit: str | None) -> None:
    """Start the hook server in the background, detached from this process and from Claude Code (its own
    session, no inherited output), unless this system cannot run one."""
    import _socket

    if not hasattr(_socket, "AF_UNIX"):
        return
    argv = [sys.executable, "-m", _SERVER_MODULE]
    if idle_exit is not None:
        argv += ["--idle-exit", idle_exit]
    try:
        if hasattr(os, "posix_spawn"):  # no subprocess module to import
            null = os.devnull
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ]
            try:
                os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions, setsid=True)
                return
            except NotImplementedError:  # no POSIX_SPAWN_SETSID here
                pass
        import subprocess

        null_io = subprocess.DEVNULL
        subprocess.Popen(argv, stdin=null_io, stdout=null_io, stderr=null_io, start_new_session=True)
    except (OSError, TypeError, ValueError) as exc:
        _note(f"could not start the hook server ({exc}); events are judged in the hook's process")


def _note(message: str) -> None:
    try:  # noqa: SIM105 (contextlib is one more import on every hook run)
        print(f"loopwatch hook: {message}", file=sys.stderr)
    except (OSError, ValueError):  # stderr closed: nothing more to do
        pass


def _split_idle(args: list[str]) -> tuple[str | None, list[str]]:
    """``--idle-exit N`` (the server's setting, not the judging's) taken out of the hook's options."""
    rest: list[str] = []
    idle = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--idle-exit" and i + 1 < len(args):
            idle = args[i + 1]
            i += 2
            continue
        if arg.startswith("--idle-exit="):
            idle = arg.partition("=")[2]
        else:
            rest.append(arg)
        i += 1
    return (idle if idle is not None and idle.isdigit() else None), rest


def _refuse_unjudged(data: bytes, args: list[str]) -> None:
    """With ``--fail-closed``, a tool call the server took and did not answer is refused."""
    if "--fail-closed" not in args:
        return
    import json

    try:
        payload = json.loads(data)
    except ValueError:
        return
    if isinstance(payload, dict) and payload.get("hook_event_name") == "PreToolUse":
        reason = "The loop guard could not judge this call (its server gave no answer), so it was refused."
        deny = {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}
        sys.stdout.write(json.dumps({"hookSpecificOutput": deny}) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Judge one hook event (read on stdin) through the local hook server, else here; always 0."""
    idle_exit, args = _split_idle(list(sys.argv[1:] if argv is None else argv))
    data = sys.stdin.buffer.read()
    try:
        status, out, err = _ask(data, args)
    except _Unanswered as exc:
        _note(f"the hook server gave no answer ({exc}); nothing judged")
        _refuse_unjudged(data, args)
        return 0
    if status == "ok":
        if err:
            sys.stderr.buffer.write(err)
            sys.stderr.flush()
        if out:
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
        return 0
    if status != "declined":  # none running, or another loopwatch's: start ours for the next events
        _start_server(idle_exit)
    import io

    from .claude_code import main as judge_here

    return judge_here(args, stdin=io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


if __name__ == "__main__":
    sys.exit(main())
