"""Redis and Valkey stores: ``redis://[[user]:password@]host[:port][/db][?prefix=&ttl=&timeout=]``.

Also ``rediss://`` (TLS), ``valkey://`` and ``valkeys://``. Needs the ``redis`` extra
(``pip install 'loopwatch[redis]'``: redis-py, which speaks to Valkey as well).

One event costs one round trip: :meth:`RedisStore.compare_and_set` and :meth:`RedisStore.swarm_add` are
server-side Lua scripts (sent once with ``EVAL``, then called by their SHA1 with ``EVALSHA``; a server
that forgot them, after a restart or a ``SCRIPT FLUSH``, gets them again with ``EVAL``), and
:meth:`RedisStore.load` is one ``HMGET``. A script runs atomically, so a session's state and version are
written together or not at all. ``round_trips`` counts the requests sent (a pipeline counts once).

Keys (``prefix`` defaults to ``loopwatch``; ``{...}`` is a Redis Cluster hash tag, so every key of one
session or one swarm lands in the same slot and the scripts work on a cluster node)::

    {prefix}:s:{<session>}          hash  v: version, s: state text
    {prefix}:w:{<swarm>}:calls      hash  fingerprint -> calls
    {prefix}:w:{<swarm>}:tools      hash  fingerprint -> tool
    {prefix}:w:{<swarm>}:workers    hash  fingerprint -> JSON list of workers, in arrival order
    {prefix}:w:{<swarm>}:order      list  fingerprints, oldest first (the first evicted past the cap)

A name inside ``{...}`` has ``%``, ``{`` and ``}`` percent-encoded and the empty name is written ``%``, so
the hash tag is never empty and names map back from keys. With ``ttl`` (seconds), every write sets the
keys it touches to expire ``ttl`` after it (``PEXPIRE``); without, they are kept (``PERSIST``).

Connections: :class:`RedisStore` keeps one connection per thread (made on first use, made again in a
forked child) and talks RESP2, which every Redis and Valkey version speaks. A connection found closed
before a command is sent (the server restarted) is opened again first, so the store works again by itself
as soon as the server is back, without being recreated.

Errors: every failure (connection refused or lost, timeout, an error reply...) raises
:class:`~loopwatch.stores.StoreError` naming the operation and the server, after ``timeout`` seconds at
most (default 1). Commands are never sent twice: a write whose reply was lost may have been applied, and
sending it again would count an event twice (so after a ``StoreError`` from :meth:`RedisStore.compare_and_set`
the caller does not know whether its write landed: it reloads). :meth:`RedisStore.sessions` scans the keys
with ``SCAN``: on a Redis Cluster it sees the sessions of the node it is connected to only.

Other URL options, passed to redis-py: ``client_name`` and the TLS settings ``ssl_cert_reqs``,
``ssl_ca_certs``, ``ssl_ca_path``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Final

from . import Store, StoreError, SwarmTally, Versioned, storable
from ._redis_config import Config, client_options, import_redis, parse_url, redact_url
from ._redis_keys import Keys
from ._redis_scripts import CAS, SWARM_ADD, Script, cas_result, swarm_args, swarm_result
from ._redis_values import restore_pipeline, swarm_counts_of, versioned

__all__ = ["AsyncRedisStore", "RedisStore", "async_from_url", "from_url"]

SCAN_COUNT: Final = 500


class _Base:
    url: str
    ttl: float | None

    def __init__(self, url: str, config: Config) -> None:
        self.url = url
        self.ttl = config.ttl
        self.prefix = config.prefix
        self.timeout = config.timeout
        self.where = config.where
        self.round_trips = 0
        """Requests sent to the server so far (a script call, a command or a pipeline counts once)."""
        self._keys = Keys(config.prefix)
        self._ttl_ms = str(max(1, round(config.ttl * 1000))) if config.ttl else "0"
        self._loaded: set[str] = set()  # scripts this server is known to have

    def _error(self, operation: str, exc: BaseException) -> StoreError:
        return StoreError(f"redis store {operation} on {self.where} failed: {type(exc).__name__}: {exc}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"


class RedisStore(_Base, Store):
    """Sessions and swarms in a Redis or Valkey server (see the module's docstring); thread-safe."""

    def __init__(self, url: str = "redis://localhost:6379/0", options: dict[str, str] | None = None) -> None:
        config = parse_url(url, options or {})
        super().__init__(url, config)
        retry = import_redis("redis.retry").Retry(import_redis("redis.backoff").NoBackoff(), 0)
        self._noscript: type[Exception] = import_redis("redis.exceptions").NoScriptError
        self._client: Any = import_redis("redis").Redis.from_url(
            config.client_url, **client_options(config.timeout, retry)
        )
        exceptions = import_redis("redis.exceptions")
        self._reply_error: type[Exception] = exceptions.ResponseError
        self._stale_errors: tuple[type[BaseException], ...] = (
            exceptions.ConnectionError,
            exceptions.TimeoutError,
            OSError,
        )
        self._local = threading.local()
        # every live connection, for close(); a thread's connection is closed when the thread ends
        self._connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._connections_lock = threading.Lock()
        self._pid = os.getpid()

    # -- one request, one round trip -----------------------------------------------------------------

    def _connection(self) -> Any:
        """This thread's connection (made on first use, and again in a forked child)."""
        if self._pid != os.getpid():  # forked: the parent's sockets are not ours to use
            self._pid, self._local, self._connections = os.getpid(), threading.local(), weakref.WeakSet()
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._client.connection_pool.make_connection()
            with self._connections_lock:
                self._connections.add(connection)
        return connection

    def _call(self, *args: str | int | bytes) -> Any:
        """Send one command and read its reply on this thread's connection: redis-py's ``execute_command``
        without its connection pool's locking, its retry wrapper and its metrics, which cost more CPU than
        the round trip itself. As the pool does, a connection found closed (the server restarted) or with
        unread data is opened afresh before the command is sent, so nothing is sent twice."""
        connection = self._connection()
        try:
            connection.connect()  # a no-op when connected
            try:
                if _may_read(connection) and connection.can_read():
                    raise ConnectionError("unexpected data on an idle connection")
            except self._stale_errors:
                connection.disconnect()
                connection.connect()
            connection.send_packed_command([_pack(args)], check_health=False)
            return connection.read_response()
        except self._reply_error:
            raise  # an error reply: the connection is fine
        except BaseException:
            connection.disconnect()
            raise

    def _script(self, script: Script, keys: tuple[str, ...], args: tuple[str, ...]) -> Any:
        if script.sha in self._loaded:
            self.round_trips += 1
            try:
                return self._call("EVALSHA", script.sha, len(keys), *keys, *args)
            except self._noscript:
                self._loaded.discard(script.sha)  # the server restarted or flushed its scripts
        self.round_trips += 1
        reply = self._call("EVAL", script.text, len(keys), *keys, *args)
        self._loaded.add(script.sha)
        return reply

    # -- sessions ------------------------------------------------------------------------------------

    def load(self, session: str) -> Versioned | None:
        key = self._keys.session(session)
        try:
            self.round_trips += 1
            return versioned(self._call("HMGET", key, "v", "s", "t"))
        except Exception as exc:
            raise self._error("load", exc) from exc

    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        keys = (self._keys.session(session),)
        try:
            return cas_result(self._script(CAS, keys, (expected, storable(state), self._ttl_ms, token)))
        except Exception as exc:
            raise self._error("compare_and_set", exc) from exc

    def delete(self, session: str) -> None:
        try:
            self.round_trips += 1
            self._call("DEL", self._keys.session(session))
        except Exception as exc:
            raise self._error("delete", exc) from exc

    def sessions(self) -> Iterator[tuple[str, Versioned]]:
        cursor: Any = 0
        try:
            while True:
                self.round_trips += 1
                cursor, keys = self._call("SCAN", cursor, "MATCH", self._keys.session_pattern, "COUNT", SCAN_COUNT)
                named = [(name, key) for key in keys if (name := self._keys.session_name(key)) is not None]
                if named:
                    pipe = self._client.pipeline(transaction=False)
                    for _, key in named:
                        pipe.execute_command("HMGET", key, "v", "s", "t")
                    self.round_trips += 1
                    replies = pipe.execute()
                    batch = [(name, versioned(reply)) for (name, _), reply in zip(named, replies, strict=True)]
                    yield from ((name, v) for name, v in batch if v is not None)
                if int(cursor) == 0:
                    return
        except Exception as exc:
            raise self._error("sessions", exc) from exc

    # -- swarms --------------------------------------------------------------------------------------

    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        args = swarm_args(fingerprint, worker, tool, self._ttl_ms)
        try:
            return swarm_result(self._script(SWARM_ADD, self._keys.swarm(swarm), args))
        except Exception as exc:
            raise self._error("swarm_add", exc) from exc

    def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        calls, tools, workers, order = self._keys.swarm(swarm)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.execute_command("LRANGE", order, 0, -1)
            pipe.hgetall(calls)
            pipe.hgetall(tools)
            pipe.hgetall(workers)
            self.round_trips += 1
            replies = pipe.execute()
            counts: dict[str, tuple[int, list[str], str]] = swarm_counts_of(*replies)
            return counts
        except Exception as exc:
            raise self._error("swarm_counts", exc) from exc

    def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        try:
            pipe = restore_pipeline(self._client.pipeline(transaction=True), self._keys.swarm(swarm), counts, self)
            self.round_trips += 1
            pipe.execute()
        except Exception as exc:
            raise self._error("swarm_restore", exc) from exc

    def swarm_clear(self, swarm: str) -> None:
        try:
            self.round_trips += 1
            self._call("DEL", *self._keys.swarm(swarm))
        except Exception as exc:
            raise self._error("swarm_clear", exc) from exc

    # -- upkeep --------------------------------------------------------------------------------------

    def health(self) -> bool:
        try:
            self.round_trips += 1
            return bool(self._call("PING"))
        except Exception:
            return False

    def close(self) -> None:
        with self._connections_lock:
            connections, self._connections = list(self._connections), weakref.WeakSet()
        for connection in connections:
            with contextlib.suppress(Exception):  # closing never fails the caller
                connection.disconnect()
        with contextlib.suppress(Exception):
            self._client.close()


class AsyncRedisStore(_Base):
    """:class:`RedisStore`'s twin for asyncio (``redis.asyncio``): the same keys, scripts and results, with
    every method a coroutine (:meth:`sessions` an async iterator). Bound to the event loop that first uses it.

    Its connections come from redis-py's asyncio pool, which replaces a connection the server closed before
    using it again, once the event loop has seen the close (it has, unless the loop was blocked from the
    server's death until the next call, when that call fails with a :class:`StoreError`).
    """

    def __init__(self, url: str = "redis://localhost:6379/0", options: dict[str, str] | None = None) -> None:
        config = parse_url(url, options or {})
        super().__init__(url, config)
        retry = import_redis("redis.asyncio.retry").Retry(import_redis("redis.backoff").NoBackoff(), 0)
        self._noscript: type[Exception] = import_redis("redis.exceptions").NoScriptError
        self._client: Any = import_redis("redis.asyncio").Redis.from_url(
            config.client_url, **client_options(config.timeout, retry)
        )

    async def _script(self, script: Script, keys: tuple[str, ...], args: tuple[str, ...]) -> Any:
        if script.sha in self._loaded:
            self.round_trips += 1
            try:
                return await self._client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            except self._noscript:
                self._loaded.discard(script.sha)
        self.round_trips += 1
        reply = await self._client.execute_command("EVAL", script.text, len(keys), *keys, *args)
        self._loaded.add(script.sha)
        return reply

    async def load(self, session: str) -> Versioned | None:
        key = self._keys.session(session)
        try:
            self.round_trips += 1
            return versioned(await self._client.execute_command("HMGET", key, "v", "s", "t"))
        except Exception as exc:
            raise self._error("load", exc) from exc

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        keys = (self._keys.session(session),)
        try:
            return cas_result(await self._script(CAS, keys, (expected, storable(state), self._ttl_ms, token)))
        except Exception as exc:
            raise self._error("compare_and_set", exc) from exc

    async def delete(self, session: str) -> None:
        try:
            self.round_trips += 1
            await self._client.execute_command("DEL", self._keys.session(session))
        except Exception as exc:
            raise self._error("delete", exc) from exc

    async def sessions(self) -> AsyncIterator[tuple[str, Versioned]]:
        cursor: Any = 0
        try:
            while True:
                self.round_trips += 1
                cursor, keys = await self._client.execute_command(
                    "SCAN", cursor, "MATCH", self._keys.session_pattern, "COUNT", SCAN_COUNT
                )
                named = [(name, key) for key in keys if (name := self._keys.session_name(key)) is not None]
                if named:
                    pipe = self._client.pipeline(transaction=False)
                    for _, key in named:
                        pipe.execute_command("HMGET", key, "v", "s", "t")
                    self.round_trips += 1
                    replies = await pipe.execute()
                    batch = [(name, versioned(reply)) for (name, _), reply in zip(named, replies, strict=True)]
                    for name, v in batch:
                        if v is not None:
                            yield name, v
                if int(cursor) == 0:
                    return
        except Exception as exc:
            raise self._error("sessions", exc) from exc

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        args = swarm_args(fingerprint, worker, tool, self._ttl_ms)
        try:
            return swarm_result(await self._script(SWARM_ADD, self._keys.swarm(swarm), args))
        except Exception as exc:
            raise self._error("swarm_add", exc) from exc

    async def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        calls, tools, workers, order = self._keys.swarm(swarm)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.execute_command("LRANGE", order, 0, -1)
            pipe.hgetall(calls)
            pipe.hgetall(tools)
            pipe.hgetall(workers)
            self.round_trips += 1
            replies = await pipe.execute()
            counts: dict[str, tuple[int, list[str], str]] = swarm_counts_of(*replies)
            return counts
        except Exception as exc:
            raise self._error("swarm_counts", exc) from exc

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        try:
            pipe = restore_pipeline(self._client.pipeline(transaction=True), self._keys.swarm(swarm), counts, self)
            self.round_trips += 1
            await pipe.execute()
        except Exception as exc:
            raise self._error("swarm_restore", exc) from exc

    async def swarm_clear(self, swarm: str) -> None:
        try:
            self.round_trips += 1
            await self._client.execute_command("DEL", *self._keys.swarm(swarm))
        except Exception as exc:
            raise self._error("swarm_clear", exc) from exc

    async def health(self) -> bool:
        try:
            self.round_trips += 1
            return bool(await self._client.execute_command("PING"))
        except Exception:
            return False

    async def expire(self) -> int:
        """The server expires keys by itself: nothing to do."""
        return 0

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # closing never fails the caller
            closer = getattr(self._client, "aclose", None) or self._client.close
            await closer()


def from_url(url: str, options: dict[str, str]) -> RedisStore:
    """``store_from_url``'s factory for ``redis://``, ``rediss://``, ``valkey://`` and ``valkeys://``."""
    return RedisStore(url, options)


def async_from_url(url: str, options: dict[str, str]) -> AsyncRedisStore:
    """The asyncio twin of :func:`from_url`."""
    return AsyncRedisStore(url, options)


def _may_read(connection: Any) -> bool:
    """Has an idle connection anything to read (unread data, or the server closed it)?

    One ``poll`` of its socket with no wait: redis-py's own ``can_read`` switches the socket to non-blocking
    and back around a ``recv``, several system calls on every command. Without a socket to poll, ``True``
    (so that ``can_read`` decides).
    """
    sock = getattr(connection, "_sock", None)
    buffer: Any = getattr(getattr(connection, "_parser", None), "_buffer", None)  # redis-py's own parser's
    if sock is None or not hasattr(buffer, "unread_bytes") or not hasattr(select, "poll") or buffer.unread_bytes():
        return True
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR)
    except (ValueError, OSError):  # closed meanwhile (another thread): let can_read find out and reconnect
        return True
    return bool(poller.poll(0))


def _pack(args: Sequence[str | int | bytes]) -> bytes:
    """One command in the Redis protocol (RESP), as redis-py's ``pack_command`` writes it, at a third of its
    cost (it is paid on every event). Only what this store sends: text, bytes and integers (``TypeError`` for
    anything else, booleans and floats included), and one-word command names."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, int) and not isinstance(arg, bool):
            data = b"%d" % arg
        else:
            raise TypeError(f"cannot send {type(arg).__name__} {arg!r} to Redis")
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)
