"""A Claude Code command hook that hands each event to a running hook service, for the cost of a bare Python.

    loopwatch hook claude-code --serve                                # once: the service, holding the guard
    loopwatch hook claude-code --install --relay http://127.0.0.1:7349/loopwatch/claude-code

Claude Code starts a command hook once per event. Judging in that process means importing the rules, opening the
store and reading the session's state each time (:mod:`loopwatch.adapters.claude_code`); the standard library
modules that alone take three times a bare ``python -c pass``. This relay imports nothing but the interpreter's
socket module (``_socket``, built in C): it reads the event on stdin, posts it to the service started with
``loopwatch hook claude-code --serve`` (the same answer an ``http`` hook gets), and writes the service's answer on
stdout. Where ``http`` hooks can be used they cost less still (``--install --http URL``); the relay is for set-ups
that run command hooks only.

When the service cannot be reached (not started, another port), the event is judged in this process as
:mod:`loopwatch.adapters.claude_code` would, with the hook options given after the URL (``--store``, ``--preset``,
``--config``, ``--fail-closed``): no event goes unjudged because the service is down, it only costs a full hook
run. When the service took the event but gave no answer in ``TIMEOUT`` seconds (or an answer that is not its own),
the call goes ahead unjudged and a line on stderr says so: judging it here too would count it twice.

The HTTP exchange is written out here (a request line, two headers, a body; a status line, a ``Content-Length``
and a body back) rather than made with :mod:`http.client`, whose imports (``email``, ``ssl``...) cost more than the
whole relay: it speaks only to this package's own service, on a local address.
"""

from __future__ import annotations

import sys

__all__ = ["TIMEOUT", "main"]

TIMEOUT = 5.0
"""Seconds the relay waits for the service (connecting, then answering) before judging the event itself."""
_MAX_ANSWER = 1 << 20


def _address(url: str) -> tuple[str, int, str] | None:
    """(host, port, path) of an ``http://HOST[:PORT]/PATH`` URL; None for anything else."""
    if not url.startswith("http://"):
        return None
    rest = url[len("http://") :]
    hostport, slash, path = rest.partition("/")
    host, colon, port = hostport.rpartition(":") if not hostport.endswith("]") else (hostport, "", "")
    if not colon:
        host, port = hostport, "80"
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port), "/" + path if slash else "/"


class _Unanswered(Exception):
    """The service took the event but gave no usable answer: judging it here too would count it twice."""


def _relay(url: str, body: bytes, timeout: float = TIMEOUT) -> bytes | None:
    """The service's answer to one hook event (its JSON body); None when the service could not be reached (nothing
    was sent); :class:`_Unanswered` when the event was sent and no usable answer came back."""
    address = _address(url)
    if address is None:
        return None
    host, port, path = address
    import _socket

    try:
        family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
        connection = _socket.socket(family, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        connection.settimeout(timeout)
        try:
            connection.connect((host, port))
        except (OSError, UnicodeError):
            return None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        try:
            connection.sendall(head.encode("ascii") + body)
            received = b""
            while len(received) <= _MAX_ANSWER:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
                answer = _answer(received)
                if answer is not None:
                    return answer
        except OSError as exc:
            raise _Unanswered(str(exc)) from None
        raise _Unanswered("the answer ended early")
    finally:
        connection.close()


def _answer(received: bytes) -> bytes | None:
    """The body of a complete ``200`` response in ``received``; None while incomplete or for any other answer."""
    end = received.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = received[:end].split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.") or lines[0][9:12] != b"200":
        raise _Unanswered(f"the hook service answered {lines[0][:60]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value)
    body = received[end + 4 :]
    if length is None or len(body) < length:
        return None
    return body[:length]


def main(argv: list[str] | None = None) -> int:
    """``python -m loopwatch.adapters.claude_code_relay URL [HOOK OPTIONS...]``: always 0 (Claude Code goes on)."""
    args = list(sys.argv[1:] if argv is None else argv)
    data = sys.stdin.buffer.read()
    try:
        answer = _relay(args[0], data) if args else None
    except _Unanswered as exc:
        # the service has the event: judging it here as well would count it twice; the call goes ahead
        print(f"loopwatch hook: the hook service gave no answer ({exc}); nothing judged", file=sys.stderr)
        return 0
    if answer is not None:
        if answer.strip() not in (b"", b"{}"):
            sys.stdout.buffer.write(answer.strip() + b"\n")
            sys.stdout.flush()
        return 0
    # the service is not there: judge here, as the in-process hook does
    import io

    from .claude_code import main as judge_here

    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    return judge_here(args[1:], stdin=stdin)


if __name__ == "__main__":
    sys.exit(main())
