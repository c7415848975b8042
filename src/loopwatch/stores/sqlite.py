"""The SQLite store: ``sqlite:///path/to/state.db``, for several processes guarding sessions on one machine.

    store_from_url("sqlite:///loops.db")                       # relative to the working directory
    store_from_url("sqlite:////var/lib/agent/loops.db?ttl=3600")  # absolute (four slashes, as in SQLAlchemy)

URL options: ``ttl`` (seconds a session or swarm outlives its last write; default: never expires),
``timeout`` (seconds to wait for another process's write lock before failing with "database is locked";
default 5), ``synchronous`` (``normal``, the default, or ``full``, ``extra``, ``off``).

The database runs in WAL mode (readers never wait for the writer) with ``synchronous=NORMAL``: a commit
survives the process crashing, and only a power loss or OS crash can drop the last commits (never corrupt
the file); ``synchronous=full`` trades write speed for durability across power loss too. Every write is
one atomic statement (a session's compare-and-set) or one ``BEGIN IMMEDIATE`` transaction (a swarm count),
so processes sharing the file never lose an update. Each thread and each process (after ``fork``) opens
its own connection. ``sqlite:///:memory:`` is refused: an in-memory SQLite database lives inside one
connection, so other threads and processes could not see it; ``memory://`` is the in-process store.

Tables (prefix ``loopwatch_``, so the file may hold other tables too): ``loopwatch_meta`` (the schema
version), ``loopwatch_sessions`` (id, version, state, token, expires_at), ``loopwatch_swarms`` (swarm, number of
fingerprints, expires_at) and ``loopwatch_swarm_calls`` (one row per swarm and fingerprint: calls, tool,
workers as a JSON list; the row id keeps insertion order, so the oldest fingerprints are evicted first).
Expired rows are treated as absent at once and deleted by :meth:`SqliteStore.expire`. A file written by
the previous layout (schema 1, without tokens) is upgraded in place on first use, each session given a
random token; every process sharing a file should run the same loopwatch version.

Names and texts are stored with :func:`~loopwatch.stores.storable`, so any Python string fits (SQLite's
text is UTF-8). A row whose fields have the wrong types (edited by hand, another program's) is read as what
it holds: its state then fails to decode and the guard reports the session as damaged.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

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

__all__ = ["SCHEMA_VERSION", "AsyncSqliteStore", "SqliteStore", "async_from_url", "from_url"]

SCHEMA_VERSION: Final = 2
"""The layout of the tables this module writes (recorded in ``loopwatch_meta``); 1 had no session tokens."""

OPTIONS: Final = ("ttl", "timeout", "synchronous")
SYNCHRONOUS: Final = ("off", "normal", "full", "extra")

_PAGE: Final = 256  # sessions read per query by sessions()

# What a failing SQLite call can raise: its own errors, the OS's, and values it cannot bind (a str with
# lone surrogates, an int beyond 64 bits) or read back (a workers list that is not JSON).
_FAILURES: Final = (sqlite3.Error, OSError, ValueError, OverflowError)

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS loopwatch_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS loopwatch_sessions (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL,"
    " state TEXT NOT NULL, expires_at REAL, token TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS loopwatch_sessions_expiry ON loopwatch_sessions (expires_at)"
    " WHERE expires_at IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS loopwatch_swarms"
    " (swarm TEXT PRIMARY KEY NOT NULL, fingerprints INTEGER NOT NULL, expires_at REAL)",
    "CREATE INDEX IF NOT EXISTS loopwatch_swarms_expiry ON loopwatch_swarms (expires_at) WHERE expires_at IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS loopwatch_swarm_calls (id INTEGER PRIMARY KEY, swarm TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL, calls INTEGER NOT NULL, tool TEXT NOT NULL, workers TEXT NOT NULL,"
    " UNIQUE (swarm, fingerprint))",
    "CREATE INDEX IF NOT EXISTS loopwatch_swarm_calls_order ON loopwatch_swarm_calls (swarm, id)",
    f"INSERT OR IGNORE INTO loopwatch_meta (key, value) VALUES ('schema', '{SCHEMA_VERSION}')",
)

_SCHEMA_VERSION: Final = "SELECT value FROM loopwatch_meta WHERE key = 'schema'"
# schema 1 -> 2, in one transaction: a token column, a random token for every session already stored
_UPGRADE_1: Final = (
    "ALTER TABLE loopwatch_sessions ADD COLUMN token TEXT NOT NULL DEFAULT ''",
    "UPDATE loopwatch_sessions SET token = 'u' || lower(hex(randomblob(8)))",
    "UPDATE loopwatch_meta SET value = '2' WHERE key = 'schema'",
)

_ALIVE: Final = "(expires_at IS NULL OR expires_at >= ?)"
_LOAD: Final = f"SELECT version, state, token FROM loopwatch_sessions WHERE id = ? AND {_ALIVE}"
# expected == "": a new row, or the expired (or tokenless) row it replaces; one statement, atomic across processes
_CREATE: Final = (
    "INSERT INTO loopwatch_sessions (id, version, state, expires_at, token) VALUES (?, 1, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET version = 1, state = excluded.state, expires_at = excluded.expires_at,"
    " token = excluded.token WHERE loopwatch_sessions.expires_at < ? OR loopwatch_sessions.token = ''"
)
_UPDATE: Final = (
    "UPDATE loopwatch_sessions SET version = version + 1, state = ?, expires_at = ?, token = ?"
    f" WHERE id = ? AND token = ? AND {_ALIVE}"
)
_DELETE: Final = "DELETE FROM loopwatch_sessions WHERE id = ?"
_PAGE_FIRST: Final = f"SELECT id, version, state, token FROM loopwatch_sessions WHERE {_ALIVE} ORDER BY id LIMIT ?"
_PAGE_NEXT: Final = (
    f"SELECT id, version, state, token FROM loopwatch_sessions WHERE id > ? AND {_ALIVE} ORDER BY id LIMIT ?"
)

_SWARM: Final = "SELECT fingerprints, expires_at FROM loopwatch_swarms WHERE swarm = ?"
_SWARM_SET: Final = (
    "INSERT INTO loopwatch_swarms (swarm, fingerprints, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT (swarm) DO UPDATE SET fingerprints = excluded.fingerprints, expires_at = excluded.expires_at"
)
_SWARM_DROP: Final = "DELETE FROM loopwatch_swarms WHERE swarm = ?"
_CALLS_DROP: Final = "DELETE FROM loopwatch_swarm_calls WHERE swarm = ?"
_CALL: Final = "SELECT id, calls, workers FROM loopwatch_swarm_calls WHERE swarm = ? AND fingerprint = ?"
_CALL_NEW: Final = "INSERT INTO loopwatch_swarm_calls (swarm, fingerprint, calls, tool, workers) VALUES (?, ?, ?, ?, ?)"
_CALL_COUNT: Final = "UPDATE loopwatch_swarm_calls SET calls = ? WHERE id = ?"
_CALL_WORKERS: Final = "UPDATE loopwatch_swarm_calls SET calls = ?, workers = ? WHERE id = ?"
_CALL_OLDEST: Final = (
    "DELETE FROM loopwatch_swarm_calls"
    " WHERE id = (SELECT id FROM loopwatch_swarm_calls WHERE swarm = ? ORDER BY id LIMIT 1)"
)
_COUNTS: Final = (
    "SELECT c.fingerprint, c.calls, c.workers, c.tool FROM loopwatch_swarm_calls AS c"
    " JOIN loopwatch_swarms AS s ON s.swarm = c.swarm"
    " WHERE c.swarm = ? AND (s.expires_at IS NULL OR s.expires_at >= ?) ORDER BY c.id"
)
_EXPIRE_SESSIONS: Final = "DELETE FROM loopwatch_sessions WHERE expires_at < ?"
_EXPIRE_CALLS: Final = (
    "DELETE FROM loopwatch_swarm_calls WHERE swarm IN (SELECT swarm FROM loopwatch_swarms WHERE expires_at < ?)"
)
_EXPIRE_SWARMS: Final = "DELETE FROM loopwatch_swarms WHERE expires_at < ?"

# Connections inherited through fork() are never used or closed in the child (closing could disturb the
# parent's locks and WAL index); they are parked here for the life of the child process.
_INHERITED: list[sqlite3.Connection] = []
_STORES: weakref.WeakSet[SqliteStore] = weakref.WeakSet()


def _after_fork() -> None:
    for store in list(_STORES):
        store._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _config(message: str) -> ConfigError:
    return ConfigError(message, field="store")


def _check_ttl(ttl: float | None) -> float | None:
    if ttl is not None and not (math.isfinite(ttl) and ttl > 0):
        raise _config(f"ttl must be a positive number of seconds, not {ttl!r}")
    return ttl


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
        raw = os.fspath(path)
        if not raw or raw == ":memory:" or raw.startswith("file:"):
            raise _config(f"a SQLite store needs a database file, not {raw!r} (memory:// keeps state in memory)")
        if "\0" in raw:
            raise _config(f"database path {raw!r} contains a NUL character")
        self.path = os.path.abspath(raw)
        if os.path.isdir(self.path):
            raise _config(f"database path {self.path!r} is a directory")
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):
            raise _config(f"the directory of database {self.path!r} does not exist")
        if not (math.isfinite(timeout) and timeout >= 0):
            raise _config(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        if synchronous.lower() not in SYNCHRONOUS:
            raise _config(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r}")
        self.url = url if url is not None else "sqlite:///" + self.path.replace(os.sep, "/")
        self.ttl = _check_ttl(ttl)
        self.timeout = float(timeout)
        self.synchronous = synchronous.lower()
        self._clock = clock
        self._local = threading.local()
        self._lock = threading.Lock()  # guards _conns
        self._conns: dict[int, tuple[threading.Thread, sqlite3.Connection]] = {}
        self._epoch = object()  # renewed by close() and fork: a thread's connection from another epoch is stale
        self._pid = os.getpid()
        _STORES.add(self)

    # -- connections ---------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened (with the schema made) on first use in this thread and process."""
        if self._pid != os.getpid():  # forked without the at-fork hook (e.g. a C extension's fork)
            self._forked()
        entry: tuple[object, sqlite3.Connection] | None = getattr(self._local, "entry", None)
        if entry is not None and entry[0] is self._epoch:
            return entry[1]
        return self._open()

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
            self._use_wal(conn)
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
            _close(old)
        self._local.entry = (epoch, conn)
        return conn

    def deadline(self, seconds: float) -> contextlib.AbstractContextManager[None]:
        """Within ``with store.deadline(s):``, this thread's operations wait at most ``s`` seconds in all for
        another process's lock (instead of ``timeout`` each), then fail with :class:`StoreError`: for a
        caller that must answer in time, such as a hook run that Claude Code cancels after 10 seconds."""
        return _Deadline(self._local, time.monotonic() + max(0.0, seconds))

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
                if not _busy(exc):
                    raise
                now = time.monotonic()
                if not deadline:
                    deadline = self._wait_limit(now)
                if now >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.002)

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Put the file in WAL mode (persistent: once per file). Switching needs the file to itself and
        SQLite does not wait for it (no busy handler), so a connection opened while others read retries."""
        deadline = self._wait_limit(time.monotonic())
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

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(_SCHEMA_VERSION).fetchone() if _has_meta(conn) else None
        if row is None or str(row[0]) == "1":
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                row = conn.execute(_SCHEMA_VERSION).fetchone() if _has_meta(conn) else None
                if row is None:
                    for statement in _SCHEMA:
                        conn.execute(statement)
                elif str(row[0]) == "1":  # written by the layout without tokens: upgraded once, by one process
                    for statement in _UPGRADE_1:
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            row = conn.execute(_SCHEMA_VERSION).fetchone()
        found = int(row[0]) if row is not None and str(row[0]).isdigit() else -1
        if found != SCHEMA_VERSION:
            raise StoreError(
                f"sqlite store {self.path}: tables of schema version {row[0] if row else None!r}, "
                f"this loopwatch reads version {SCHEMA_VERSION} (a newer loopwatch wrote the file?)"
            )

    def _drop(self) -> None:
        """Forget this thread's connection after a failure: the next call opens a fresh one (a connection
        opened while the file was read-only, say, stays read-only)."""
        entry: tuple[object, sqlite3.Connection] | None = getattr(self._local, "entry", None)
        self._local.entry = None
        if entry is None or entry[0] is not self._epoch:
            return
        with self._lock:
            self._conns.pop(id(entry[1]), None)
        _close(entry[1])

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
            row = self._retry(self._conn(), _LOAD, (storable(session), self._clock())).fetchone()
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"load of session {session!r}", exc) from exc
        return None if row is None else _versioned(row)

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
                    written = self._retry(conn, _CREATE, (key, text, self._expiry(now), token, now)).rowcount
                else:
                    written = self._retry(conn, _UPDATE, (text, self._expiry(now), token, key, expected, now)).rowcount
                if written:
                    return None
                row = self._retry(conn, _LOAD, (key, self._clock())).fetchone()
                if row is not None:
                    return _versioned(row)
                if expected:
                    return NO_STATE
                # expected == "" lost to a row that is gone already (deleted or expired since): try again
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"compare_and_set of session {session!r}", exc) from exc

    def delete(self, session: str) -> None:
        try:
            self._retry(self._conn(), _DELETE, (storable(session),))
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"delete of session {session!r}", exc) from exc

    def _sessions_page(self, after: str | None) -> list[tuple[str, Versioned]]:
        try:
            conn = self._conn()
            now = self._clock()
            if after is None:
                rows = self._retry(conn, _PAGE_FIRST, (now, _PAGE)).fetchall()
            else:
                rows = self._retry(conn, _PAGE_NEXT, (after, now, _PAGE)).fetchall()
        except (*_FAILURES, StoreError) as exc:
            raise self._fail("listing sessions", exc) from exc
        return [(_session_name(row[0]), _versioned(row[1:])) for row in rows]

    def sessions(self) -> Iterator[tuple[str, Versioned]]:
        """Live sessions in pages of a few hundred (by id), so a large store is not read into memory at once."""
        after: str | None = None
        while True:
            page = self._sessions_page(after)
            yield from page
            if len(page) < _PAGE:
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
                _rollback(conn)
                raise
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_add to swarm {swarm!r}", exc) from exc
        return tally

    def _swarm_add(self, conn: sqlite3.Connection, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        now = self._clock()
        head = conn.execute(_SWARM, (swarm,)).fetchone()
        if head is None or (head[1] is not None and head[1] < now):  # unknown or expired: start afresh
            conn.execute(_CALLS_DROP, (swarm,))
            size = 0
        else:
            size = head[0]
        row = conn.execute(_CALL, (swarm, fingerprint)).fetchone()
        if row is None:
            if size >= MAX_SWARM_FINGERPRINTS:
                size -= conn.execute(_CALL_OLDEST, (swarm,)).rowcount
            conn.execute(_CALL_NEW, (swarm, fingerprint, 1, tool, json.dumps([worker])))
            size += 1
            tally = SwarmTally(1, 1)
        else:
            calls = _count(row[1]) + 1
            workers = _workers(row[2])
            if worker not in workers and len(workers) < MAX_SWARM_WORKERS:
                workers.append(worker)
                conn.execute(_CALL_WORKERS, (calls, json.dumps(workers), row[0]))
            else:
                conn.execute(_CALL_COUNT, (calls, row[0]))
            tally = SwarmTally(calls, len(workers))
        conn.execute(_SWARM_SET, (swarm, size, self._expiry(now)))
        return tally

    def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        try:
            rows = self._retry(self._conn(), _COUNTS, (storable(swarm), self._clock())).fetchall()
            return {
                from_storable(str(row[0])): (_count(row[1]), _workers(row[2]), from_storable(str(row[3])))
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
                conn.execute(_CALLS_DROP, (storable(swarm),))
                conn.executemany(_CALL_NEW, rows)
                conn.execute(_SWARM_SET, (storable(swarm), len(rows), self._expiry(self._clock())))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        except (*_FAILURES, StoreError) as exc:
            raise self._fail(f"swarm_restore of swarm {swarm!r}", exc) from exc

    def swarm_clear(self, swarm: str) -> None:
        try:
            conn = self._conn()
            self._retry(conn, "BEGIN IMMEDIATE")
            try:
                conn.execute(_CALLS_DROP, (storable(swarm),))
                conn.execute(_SWARM_DROP, (storable(swarm),))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
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
                sessions = conn.execute(_EXPIRE_SESSIONS, (now,)).rowcount
                conn.execute(_EXPIRE_CALLS, (now,))
                swarms = conn.execute(_EXPIRE_SWARMS, (now,)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
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
            _close(conn)


class _Deadline:
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


def _versioned(row: Sequence[Any]) -> Versioned:
    """(version, state, token) of a row, whatever types a damaged row holds."""
    version, state, token = row
    return Versioned(
        version if isinstance(version, int) else -1,
        from_storable(state) if isinstance(state, str) else _text_of(state),
        token if isinstance(token, str) else _text_of(token),
    )


def _text_of(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _session_name(value: object) -> str:
    return from_storable(value) if isinstance(value, str) else _text_of(value)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _workers(value: object) -> list[str]:
    """A row's workers (a JSON list): what it holds that is a name; nothing from a damaged row."""
    try:
        names = json.loads(value) if isinstance(value, (str, bytes)) else []
    except ValueError:
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY: another connection holds the lock (worth waiting for, unlike other errors)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return bool(code & 0xFF == 5)  # SQLITE_BUSY (the sqlite3 constant is 3.11+)
    return "database is locked" in str(exc)


def _has_meta(conn: sqlite3.Connection) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loopwatch_meta'").fetchone()
    return found is not None


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except Exception:  # the connection is dropped after a failure anyway: closing it rolls back
        pass


def _close(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()


# -- async ------------------------------------------------------------------------------------------------

_T = TypeVar("_T")


class AsyncSqliteStore:
    """The async twin of :class:`SqliteStore`: the same methods as coroutines, run in a small thread pool
    of this store's own (``threads`` threads, each with its connection), so the event loop never waits on
    SQLite. The sync store is :attr:`sync`.

    A call whose awaiting task is cancelled still completes in its thread: a compare-and-set may have been
    written (the next load shows it)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        timeout: float = 5.0,
        synchronous: str = "normal",
        clock: Callable[[], float] = time.time,
        url: str | None = None,
        threads: int = 4,
    ) -> None:
        if threads < 1:
            raise _config(f"threads must be at least 1, not {threads!r}")
        self.sync = SqliteStore(path, ttl=ttl, timeout=timeout, synchronous=synchronous, clock=clock, url=url)
        self.threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.sync.url

    @property
    def ttl(self) -> float | None:
        return self.sync.ttl

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    async def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        with self._executor_lock:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor  # the async store only

                self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="loopwatch-sqlite")
            executor = self._executor
        import asyncio  # the async twin only: the sync store (a hook process) never imports it

        return await asyncio.get_running_loop().run_in_executor(executor, partial(function, *args))

    async def load(self, session: str) -> Versioned | None:
        return await self._call(self.sync.load, session)

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        return await self._call(self.sync.compare_and_set, session, expected, state, token)

    async def delete(self, session: str) -> None:
        await self._call(self.sync.delete, session)

    async def sessions(self) -> AsyncIterator[tuple[str, Versioned]]:
        """Every live session with its state, read a page at a time (``async for``)."""
        after: str | None = None
        while True:
            page = await self._call(self.sync._sessions_page, after)
            for item in page:
                yield item
            if len(page) < _PAGE:
                return
            after = storable(page[-1][0])

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        return await self._call(self.sync.swarm_add, swarm, fingerprint, worker, tool)

    async def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        return await self._call(self.sync.swarm_counts, swarm)

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        await self._call(self.sync.swarm_restore, swarm, counts)

    async def swarm_clear(self, swarm: str) -> None:
        await self._call(self.sync.swarm_clear, swarm)

    async def health(self) -> bool:
        try:
            return await self._call(self.sync.health)
        except Exception:  # the pool itself failed (interpreter shutting down): never raise
            return False

    async def expire(self) -> int:
        return await self._call(self.sync.expire)

    async def close(self) -> None:
        """Stop the pool (after the calls under way) and close the connections; the store reopens on next use."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:  # let the calls under way finish, without blocking the event loop
            import asyncio

            await asyncio.get_running_loop().run_in_executor(None, partial(executor.shutdown, wait=True))
        self.sync.close()


# -- URLs -------------------------------------------------------------------------------------------------


def _parse(url: str, options: dict[str, str]) -> dict[str, Any]:
    from urllib.parse import unquote, urlsplit  # here: opening a store by path needs no URL parsing

    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise _config(f"not a sqlite:// URL: {url!r}")
    if parts.netloc:
        raise _config(
            f"{url!r} names a host; a sqlite URL names a file: sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(parts.path)
    if not path.startswith("/") or len(path) == 1:
        raise _config(f"no database file in {url!r} (sqlite:///relative/path.db or sqlite:////absolute/path.db)")
    path = path[1:]
    if path == ":memory:":
        raise _config(
            f"{url!r}: an in-memory SQLite database is private to one connection, so threads and processes "
            "could not share it; use memory:// for state in this process, or a file"
        )
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise _config(f"unknown option(s) {', '.join(unknown)} in {url!r} (known: {', '.join(OPTIONS)})")
    found: dict[str, Any] = {"path": path, "url": url}
    if options.get("ttl"):
        found["ttl"] = _number(url, "ttl", options["ttl"])
    if options.get("timeout"):
        found["timeout"] = _number(url, "timeout", options["timeout"])
    if options.get("synchronous"):
        found["synchronous"] = options["synchronous"]
    return found


def _number(url: str, name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _config(f"{name}={text!r} in {url!r} is not a number of seconds") from None


def from_url(url: str, options: dict[str, str]) -> SqliteStore:
    """The store of a ``sqlite:///path`` URL (``options``: its query string); :class:`ConfigError` when bad."""
    return SqliteStore(**_parse(url, options))


def async_from_url(url: str, options: dict[str, str]) -> AsyncSqliteStore:
    """The :class:`AsyncSqliteStore` of a ``sqlite:///path`` URL (for ``async_store_from_url``)."""
    return AsyncSqliteStore(**_parse(url, options))
