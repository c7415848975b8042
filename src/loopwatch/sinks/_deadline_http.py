"""HTTP connections that give up at a deadline: every send and receive of a post waits at most until the deadline
of the record being posted, however slowly the server answers."""

from __future__ import annotations

import http.client
import io
import socket
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from typing import Any


class _DeadlineSocket:
    """A connected socket whose every send and receive waits at most its time-out and, in all, until one
    deadline: a server that sends its answer a byte at a time cannot hold a post past the deadline."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._timeout: float | None = sock.gettimeout()

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the delivery deadline passed")
        self._sock.settimeout(left if self._timeout is None else min(left, self._timeout))

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        received: int = self._sock.recv_into(buffer, nbytes, flags)
        return received

    def recv(self, size: int, flags: int = 0) -> bytes:
        self._arm()
        data: bytes = self._sock.recv(size, flags)
        return data

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm()
        self._sock.sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._arm()
        sent: int = self._sock.send(data, flags)
        return sent

    def makefile(self, mode: str = "r", buffering: int | None = None, **_: Any) -> Any:
        raw = socket.SocketIO(self, "rb" if "r" in mode else "wb")  # type: ignore[arg-type]
        return io.BufferedReader(raw) if "r" in mode else io.BufferedWriter(raw)

    def _decref_socketios(self) -> None:
        """Called by the file ``makefile`` gives when it closes (the socket itself is closed by its owner)."""

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = _within(self._deadline, self.timeout)
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        self.timeout = _within(self._deadline, self.timeout)
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


def _within(deadline: float, timeout: Any) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the delivery deadline passed")
    return left if not isinstance(timeout, (int, float)) else min(float(timeout), left)


class DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """Opens connections that give up at the deadline ``deadline()`` returns (the record being posted)."""

    def __init__(self, deadline: Callable[[], float]) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_DeadlineHTTPConnection, deadline=self._deadline()), req)


class DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Callable[[], float]) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = partial(_DeadlineHTTPSConnection, deadline=self._deadline())
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]
