"""The JSON Lines audit log: one line per record, on disk (and synced) when ``emit`` returns."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from ..core._checked import file_path
from ..redact import Redactor
from ._common import AuditWriteError, make_redactor, redact_repr


class JsonlAuditSink:
    """Append one JSON line per record to ``path``; the record is on disk when ``emit`` returns.

    The file (and its parent directories) is created if needed, readable by its owner only. With
    ``fsync=True`` (the default) every record is flushed to stable storage. Any failure raises
    :class:`AuditWriteError`, from the constructor or from ``emit``; ``emit`` after ``close`` too.
    Safe to share between threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, redact: bool | Redactor = True, fsync: bool = True) -> None:
        self.path = file_path(path, "path")
        self.fsync = bool(fsync)
        self._redactor = make_redactor(redact)
        self._lock = threading.Lock()
        self._records_written = 0
        self._closed = False
        self._line_broken = False  # a failed write left half a line in the file
        self._fd = self._open()
        self._sync = self.fsync and stat.S_ISREG(os.fstat(self._fd).st_mode)  # pipes, ttys can't fsync

    @property
    def records_written(self) -> int:
        """How many records were written (and synced) so far."""
        return self._records_written

    @property
    def closed(self) -> bool:
        return self._closed

    def emit(self, record: Mapping[str, Any]) -> None:
        """Write ``record`` (redacted); raise :class:`AuditWriteError` if it is not written."""
        line = self._encode(record)
        with self._lock:
            if self._closed:
                raise AuditWriteError("audit sink is closed", path=str(self.path))
            self._write(line)
            self._records_written += 1

    def close(self) -> None:
        """Close the file; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                os.close(self._fd)
            except OSError as exc:
                raise AuditWriteError(f"cannot close audit log: {exc}", path=str(self.path)) from exc

    def __enter__(self) -> JsonlAuditSink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return (
            f"JsonlAuditSink(path={str(self.path)!r}, fsync={self.fsync}, "
            f"redact={redact_repr(self._redactor)}, records_written={self._records_written}{state})"
        )

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            return os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise AuditWriteError(f"cannot open audit log: {exc}", path=str(self.path)) from exc

    def _encode(self, record: Mapping[str, Any]) -> bytes:
        try:
            text = json.dumps(self._redactor(record), ensure_ascii=True, allow_nan=False, default=repr)
        except (TypeError, ValueError) as exc:
            raise AuditWriteError(f"cannot serialise audit record: {exc}", path=str(self.path)) from exc
        return (text + "\n").encode("ascii")

    def _write(self, line: bytes) -> None:
        data = memoryview(b"\n" + line if self._line_broken else line)
        try:
            while data:
                written = os.write(self._fd, data)
                if written <= 0:
                    raise OSError("write returned no progress")
                self._line_broken = True
                data = data[written:]
            self._line_broken = False
            if self._sync:
                os.fsync(self._fd)
        except OSError as exc:
            raise AuditWriteError(f"cannot write audit record: {exc}", path=str(self.path)) from exc
