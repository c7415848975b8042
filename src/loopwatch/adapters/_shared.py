"""Small pieces the framework adapters share (standard library only)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

from .._guard import Guard
from ..core._policy import Policy
from ..errors import ConfigError

_log: Final = logging.getLogger("loopwatch")


def as_text(value: object) -> str:
    """A tool's output as text: strings as they are, anything else as sorted JSON (or its ``str``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def guard_of(guard: Guard | None, preset: str | Policy | None) -> Guard:
    """The adapter's guard: ``guard`` as given, else a new one with ``preset`` (not both): a
    :class:`~loopwatch.remote.ServiceGuard` asking the loopwatch service at ``$LOOPWATCH_SERVICE_URL`` when that
    is set (the one setting that moves adapters onto the service), else an in-memory guard."""
    if guard is not None and preset is not None:
        raise ConfigError("give either guard or preset, not both", field="preset")
    return guard if guard is not None else default_guard(preset)


def default_guard(preset: str | Policy | None) -> Guard:
    """A new guard with ``preset``: a :class:`~loopwatch.remote.ServiceGuard` when ``$LOOPWATCH_SERVICE_URL`` is
    set, else an in-memory :class:`~loopwatch._guard.Guard`."""
    from ..remote import service_guard_from_env

    return service_guard_from_env(preset) or Guard(preset)


class GuardedAdapter:
    """What adapters with a fixed session share: ``guard`` (else a new one with ``preset``), ``session`` (a
    string or ``None``) and ``swarm``, checked and kept as attributes of the same names; and, for those that deliver a
    nudge on the model's next turn, the nudges waiting for it (``_nudges``, a :class:`NudgeQueue`)."""

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        session: str | None = None,
        swarm: str | None = None,
    ) -> None:
        if session is not None and not isinstance(session, str):
            raise ConfigError("must be a string", field="session")
        self.guard = guard_of(guard, preset)
        self.session = session
        self.swarm = swarm
        self._nudges = NudgeQueue()


@contextlib.contextmanager
def session_scope(var: ContextVar[str | None], name: str | None, prefix: str) -> Iterator[str]:
    """Sets ``var`` to session ``name`` (a fresh ``<prefix>-<hex>`` when not given) inside the block; yields it."""
    session = name or f"{prefix}-{uuid.uuid4().hex[:12]}"
    token = var.set(session)
    try:
        yield session
    finally:
        var.reset(token)


class NudgeQueue:
    """The nudges waiting for each session's next model call, for adapters that deliver a nudge on the model's next
    turn rather than in the tool's answer. Safe to share between threads.

    A message already waiting for the session is not queued twice. Bounded: past ``max_sessions`` sessions with
    nudges waiting (runs that ended before their next model call, in a long-lived process), the oldest session's
    are dropped; past ``per_session`` for one session, its oldest. Every drop is logged (logger ``loopwatch``)
    and counted in :attr:`dropped`.
    """

    def __init__(self, *, max_sessions: int = 4096, per_session: int = 16) -> None:
        if max_sessions < 1 or per_session < 1:
            raise ConfigError("must be at least 1", field="max_sessions" if max_sessions < 1 else "per_session")
        self.max_sessions = max_sessions
        self.per_session = per_session
        self.dropped = 0
        self._lock = threading.Lock()
        self._waiting: OrderedDict[str, list[str]] = OrderedDict()

    def __repr__(self) -> str:
        return f"NudgeQueue(max_sessions={self.max_sessions}, per_session={self.per_session})"

    def __len__(self) -> int:
        """Sessions with nudges waiting."""
        with self._lock:
            return len(self._waiting)

    def add(self, session: str, message: str) -> None:
        """Queue ``message`` for the session's next model call (once: a message already waiting is not repeated)."""
        if not message:
            return
        with self._lock:
            notes = self._waiting.get(session)
            if notes is None:
                notes = self._waiting[session] = []
            self._waiting.move_to_end(session)
            if message in notes:
                return
            notes.append(message)
            dropped = 0
            if len(notes) > self.per_session:
                del notes[0]
                dropped += 1
            while len(self._waiting) > self.max_sessions:
                _, old = self._waiting.popitem(last=False)
                dropped += len(old)
            self.dropped += dropped
        if dropped:
            _log.warning("loopwatch: %d waiting nudge(s) dropped (the nudge queue is full)", dropped)

    def take(self, session: str) -> list[str]:
        """The session's waiting nudges, oldest first, taken off the queue."""
        with self._lock:
            return self._waiting.pop(session, [])

    def peek(self, session: str) -> list[str]:
        """The session's waiting nudges, left on the queue."""
        with self._lock:
            return list(self._waiting.get(session, ()))

    def discard(self, session: str) -> None:
        """Forget the session's waiting nudges (its run is over)."""
        with self._lock:
            self._waiting.pop(session, None)
