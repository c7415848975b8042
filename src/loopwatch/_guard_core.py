"""What a guard does at every event, and what it does when something fails.

:class:`GuardCore` holds a guard's settings and parts (the engine, the session backend, the sinks, the judge) and its
work at each event: the event and the session's name checked, the session's lock taken, the engine's evaluation
through the backend, the records handed to the sinks and listeners, and the fail-open or fail-closed handling of
malformed events, internal errors, store errors and damaged states. :class:`~loopwatch.Guard` subclasses it with its
constructor and its public methods, which check what a caller hands them and say what they take.

Where the package is built with a C compiler, mypyc compiles this module with the engine and the session backend
(:mod:`loopwatch._native`), so that the guard adds ~0.6 us to the engine's time per event rather than ~1 us; its
parameters take any object (a session named by a ``uuid.UUID``, an event as a mapping), since compiled code would
refuse another type before the guard could turn it into a counted skip. ``Guard`` and its subclasses (the service's
:class:`~loopwatch.remote.ServiceGuard`, :class:`~loopwatch.memory.RecallingGuard`, a user's) run from source.
"""

from __future__ import annotations

from typing import Any, Final

from ._guard_inputs import EVENT_CLASSES, _event_of, _name, _safe_repr
from ._session_backend import JudgingError, SessionBackend, _logger, stamp_of
from .core._audit import damaged_state_record, judge_record, state_reset_record, store_error_block, store_error_record
from .core._engine import Engine, Evaluation
from .core._event_values import MAX_NAME
from .core._events import Event, ToolCall
from .core._policy import Policy
from .core._verdict import Verdict
from .core.detectors._base import mypyc_attr
from .errors import EventError, StoreError

STRIPES: Final = 64
"""The guard's session locks: a session takes the one its name's hash picks."""


@mypyc_attr(allow_interpreted_subclasses=True)  # Guard, run from source, subclasses it
class GuardCore:
    """A guard's parts and its work at each event (see the module); :class:`~loopwatch.Guard` sets the parts."""

    policy: Policy
    engine: Engine
    backend: SessionBackend
    stats: dict[str, int]
    sinks: list[Any]
    listeners: list[Any]
    redact_listeners: Any  # bool or a Redactor
    clock: Any  # a callable, or None
    judge: Any  # a LoopJudge, or None (its module is loaded only for a guard that has one)
    store: Any  # a Store, or None (the stores are loaded only for a guard that has one)
    on_error: str
    on_audit_error: str
    on_store_error: str
    max_sessions: int
    max_swarms: int
    verdict_hooks: list[Any]
    _locks: list[Any]
    _table_lock: Any
    _judged: Any  # an OrderedDict of JudgeMemory by session

    def _judge_event(self, session: object, event: object, swarm: object) -> Verdict:
        try:  # (a short plain name and an event object, the usual inputs, taken as they are without a call)
            name = session if type(session) is str and len(session) <= MAX_NAME else _name(session, "session")
            group = None if swarm is None else _name(swarm, "swarm")
            parsed: Event = event if type(event) in EVENT_CLASSES else _event_of(event)  # type: ignore[assignment]
        except EventError as exc:
            return self._skip(session, exc)
        with self._locks[hash(name) % STRIPES]:  # (what Guard._lock() picks)
            try:
                (verdict, records), group = _evaluate(self, name, parsed, group)
            except _Raised as raised:
                raise raised.error from None
            memory = self._remember(name, verdict, parsed) if self.judge is not None else None
            if memory is None or not verdict.evidence.get("undecided"):
                # a sink's error is governed by on_audit_error, not taken for an internal error
                for record in records:
                    self._emit(record)
                return verdict
        # an undecided ok, and a judge: asked outside the lock (it may take seconds)
        return self._consult(name, parsed, verdict, memory, group)

    def _remember(self, session: str, verdict: Verdict, event: Event) -> Any:
        """Keep the event in the session's recent history for the judge (in this process): its ``JudgeMemory``."""
        if verdict.index < 0:
            return None
        with self._table_lock:
            memory = self._judged.get(session)
            if memory is None:
                from .core._judge import JudgeMemory

                memory = self._judged[session] = JudgeMemory()
                while len(self._judged) > self.max_sessions:
                    self._judged.popitem(last=False)
            else:
                self._judged.move_to_end(session)
        self.judge.remember(memory, verdict.index, event)
        return memory

    def _consult(self, session: str, event: Event, verdict: Verdict, memory: Any, swarm: str | None) -> Verdict:
        """Ask the judge about an undecided step when it is due; the engine turns its answer into a verdict."""
        judge = self.judge
        if not judge.due(memory, verdict.index):
            return verdict
        suspicion = str(verdict.evidence["undecided"])
        self.stats["judge_calls"] += 1
        ts = stamp_of(event, self._now())
        try:
            answer = judge.ask(memory, session, verdict.index, suspicion)
        except Exception as exc:  # the judge's failure never reaches the agent
            self.stats["judge_errors"] += 1
            _logger().warning("loopwatch: the judge failed on session %r: %r", session, exc)
            self._emit(judge_record(session, verdict.index, ts, judge=repr(judge), error=repr(exc)))
            return verdict
        judged, records = self.engine.judged(
            verdict, answer, judge, session=session, event=event, suspicion=suspicion, now=ts, swarm=swarm
        )
        for record in records:
            self._emit(record)
        return judged

    def _now(self) -> Any:
        """The guard's clock's time (see :func:`_time_of`)."""
        return _time_of(self.clock)

    def _damaged(self, session: str, event: Event, damaged: Any, ts: Any) -> bool:
        """A stored state this loopwatch cannot read (``damaged``: the ``DamagedStateError``): counted, logged,
        reported; started afresh when failing open (``True``), left for ``on_store_error`` to decide otherwise."""
        self.stats["damaged_states"] += 1
        fresh = self.on_store_error == "allow"
        _logger().warning(
            "loopwatch: the stored state of session %r is damaged (%s); %s",
            session,
            damaged.reason,
            "it starts afresh" if fresh else f"on_store_error={self.on_store_error!r} decides",
        )
        self._emit(
            damaged_state_record(session, event, ts, repr(self.store), damaged.reason, self.on_store_error, fresh)
        )
        return fresh

    def _recover(self, session: str, event: Event, swarm: str | None, now: Any) -> tuple[Evaluation, str | None] | None:
        """After an internal error: judge the event on a fresh state. When that works, the session's own state
        was what failed (a damaged snapshot restored, say): the session starts afresh with this event, and
        says so. When it fails too, the event itself is at fault and the session's state is kept."""
        try:
            (verdict, records), swarm = self.backend.restart(session, event, swarm=swarm, now=now)
        except StoreError:
            raise
        except Exception:
            return None
        self.stats["state_resets"] += 1
        _logger().warning("loopwatch: the state of session %r failed on an event; the session starts afresh", session)
        return Evaluation(verdict, (state_reset_record(session, event, stamp_of(event, now)), *records)), swarm

    def _store_failed(self, session: str, event: Event, exc: StoreError, ts: Any) -> Evaluation:
        record = self._store_error(session, event, exc, ts)
        if self.on_store_error == "raise":
            raise _Raised(exc)
        if self.on_store_error == "block" and isinstance(event, ToolCall):
            return Evaluation(store_error_block(self.policy.messages, str(exc)), (record,))
        return Evaluation(Verdict(reason=f"store error (fail open): {exc}"), (record,))

    def _store_error(
        self, session: str, event: Event | None, exc: StoreError, ts: Any, operation: str = "observe"
    ) -> dict[str, Any]:
        """A store failure at an event, or in ``reset`` or ``forget`` (``operation``): counted and logged; its
        ``store.error`` record (the caller raises it instead when ``on_store_error="raise"``)."""
        self.stats["store_errors"] += 1
        where = "" if operation == "observe" else f" ({operation})"
        _logger().warning("loopwatch: store error on session %r%s: %s", session, where, exc)
        store = repr(self.store) if self.store is not None else None
        return store_error_record(session, event, ts, store, str(exc), self.on_store_error, operation)

    def _for_listener(self, record: dict[str, Any]) -> dict[str, Any]:
        """A listener's own redacted copy of ``record`` (``redact_listeners``; the redactor made on first use)."""
        setting = self.redact_listeners
        if setting is False:
            return record
        if setting is True:
            from .redact import Redactor

            setting = self.redact_listeners = Redactor()
        copy: dict[str, Any] = setting(record)
        return copy

    def _skip(self, session: object, exc: EventError) -> Verdict:
        self.stats["skipped"] += 1
        _logger().warning("loopwatch: skipped a malformed event of session %s: %s", _safe_repr(session), exc)
        if self.on_error == "raise":
            raise exc
        return Verdict(index=-1, reason=f"skipped malformed event: {exc}")

    def _emit(self, record: dict[str, Any]) -> None:
        for sink in self.sinks:
            try:
                sink.emit(record)
            except Exception:
                self.stats["audit_errors"] += 1
                _logger().exception("loopwatch: audit sink %r failed; record: %s", sink, record.get("event"))
                if self.on_audit_error == "raise":
                    raise
        for listener in self.listeners:
            try:
                listener(self._for_listener(record))
            except Exception:
                self.stats["errors"] += 1
                _logger().exception("loopwatch: listener %r failed", listener)


def _evaluate(guard: GuardCore, session: str, event: Event, swarm: str | None) -> tuple[Evaluation, str | None]:
    """Load, evaluate, save: the engine's evaluation of one event and the session's swarm; errors the caller
    asked for come as :class:`_Raised`. (A function, not a method: a compiled call, not a lookup on ``Guard``.)"""
    now = _time_of(guard.clock)
    guard.stats["events"] += 1
    try:
        try:
            return guard.backend.evaluate(session, event, swarm=swarm, now=now)
        except StoreError as exc:
            return guard._store_failed(session, event, exc, stamp_of(event, now)), swarm
    except _Raised:
        raise
    except Exception as exc:  # an internal error must not crash the agent
        error = exc.error if isinstance(exc, JudgingError) else exc
        guard.stats["errors"] += 1
        _logger().error("loopwatch: internal error on an event of session %r", session, exc_info=error)
        if guard.on_error == "raise":
            raise _Raised(error) from error
        recovered = None
        if isinstance(exc, JudgingError):  # the rules failed: on this session's state, or on any?
            try:
                recovered = guard._recover(session, event, swarm, now)
            except Exception:  # the store failed too, say: the event stays unjudged
                _logger().exception("loopwatch: session %r could not be started afresh", session)
        if recovered is not None:
            return recovered
        return Evaluation(Verdict(index=-1, reason=f"internal error: {_safe_repr(error)}")), swarm


def _time_of(clock: Any) -> Any:
    """The time ``clock`` (a guard's, or ``None``) tells: a float or an int as it is, another number (a ``Decimal``)
    as a float; what cannot be one is handed on as it is, for the session backend to refuse where the guard catches
    it. (A function: :func:`_evaluate` calls it without a lookup on ``Guard``.)"""
    now = clock() if clock is not None else None
    if now is None or type(now) is float or type(now) is int:
        return now
    try:
        return float(now)
    except (TypeError, ValueError, OverflowError):
        return now


class _Raised(Exception):
    """Carries an error the caller asked to see (``on_error``, ``on_store_error="raise"``) past the guard's
    own handling of internal errors."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error
