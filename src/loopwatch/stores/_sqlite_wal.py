"""The SQLite store's write-ahead log: WAL mode for the file, and checkpoints run by the store itself.

SQLite checkpoints (copies the log's pages into the database) after any commit that leaves 1,000 pages or more in
the log, and when it cannot finish because another connection is busy (always, with two processes writing) it tries
again after every following commit, each time syncing the log to disk: with two busy writers that syncing took
most of their time. Each connection of the store checkpoints instead every :data:`CHECKPOINT_EVERY` of its own
writes, and SQLite's own threshold stays as a backstop, raised to :data:`AUTO_CHECKPOINT_PAGES`.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Final

CHECKPOINT_EVERY: Final = 512
"""Writes by one connection between the checkpoints it runs (writing a session's ~4 KB packed state adds about 4 pages
to the log: ~2,000 pages between checkpoints, the order of SQLite's own 1,000-page interval)."""
AUTO_CHECKPOINT_PAGES: Final = 10_000
"""SQLite's own checkpoint threshold, a backstop for processes that write too seldom to reach
:data:`CHECKPOINT_EVERY` (a command hook writes once): the log stays under ~40 MB."""


def set_up_checkpoints(conn: sqlite3.Connection) -> None:
    """SQLite's automatic checkpoints as the backstop only (the store runs its own, :func:`checkpoint`)."""
    conn.execute(f"PRAGMA wal_autocheckpoint = {AUTO_CHECKPOINT_PAGES}")


def checkpoint(conn: sqlite3.Connection) -> None:
    """A checkpoint in ``RESTART`` mode (the log's pages copied into the database, and the log started over by the
    next writer) that waits for nobody: with another connection busy it copies what it can (as ``PASSIVE``).
    Raises :class:`sqlite3.Error`; a checkpoint that fails loses nothing (the log keeps every page)."""
    conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()


def checkpoint_failed(store: object, error: sqlite3.Error) -> None:
    """Log a checkpoint of ``store`` that failed (it loses nothing: the log keeps every page until the next one)."""
    import logging  # here: only a failed checkpoint logs

    logging.getLogger("loopwatch").warning(
        "loopwatch: %r could not checkpoint its write-ahead log (%s); nothing is lost, the next checkpoint, %d writes"
        " on, tries again",
        store,
        error,
        CHECKPOINT_EVERY,
    )


def use_wal(conn: sqlite3.Connection, deadline: float) -> None:
    """Put the file in WAL mode (persistent: once per file). Switching needs the file to itself and SQLite does not
    wait for it (no busy handler), so a connection opened while others read retries until ``deadline``
    (:func:`time.monotonic`)."""
    while True:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # reads the file's journal mode
        if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            return
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)
