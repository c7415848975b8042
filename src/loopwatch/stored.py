"""Sessions kept in a store (SQLite, Redis...): load, judge, compare-and-set, retry on conflict.

The guard's helper for ``Guard(store=...)``. Each process caches the states it last wrote with their
versions, so an event costs one store round trip (the compare-and-set) while no other process writes the
same session; when one did, the write fails, the winner's state comes back with the failure, and the
event is judged again on it. The pure engine is deterministic, so judging again is safe; swarm counts
are added once per event, before judging.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any, Final

from .detectors.base import State
from .detectors.swarm import SwarmTally
from .engine import Engine
from .errors import StateError
from .events import Event, ToolCall
from .stores import Store, StoreError, Versioned
from .verdict import Verdict

_UNLOADED: Any = object()
_orjson: Any = _UNLOADED
"""The `fast` extra's orjson (encodes a session's state ~20x faster than json), imported on first use."""


def _fast() -> Any:
    global _orjson
    if _orjson is _UNLOADED:
        try:
            import orjson
        except ImportError:  # pragma: no cover (the test extra installs it; tests cover both encoders)
            _orjson = None
        else:
            _orjson = orjson
    return _orjson


def use_orjson(enabled: bool) -> None:
    """Encode states with orjson (when installed) or always with ``json``. A process that handles a single
    event (a command hook) does better without: importing orjson costs more than it saves on one state."""
    global _orjson
    _orjson = _UNLOADED if enabled else None


def encode_state(data: Any) -> str:
    """Compact JSON text of a session's state (orjson when installed, else json: the same JSON)."""
    fast = _fast()
    if fast is not None:
        try:
            text: str = fast.dumps(data).decode("utf-8")
            return text
        except (TypeError, fast.JSONEncodeError):  # an int over 64 bits, a non-str key...: json copes
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def decode_state(text: str) -> Any:
    """The data of :func:`encode_state`'s text."""
    fast = _fast()
    return fast.loads(text) if fast is not None else json.loads(text)


MAX_ATTEMPTS: Final = 100
"""Compare-and-set attempts per event before giving up with a :class:`StoreError` (heavy contention)."""
_BACKOFF_START: Final = 0.0001
_BACKOFF_MAX: Final = 0.01


def _back_off(attempt: int) -> None:
    """After a lost compare-and-set: wait a random while, longer after each loss (writers that keep
    colliding spread out instead of losing to each other in lockstep)."""
    import random  # here: a process that never collides does not pay for importing it

    time.sleep(random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_START * 2**attempt)))


class StoredSessions:
    """Session states in ``store``, with a bounded per-process cache of the last versions seen."""

    def __init__(self, engine: Engine, store: Store, *, cache_size: int = 10_000) -> None:
        self.engine = engine
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[int, State, str | None]] = OrderedDict()
        self._cache_lock = threading.Lock()  # sessions are locked by the guard; the cache is shared

    # -- the state of one session --------------------------------------------------------------------

    def _decode(self, stored: Versioned) -> tuple[int, State, str | None]:
        if stored.version == 0 or not stored.state:
            return 0, self.engine.new_session(), None
        try:
            data = decode_state(stored.state)
            state = self.engine.load(data["state"])
            swarm = data.get("swarm")
        except (ValueError, KeyError, TypeError, StateError):
            # a state this version cannot read (another preset, a newer loopwatch): start the session afresh
            return stored.version, self.engine.new_session(), None
        return stored.version, state, swarm if isinstance(swarm, str) else None

    def _encode(self, state: State, swarm: str | None) -> str:
        return encode_state({"swarm": swarm, "state": self.engine.dump(state)})

    def current(self, session: str) -> tuple[int, State, str | None]:
        """The cached state, else the stored one (one round trip), else a new one."""
        with self._cache_lock:
            cached = self._cache.pop(session, None)  # taken out while judged: on a failure nothing stale stays
        if cached is not None:
            return cached
        stored = self.store.load(session)
        return self._decode(stored) if stored is not None else (0, self.engine.new_session(), None)

    def _remember(self, session: str, entry: tuple[int, State, str | None]) -> None:
        with self._cache_lock:
            self._cache[session] = entry
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def forget_cached(self, session: str) -> None:
        with self._cache_lock:
            self._cache.pop(session, None)

    # -- judging -------------------------------------------------------------------------------------

    def observe(
        self, session: str, event: Event, *, swarm: str | None, now: float | None
    ) -> tuple[Verdict, bool, str | None]:
        """Judge ``event`` and store the session's new state: (verdict, was the session already stopped, swarm).

        Raises :class:`StoreError` when the store fails; the cache then keeps nothing for the session
        (its next event reloads what the store has)."""
        version, state, saved_swarm = self.current(session)
        swarm = swarm or saved_swarm
        tally = self._tally(session, event, swarm)
        for attempt in range(MAX_ATTEMPTS):
            was_stopped = state["stopped"] is not None
            verdict = self.engine.observe(state, event, now=now, swarm=tally, worker=session)
            lost = self.store.compare_and_set(session, version, self._encode(state, swarm))
            if lost is None:
                self._remember(session, (version + 1, state, swarm))
                return verdict, was_stopped, swarm
            version, state, saved_swarm = self._decode(lost)
            swarm = swarm or saved_swarm
            if attempt:  # the first loss is retried at once: usually one other writer got in between
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def _tally(self, session: str, event: Event, swarm: str | None) -> SwarmTally | None:
        if swarm is None or not isinstance(event, ToolCall) or not self.engine.counts_swarms:
            return None
        fingerprint = self.engine.call_fingerprint(event)
        return self.store.swarm_add(swarm, fingerprint, event.worker or session, event.tool)

    def update(self, session: str, change: Any) -> None:
        """Apply ``change(state)`` (in place) to the stored state, with the same retry as :meth:`observe`."""
        version, state, swarm = self.current(session)
        for attempt in range(MAX_ATTEMPTS):
            change(state)
            lost = self.store.compare_and_set(session, version, self._encode(state, swarm))
            if lost is None:
                self._remember(session, (version + 1, state, swarm))
                return
            version, state, swarm = self._decode(lost)
            if attempt:
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def replace(self, session: str, state: State, swarm: str | None) -> None:
        """Store ``state`` as the session's state, whatever was there."""
        version = self.current(session)[0]
        for attempt in range(MAX_ATTEMPTS):
            lost = self.store.compare_and_set(session, version, self._encode(state, swarm))
            if lost is None:
                self._remember(session, (version + 1, state, swarm))
                return
            version = lost.version
            if attempt:
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def delete(self, session: str) -> None:
        self.forget_cached(session)
        self.store.delete(session)

    def sessions(self) -> list[str]:
        return [name for name, _ in self.store.sessions()]
