"""The SQLite store itself: one connection per thread (and per process after ``fork``), lock waits bounded by a
deadline, every write one atomic statement or one ``BEGIN IMMEDIATE`` transaction (the module
:mod:`loopwatch.stores.sqlite` says how it is laid out and used)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final

from ..errors import ConfigError
from . import (
    MAX_SWARM_FINGERPRINTS,
    MAX_SWARM_WORKERS,
    NO_STATE,
    Store,
    StoreError,
    SwarmTally,
    Versioned,
    from_storable,
    storable,
)
from . import _sqlite_tables as sql
from ._options import check_ttl, seconds
from ._sqlite_connection import Deadline, FileIdentity, busy, close_quietly, file_identity, rollback
from ._sqlite_tables import SCHEMA_VERSION, has_meta, row_count, row_name, row_versioned, row_workers
from ._sqlite_wal import CHECKPOINT_EVERY, checkpoint, checkpoint_failed, set_up_checkpoints, use_wal

FILE_CHECK_EVERY: Final = 0.01
"""Seconds between a thread's checks that the path still names the file its connection opened (a ``stat``, ~1 us: not
at every operation; see :mod:`._sqlite_connection`)."""

SYNCHRONOUS: Final = ("off", "normal", "full", "extra")

PAGE: Final = 256  # sessions read per query by sessions()

# What a failing SQLite call can raise: its own errors, the OS's, and values it cannot bind (a str with
# lone surrogates, an int beyond 64 bits) or read back (a workers list that is not JSON).
_FAILURES: Final = (sqlite3.Error, OSError, ValueError, OverflowError)

# Connections inherited through fork() are never used or closed in the child (closing could disturb the
# parent's locks and WAL index); they are parked here for the life of the child process.
_INHERITED: list[sqlite3.Connection] = []
_STORES: weakref.WeakSet[SqliteStore] = weakref.WeakSet()


def _after_fork() -> None:
    for store in list(_STORES):
        store._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def config_error(message: str) -> ConfigError:
    return ConfigError(message, field="store")


class SqliteStore(Store):
    """Sessions and swarm counts in one SQLite file, shared by the processes and threads that open it.

    ``path``: the database file (created with its tables on first use; its directory must exist).
    ``ttl``: seconds a session or swarm outlives its last write (``None``: never expires).
    ``timeout``: seconds a write waits for another connection's lock before :class:`StoreError`.
    ``synchronous``: SQLite's ``synchronous`` pragma (``normal`` is safe in WAL mode; see the module).
    ``clock``: the time source for expiry (seconds; injectable for tests).

    Thread-safe: each thread uses its own connection. Call :meth:`close` when no thread uses the store any
    more; a closed store reopens on its next use.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        timeout: float = 5.0,
        synchronous: str = "normal",
        clock: Callable[[], float] = time.time,
        url: str | None = None,
    ) -> None:
        raw = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
        if not isinstance(raw, str):  # a number, bytes, a path object made of bytes
            raise config_error(f"a SQLite store's path is a file name, not {type(path).__name__}")
        if not raw or raw == ":memory:" or raw.startswith("file:"):
            raise config_error(f"a SQLite store needs a database file, not {raw!r} (memory:// keeps state in memory)")
        if "\0" in raw:
            raise config_error(f"database path {raw!r} contains a NUL character")
        self.path = os.path.abspath(raw)
        if os.path.isdir(self.path):
            raise config_error(f"database path {self.path!r} is a directory")
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):
            raise config_error(f"the directory of database {self.path!r} does not exist")
        if not (seconds(timeout) and timeout >= 0):
            raise config_error(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        if not isinstance(synchronous, str) or synchronous.lower() not in SYNCHRONOUS:
            raise config_error(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r}")
        self.url = url if url is not None else "sqlite:///" + self.path.replace(os.sep, "/")
        self.ttl = check_ttl(ttl)
        self.timeout = float(timeout)
        self.synchronous = synchronous.lower()
        self._clock = clock
        self._local = threading.local()
        self._lock = threading.Lock()  # guards _conns
        self._conns: dict[int, tuple[threading.Thread, sqlite3.Connection]] = {}
        self._epoch = object()  # renewed by close() and fork: a thread's connection from another epoch is stale
        self._pid = os.getpid()
        self.checkpoints = self.checkpoint_failures = 0  # run by the store (_wrote), and failed (nothing lost)
        self.reopened = 0  # times a thread found the file removed or replaced, and opened the path afresh
        _STORES.add(self)

    # -- connections ---------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened (with the schema made) on first use in this thread and process."""
        if self._pid != os.getpid():  # forked without the at-fork hook (e.g. a C extension's fork)
            self._forked()
        entry: tuple[object, sqlite3.Connection, FileIdentity | None] | None = getattr(self._local, "entry", None)
        if entry is not None and entry[0] is self._epoch:
            now = time.monotonic()
            if now < self._local.checked + FILE_CHECK_EVERY:
                return entry[1]
            self._local.checked = now
            if file_identity(self.path) == entry[2]:
                return entry[1]
            self._file_lost()
        return self._open()

    def _file_lost(self) -> None:
        """The path names another file than this thread's connection opened, or none: the file was removed or
        replaced. The connection is dropped (:meth:`_drop`) and the path opened afresh; the sessions it held start
        afresh (as after a Redis server restarted empty), and this is logged and counted in :attr:`reopened`."""
        self._drop()
        self.reopened += 1
        import logging  # here: only a lost file logs

        logging.getLogger("loopwatch").warning(
            "loopwatch: sqlite store %s: the database file was removed or replaced while open; opened afresh", self.path
        )

    def _open(self) -> sqlite3.Connection:
        epoch = self._epoch
        # No busy handler of SQLite's own: it sleeps 1 ms, then 2, 5, 10... on the first contention, which
        # caps two busy writers at a few hundred writes/s; _retry waits tens of microseconds instead.
        conn = sqlite3.connect(self.path, timeout=0.0, isolation_level=None, check_same_thread=False)
        try:
            now = time.monotonic()
            wait = max(0.0, self._wait_limit(now) - now)
            conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")  # setting up may wait as SQLite does
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA journal_size_limit = 67108864")  # the -wal file shrinks back to 64 MB at most
            set_up_checkpoints(conn)  # the store checkpoints itself (_wrote), SQLite only as a backstop
            use_wal(conn, self._wait_limit(time.monotonic()))
            self._ensure_schema(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # from now on _retry waits, in finer steps
        except BaseException:
            conn.close()
            raise
        stale: list[sqlite3.Connection] = []
        with self._lock:
            for key, (thread, old) in list(self._conns.items()):
                if not thread.is_alive():  # a finished thread's connection: nobody will use it again
                    del self._conns[key]
                    stale.append(old)
            self._conns[id(conn)] = (threading.current_thread(), conn)
        for old in stale:
            close_quietly(old)
        self._local.entry = (epoch, conn, file_identity(self.path))
        self._local.checked = time.monotonic()
        return conn

    def deadline(self, seconds: float) -> contextlib.AbstractContextManager[None]:
        """Within ``with store.deadline(s):``, this thread's operations wait at most ``s`` seconds in all for
        another process's lock (instead of ``timeout`` each), then fail with :class:`StoreError`: for a
        caller that must answer in time, such as a hook run that Claude Code cancels after 10 seconds."""
        return Deadline(self._local, time.monotonic() + max(0.0, seconds))

    def _wait_limit(self, now: float) -> float:
        """Until when a busy database is waited for, from ``now``: the timeout, or this thread's deadline."""
        limit = now + self.timeout
        deadline: float | None = getattr(self._local, "deadline", None)
        return limit if deadline is None else min(limit, deadline)

    def _retry(self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """``conn.execute`` that waits for a busy database (another writer) up to the store's timeout (or the
        thread's deadline), polling every 50 us at first and every 2 ms at most; then raises SQLite's
        "database is locked"."""
        deadline = 0.0
        pause = 0.00005
        while True:
            try:
                return conn.execute(sql, params)
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    raise
                now = time.monotonic()
                if not deadline:
                    deadline = self._wait_limit(now)
                if now >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.002)

    def _wrote(self, conn: sqlite3.Connection) -> None:
        """After a committed write: every :data:`~._sqlite_wal.CHECKPOINT_EVERY` of this connection's, a checkpoint
        (:mod:`._sqlite_wal`); one that fails loses nothing (counted and logged, the next one tries again)."""
        writes = self._local.writes = getattr(self._local, "writes", 0) + 1
        if writes % CHECKPOINT_EVERY:
            return
        try:
            checkpoint(conn)
        except sqlite3.Error as exc:
            self.checkpoint_failures += 1
            checkpoint_failed(self, exc)
        else:
            self.checkpoints += 1

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(sql.READ_SCHEMA).fetchone() if has_meta(conn) else None
        if row is None or str(row[0]) == "1":
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                row = conn.execute(sql.READ_SCHEMA).fetchone() if has_meta(conn) else None
                if row is None:
                    for statement in sql.SCHEMA:
                        conn.execute(statement)
                elif str(row[0]) == "1":  # written by the layout without tokens: upgraded once, by one process
                    for statement in sql.UPGRADE_1:
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            row = conn.execute(sql.READ_SCHEMA).fetchone()
        found = int(row[0]) if row is not None and str(row[0]).isdigit() else -1
        if found != SCHEMA_VERSION:
            raise StoreError(
                f"sqlite store {self.path}: tables of schema version {row[0] if row else None!r}, "
                f"this loopwatch reads version {SCHEMA_VERSION} (a newer loopwatch wrote the file?)"
            )

    def _drop(self) -> None:
        """Forget this thread's connection after a failure: the next call opens a fresh one (a connection
        opened while the file was read-only, say, stays read-only)."""
        entry: tuple[object, sqlite3.Connection, FileIdentity | None] | None = getattr(self._local, "entry", None)
        self._local.entry = None
        if entry is None or entry[0] is not self._epoch:
            return
        with self._lock:
            self._conns.pop(id(entry[1]), None)
        close_quietly(entry[1])

    def _forked(self) -> None:
        """In a child process: park the parent's connections and start afresh."""
        _INHERITED.extend(conn for _, conn in self._conns.values())
        entry = getattr(self._local, "entry", None)
        if entry is not None:
            _INHERITED.append(entry[1])
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns = {}
        self._epoch = object()
        self._pid = os.getpid()

    def _fail(self, operation: str, exc: BaseException) -> StoreError:
        self._drop()
        if isinstance(exc, StoreError):
            return exc
        hint = ""
        if "readonly" in str(exc):  # SQLite makes the -wal and -shm files with the database's file mode
            hint = " (the file, its -wal and -shm files and its directory must be writable)"
        return StoreError(f"sqlite store {self.path}: {operation} failed: {exc}{hint}")

    def _expiry(self, now: float) -> float | None:
        return None if self.ttl is None else now + self.ttl

    # -- sessions ------------------------------------------------------------------------------------

    def load(self, session: str) -> Versioned | None:
        try:
            row = self._retry(self._conn(), sql.LOAD, (storable(session), self._clock())).fetchone()
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"load of session {session!r}", exc) from exc
        return None if row is None else row_versioned(row)

    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        """One autocommitted statement when it succeeds; on a conflict, one more to read the winner.

        When the session has no state any more (deleted, expired) but ``expected`` is not ``""``, the winner is
        :data:`~loopwatch.stores.NO_STATE`: no state, write again with ``expected=""``."""
        key, text = storable(session), storable(state)
        try:
            conn = self._conn()
            while True:
                now = self._clock()
                if not expected:
                    written = self._retry(conn, sql.CREATE, (key, text, self._expiry(now), token, now)).rowcount
                else:
                    written = self._retry(
                        conn, sql.UPDATE, (text, self._expiry(now), token, key, expected, now)
                    ).rowcount
                if written:
                    self._wrote(conn)
                    return None
                row = self._retry(conn, sql.LOAD, (key, self._clock())).fetchone()
                if row is not None:
                    return row_versioned(row)
                if expected:
                    return NO_STATE
                # expected == "" lost to a row that is gone already (deleted or expired since): try again
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"compare_and_set of session {session!r}", exc) from exc

    def delete(self, session: str) -> None:
        try:
            self._retry(self._conn(), sql.DELETE, (storable(session),))
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"delete of session {session!r}", exc) from exc

    def _sessions_page(self, after: str | None) -> list[tuple[str, Versioned]]:
        try:
            conn = self._conn()
            now = self._clock()
            if after is None:
                rows = self._retry(conn, sql.PAGE_FIRST, (now, PAGE)).fetchall()
            else:
                rows = self._retry(conn, sql.PAGE_NEXT, (after, now, PAGE)).fetchall()
        except (*_FAILURES, StoreError) as exc:
            raise self._fail("listing sessions", exc) from exc
        return [(row_name(row[0]), row_versioned(row[1:])) for row in rows]

    def sessions(self) -> Iterator[tuple[str, Versioned]]:
        """Live sessions in pages of a few hundred (by id), so a large store is not read into memory at once."""
        after: str | None = None
        while True:
            page = self._sessions_page(after)
            yield from page
            if len(page) < PAGE:
                return
            after = storable(page[-1][0])

    # -- swarms --------------------------------------------------------------------------------------

    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        try:
            conn = self._conn()
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                tally = self._swarm_add(conn, storable(swarm), storable(fingerprint), worker, storable(tool))
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            self._wrote(conn)
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_add to swarm {swarm!r}", exc) from exc
        return tally

    def _swarm_add(self, conn: sqlite3.Connection, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        now = self._clock()
        head = conn.execute(sql.SWARM, (swarm,)).fetchone()
        if head is None or (head[1] is not None and head[1] < now):  # unknown or expired: start afresh
            conn.execute(sql.CALLS_DROP, (swarm,))
            size = 0
        else:
            size = head[0]
        row = conn.execute(sql.CALL, (swarm, fingerprint)).fetchone()
        if row is None:
            if size >= MAX_SWARM_FINGERPRINTS:
                size -= conn.execute(sql.CALL_OLDEST, (swarm,)).rowcount
            conn.execute(sql.CALL_NEW, (swarm, fingerprint, 1, tool, json.dumps([worker])))
            size += 1
            tally = SwarmTally(1, 1)
        else:
            calls = row_count(row[1]) + 1
            workers = row_workers(row[2])
            if worker not in workers and len(workers) < MAX_SWARM_WORKERS:
                workers.append(worker)
                conn.execute(sql.CALL_WORKERS, (calls, json.dumps(workers), row[0]))
            else:
                conn.execute(sql.CALL_COUNT, (calls, row[0]))
            tally = SwarmTally(calls, len(workers))
        conn.execute(sql.SWARM_SET, (swarm, size, self._expiry(now)))
        return tally

    def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        try:
            rows = self._retry(self._conn(), sql.COUNTS, (storable(swarm), self._clock())).fetchall()
            return {
                from_storable(str(row[0])): (row_count(row[1]), row_workers(row[2]), from_storable(str(row[3])))
                for row in rows
            }
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_counts of swarm {swarm!r}", exc) from exc

    def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        # converted first, as MemoryStore does (a bad value raises before anything changes)
        rows = [
            (storable(swarm), storable(str(k)), int(c), storable(str(t)), json.dumps([str(x) for x in w]))
            for k, (c, w, t) in counts.items()
        ]
        try:
            conn = self._conn()
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                conn.execute(sql.CALLS_DROP, (storable(swarm),))
                conn.executemany(sql.CALL_NEW, rows)
                conn.execute(sql.SWARM_SET, (storable(swarm), len(rows), self._expiry(self._clock())))
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_restore of swarm {swarm!r}", exc) from exc

    def swarm_clear(self, swarm: str) -> None:
        try:
            conn = self._conn()
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                conn.execute(sql.CALLS_DROP, (storable(swarm),))
                conn.execute(sql.SWARM_DROP, (storable(swarm),))
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_clear of swarm {swarm!r}", exc) from exc

    # -- upkeep --------------------------------------------------------------------------------------

    def health(self) -> bool:
        try:
            self._conn().execute("SELECT 1 FROM loopwatch_meta LIMIT 1").fetchall()
        except Exception:
            self._drop_quietly()
            return False
        return True

    def _drop_quietly(self) -> None:
        try:
            self._drop()
        except Exception:
            self._local.entry = None

    def expire(self) -> int:
        """Delete expired sessions and swarms (they already read as absent); how many were deleted."""
        try:
            conn = self._conn()
            now = self._clock()
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                sessions = conn.execute(sql.EXPIRE_SESSIONS, (now,)).rowcount
                conn.execute(sql.EXPIRE_CALLS, (now,))
                swarms = conn.execute(sql.EXPIRE_SWARMS, (now,)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
        except (*_FAILURES, StoreError) as exc:
            raise self._fail("expire", exc) from exc
        return int(sessions) + int(swarms)

    def close(self) -> None:
        """Close every connection this store opened in this process (the store reopens on its next use)."""
        if self._pid != os.getpid():
            self._forked()
        with self._lock:
            conns = [conn for _, conn in self._conns.values()]
            self._conns.clear()
            self._epoch = object()
        self._local.entry = None
        for conn in conns:
            close_quietly(conn)
