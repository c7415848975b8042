"""Sessions kept in a store (SQLite, Redis...): load, judge, compare-and-set, retry on conflict.

The guard's helper for ``Guard(store=...)``. Each process caches the states it last wrote with the tokens
of those writes, so an event costs one store round trip (the compare-and-set) while no other process writes
the same session; when one did, the write fails, the winner's state comes back with the failure, and the
event is judged again on it. A token is random and never reused, so a cached state can never overwrite a
newer one, even after the session was deleted, expired or lost with a server's data. The pure engine is
deterministic, so judging again is safe; swarm counts are added once per event, before judging.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any, Final, NamedTuple

from .engine import Engine
from .errors import LoopwatchError, StateError
from .events import Event, ToolCall
from .stores import NO_STATE, Store, StoreError, Versioned, new_token
from .swarm_tally import SwarmTally
from .verdict import Verdict

State = dict[str, Any]
"""A session's state as the engine keeps it (JSON-able); the store keeps it without reading the rules' parts."""

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
    """Compact JSON text of a session's state (orjson when installed, else json: the same JSON).

    A state's strings may hold surrogates (orjson refuses them: ``json`` writes them as they are); stores
    keep such text exactly (:func:`~loopwatch.stores.storable`), and :func:`decode_state` reads it back."""
    fast = _fast()
    if fast is not None:
        try:
            text: str = fast.dumps(data).decode("utf-8")
            return text
        except (TypeError, fast.JSONEncodeError):  # a lone surrogate, an int over 64 bits...: json copes
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def decode_state(text: str) -> Any:
    """The data of :func:`encode_state`'s text (``ValueError`` when it is not JSON)."""
    fast = _fast()
    if fast is not None:
        try:
            return fast.loads(text)
        except fast.JSONDecodeError:  # orjson refuses surrogates, which json reads
            pass
    return json.loads(text)


class JudgingError(LoopwatchError):
    """The engine raised while judging an event on a session's state (``error``: what it raised), as opposed
    to a store or another part failing: the guard then tries the event on a fresh state."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def judge(engine: Engine, state: State, event: Event, **options: Any) -> Verdict:
    """``engine.observe(state, event, **options)``, its failures as :class:`JudgingError`."""
    try:
        return engine.observe(state, event, **options)
    except Exception as exc:
        raise JudgingError(exc) from exc


class DamagedStateError(StoreError):
    """A session's stored state that this loopwatch cannot read (a damaged row, another program's data).

    ``stored``: what the store holds (its token lets the guard replace it); ``reason``: what is wrong."""

    def __init__(self, session: str, stored: Versioned, reason: str) -> None:
        self.session = session
        self.stored = stored
        self.reason = reason
        self.tally: SwarmTally | None = None  # the swarm count already added for the event being judged
        self.counted = False
        super().__init__(f"the stored state of session {session!r} is damaged: {reason}")


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
    """Session states in ``store``, with a bounded per-process cache of the last states written or read."""

    def __init__(self, engine: Engine, store: Store, *, cache_size: int = 10_000) -> None:
        self.engine = engine
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._cache_lock = threading.Lock()  # sessions are locked by the guard; the cache is shared

    # -- the state of one session --------------------------------------------------------------------

    def _decode(self, session: str, stored: Versioned) -> _Entry:
        """The state a store holds; :class:`DamagedStateError` when it cannot be read."""
        if not stored.token:
            return _Entry("", 0, self.engine.new_session(), None)
        try:
            data = decode_state(stored.state)
            state = self.engine.load(data["state"])
            swarm = data.get("swarm")
        except (ValueError, KeyError, TypeError, StateError) as exc:
            # another preset, a newer loopwatch, a damaged row: the guard decides (on_store_error)
            raise DamagedStateError(session, stored, f"{type(exc).__name__}: {exc}"[:500]) from None
        return _Entry(stored.token, stored.version, state, swarm if isinstance(swarm, str) else None)

    def _encode(self, state: State, swarm: str | None) -> str:
        return encode_state({"swarm": swarm, "state": self.engine.dump(state)})

    def current(self, session: str) -> tuple[int, State, str | None]:
        """(writes so far, state, swarm): the cached state, else the stored one (one round trip), else a new one.

        :class:`DamagedStateError` when the stored state cannot be read."""
        entry = self._current(session)
        return entry.version, entry.state, entry.swarm

    def _current(self, session: str) -> _Entry:
        with self._cache_lock:
            cached = self._cache.pop(session, None)  # taken out while judged: on a failure nothing stale stays
        if cached is not None:
            return cached
        stored = self.store.load(session)
        return self._decode(session, stored) if stored is not None else _Entry("", 0, self.engine.new_session(), None)

    def _remember(self, session: str, entry: _Entry) -> None:
        with self._cache_lock:
            self._cache[session] = entry
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def forget_cached(self, session: str) -> None:
        with self._cache_lock:
            self._cache.pop(session, None)

    def _write(self, session: str, entry: _Entry, state: State, swarm: str | None) -> Versioned | None:
        """Compare-and-set ``state`` over ``entry``; remembered when written, else the winner."""
        token = new_token()
        lost = self.store.compare_and_set(session, entry.token, self._encode(state, swarm), token)
        if lost is None:
            self._remember(session, _Entry(token, entry.version + 1, state, swarm))
        return lost

    # -- judging -------------------------------------------------------------------------------------

    def observe(
        self,
        session: str,
        event: Event,
        *,
        swarm: str | None,
        now: float | None,
        counted: tuple[SwarmTally | None] | None = None,
    ) -> tuple[Verdict, bool, str | None]:
        """Judge ``event`` and store the session's new state: (verdict, was the session already stopped, swarm).

        Raises :class:`StoreError` when the store fails (:class:`DamagedStateError` when the stored state
        cannot be read); the cache then keeps nothing for the session (its next event reloads what the
        store has). ``counted``: the swarm count already added for this event (by an attempt that met a
        damaged state), so that it is not added twice."""
        entry = self._current(session)
        swarm = swarm or entry.swarm
        tally = counted[0] if counted is not None else self._tally(session, event, swarm)
        for attempt in range(MAX_ATTEMPTS):
            state = entry.state
            was_stopped = state["stopped"] is not None
            verdict = judge(self.engine, state, event, now=now, swarm=tally, worker=session)
            lost = self._write(session, entry, state, swarm)
            if lost is None:
                return verdict, was_stopped, swarm
            try:
                entry = self._decode(session, lost)
            except DamagedStateError as damaged:
                damaged.tally, damaged.counted = tally, True
                raise
            swarm = swarm or entry.swarm
            if attempt:  # the first loss is retried at once: usually one other writer got in between
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def _tally(self, session: str, event: Event, swarm: str | None) -> SwarmTally | None:
        if swarm is None or not isinstance(event, ToolCall) or not self.engine.counts_swarms:
            return None
        fingerprint = self.engine.call_fingerprint(event)
        return self.store.swarm_add(swarm, fingerprint, event.worker or session, event.tool)

    def update(self, session: str, change: Any) -> None:
        """Apply ``change(state)`` (in place) to the stored state, with the same retry as :meth:`observe`; a
        damaged stored state is replaced by a fresh one that ``change`` is applied to."""
        entry = self._readable(session, self._raw(session))
        for attempt in range(MAX_ATTEMPTS):
            change(entry.state)
            lost = self._write(session, entry, entry.state, entry.swarm)
            if lost is None:
                return
            entry = self._readable(session, lost)
            if attempt:
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def _raw(self, session: str) -> Versioned:
        """What the store holds for the session (its token), without reading the state."""
        with self._cache_lock:
            self._cache.pop(session, None)
        return self.store.load(session) or NO_STATE

    def _readable(self, session: str, stored: Versioned) -> _Entry:
        try:
            return self._decode(session, stored)
        except DamagedStateError:
            return _Entry(stored.token, stored.version, self.engine.new_session(), None)

    def replace(self, session: str, state: State, swarm: str | None) -> None:
        """Store ``state`` as the session's state, whatever was there (damaged or not)."""
        stored = self._raw(session)
        for attempt in range(MAX_ATTEMPTS):
            lost = self._write(session, _Entry(stored.token, stored.version, state, swarm), state, swarm)
            if lost is None:
                return
            stored = lost
            if attempt:
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    def start_afresh(self, session: str, damaged: Versioned) -> None:
        """Replace a damaged stored state by a fresh one (unless another process replaced it already)."""
        fresh = self.engine.new_session()
        self._write(session, _Entry(damaged.token, damaged.version, fresh, None), fresh, None)
        self.forget_cached(session)  # the next observe reads whatever is stored now

    def delete(self, session: str) -> None:
        self.forget_cached(session)
        self.store.delete(session)

    def sessions(self) -> list[str]:
        return [name for name, _ in self.store.sessions()]


class _Entry(NamedTuple):
    """A session's state as this process last wrote or read it, with the token of that write."""

    token: str
    version: int
    state: State
    swarm: str | None
