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
import hashlib
import importlib
import json
import math
import os
import select
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError, MissingExtraError
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

__all__ = ["AsyncRedisStore", "RedisStore", "async_from_url", "from_url"]

DEFAULT_PREFIX: Final = "loopwatch"
DEFAULT_TIMEOUT: Final = 1.0
SCAN_COUNT: Final = 500

_SCHEMES: Final = {"redis": "redis", "rediss": "rediss", "valkey": "redis", "valkeys": "rediss"}
_OWN_OPTIONS: Final = ("prefix", "ttl", "timeout")
_CLIENT_OPTIONS: Final = (
    "client_name",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_cert_reqs",
    "ssl_certfile",
    "ssl_check_hostname",
    "ssl_keyfile",
)


# -- server-side scripts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Script:
    text: str
    sha: str

    @classmethod
    def of(cls, text: str) -> _Script:
        return cls(text, hashlib.sha1(text.encode()).hexdigest())


# KEYS[1]: the session's hash. ARGV: expected token ('': no state), state, ttl in ms (0: none), new token.
# Returns 0 when written, else {stored version ('0': none), stored state, stored token ('': none)}.
# A hash written before tokens existed has none: its token is 'v' and its version (what it was compared by).
_CAS: Final = _Script.of(
    """
local stored = redis.call('HMGET', KEYS[1], 'v', 's', 't')
local token = stored[3]
if not token then
  if stored[1] then token = 'v' .. stored[1] else token = '' end
end
if token ~= ARGV[1] then
  return {stored[1] or '0', stored[2] or '', token}
end
redis.call('HSET', KEYS[1], 'v', (tonumber(stored[1]) or 0) + 1, 's', ARGV[2], 't', ARGV[4])
local ttl = tonumber(ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return 0
"""
)

# KEYS: calls, tools, workers, order (see the module's docstring).
# ARGV: fingerprint, worker, tool, max fingerprints, max workers, ttl in ms (0: none).
# Returns {calls, workers} after counting the call.
_SWARM_ADD: Final = _Script.of(
    """
local fp, worker = ARGV[1], ARGV[2]
if redis.call('HEXISTS', KEYS[1], fp) == 0 then
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    while true do
      local oldest = redis.call('LPOP', KEYS[4])
      if not oldest then break end
      local gone = redis.call('HDEL', KEYS[1], oldest)
      redis.call('HDEL', KEYS[2], oldest)
      redis.call('HDEL', KEYS[3], oldest)
      if gone == 1 then break end
    end
  end
  redis.call('RPUSH', KEYS[4], fp)
  redis.call('HSET', KEYS[2], fp, ARGV[3])
end
local calls = redis.call('HINCRBY', KEYS[1], fp, 1)
local raw = redis.call('HGET', KEYS[3], fp)
local workers = {}
if raw then workers = cjson.decode(raw) end
local known = false
for i = 1, #workers do
  if workers[i] == worker then known = true break end
end
if not known and #workers < tonumber(ARGV[5]) then
  workers[#workers + 1] = worker
  redis.call('HSET', KEYS[3], fp, cjson.encode(workers))
end
local ttl = tonumber(ARGV[6])
for i = 1, 4 do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
end
return {calls, #workers}
"""
)


# -- keys -------------------------------------------------------------------------------------------------


def _tag(name: str) -> str:
    """``name`` as the inside of a hash tag: never empty, without ``{`` or ``}``, reversible."""
    if not name:
        return "%"
    if "%" in name or "{" in name or "}" in name:
        return name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return name


def _untag(tag: str) -> str | None:
    if tag == "%":
        return ""
    if not tag or "{" in tag or "}" in tag:
        return None
    return unquote(tag) if "%" in tag else tag


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class _Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._session_head = f"{prefix}:s:{{"
        self.session_pattern = _glob_escape(self._session_head) + "*}"

    def session(self, name: str) -> str:
        return f"{self._session_head}{_tag(storable(name))}}}"

    def session_name(self, key: str) -> str | None:
        if not key.startswith(self._session_head) or not key.endswith("}"):
            return None
        name = _untag(key[len(self._session_head) : -1])
        return None if name is None else from_storable(name)

    def swarm(self, name: str) -> tuple[str, str, str, str]:
        base = f"{self.prefix}:w:{{{_tag(storable(name))}}}"
        return f"{base}:calls", f"{base}:tools", f"{base}:workers", f"{base}:order"


# -- configuration ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Config:
    client_url: str  # what redis-py is given: redis:// or rediss://, without loopwatch's options
    where: str  # the server for messages, without the password
    prefix: str
    ttl: float | None
    timeout: float


def _positive(options: dict[str, str], name: str) -> float | None:
    raw = options.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={raw!r} in the store URL must be a positive number of seconds", field="store")
    return value


def _parse(url: str, options: dict[str, str]) -> _Config:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"bad Redis URL {_redact(url)!r}: {exc}", field="store") from None
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ConfigError(
            f"not a Redis URL: {_redact(url)!r} (redis://, rediss://, valkey://, valkeys://)", field="store"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(options)
    unknown = sorted(set(query) - set(_OWN_OPTIONS) - set(_CLIENT_OPTIONS))
    if unknown:
        known = ", ".join((*_OWN_OPTIONS, *_CLIENT_OPTIONS))
        raise ConfigError(f"unknown option(s) {', '.join(unknown)} in the Redis URL (known: {known})", field="store")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ConfigError(f"the database in a Redis URL is a number (redis://host:6379/0), not {db!r}", field="store")
    prefix = query.get("prefix", DEFAULT_PREFIX)
    if not prefix or "{" in prefix or "}" in prefix:
        raise ConfigError(f"prefix={prefix!r} in the store URL must be non-empty, without braces", field="store")
    passed = urlencode({k: v for k, v in query.items() if k in _CLIENT_OPTIONS})
    client_url = urlunsplit((scheme, parts.netloc, f"/{int(db or 0)}", passed, ""))
    host = parts.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    where = f"{parts.scheme.lower()}://{host}:{port or 6379}/{int(db or 0)}"
    return _Config(client_url, where, prefix, _positive(query, "ttl"), _positive(query, "timeout") or DEFAULT_TIMEOUT)


def _redact(url: str) -> str:
    """``url`` without its password (for messages and ``repr``)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparsable URL>"


def _import(module: str) -> Any:
    """A module of redis-py (imported on first use: the core needs no third-party package)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError("redis", "redis") from None


# -- replies ------------------------------------------------------------------------------------------------


def _versioned(reply: Any) -> Versioned | None:
    """An ``HMGET v s t`` reply (a hash from before tokens: its token is ``v`` and its version)."""
    version, state, token = reply
    if version is None and state is None and token is None:
        return None
    if token is None:
        token = "" if version is None else f"v{version}"
    return Versioned(_int(version), from_storable(state or ""), token)


def _int(value: Any) -> int:
    """A stored version (``-1`` for one that is not a number: a damaged hash)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _cas_result(reply: Any) -> Versioned | None:
    if not isinstance(reply, list):
        return None  # 0: written
    # The stored state that won; no token and no state when the session has none (deleted or expired since
    # the caller read it): the caller starts it afresh and writes it with ``expected=""``.
    if not reply[2]:
        return NO_STATE
    return Versioned(_int(reply[0]), from_storable(reply[1] or ""), str(reply[2]))


def _swarm_args(fingerprint: str, worker: str, tool: str, ttl_ms: str) -> tuple[str, ...]:
    """The swarm script's arguments; names as :func:`storable` text (a worker is kept in a JSON list)."""
    stored_worker = storable(worker)
    return (
        storable(fingerprint),
        stored_worker,
        storable(tool),
        str(MAX_SWARM_FINGERPRINTS),
        str(MAX_SWARM_WORKERS),
        ttl_ms,
    )


def _swarm_result(reply: Any) -> SwarmTally:
    return SwarmTally(int(reply[0]), int(reply[1]))


def _counts(order: list[str], calls: dict[str, str], tools: dict[str, str], workers: dict[str, str]) -> Any:
    out: dict[str, tuple[int, list[str], str]] = {}
    listed = set(order)
    for fp in [*order, *(fp for fp in calls if fp not in listed)]:
        if fp in calls and from_storable(fp) not in out:
            names = _names(workers.get(fp))
            tool = from_storable(tools.get(fp, ""))
            out[from_storable(fp)] = (_int(calls[fp]), names, tool)
    return out


def _names(raw: str | None) -> list[str]:
    """A stored JSON list of worker names (nothing from a damaged one)."""
    try:
        names = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [from_storable(str(w)) for w in names] if isinstance(names, list) else []


def _restore_pipeline(pipe: Any, keys: Sequence[str], counts: dict[str, tuple[int, list[str], str]], store: Any) -> Any:
    """A (sync or async) transaction pipeline that replaces a swarm's keys by ``counts``, not yet sent."""
    calls, tools, workers = _restore_args(counts)
    pipe.execute_command("DEL", *keys)
    if calls:
        pipe.hset(keys[0], mapping=calls)
        pipe.hset(keys[1], mapping=tools)
        pipe.hset(keys[2], mapping=workers)
        pipe.execute_command("RPUSH", keys[3], *calls)
        if store.ttl:
            for key in keys:
                pipe.execute_command("PEXPIRE", key, store._ttl_ms)
    return pipe


def _restore_args(
    counts: dict[str, tuple[int, list[str], str]],
) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
    calls = {storable(str(fp)): int(c) for fp, (c, _, _) in counts.items()}
    workers = {
        storable(str(fp)): json.dumps([storable(str(x)) for x in w], ensure_ascii=False)
        for fp, (_, w, _) in counts.items()
    }
    tools = {storable(str(fp)): storable(str(t)) for fp, (_, _, t) in counts.items()}
    return calls, tools, workers


# -- the stores ---------------------------------------------------------------------------------------------


class _Base:
    url: str
    ttl: float | None

    def __init__(self, url: str, config: _Config) -> None:
        self.url = url
        self.ttl = config.ttl
        self.prefix = config.prefix
        self.timeout = config.timeout
        self.where = config.where
        self.round_trips = 0
        """Requests sent to the server so far (a script call, a command or a pipeline counts once)."""
        self._keys = _Keys(config.prefix)
        self._ttl_ms = str(max(1, round(config.ttl * 1000))) if config.ttl else "0"
        self._loaded: set[str] = set()  # scripts this server is known to have

    def _error(self, operation: str, exc: BaseException) -> StoreError:
        return StoreError(f"redis store {operation} on {self.where} failed: {type(exc).__name__}: {exc}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_redact(self.url)!r})"


def _client_options(timeout: float, retry: Any) -> dict[str, Any]:
    """redis-py client settings of both twins: fail fast, never retry (a resent write could land twice)."""
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
        "health_check_interval": 0,
        "decode_responses": True,
        "protocol": 2,
    }


class RedisStore(_Base, Store):
    """Sessions and swarms in a Redis or Valkey server (see the module's docstring); thread-safe."""

    def __init__(self, url: str = "redis://localhost:6379/0", options: dict[str, str] | None = None) -> None:
        config = _parse(url, options or {})
        super().__init__(url, config)
        retry = _import("redis.retry").Retry(_import("redis.backoff").NoBackoff(), 0)
        self._noscript: type[Exception] = _import("redis.exceptions").NoScriptError
        self._client: Any = _import("redis").Redis.from_url(config.client_url, **_client_options(config.timeout, retry))
        exceptions = _import("redis.exceptions")
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

    def _script(self, script: _Script, keys: tuple[str, ...], args: tuple[str, ...]) -> Any:
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
            return _versioned(self._call("HMGET", key, "v", "s", "t"))
        except Exception as exc:
            raise self._error("load", exc) from exc

    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        keys = (self._keys.session(session),)
        try:
            return _cas_result(self._script(_CAS, keys, (expected, storable(state), self._ttl_ms, token)))
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
                    batch = [(name, _versioned(reply)) for (name, _), reply in zip(named, replies, strict=True)]
                    yield from ((name, v) for name, v in batch if v is not None)
                if int(cursor) == 0:
                    return
        except Exception as exc:
            raise self._error("sessions", exc) from exc

    # -- swarms --------------------------------------------------------------------------------------

    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        args = _swarm_args(fingerprint, worker, tool, self._ttl_ms)
        try:
            return _swarm_result(self._script(_SWARM_ADD, self._keys.swarm(swarm), args))
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
            counts: dict[str, tuple[int, list[str], str]] = _counts(*replies)
            return counts
        except Exception as exc:
            raise self._error("swarm_counts", exc) from exc

    def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        try:
            pipe = _restore_pipeline(self._client.pipeline(transaction=True), self._keys.swarm(swarm), counts, self)
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
        config = _parse(url, options or {})
        super().__init__(url, config)
        retry = _import("redis.asyncio.retry").Retry(_import("redis.backoff").NoBackoff(), 0)
        self._noscript: type[Exception] = _import("redis.exceptions").NoScriptError
        self._client: Any = _import("redis.asyncio").Redis.from_url(
            config.client_url, **_client_options(config.timeout, retry)
        )

    async def _script(self, script: _Script, keys: tuple[str, ...], args: tuple[str, ...]) -> Any:
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
            return _versioned(await self._client.execute_command("HMGET", key, "v", "s", "t"))
        except Exception as exc:
            raise self._error("load", exc) from exc

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        keys = (self._keys.session(session),)
        try:
            return _cas_result(await self._script(_CAS, keys, (expected, storable(state), self._ttl_ms, token)))
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
                    batch = [(name, _versioned(reply)) for (name, _), reply in zip(named, replies, strict=True)]
                    for name, v in batch:
                        if v is not None:
                            yield name, v
                if int(cursor) == 0:
                    return
        except Exception as exc:
            raise self._error("sessions", exc) from exc

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        args = _swarm_args(fingerprint, worker, tool, self._ttl_ms)
        try:
            return _swarm_result(await self._script(_SWARM_ADD, self._keys.swarm(swarm), args))
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
            counts: dict[str, tuple[int, list[str], str]] = _counts(*replies)
            return counts
        except Exception as exc:
            raise self._error("swarm_counts", exc) from exc

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        try:
            pipe = _restore_pipeline(self._client.pipeline(transaction=True), self._keys.swarm(swarm), counts, self)
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
