"""The SQLite store's connections: lock-wait deadlines, SQLite's "busy" error, rolling back and closing without
raising, and which file a connection has open.

A connection keeps the file it opened even when the path is removed or names another file afterwards (a database
deleted by hand while agents run, or replaced by a copy): it would go on reading and writing a file no other
process sees. The store remembers each connection's file (:func:`file_identity`) and opens the path afresh when it
names another one, closing the old connection (SQLite leaves the new database's ``-wal`` file alone: it sees that
the old one's file has moved).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading

FileIdentity = tuple[int, int]


def file_identity(path: str) -> FileIdentity | None:
    """The (device, inode) of the file at ``path``; ``None`` when there is none (or it cannot be read)."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


class Deadline:
    """Sets a thread's deadline for lock waits, and restores the one before it on exit."""

    def __init__(self, local: threading.local, deadline: float) -> None:
        self._local = local
        self._deadline = deadline
        self._before: float | None = None

    def __enter__(self) -> None:
        self._before = getattr(self._local, "deadline", None)
        self._local.deadline = self._deadline if self._before is None else min(self._before, self._deadline)

    def __exit__(self, *exc: object) -> None:
        self._local.deadline = self._before


def busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY: another connection holds the lock (worth waiting for, unlike other errors)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return bool(code & 0xFF == 5)  # SQLITE_BUSY (the sqlite3 constant is 3.11+)
    return "database is locked" in str(exc)


def rollback(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except Exception:  # the connection is dropped after a failure anyway: closing it rolls back
        pass


def close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()
