"""Stores: where session state and swarm counts live, selected by URL (in the style of ``limits``).

    store_from_url("memory://")                         # one process (the default)
    store_from_url("sqlite:////var/lib/agent/loops.db")  # several processes on one machine (four slashes: absolute)
    store_from_url("redis://localhost:6379/0?prefix=lw")  # several machines (also rediss://, Valkey)

A store keeps, per session, an opaque state text (the engine's JSON snapshot) with the token of the write
that stored it (random, never reused) and a count of writes, and per swarm, call counts per fingerprint with
the workers that made them. It knows nothing about detection: the guard loads a session's state, runs the
pure engine on it, and writes it back with :meth:`Store.compare_and_set`, which succeeds only if the stored
state is still the one the guard read, token for token (then the guard reloads the winner's state and judges
the event again). A token is never reused, unlike a version number: a state deleted (``--forget``), expired
(``ttl``) or lost with a server restarted empty and then written afresh by another process can never be
taken for the one a guard cached, so its write fails instead of overwriting newer events. Every event is
thus counted exactly once, whichever process or machine it came from, and one event costs one round trip
when the guard's cached state is current.

Names (sessions, swarms, workers, tools) and states are any Python strings, lone surrogates included
(``os.fsdecode`` gives them for file names that are not UTF-8): :func:`storable` writes a text the store's
encoding cannot hold as its bytes behind a marker, and :func:`from_storable` reads it back exactly.

Third-party stores: subclass :class:`Store` and :func:`register` a URL scheme.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..core._swarm_tally import MAX_SWARM_FINGERPRINTS as MAX_SWARM_FINGERPRINTS
from ..core._swarm_tally import MAX_SWARM_WORKERS as MAX_SWARM_WORKERS
from ..core._swarm_tally import SwarmTally, count_call
from ..errors import ConfigError
from ..errors import StoreError as StoreError  # the error tree holds it: a guard without a store needs no store
from ._options import check_ttl, refuse_unknown_options

__all__ = [
    "NO_STATE",
    "AsyncMemoryStore",
    "AsyncStore",
    "MemoryStore",
    "Store",
    "StoreError",
    "SwarmTally",
    "Versioned",
    "async_store_from_url",
    "from_storable",
    "new_token",
    "register",
    "storable",
    "store_from_url",
]


@dataclass(frozen=True)
class Versioned:
    """A session's stored state text, how many times it was written (1 for the first write, +1 for each
    write after; for people, never compared) and the token of the write that stored it (what a
    compare-and-set compares; ``""``: no state)."""

    version: int
    state: str
    token: str = ""


NO_STATE: Final = Versioned(0, "", "")
"""What a compare-and-set returns when the session has no state (never written, deleted, expired)."""


def new_token() -> str:
    """A write token: 64 random bits as 16 hex digits, so no two writes, in any process, share one."""
    return os.urandom(8).hex()


_ESCAPED: Final = "\x00utf8:"


def storable(text: str) -> str:
    """``text`` as valid Unicode a store can hold: itself, or when it holds surrogates (or starts with the
    marker this uses) the marker and its UTF-8 bytes (surrogates as such) one character per byte. Reversible
    with :func:`from_storable` for any Python string; two different texts never give the same result."""
    if text.startswith(_ESCAPED) or not (text.isascii() or _encodable(text)):
        return _ESCAPED + text.encode("utf-8", "surrogatepass").decode("latin-1")
    return text


def from_storable(text: str) -> str:
    """The text :func:`storable` was given."""
    if text.startswith(_ESCAPED):
        try:
            return text[len(_ESCAPED) :].encode("latin-1").decode("utf-8", "surrogatepass")
        except UnicodeError:  # not written by storable (a damaged value): as it is
            return text
    return text


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Store(ABC):
    """The store contract. Every method may raise :class:`StoreError` (and nothing else) on failure.

    ``ttl``: seconds after the last write of a session or swarm before it expires (``None``: never).
    """

    url: str = ""
    ttl: float | None = None

    # -- sessions ------------------------------------------------------------------------------------

    @abstractmethod
    def load(self, session: str) -> Versioned | None:
        """The session's state and token, or ``None`` when it has none (never written, expired, reset)."""

    @abstractmethod
    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        """Write ``state`` with ``token`` (a fresh :func:`new_token`) if the session's stored token is
        ``expected`` (``""``: the caller has seen no state, and there is none).

        Returns ``None`` when written, else the stored state that won (the caller re-judges against it);
        when the session has no state (never written, expired, deleted, a server restarted empty) but
        ``expected`` is not ``""``, that is :data:`NO_STATE`. Atomic: of several writers holding the same
        ``expected``, exactly one succeeds; a token once replaced never matches again.
        """

    @abstractmethod
    def delete(self, session: str) -> None:
        """Forget a session (its next event starts afresh)."""

    @abstractmethod
    def sessions(self) -> Iterator[tuple[str, Versioned]]:
        """Every live session with its state (for ``loopwatch sessions``), in no particular order."""

    # -- swarms --------------------------------------------------------------------------------------

    @abstractmethod
    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        """Count one call of ``fingerprint`` by ``worker`` in ``swarm``, atomically; the tally after it.

        At most :data:`MAX_SWARM_FINGERPRINTS` fingerprints per swarm and :data:`MAX_SWARM_WORKERS` workers
        per fingerprint are kept (the oldest fingerprints go first).
        """

    @abstractmethod
    def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        """``{fingerprint: (calls, workers, tool)}`` of a swarm (empty when unknown)."""

    @abstractmethod
    def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        """Replace a swarm's counts (the doom-loop preset's restoreFrom)."""

    @abstractmethod
    def swarm_clear(self, swarm: str) -> None:
        """Forget a swarm's counts (when the swarm completes)."""

    # -- upkeep --------------------------------------------------------------------------------------

    @abstractmethod
    def health(self) -> bool:
        """True when the store answers (never raises)."""

    def expire(self) -> int:
        """Drop what outlived its ``ttl`` where the backend does not do it by itself; returns how many."""
        return 0

    def close(self) -> None:  # noqa: B027 (optional: most stores have nothing to release)
        """Release connections and files."""

    def deadline(self, seconds: float) -> AbstractContextManager[None]:
        """Within ``with store.deadline(s):``, this thread's operations wait at most ``s`` seconds in all for
        a busy backend (another process's lock) before failing with :class:`StoreError`. Stores whose
        operations cannot wait on a lock bound them with their own time-out and ignore it."""
        return nullcontext()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class MemoryStore(Store):
    """Everything in this process's memory (``memory://``); thread-safe. Mostly for tests and as the
    reference the other stores are held to: the guard itself keeps in-memory sessions without a store."""

    def __init__(self, url: str = "memory://", *, ttl: float | None = None, clock: Callable[[], float] = time.time):
        self.url = url
        self.ttl = check_ttl(ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[Versioned, float]] = {}
        self._swarms: dict[str, dict[str, list[Any]]] = {}
        self._swarm_written: dict[str, float] = {}

    def _alive(self, written: float) -> bool:
        return self.ttl is None or self._clock() - written <= self.ttl

    def load(self, session: str) -> Versioned | None:
        with self._lock:
            entry = self._sessions.get(session)
            return entry[0] if entry is not None and self._alive(entry[1]) else None

    def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        with self._lock:
            entry = self._sessions.get(session)
            current = entry[0] if entry is not None and self._alive(entry[1]) else None
            if (current.token if current is not None else "") != expected:
                return current if current is not None else NO_STATE
            version = current.version + 1 if current is not None else 1
            self._sessions[session] = (Versioned(version, state, token), self._clock())
            return None

    def delete(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    def sessions(self) -> Iterator[tuple[str, Versioned]]:
        with self._lock:
            live = [(k, v) for k, (v, written) in self._sessions.items() if self._alive(written)]
        yield from live

    def _swarm(self, swarm: str) -> dict[str, list[Any]]:
        """A live swarm's counts (an expired swarm is dropped first); call with the lock held."""
        written = self._swarm_written.get(swarm)
        if written is not None and not self._alive(written):
            self._swarms.pop(swarm, None)
            self._swarm_written.pop(swarm, None)
        return self._swarms.get(swarm, {})

    def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        with self._lock:
            counts = self._swarms[swarm] = self._swarm(swarm)
            self._swarm_written[swarm] = self._clock()
            return count_call(
                counts,
                fingerprint,
                worker,
                tool,
                max_fingerprints=MAX_SWARM_FINGERPRINTS,
                max_workers=MAX_SWARM_WORKERS,
            )

    def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        with self._lock:
            return {k: (v[0], list(v[1]), v[2]) for k, v in self._swarm(swarm).items()}

    def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        with self._lock:
            self._swarms[swarm] = {k: [int(c), list(w), str(t)] for k, (c, w, t) in counts.items()}
            self._swarm_written[swarm] = self._clock()

    def swarm_clear(self, swarm: str) -> None:
        with self._lock:
            self._swarms.pop(swarm, None)
            self._swarm_written.pop(swarm, None)

    def health(self) -> bool:
        return True

    def expire(self) -> int:
        with self._lock:
            dead = [k for k, (_, written) in self._sessions.items() if not self._alive(written)]
            for key in dead:
                del self._sessions[key]
            swarms = [k for k, written in self._swarm_written.items() if not self._alive(written)]
            for key in swarms:
                self._swarms.pop(key, None)
                del self._swarm_written[key]
            return len(dead) + len(swarms)


class AsyncStore(Protocol):
    """The async twin of :class:`Store`: the same methods, awaitable (``sessions`` is an async iterator)."""

    url: str

    async def load(self, session: str) -> Versioned | None: ...

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None: ...

    async def delete(self, session: str) -> None: ...

    def sessions(self) -> AsyncIterator[tuple[str, Versioned]]: ...

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally: ...

    async def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]: ...

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None: ...

    async def swarm_clear(self, swarm: str) -> None: ...

    async def health(self) -> bool: ...

    async def expire(self) -> int: ...

    async def close(self) -> None: ...


async def _yield_to_loop() -> None:
    import asyncio  # imported by async callers only: a hook process never pays for it

    await asyncio.sleep(0)


class AsyncMemoryStore:
    """:class:`MemoryStore` behind the :class:`AsyncStore` methods (no I/O: nothing to wait for)."""

    def __init__(self, url: str = "memory://", *, ttl: float | None = None) -> None:
        self.sync = MemoryStore(url, ttl=ttl)
        self.url = url

    async def load(self, session: str) -> Versioned | None:
        return self.sync.load(session)

    async def compare_and_set(self, session: str, expected: str, state: str, token: str) -> Versioned | None:
        return self.sync.compare_and_set(session, expected, state, token)

    async def delete(self, session: str) -> None:
        self.sync.delete(session)

    async def sessions(self) -> AsyncIterator[tuple[str, Versioned]]:
        for item in list(self.sync.sessions()):
            yield item
            await _yield_to_loop()

    async def swarm_add(self, swarm: str, fingerprint: str, worker: str, tool: str) -> SwarmTally:
        return self.sync.swarm_add(swarm, fingerprint, worker, tool)

    async def swarm_counts(self, swarm: str) -> dict[str, tuple[int, list[str], str]]:
        return self.sync.swarm_counts(swarm)

    async def swarm_restore(self, swarm: str, counts: dict[str, tuple[int, list[str], str]]) -> None:
        self.sync.swarm_restore(swarm, counts)

    async def swarm_clear(self, swarm: str) -> None:
        self.sync.swarm_clear(swarm)

    async def health(self) -> bool:
        return True

    async def expire(self) -> int:
        return self.sync.expire()

    async def close(self) -> None:
        self.sync.close()


# -- URLs -----------------------------------------------------------------------------------------------

Factory = Callable[[str, dict[str, str]], Store]
_SCHEMES: dict[str, Factory | str] = {
    "memory": "loopwatch.stores:_memory",
    "sqlite": "loopwatch.stores.sqlite:from_url",
    "redis": "loopwatch.stores.redis:from_url",
    "rediss": "loopwatch.stores.redis:from_url",
    "valkey": "loopwatch.stores.redis:from_url",
    "valkeys": "loopwatch.stores.redis:from_url",
}


_ASYNC_SCHEMES: dict[str, Callable[[str, dict[str, str]], AsyncStore] | str] = {
    "memory": "loopwatch.stores:_async_memory",
    "sqlite": "loopwatch.stores.sqlite:async_from_url",
    "redis": "loopwatch.stores.redis:async_from_url",
    "rediss": "loopwatch.stores.redis:async_from_url",
    "valkey": "loopwatch.stores.redis:async_from_url",
    "valkeys": "loopwatch.stores.redis:async_from_url",
}


def _ttl(options: dict[str, str]) -> float | None:
    ttl = options.get("ttl")
    try:
        return float(ttl) if ttl else None
    except ValueError:
        raise ConfigError(f"ttl must be a number of seconds, got {ttl!r}", field="store") from None


def _memory(url: str, options: dict[str, str]) -> Store:
    refuse_unknown_options(options, ("ttl",), repr(url))
    return MemoryStore(url, ttl=_ttl(options))


def _async_memory(url: str, options: dict[str, str]) -> AsyncStore:
    refuse_unknown_options(options, ("ttl",), repr(url))
    return AsyncMemoryStore(url, ttl=_ttl(options))


def register(
    scheme: str, factory: Factory, async_factory: Callable[[str, dict[str, str]], AsyncStore] | None = None
) -> None:
    """Make ``scheme://...`` URLs build stores with ``factory(url, options)`` (options: the query string),
    and async ones with ``async_factory``."""
    _SCHEMES[scheme.lower()] = factory
    if async_factory is not None:
        _ASYNC_SCHEMES[scheme.lower()] = async_factory


def store_from_url(url: str) -> Store:
    """The store a URL names: ``memory://``, ``sqlite:///path``, ``redis://host:port/db?prefix=...``.

    Common query options: ``ttl`` (seconds a session or swarm outlives its last write). Raises
    :class:`~loopwatch.errors.ConfigError` naming the bad part of the URL.
    """
    factory, options = _parse(url, _SCHEMES)
    store: Store = factory(url, options)
    return store


def async_store_from_url(url: str) -> AsyncStore:
    """The async store a URL names (the same URLs as :func:`store_from_url`)."""
    factory, options = _parse(url, _ASYNC_SCHEMES)
    store: AsyncStore = factory(url, options)
    return store


def _parse(url: str, schemes: dict[str, Any]) -> tuple[Callable[[str, dict[str, str]], Any], dict[str, str]]:
    from urllib.parse import parse_qs, urlsplit  # here: opening a store by path needs no URL parsing

    if not isinstance(url, str):
        raise ConfigError(f"a store URL is a string, not {type(url).__name__}", field="store")
    try:
        parts = urlsplit(url)
        query = parse_qs(parts.query, keep_blank_values=True)
    except ValueError as exc:  # a bracket left open ("redis://[::1/0"), a port that is not a number...
        raise ConfigError(f"unreadable store URL {url!r}: {exc}", field="store") from None
    factory = schemes.get(parts.scheme.lower())
    if factory is None:
        known = ", ".join(f"{s}://" for s in sorted(schemes))
        raise ConfigError(f"unknown store URL scheme in {url!r} (known: {known})", field="store")
    options = {k: v[-1] for k, v in query.items()}
    if isinstance(factory, str):
        import importlib

        module, _, name = factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
    return factory, options
