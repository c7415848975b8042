"""The guard: for each event, load the session, evaluate the event, save the session, emit the records.

``Guard`` drives a session backend (:mod:`loopwatch._session_backend`: the sessions in this process, or in a store
shared between processes) and the pure engine, which gives the verdict with its audit records; the guard decides
nothing about loops itself. What it adds is what surrounds the pipeline: parsing events, per-session locks, the
fail-open or fail-closed handling of internal and store errors, the optional loop judge, and the sinks. Its work at
each event is :class:`~loopwatch._guard_core.GuardCore`'s (compiled where the package is); here are its constructor,
which checks its settings, and its public methods.

``Guard`` is thread-safe (striped locks: sessions never wait on each other's work beyond a shared
stripe) and never lets a malformed event or an internal error escape into the agent it guards unless
``on_error="raise"``. Every non-ok verdict is passed to the sinks and listeners *before* it is returned.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ._async_guard import AsyncGuard as AsyncGuard
from ._guard_core import STRIPES, GuardCore
from ._guard_inputs import _listed, _name, _policy_of, _store_of
from ._session_backend import InProcessSessions, SessionBackend, _logger
from .core._checked import integer_at_least
from .core._engine import Engine
from .core._events import Event
from .core._policy import Policy
from .core._verdict import Verdict
from .errors import ConfigError, StateError, StoreError

if TYPE_CHECKING:
    from .core._judge import JudgeMemory, LoopJudge
    from .redact import Redactor
    from .stores import Store


Listener = Callable[[dict[str, Any]], None]
VerdictHook = Callable[[str, "Event | Mapping[str, Any]", Verdict], None]
"""Called with (session, event as given, verdict) after every ``observe`` (:attr:`Guard.verdict_hooks`)."""
OnError = Literal["allow", "raise"]
OnStoreError = Literal["allow", "raise", "block"]


class Guard(GuardCore):
    """Judges each event of each session and says ``ok``, ``nudge``, ``block`` or ``stop``.

    >>> guard = Guard(preset="default")
    >>> verdict = guard.observe("run-1", ToolCall("bash", {"command": "ls"}))

    ``sinks``: audit sinks (``emit(record)``), written before the verdict is returned; ``listeners``:
    callables receiving the same records, each its own redacted copy (secrets hidden as the sinks hide them;
    ``redact_listeners=False`` hands them the records as they are, or give a configured
    :class:`~loopwatch.redact.Redactor`). ``clock``: seconds since the epoch, for runtime limits and idle
    eviction (events' own ``ts`` win when present). ``max_sessions``: least recently used sessions beyond it
    are evicted (with a store: the states cached in this process, which the store still holds); ``max_swarms``
    the same for the swarm counts kept in this process (without a store).
    ``on_error``: ``"allow"`` logs and counts a malformed event or an internal error and returns ``ok``;
    ``"raise"`` raises it. Session and swarm names are plain strings: a ``uuid.UUID`` or an int is taken
    as its text, a name longer than 1,024 characters as its head and a digest of the whole.

    A session whose state fails on an event (a damaged snapshot restored, say) while a fresh state does
    not is started afresh with that event: counted in ``stats["state_resets"]``, logged, and reported
    as a ``session.state_reset`` record, so detection never stays off.

    ``store``: where session state lives (a :class:`~loopwatch.stores.Store` or its URL:
    ``"sqlite:///path.db"``, ``"redis://host:6379/0"``); the default (``None`` or ``"memory://"``) keeps it in
    this process. With a store, several processes guarding the same sessions see one state, and sessions
    tagged with the same swarm share their counts. ``on_store_error`` says what happens when the store
    fails: ``"allow"`` (fail open: the event gets ``ok``, a ``store.error`` record is emitted and counted),
    ``"block"`` (fail closed: tool calls are refused, other events get ``ok``), ``"raise"`` (the
    :class:`~loopwatch.stores.StoreError` reaches the caller).

    A ``block`` is a refusal: the integration does not run the call, or, where it cannot refuse, shows the
    refusal to the model. The same call made again after ``policy.stop_after_refusals`` refusals stops the run,
    even when it was succeeding (see :class:`~loopwatch.core.Policy`). ``replay=True`` is for feeding recorded
    runs (as ``loopwatch scan`` does): their agents never saw a verdict, so a refused call that ran anyway is not
    a refusal ignored.
    """

    def __init__(
        self,
        preset: str | Policy | None = None,
        *,
        policy: Policy | None = None,
        sinks: Iterable[Any] = (),
        listeners: Iterable[Listener] = (),
        clock: Callable[[], float] | None = time.time,
        max_sessions: int = 100_000,
        max_swarms: int = 10_000,
        on_error: OnError = "allow",
        on_audit_error: OnError = "allow",
        store: str | Store | None = None,
        on_store_error: OnStoreError = "allow",
        judge: LoopJudge | None = None,
        redact_listeners: bool | Redactor = True,
        replay: bool = False,
    ) -> None:
        if on_error not in ("allow", "raise") or on_audit_error not in ("allow", "raise"):
            raise ConfigError("must be 'allow' or 'raise'", field="on_error")
        if on_store_error not in ("allow", "raise", "block"):
            raise ConfigError("must be 'allow', 'raise' or 'block'", field="on_store_error")
        self.policy = _policy_of(preset, policy)
        self.engine = Engine(self.policy, replay=replay)
        self.sinks = _listed(sinks, "sinks")
        self.listeners = _listed(listeners, "listeners")
        if not isinstance(redact_listeners, bool):
            from .redact import Redactor

            if not isinstance(redact_listeners, Redactor):
                raise ConfigError("must be True, False or a Redactor", field="redact_listeners")
        self.redact_listeners: bool | Redactor = redact_listeners
        self.clock = clock
        self.max_sessions = integer_at_least(max_sessions, 1, "max_sessions")
        self.max_swarms = integer_at_least(max_swarms, 1, "max_swarms")
        self.on_error = on_error
        self.on_audit_error = on_audit_error
        if judge is not None:
            from .core._judge import LoopJudge  # here: guards without a judge (a hook process) never load it

            if not isinstance(judge, LoopJudge):
                raise ConfigError("must be a LoopJudge (LoopJudge(your_callable, ...))", field="judge")
        self.judge = judge
        self._judged: OrderedDict[str, JudgeMemory] = OrderedDict()
        self.stats = {
            "events": 0, "skipped": 0, "errors": 0, "audit_errors": 0, "evicted": 0, "store_errors": 0,
            "judge_calls": 0, "judge_errors": 0, "state_resets": 0, "damaged_states": 0, "evicted_swarms": 0,
        }  # fmt: skip
        self.on_store_error = on_store_error
        self.store = _store_of(store)
        self.backend: SessionBackend
        """Where the sessions live: :class:`~loopwatch._session_backend.InProcessSessions`, or with a store
        :class:`~loopwatch._stored.StoredSessions`; the guard only drives it."""
        if self.store is not None:
            from ._stored import StoredSessions  # here: a guard without a store never loads the stores

            self.backend = StoredSessions(self.engine, self.store, cache_size=max_sessions, on_damaged=self._damaged)
        else:
            self.backend = InProcessSessions(self.engine, self.stats, max_sessions=max_sessions, max_swarms=max_swarms)
        self._locks = [threading.Lock() for _ in range(STRIPES)]
        self._table_lock = threading.Lock()  # the judge's memories
        self.verdict_hooks: list[VerdictHook] = []
        """Callables told of every verdict, ``ok`` included (OpenTelemetry, the service's dashboard); an
        exception in one is logged and counted in ``stats["errors"]``, never raised into the agent."""

    def __repr__(self) -> str:
        where = f", store={self.store!r}" if self.store is not None else f", sessions={len(self.backend.sessions())}"
        return f"Guard(preset={self.policy.name!r}{where})"

    # -- public API ------------------------------------------------------------------------------------

    def observe(self, session: str, event: Event | Mapping[str, Any], *, swarm: str | None = None) -> Verdict:
        """Judge ``event`` of ``session`` (an event object or its JSON form).

        Never raises unless ``on_error="raise"`` (a malformed event, an internal error), ``on_store_error=
        "raise"`` (a store failure) or ``on_audit_error="raise"`` (an audit sink failure) says so. Every verdict is
        handed to the ``verdict_hooks`` (a failing hook is logged and counted, never raised)."""
        verdict = self._judge_event(session, event, swarm)
        for hook in self.verdict_hooks:
            try:
                hook(session, event, verdict)
            except Exception:
                self.stats["errors"] += 1
                _logger().exception("loopwatch: verdict hook %r failed", hook)
        return verdict

    def reset(self, session: str, *, limits: bool = False) -> None:
        """Clear a session's loop state (and its limits' counters with ``limits=True``); an unknown session stays
        unknown. A store failure follows ``on_store_error`` (see :meth:`forget`)."""
        session = _name(session, "session")
        with self._lock(session):
            try:
                self.backend.reset(session, limits=bool(limits))
            except StoreError as exc:
                self._store_call_failed("reset", session, exc)

    def forget(self, session: str) -> None:
        """Drop everything about a session.

        The integrations call this and :meth:`reset` on the agent's path (a run's end, a stopped thread resumed), so a
        store failure here follows ``on_store_error`` as one at an event does: ``"raise"`` raises the
        :class:`~loopwatch.stores.StoreError`; ``"allow"`` and ``"block"`` (there is no call to refuse) log it,
        count it in ``stats["store_errors"]``, emit a ``store.error`` record (its ``operation``: ``"forget"`` or
        ``"reset"``) and return, the stored state left as it was."""
        session = _name(session, "session")
        with self._lock(session):
            try:
                self.backend.forget(session)
            except StoreError as exc:
                self._store_call_failed("forget", session, exc)

    def snapshot(self, session: str) -> dict[str, Any]:
        """The session's state as JSON-able data (the doom-loop preset's toJSON); with a store, what it holds now."""
        session = _name(session, "session")
        with self._lock(session):
            state, swarm = self.backend.read(session)
            return {"session": session, "swarm": swarm, "state": self.engine.dump(state)}

    def restore(self, data: Mapping[str, Any], session: str | None = None) -> None:
        """Load a snapshot (the doom-loop preset's restoreFrom), its swarm included; raises :class:`StateError`
        when it is not one."""
        try:
            if not isinstance(data, Mapping) or "state" not in data:
                raise StateError("a snapshot is an object with 'session' and 'state'")
            name = session or data.get("session")
            if not isinstance(name, str):
                raise StateError("the snapshot names no session")
            name = _name(name, "session")
            state = self.engine.load(data["state"])
            swarm = str(data["swarm"]) if data.get("swarm") else None
        except StateError:
            raise
        except Exception as exc:  # a mapping whose own methods raise, a name with no text...
            raise StateError(f"not a loopwatch snapshot ({type(exc).__name__})") from None
        with self._lock(name):
            self.backend.replace(name, state, swarm, now=self._now())

    def sessions(self) -> list[str]:
        """The sessions this guard (or, with a store, any guard sharing it) holds state for."""
        return self.backend.sessions()

    def swarm_snapshot(self, swarm: str) -> dict[str, Any]:
        """A swarm's shared fingerprint counts as JSON-able data."""
        swarm = _name(swarm, "swarm")  # as observe() names it
        counts = self.backend.swarm_counts(swarm)
        return {"swarm": swarm, "counts": {k: [c, list(w), t] for k, (c, w, t) in counts.items()}}

    def restore_swarm(self, data: Mapping[str, Any]) -> None:
        """Load a swarm's counts saved by :meth:`swarm_snapshot`."""
        try:
            entries = {str(k): (int(v[0]), [str(w) for w in v[1]], str(v[2])) for k, v in data["counts"].items()}
            name = _name(str(data["swarm"]), "swarm")  # as observe() and swarm_snapshot() name it
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:  # an EventError is a ValueError
            raise StateError(f"not a swarm snapshot: {exc}") from exc
        self.backend.restore_swarm(name, entries, now=self._now())

    def clear_swarm(self, swarm: str) -> None:
        """Forget a swarm's counts (when the swarm completes)."""
        self.backend.clear_swarm(_name(swarm, "swarm"))

    def evict_idle(self, max_idle_seconds: float) -> int:
        """Forget the sessions not seen for ``max_idle_seconds`` (by the guard's clock; none without one), and the
        swarm counts no session used for as long; returns how many sessions.

        Sessions kept in this process only: with a store, other processes may be using the same sessions, so this
        raises :class:`~loopwatch.errors.UnsupportedError`; the store's ``ttl`` (``?ttl=seconds`` in its URL)
        expires them instead."""
        try:  # any real number (a Decimal, a numpy float), not a bool or a text
            if isinstance(max_idle_seconds, (bool, str, bytes)):
                raise TypeError
            seconds = float(max_idle_seconds)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError("must be a number of seconds", field="max_idle_seconds") from None
        now = self._now()
        if now is None and self.store is None:
            return 0
        return self.backend.evict_idle(seconds, now or 0.0)

    # -- internals -------------------------------------------------------------------------------------

    def _store_call_failed(self, operation: str, session: str, exc: StoreError) -> None:
        """A store failure in :meth:`reset` or :meth:`forget`, handled as ``on_store_error`` says."""
        record = self._store_error(session, None, exc, self._now(), operation)
        if self.on_store_error == "raise":
            raise exc
        self._emit(record)

    def _lock(self, session: str) -> threading.Lock:
        # the lock stripes of this process: a name's own hash, kept in the string, picks one
        lock: threading.Lock = self._locks[hash(session) % STRIPES]
        return lock
