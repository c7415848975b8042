"""Where a guard keeps its sessions: one interface, two implementations.

:class:`SessionBackend` is what :class:`~loopwatch.Guard` drives: for each event it loads the session's
state, has the engine evaluate the event on it, and saves it (:meth:`SessionBackend.evaluate`); the guard only
emits what the engine returned. The backend alone counts a swarm's calls: the engine asks it for a call's tally
(:data:`~loopwatch.core._swarm_tally.SwarmCounter`) and hands the rule that tally, read-only.

- :class:`InProcessSessions`: the states live in this process, used as they are (never serialised); least
  recently used sessions beyond ``max_sessions`` and swarms beyond ``max_swarms`` are dropped.
- :class:`~loopwatch._stored.StoredSessions`: the states live in a :class:`~loopwatch.stores.Store` shared with
  other processes, written with a compare-and-set and judged again when another process wrote first.

Both behave the same way through the guard, with one exception: :meth:`SessionBackend.evict_idle` raises
:class:`~loopwatch.errors.UnsupportedError` with a store, whose sessions other processes may be using; the store's
``ttl`` expires them instead.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Final

from .core._engine import Engine, Evaluation
from .core._events import Event
from .core._kernels import warm_up
from .core._session_state import HeldSession, SessionState, held_session
from .core._swarm_tally import SwarmCounter, SwarmTally, count_call
from .core.detectors._base import mypyc_attr
from .errors import LoopwatchError, StoreError

State = SessionState
"""A session's state as the engine keeps it."""
SwarmCounts = dict[str, tuple[int, list[str], str]]
"""A swarm's counts as snapshots show them: ``{fingerprint: (calls, workers, tool)}``."""


def _logger() -> Any:
    """The ``loopwatch`` logger (``logging`` is imported on first use: a hook process rarely logs)."""
    import logging

    return logging.getLogger("loopwatch")


class JudgingError(LoopwatchError):
    """The engine raised while judging an event on a session's state (``error``: what it raised), as opposed
    to a store or another part failing: the guard then tries the event on a fresh state."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def evaluate(
    engine: Engine,
    state: State,
    event: Event,
    session: str,
    now: float | None,
    swarm: str | None,
    count_swarm: SwarmCounter | None,
) -> Evaluation:
    """``engine.evaluate(...)``; the rules' failures as :class:`JudgingError` (a store's, met while counting a
    swarm call, as they are)."""
    try:
        return engine.evaluate(state, event, session=session, now=now, swarm=swarm, count_swarm=count_swarm)
    except StoreError:
        raise
    except Exception as exc:
        raise JudgingError(exc) from exc


def stamp_of(event: Event, now: float | None) -> Any:
    """When an event happened: its own ``ts``, else the guard's clock. Untyped, and never tested as a float: compiled,
    a test that narrows it to one would make a time stamp given as an int a float (in the counters, and their JSON)."""
    stamp: Any = event.ts
    if stamp is None:
        stamp = now
    return stamp


@mypyc_attr(allow_interpreted_subclasses=True)  # the stored sessions' backend runs from source
class SessionBackend(ABC):
    """The sessions (and swarm counts) of one guard. Methods that take a session are called with that session's
    lock held by the guard; every method may raise :class:`~loopwatch.stores.StoreError` where a store is used."""

    engine: Engine

    @abstractmethod
    def evaluate(
        self, session: str, event: Event, *, swarm: str | None, now: float | None
    ) -> tuple[Evaluation, str | None]:
        """Judge ``event`` of ``session`` and keep the session's new state: the engine's evaluation and the swarm the
        session belongs to (``swarm`` when given, else the one it joined before). ``now``: the guard's clock; the
        event's own ``ts`` wins. Raises :class:`JudgingError` when the rules fail on the session's state."""

    def restart(
        self, session: str, event: Event, *, swarm: str | None, now: float | None
    ) -> tuple[Evaluation, str | None]:
        """After the rules failed on the session's state (:class:`JudgingError`): judge ``event`` on a fresh state and,
        when that works, make it the session's state (the session starts afresh with this event); the evaluation and
        the session's swarm. The swarm rule reads the call's tally as it stands, without counting the call again
        (the failed attempt counted it). Raises what the engine raises when a fresh state fails too (the event itself
        is at fault: the session's state is kept)."""
        group = swarm or self.swarm_of(session)
        fresh = self.engine.new_session()
        stamp = stamp_of(event, now)
        tally = None if group is None else _reader(self, group)
        evaluation = self.engine.evaluate(fresh, event, session=session, now=stamp, swarm=group, count_swarm=tally)
        self.replace(session, fresh, group, now=now)
        return evaluation, group

    @abstractmethod
    def reset(self, session: str, *, limits: bool) -> None:
        """Clear a known session's loop state (:meth:`Engine.reset`); an unknown session stays unknown."""

    @abstractmethod
    def read(self, session: str) -> tuple[State, str | None]:
        """The session's current state and swarm (a fresh state and ``None`` for an unknown session)."""

    @abstractmethod
    def replace(self, session: str, state: State, swarm: str | None, *, now: float | None) -> None:
        """Make ``state`` (in ``swarm``) the session's state, whatever it was."""

    @abstractmethod
    def swarm_of(self, session: str) -> str | None:
        """The swarm the session belongs to (``None``: none, or an unknown session)."""

    @abstractmethod
    def forget(self, session: str) -> None:
        """Drop everything about a session."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """The sessions held."""

    @abstractmethod
    def swarm_counts(self, swarm: str) -> SwarmCounts:
        """A swarm's counts (empty for an unknown swarm)."""

    @abstractmethod
    def restore_swarm(self, swarm: str, counts: SwarmCounts, *, now: float | None) -> None:
        """Replace a swarm's counts."""

    @abstractmethod
    def clear_swarm(self, swarm: str) -> None:
        """Forget a swarm's counts."""

    @abstractmethod
    def evict_idle(self, max_idle_seconds: float, now: float) -> int:
        """Forget the sessions not seen for ``max_idle_seconds`` and the swarms no session used for as long; how
        many sessions. :class:`~loopwatch.errors.UnsupportedError` where that cannot be known (a store)."""


def _reader(backend: SessionBackend, swarm: str) -> SwarmCounter:
    """A swarm counter that counts nothing: a call's tally as the swarm's counts hold it (a call not counted yet: one
    call, by its worker), read from ``backend`` when the engine asks (only a policy with a swarm rule does)."""

    def read(fingerprint: str, worker: str, tool: str) -> SwarmTally:
        calls, workers, _tool = backend.swarm_counts(swarm).get(fingerprint, (1, [worker], tool))
        return SwarmTally(calls, len(workers))

    return read


_WARM_LEVELS: Final = 3
"""How deep a session's state is brought into the cache (:func:`~loopwatch.core._kernels.warm_up`): the session, its
rules' states, their fields (~120 objects). Measured on ``bench_guard.py``: 2, 3 and 4 levels all help, 3 the most."""


class InProcessSessions(SessionBackend):
    """Sessions and swarm counts in this process's memory, used as they are (never serialised); thread-safe.

    ``stats``: the guard's counters (``evicted``, ``evicted_swarms`` are added to)."""

    def __init__(self, engine: Engine, stats: dict[str, int], *, max_sessions: int, max_swarms: int) -> None:
        self.engine = engine
        self.stats = stats
        self.max_sessions = max_sessions
        self.max_swarms = max_swarms
        self._sessions: OrderedDict[str, HeldSession] = OrderedDict()
        self._swarms: OrderedDict[str, dict[str, list[Any]]] = OrderedDict()
        self._swarm_seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._latest = ""  # the session of the latest event

    def __repr__(self) -> str:
        return f"InProcessSessions(sessions={len(self._sessions)}, swarms={len(self._swarms)})"

    def evaluate(
        self, session: str, event: Event, *, swarm: str | None, now: float | None
    ) -> tuple[Evaluation, str | None]:
        with self._lock:
            held = self._sessions.get(session)
            if held is None:
                held = self._add(session, held_session(self.engine.new_session(), now or 0.0, swarm))
            else:
                self._sessions.move_to_end(session)
                held.seen = now or 0.0  # under the lock: evict_idle reads it
                if swarm is not None:
                    held.swarm = swarm
            group = held.swarm
            count = None if group is None else self._counter(self._swarm(group, now))
            switched = session != self._latest
            self._latest = session
        if switched and warm_up is not None:
            # another session's event: its state, likely out of the cache, is asked for at once and arrives while the
            # event's features are computed (the same session's again is still there: not asked)
            warm_up(held, _WARM_LEVELS)
        return evaluate(self.engine, held, event, session, stamp_of(event, now), group, count), group

    def _add(self, session: str, held: HeldSession) -> HeldSession:
        """Keep a session, dropping the least recently used beyond ``max_sessions``; call with the lock held."""
        self._sessions[session] = held
        self._sessions.move_to_end(session)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
            self.stats["evicted"] += 1
        return held

    def _swarm(self, swarm: str, now: float | None) -> dict[str, list[Any]]:
        """A swarm's counts, the most recently used last; the least recently used go past ``max_swarms``. Call
        with the lock held."""
        counts = self._swarms.get(swarm)
        if counts is None:
            counts = self._swarms[swarm] = {}
            while len(self._swarms) > self.max_swarms:
                old, _ = self._swarms.popitem(last=False)
                self._swarm_seen.pop(old, None)
                self.stats["evicted_swarms"] += 1
        else:
            self._swarms.move_to_end(swarm)
        self._swarm_seen[swarm] = now or 0.0
        return counts

    def _counter(self, counts: dict[str, list[Any]]) -> SwarmCounter:
        def count(fingerprint: str, worker: str, tool: str) -> SwarmTally:
            with self._lock:
                return count_call(counts, fingerprint, worker, tool)

        return count

    def reset(self, session: str, *, limits: bool) -> None:
        with self._lock:
            held = self._sessions.get(session)
        if held is not None:
            self.engine.reset(held, limits=limits)

    def read(self, session: str) -> tuple[State, str | None]:
        with self._lock:
            held = self._sessions.get(session)
        return (held, held.swarm) if held is not None else (self.engine.new_session(), None)

    def replace(self, session: str, state: State, swarm: str | None, *, now: float | None) -> None:
        with self._lock:
            self._add(session, held_session(state, now or 0.0, swarm))

    def swarm_of(self, session: str) -> str | None:
        with self._lock:
            held = self._sessions.get(session)
        return held.swarm if held is not None else None

    def forget(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    def sessions(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    def swarms(self) -> list[str]:
        """The swarms whose counts are held, the least recently used first."""
        with self._lock:
            return list(self._swarms)

    def swarm_counts(self, swarm: str) -> SwarmCounts:
        with self._lock:
            counts = self._swarms.get(swarm, {})
            return {k: (v[0], list(v[1]), v[2]) for k, v in counts.items()}

    def restore_swarm(self, swarm: str, counts: SwarmCounts, *, now: float | None) -> None:
        with self._lock:
            self._swarm(swarm, now)
            self._swarms[swarm] = {k: [c, list(w), t] for k, (c, w, t) in counts.items()}

    def clear_swarm(self, swarm: str) -> None:
        with self._lock:
            self._swarms.pop(swarm, None)
            self._swarm_seen.pop(swarm, None)

    def evict_idle(self, max_idle_seconds: float, now: float) -> int:
        with self._lock:
            idle = [name for name, held in self._sessions.items() if now - held.seen > max_idle_seconds]
            for name in idle:
                del self._sessions[name]
            quiet = [name for name, seen in self._swarm_seen.items() if now - seen > max_idle_seconds]
            for name in quiet:  # counts no session used for as long: the swarm is over
                self._swarms.pop(name, None)
                del self._swarm_seen[name]
        self.stats["evicted"] += len(idle)
        self.stats["evicted_swarms"] += len(quiet)
        return len(idle)
