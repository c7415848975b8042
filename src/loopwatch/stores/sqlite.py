"""The SQLite store: ``sqlite:///path/to/state.db``, for several processes guarding sessions on one machine.

    store_from_url("sqlite:///loops.db")                       # relative to the working directory
    store_from_url("sqlite:////var/lib/agent/loops.db?ttl=3600")  # absolute (four slashes, as in SQLAlchemy)

URL options: ``ttl`` (seconds a session or swarm outlives its last write; default: never expires),
``timeout`` (seconds to wait for another process's write lock before failing with "database is locked";
default 5), ``synchronous`` (``normal``, the default, or ``full``, ``extra``, ``off``).

The database runs in WAL mode (readers never wait for the writer) with ``synchronous=NORMAL``: a commit
survives the process crashing, and only a power loss or OS crash can drop the last commits (never corrupt
the file); ``synchronous=full`` trades write speed for durability across power loss too. Each connection
checkpoints the write-ahead log into the database itself, every 512 of its writes (SQLite's automatic checkpoint
stays as a backstop at 10,000 pages, ~40 MB): retried after every commit while another process writes, SQLite's
own synced the log nearly every time. Every write is
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

from typing import Any, Final

from ._options import refuse_unknown_options
from ._sqlite_async import AsyncSqliteStore
from ._sqlite_store import SqliteStore, config_error
from ._sqlite_tables import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "AsyncSqliteStore", "SqliteStore", "async_from_url", "from_url"]

OPTIONS: Final = ("ttl", "timeout", "synchronous")


def _parse(url: str, options: dict[str, str]) -> dict[str, Any]:
    from urllib.parse import unquote, urlsplit  # here: opening a store by path needs no URL parsing

    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise config_error(f"not a sqlite:// URL: {url!r}")
    if parts.netloc:
        raise config_error(
            f"{url!r} names a host; a sqlite URL names a file: sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    path = unquote(parts.path)
    if not path.startswith("/") or len(path) == 1:
        raise config_error(f"no database file in {url!r} (sqlite:///relative/path.db or sqlite:////absolute/path.db)")
    path = path[1:]
    if path == ":memory:":
        raise config_error(
            f"{url!r}: an in-memory SQLite database is private to one connection, so threads and processes "
            "could not share it; use memory:// for state in this process, or a file"
        )
    refuse_unknown_options(options, OPTIONS, repr(url))
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
        raise config_error(f"{name}={text!r} in {url!r} is not a number of seconds") from None


def from_url(url: str, options: dict[str, str]) -> SqliteStore:
    """The store of a ``sqlite:///path`` URL (``options``: its query string); :class:`ConfigError` when bad."""
    return SqliteStore(**_parse(url, options))


def async_from_url(url: str, options: dict[str, str]) -> AsyncSqliteStore:
    """The :class:`AsyncSqliteStore` of a ``sqlite:///path`` URL (for ``async_store_from_url``)."""
    return AsyncSqliteStore(**_parse(url, options))
