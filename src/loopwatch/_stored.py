"""Sessions kept in a store (SQLite, Redis...): load, judge, compare-and-set, retry on conflict.

:class:`StoredSessions` is the guard's session backend for ``Guard(store=...)``. Each process caches the states it
last wrote with the tokens of those writes, so an event costs one store round trip (the compare-and-set) while no
other process writes the same session; when one did, the write fails, the winner's state comes back with the
failure, and the event is judged again on it. A token is random and never reused, so a cached state can never
overwrite a newer one, even after the session was deleted, expired or lost with a server's data. The pure engine is
deterministic, so judging again is safe; a swarm call is counted in the store once per event, whatever the number
of attempts.
"""

from __future__ import annotations

import binascii
import json
import marshal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeVar

from ._session_backend import JudgingError as JudgingError
from ._session_backend import SessionBackend, State, SwarmCounts, _logger, evaluate, stamp_of
from .core._engine import Engine, Evaluation
from .core._events import Event
from .core._swarm_tally import SwarmCounter, SwarmTally
from .errors import OtherLayoutError, StateError, UnsupportedError
from .stores import NO_STATE, Store, StoreError, Versioned, new_token

_T = TypeVar("_T")

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


PACKED_PREFIX: Final = "lw-packed-1:"
"""How a packed state's text begins (then its :mod:`marshal` bytes in base64); a JSON state begins with ``{``."""


def state_text(engine: Engine, state: State, swarm: str | None) -> str:
    """What a store keeps of a session: its packed form (:meth:`Engine.pack`) written by :mod:`marshal` (its version
    4, which every Python since 3.4 reads), in base64 after :data:`PACKED_PREFIX`. Several times faster to write
    and to read than the JSON form, which is written instead for a state holding a value marshal does not write (a
    restored snapshot's, a rule's own state class that is not a dataclass with slots)."""
    try:
        data = marshal.dumps((swarm, engine.pack(state)), 4)
    except (ValueError, TypeError):  # a value of a class of its own (a rule's own state class...): JSON
        return encode_state({"swarm": swarm, "state": engine.dump(state)})
    return PACKED_PREFIX + binascii.b2a_base64(data, newline=False).decode("ascii")


def read_state_text(engine: Engine, text: str) -> tuple[State, str | None]:
    """A session's state and its swarm from a store's text: :func:`state_text`'s packed form, or the JSON form
    (written by a loopwatch before the packed form, or by :func:`state_text` itself). Raises ``ValueError``,
    ``KeyError``, ``TypeError`` or :class:`StateError` when the text is neither (a damaged row, another program's
    data); :class:`~loopwatch.errors.OtherLayoutError` for a state packed by a loopwatch whose rules keep other
    fields."""
    if text.startswith(PACKED_PREFIX):
        try:
            swarm, packed = marshal.loads(binascii.a2b_base64(text[len(PACKED_PREFIX) :]))
        except (EOFError, binascii.Error) as exc:
            raise ValueError(f"a damaged packed state: {exc}") from None
        state = engine.unpack(packed)
    else:
        data = decode_state(text)
        state = engine.load(data["state"])
        swarm = data.get("swarm")
    return state, swarm if isinstance(swarm, str) else None


class DamagedStateError(StoreError):
    """A session's stored state that this loopwatch cannot read (a damaged row, another program's data).

    ``stored``: what the store holds (its token lets the guard replace it); ``reason``: what is wrong."""

    def __init__(self, session: str, stored: Versioned, reason: str) -> None:
        self.session = session
        self.stored = stored
        self.reason = reason
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


OnDamaged = Callable[[str, Event, DamagedStateError, "float | None"], bool]
"""``on_damaged(session, event, error, ts)``: told of a stored state that cannot be read while judging ``event``;
``True`` starts the session afresh (and judges the event on the fresh state), ``False`` lets the error through."""


def _let_through(session: str, event: Event, damaged: DamagedStateError, ts: float | None) -> bool:
    return False


class StoredSessions(SessionBackend):
    """Session states in ``store``, with a bounded per-process cache of the last states written or read.

    ``on_damaged``: what to do with a stored state that cannot be read (see :data:`OnDamaged`; by default the
    :class:`DamagedStateError` is raised)."""

    def __init__(
        self, engine: Engine, store: Store, *, cache_size: int = 10_000, on_damaged: OnDamaged = _let_through
    ) -> None:
        self.engine = engine
        self.store = store
        self.cache_size = cache_size
        self.on_damaged = on_damaged
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._cache_lock = threading.Lock()  # sessions are locked by the guard; the cache is shared

    def __repr__(self) -> str:
        return f"StoredSessions({self.store!r})"

    # -- the state of one session --------------------------------------------------------------------

    def _decode(self, session: str, stored: Versioned) -> _Entry:
        """The state a store holds; :class:`DamagedStateError` when it cannot be read."""
        if not stored.token:
            return _Entry("", 0, self.engine.new_session(), None)
        try:
            state, swarm = read_state_text(self.engine, stored.state)
        except OtherLayoutError as exc:
            # not damaged: written by another release (an upgrade under way), unreadable here
            _logger().warning("loopwatch: session %r starts afresh: its stored state was %s", session, exc)
            return _Entry(stored.token, stored.version, self.engine.new_session(), None)
        except (ValueError, KeyError, TypeError, StateError) as exc:
            # another preset, a newer loopwatch, a damaged row: the guard decides (on_store_error)
            raise DamagedStateError(session, stored, f"{type(exc).__name__}: {exc}"[:500]) from None
        return _Entry(stored.token, stored.version, state, swarm)

    def _readable(self, session: str, stored: Versioned) -> _Entry:
        """:meth:`_decode`, a damaged state read as a fresh one (that a write replaces)."""
        try:
            return self._decode(session, stored)
        except DamagedStateError:
            return _Entry(stored.token, stored.version, self.engine.new_session(), None)

    def _current(self, session: str) -> _Entry:
        """The cached state, else the stored one (one round trip), else a new one; taken out of the cache while
        it is judged, so that on a failure nothing stale stays."""
        with self._cache_lock:
            cached = self._cache.pop(session, None)
        if cached is not None:
            return cached
        stored = self.store.load(session)
        return self._decode(session, stored) if stored is not None else _Entry("", 0, self.engine.new_session(), None)

    def _raw(self, session: str) -> Versioned:
        """What the store holds for the session (its token), without reading the state."""
        self.forget_cached(session)
        return self.store.load(session) or NO_STATE

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
        lost = self.store.compare_and_set(session, entry.token, state_text(self.engine, state, swarm), token)
        if lost is None:
            self._remember(session, _Entry(token, entry.version + 1, state, swarm))
        return lost

    def _commit(
        self,
        session: str,
        entry: _Entry,
        change: Callable[[_Entry], tuple[State, str | None, _T]],
        reread: Callable[[str, Versioned], _Entry],
    ) -> _T:
        """The compare-and-set loop: ``change(entry)`` gives the state to write (with its swarm) and the result;
        written over ``entry``, else done again on the winner's state (``reread`` from what the store holds),
        backing off after the second loss, until written or :data:`MAX_ATTEMPTS` are lost."""
        for attempt in range(MAX_ATTEMPTS):
            state, swarm, result = change(entry)
            lost = self._write(session, entry, state, swarm)
            if lost is None:
                return result
            entry = reread(session, lost)
            if attempt:  # the first loss is retried at once: usually one other writer got in between
                _back_off(attempt)
        raise StoreError(f"{self.store!r}: session {session!r} kept changing under {MAX_ATTEMPTS} attempts")

    # -- the backend ---------------------------------------------------------------------------------

    def evaluate(
        self, session: str, event: Event, *, swarm: str | None, now: float | None
    ) -> tuple[Evaluation, str | None]:
        """Judge ``event`` and store the session's new state. Raises :class:`StoreError` when the store fails
        (:class:`DamagedStateError` when the stored state cannot be read and :attr:`on_damaged` says so); the
        cache then keeps nothing for the session (its next event reloads what the store has)."""
        stamp = stamp_of(event, now)
        tally: list[SwarmTally] = []  # the swarm count of this event, added once whatever the attempts

        def judge(entry: _Entry) -> tuple[State, str | None, tuple[Evaluation, str | None]]:
            group = swarm or entry.swarm
            count = None if group is None else self._counter(group, tally)
            evaluation = evaluate(self.engine, entry.state, event, session, stamp, group, count)
            return entry.state, group, (evaluation, group)

        try:
            return self._commit(session, self._current(session), judge, self._decode)
        except DamagedStateError as damaged:
            if not self.on_damaged(session, event, damaged, stamp):
                raise
            self._start_afresh(session, damaged.stored)
        return self._commit(session, self._current(session), judge, self._decode)

    def _counter(self, swarm: str, tally: list[SwarmTally]) -> SwarmCounter:
        def count(fingerprint: str, worker: str, tool: str) -> SwarmTally:
            if not tally:
                tally.append(self.store.swarm_add(swarm, fingerprint, worker, tool))
            return tally[0]

        return count

    def _start_afresh(self, session: str, damaged: Versioned) -> None:
        """Replace a damaged stored state by a fresh one (unless another process replaced it already)."""
        fresh = self.engine.new_session()
        self._write(session, _Entry(damaged.token, damaged.version, fresh, None), fresh, None)
        self.forget_cached(session)  # the next attempt reads whatever is stored now

    def reset(self, session: str, *, limits: bool) -> None:
        """Clear a stored session's loop state (a damaged one is replaced by a fresh state); an unknown session
        stays unknown."""
        stored = self._raw(session)
        if not stored.token:
            return

        def clear(entry: _Entry) -> tuple[State, str | None, None]:
            self.engine.reset(entry.state, limits=limits)
            return entry.state, entry.swarm, None

        self._commit(session, self._readable(session, stored), clear, self._readable)

    def read(self, session: str) -> tuple[State, str | None]:
        """What the store holds now (another process may have written it since this one cached it);
        :class:`DamagedStateError` when it cannot be read."""
        self.forget_cached(session)
        entry = self._current(session)
        return entry.state, entry.swarm

    def replace(self, session: str, state: State, swarm: str | None, *, now: float | None = None) -> None:
        stored = self._raw(session)

        def same(entry: _Entry) -> tuple[State, str | None, None]:
            return state, swarm, None

        def over(session: str, lost: Versioned) -> _Entry:
            return _Entry(lost.token, lost.version, state, swarm)

        self._commit(session, over(session, stored), same, over)

    def swarm_of(self, session: str) -> str | None:
        with self._cache_lock:
            cached = self._cache.get(session)
        if cached is not None:
            return cached.swarm
        stored = self.store.load(session)
        return self._readable(session, stored).swarm if stored is not None else None

    def forget(self, session: str) -> None:
        self.forget_cached(session)
        self.store.delete(session)

    def sessions(self) -> list[str]:
        return [name for name, _ in self.store.sessions()]

    def swarm_counts(self, swarm: str) -> SwarmCounts:
        return self.store.swarm_counts(swarm)

    def restore_swarm(self, swarm: str, counts: SwarmCounts, *, now: float | None = None) -> None:
        self.store.swarm_restore(swarm, counts)

    def clear_swarm(self, swarm: str) -> None:
        self.store.swarm_clear(swarm)

    def evict_idle(self, max_idle_seconds: float, now: float) -> int:
        raise UnsupportedError(
            f"evict_idle cannot tell idle sessions in {self.store!r}: other processes may be using them. Give the "
            "store a ttl (its URL's ?ttl=seconds option) and they expire that long after their last event"
        )


class _Entry(NamedTuple):
    """A session's state as this process last wrote or read it, with the token of that write."""

    token: str
    version: int
    state: State
    swarm: str | None
