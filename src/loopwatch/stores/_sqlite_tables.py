"""The SQLite store's tables: their schema (and its upgrade from the previous layout), every statement the store
runs, and how a row reads back whatever types it holds (a damaged row is read as what it holds)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from . import Versioned, from_storable

SCHEMA_VERSION: Final = 2
"""The layout of the tables the SQLite store writes (recorded in ``loopwatch_meta``); 1 had no session tokens."""

SCHEMA: Final = (
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

READ_SCHEMA: Final = "SELECT value FROM loopwatch_meta WHERE key = 'schema'"
# schema 1 -> 2, in one transaction: a token column, a random token for every session already stored
UPGRADE_1: Final = (
    "ALTER TABLE loopwatch_sessions ADD COLUMN token TEXT NOT NULL DEFAULT ''",
    "UPDATE loopwatch_sessions SET token = 'u' || lower(hex(randomblob(8)))",
    "UPDATE loopwatch_meta SET value = '2' WHERE key = 'schema'",
)

_ALIVE: Final = "(expires_at IS NULL OR expires_at >= ?)"
LOAD: Final = f"SELECT version, state, token FROM loopwatch_sessions WHERE id = ? AND {_ALIVE}"
# expected == "": a new row, or the expired (or tokenless) row it replaces; one statement, atomic across processes
CREATE: Final = (
    "INSERT INTO loopwatch_sessions (id, version, state, expires_at, token) VALUES (?, 1, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET version = 1, state = excluded.state, expires_at = excluded.expires_at,"
    " token = excluded.token WHERE loopwatch_sessions.expires_at < ? OR loopwatch_sessions.token = ''"
)
UPDATE: Final = (
    "UPDATE loopwatch_sessions SET version = version + 1, state = ?, expires_at = ?, token = ?"
    f" WHERE id = ? AND token = ? AND {_ALIVE}"
)
DELETE: Final = "DELETE FROM loopwatch_sessions WHERE id = ?"
PAGE_FIRST: Final = f"SELECT id, version, state, token FROM loopwatch_sessions WHERE {_ALIVE} ORDER BY id LIMIT ?"
PAGE_NEXT: Final = (
    f"SELECT id, version, state, token FROM loopwatch_sessions WHERE id > ? AND {_ALIVE} ORDER BY id LIMIT ?"
)

SWARM: Final = "SELECT fingerprints, expires_at FROM loopwatch_swarms WHERE swarm = ?"
SWARM_SET: Final = (
    "INSERT INTO loopwatch_swarms (swarm, fingerprints, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT (swarm) DO UPDATE SET fingerprints = excluded.fingerprints, expires_at = excluded.expires_at"
)
SWARM_DROP: Final = "DELETE FROM loopwatch_swarms WHERE swarm = ?"
CALLS_DROP: Final = "DELETE FROM loopwatch_swarm_calls WHERE swarm = ?"
CALL: Final = "SELECT id, calls, workers FROM loopwatch_swarm_calls WHERE swarm = ? AND fingerprint = ?"
CALL_NEW: Final = "INSERT INTO loopwatch_swarm_calls (swarm, fingerprint, calls, tool, workers) VALUES (?, ?, ?, ?, ?)"
CALL_COUNT: Final = "UPDATE loopwatch_swarm_calls SET calls = ? WHERE id = ?"
CALL_WORKERS: Final = "UPDATE loopwatch_swarm_calls SET calls = ?, workers = ? WHERE id = ?"
CALL_OLDEST: Final = (
    "DELETE FROM loopwatch_swarm_calls"
    " WHERE id = (SELECT id FROM loopwatch_swarm_calls WHERE swarm = ? ORDER BY id LIMIT 1)"
)
COUNTS: Final = (
    "SELECT c.fingerprint, c.calls, c.workers, c.tool FROM loopwatch_swarm_calls AS c"
    " JOIN loopwatch_swarms AS s ON s.swarm = c.swarm"
    " WHERE c.swarm = ? AND (s.expires_at IS NULL OR s.expires_at >= ?) ORDER BY c.id"
)
EXPIRE_SESSIONS: Final = "DELETE FROM loopwatch_sessions WHERE expires_at < ?"
EXPIRE_CALLS: Final = (
    "DELETE FROM loopwatch_swarm_calls WHERE swarm IN (SELECT swarm FROM loopwatch_swarms WHERE expires_at < ?)"
)
EXPIRE_SWARMS: Final = "DELETE FROM loopwatch_swarms WHERE expires_at < ?"


def row_versioned(row: Sequence[Any]) -> Versioned:
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


def row_name(value: object) -> str:
    return from_storable(value) if isinstance(value, str) else _text_of(value)


def row_count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def row_workers(value: object) -> list[str]:
    """A row's workers (a JSON list): what it holds that is a name; nothing from a damaged row."""
    try:
        names = json.loads(value) if isinstance(value, (str, bytes)) else []
    except ValueError:
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


def has_meta(conn: sqlite3.Connection) -> bool:
    """Does the file hold the store's tables (its ``loopwatch_meta``) yet?"""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loopwatch_meta'").fetchone()
    return found is not None
