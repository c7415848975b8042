"""The guard: moves events into the pure engine, keeps session state, writes audit records.

``Guard`` is thread-safe (striped locks: sessions never wait on each other's work beyond a shared
stripe) and never lets a malformed event or an internal error escape into the agent it guards unless
``on_error="raise"``. Every non-ok verdict is passed to the sinks and listeners *before* it is returned.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from .detectors.base import State
from .detectors.swarm import new_swarm_state
from .engine import Engine
from .errors import ConfigError, EventError, StateError
from .events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage, name_of, parse_event
from .messages import render
from .policy import Policy
from .presets import preset as get_preset
from .stored import DamagedStateError, JudgingError, StoredSessions, judge
from .stores import Store, StoreError, store_from_url
from .verdict import Verdict

if TYPE_CHECKING:
    from .judge import JudgeMemory, LoopJudge
    from .redact import Redactor


def _logger() -> Any:
    """The ``loopwatch`` logger (``logging`` is imported on first use: a hook process rarely logs)."""
    import logging

    return logging.getLogger("loopwatch")


Listener = Callable[[dict[str, Any]], None]
VerdictHook = Callable[[str, "Event | Mapping[str, Any]", Verdict], None]
"""Called with (session, event as given, verdict) after every ``observe`` (:attr:`Guard.verdict_hooks`)."""
OnError = Literal["allow", "raise"]
OnStoreError = Literal["allow", "raise", "block"]
_STRIPES = 64
_EVENT_CLASSES = (ToolCall, ToolResult, Message, TextDelta, Usage, Reset)


def _policy_of(preset: str | Policy | None, policy: Policy | None) -> Policy:
    if policy is not None and preset is not None:
        raise ConfigError("give either preset or policy, not both", field="policy")
    if policy is not None:
        return policy
    if isinstance(preset, Policy):
        return preset
    return get_preset(preset or "default")


def _store_of(store: str | Store | None) -> Store | None:
    if store is None or isinstance(store, Store):
        return store
    if store.strip().lower() in ("memory://", "memory:"):
        return None  # in this process, without serialising: what the guard does by itself
    return store_from_url(store)


class Guard:
    """Judges each event of each session and says ``ok``, ``nudge``, ``block`` or ``stop``.

    >>> guard = Guard(preset="default")
    >>> verdict = guard.observe("run-1", ToolCall("bash", {"command": "ls"}))

    ``sinks``: audit sinks (``emit(record)``), written before the verdict is returned; ``listeners``:
    callables receiving the same records, each its own redacted copy (secrets hidden as the sinks hide them;
    ``redact_listeners=False`` hands them the records as they are, or give a configured
    :class:`~loopwatch.redact.Redactor`). ``clock``: seconds since the epoch, for runtime limits and idle
    eviction (events' own ``ts`` win when present). ``max_sessions``: least recently used sessions beyond it
    are evicted; ``max_swarms`` the same for the swarm counts kept in this process (without a store).
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
    even when it was succeeding (see :class:`~loopwatch.policy.Policy`). ``replay=True`` is for feeding recorded
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
        self.sinks = list(sinks)
        self.listeners = list(listeners)
        if not isinstance(redact_listeners, bool):
            from .redact import Redactor

            if not isinstance(redact_listeners, Redactor):
                raise ConfigError("must be True, False or a Redactor", field="redact_listeners")
        self.redact_listeners: bool | Redactor = redact_listeners
        self.clock = clock
        self.max_sessions = max_sessions
        if isinstance(max_swarms, bool) or not isinstance(max_swarms, int) or max_swarms < 1:
            raise ConfigError("must be an integer >= 1", field="max_swarms")
        self.max_swarms = max_swarms
        self.on_error = on_error
        self.on_audit_error = on_audit_error
        if judge is not None:
            from .judge import LoopJudge  # here: guards without a judge (a hook process) never load it

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
        self._stored = StoredSessions(self.engine, self.store, cache_size=max_sessions) if self.store else None
        self._sessions: OrderedDict[str, State] = OrderedDict()
        self._seen: dict[str, float] = {}
        self._swarms: OrderedDict[str, State] = OrderedDict()
        self._swarm_seen: dict[str, float] = {}
        self._session_swarm: dict[str, str] = {}
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._table_lock = threading.Lock()
        self.verdict_hooks: list[VerdictHook] = []
        """Callables told of every verdict, ``ok`` included (OpenTelemetry, the service's dashboard); an
        exception in one is logged and counted in ``stats["errors"]``, never raised into the agent."""

    def __repr__(self) -> str:
        where = f", store={self.store!r}" if self.store is not None else f", sessions={len(self._sessions)}"
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

    def _judge_event(self, session: str, event: Event | Mapping[str, Any], swarm: str | None) -> Verdict:
        try:
            name = _name(session, "session")
            group = None if swarm is None else _name(swarm, "swarm")
            parsed = _event_of(event)
        except EventError as exc:
            return self._skip(session, exc)
        with self._lock(name):
            try:
                verdict, records = self._verdict_of(name, parsed, group)
            except _Raised as raised:
                raise raised.error from None
            memory = self._remember(name, verdict, parsed) if self.judge is not None else None
            if memory is None or not verdict.evidence.get("undecided"):
                # a sink's error is governed by on_audit_error, not taken for an internal error
                for record in records:
                    self._emit(record)
                return verdict
        # an undecided ok, and a judge: asked outside the lock (it may take seconds)
        return self._consult(name, parsed, verdict, memory)

    def _verdict_of(self, session: str, event: Event, swarm: str | None) -> tuple[Verdict, list[dict[str, Any]]]:
        """The verdict and audit records of one event; errors the caller asked for come as :class:`_Raised`."""
        try:
            if self._stored is not None:
                return self._observe_stored(session, event, swarm)
            return self._observe(session, event, swarm)
        except _Raised:
            raise
        except Exception as exc:  # an internal error must not crash the agent
            error = exc.error if isinstance(exc, JudgingError) else exc
            self.stats["errors"] += 1
            _logger().error("loopwatch: internal error on an event of session %r", session, exc_info=error)
            if self.on_error == "raise":
                raise _Raised(error) from error
            recovered = None
            if isinstance(exc, JudgingError):  # the rules failed: on this session's state, or on any?
                try:
                    recovered = self._recover(session, event, swarm)
                except Exception:  # the store failed too, say: the event stays unjudged
                    _logger().exception("loopwatch: session %r could not be started afresh", session)
            if recovered is not None:
                return recovered
            return Verdict(index=-1, reason=f"internal error: {_safe_repr(error)}"), []

    def reset(self, session: str, *, limits: bool = False) -> None:
        """Clear a session's loop state (and its limits' counters with ``limits=True``)."""
        session = _name(session, "session")
        with self._lock(session):
            if self._stored is not None:
                self._stored.update(session, lambda state: self.engine.reset(state, limits=limits))
                return
            state = self._sessions.get(session)
            if state is not None:
                self.engine.reset(state, limits=limits)

    def forget(self, session: str) -> None:
        """Drop everything about a session."""
        session = _name(session, "session")
        with self._lock(session), self._table_lock:
            self._sessions.pop(session, None)
            self._seen.pop(session, None)
            self._session_swarm.pop(session, None)
        if self._stored is not None:
            with self._lock(session):
                self._stored.delete(session)

    def snapshot(self, session: str) -> dict[str, Any]:
        """The session's state as JSON-able data (the doom-loop preset's toJSON)."""
        session = _name(session, "session")
        with self._lock(session):
            if self._stored is not None:
                self._stored.forget_cached(session)  # another process may have written it: read the store's
                _, state, swarm = self._stored.current(session)
                return {"session": session, "swarm": swarm, "state": self.engine.dump(state)}
            state = self._sessions.get(session) or self.engine.new_session()
            return {
                "session": session,
                "swarm": self._session_swarm.get(session),
                "state": self.engine.dump(state),
            }

    def restore(self, data: Mapping[str, Any], session: str | None = None) -> None:
        """Load a snapshot (the doom-loop preset's restoreFrom); raises :class:`StateError` when it is not one."""
        try:
            if not isinstance(data, Mapping) or "state" not in data:
                raise StateError("a snapshot is an object with 'session' and 'state'")
            name = session or data.get("session")
            if not isinstance(name, str):
                raise StateError("the snapshot names no session")
            name = _name(name, "session")
            state = self.engine.load(data["state"])
        except StateError:
            raise
        except Exception as exc:  # a mapping whose own methods raise, a name with no text...
            raise StateError(f"not a loopwatch snapshot ({type(exc).__name__})") from None
        if self._stored is not None:
            with self._lock(name):
                self._stored.replace(name, state, str(data["swarm"]) if data.get("swarm") else None)
            return
        with self._lock(name), self._table_lock:
            self._sessions[name] = state
            self._seen[name] = self._now() or 0.0
            if data.get("swarm"):
                self._session_swarm[name] = str(data["swarm"])

    def sessions(self) -> list[str]:
        """The sessions this guard (or, with a store, any guard sharing it) holds state for."""
        if self._stored is not None:
            return self._stored.sessions()
        with self._table_lock:
            return list(self._sessions)

    def swarm_snapshot(self, swarm: str) -> dict[str, Any]:
        """A swarm's shared fingerprint counts as JSON-able data."""
        if self.store is not None:
            stored = self.store.swarm_counts(swarm)
            return {"swarm": swarm, "counts": {k: [c, list(w), t] for k, (c, w, t) in stored.items()}}
        with self._table_lock:
            counts = self._swarms.get(swarm, new_swarm_state())
            return {
                "swarm": swarm,
                "counts": {k: [v[0], list(v[1]), v[2]] for k, v in counts["counts"].items()},
            }

    def restore_swarm(self, data: Mapping[str, Any]) -> None:
        """Load a swarm's counts saved by :meth:`swarm_snapshot`."""
        try:
            entries = {str(k): (int(v[0]), [str(w) for w in v[1]], str(v[2])) for k, v in data["counts"].items()}
            name = str(data["swarm"])
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise StateError(f"not a swarm snapshot: {exc}") from exc
        if self.store is not None:
            self.store.swarm_restore(name, entries)
            return
        with self._table_lock:
            self._swarm_state(name, self._now())["counts"] = {k: list(v) for k, v in entries.items()}

    def clear_swarm(self, swarm: str) -> None:
        """Forget a swarm's counts (when the swarm completes)."""
        if self.store is not None:
            self.store.swarm_clear(swarm)
            return
        with self._table_lock:
            self._swarms.pop(swarm, None)
            self._swarm_seen.pop(swarm, None)

    def evict_idle(self, max_idle_seconds: float) -> int:
        """Drop sessions not seen for ``max_idle_seconds`` (by the guard's clock), and the swarm counts kept in
        this process that no call added to for as long; returns how many sessions."""
        now = self._now()
        if now is None:
            return 0
        with self._table_lock:
            idle = [s for s, seen in self._seen.items() if now - seen > max_idle_seconds]
            quiet = [s for s, seen in self._swarm_seen.items() if now - seen > max_idle_seconds]
            for name in quiet:  # counts no worker added to for as long: the swarm is over
                self._swarms.pop(name, None)
                del self._swarm_seen[name]
            self.stats["evicted_swarms"] += len(quiet)
        for name in idle:
            self.forget(name)
        self.stats["evicted"] += len(idle)
        return len(idle)

    # -- internals -------------------------------------------------------------------------------------

    def _remember(self, session: str, verdict: Verdict, event: Event) -> JudgeMemory | None:
        """Keep the event in the session's recent history for the judge (in this process)."""
        assert self.judge is not None
        if verdict.index < 0:
            return None
        with self._table_lock:
            memory = self._judged.get(session)
            if memory is None:
                from .judge import JudgeMemory

                memory = self._judged[session] = JudgeMemory()
                while len(self._judged) > self.max_sessions:
                    self._judged.popitem(last=False)
            else:
                self._judged.move_to_end(session)
        self.judge.remember(memory, verdict.index, event)
        return memory

    def _consult(self, session: str, event: Event, verdict: Verdict, memory: JudgeMemory) -> Verdict:
        """Ask the judge about an undecided step when it is due; a confident "loop" becomes a nudge."""
        judge = self.judge
        assert judge is not None
        if not judge.due(memory, verdict.index):
            return verdict
        suspicion = str(verdict.evidence["undecided"])
        self.stats["judge_calls"] += 1
        ts = event.ts if event.ts is not None else self._now()
        base = {"ts": ts, "session": session, "index": verdict.index}
        try:
            answer = judge.ask(memory, session, verdict.index, suspicion)
        except Exception as exc:  # the judge's failure never reaches the agent
            self.stats["judge_errors"] += 1
            _logger().warning("loopwatch: the judge failed on session %r: %r", session, exc)
            self._emit({"event": "judge.error", **base, "judge": repr(judge), "error": repr(exc)})
            return verdict
        answered = {"loop": answer.loop, "confidence": answer.confidence, "reason": answer.reason}
        self._emit({"event": "judge.verdict", **base, "judge": repr(judge), "suspicion": suspicion, **answered})
        if not answer.loop or answer.confidence < judge.min_confidence:
            return verdict
        reason = f"the loop judge says: {answer.reason or 'the agent is going in circles'}"
        template = self.policy.messages.template("judged_loop", 1, "nudge")
        nudge = Verdict(
            action="nudge",
            index=verdict.index,
            pattern="judged_loop",
            count=1,
            level=1,
            message=render(template, {"reason": answer.reason or "the same thing again", "count": 1}),
            reason=reason,
            detector=repr(judge),
            evidence={"undecided": suspicion, "undecided_by": verdict.detector, "judge": answered},
        )
        self._emit(_record("loop.nudge", session, event, nudge, ts, self._session_swarm.get(session)))
        return nudge

    def _lock(self, session: str) -> threading.Lock:
        return self._locks[zlib.crc32(session.encode("utf-8", "surrogatepass")) % _STRIPES]

    def _now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    def _state(self, session: str, swarm: str | None, now: float | None) -> tuple[State, State | None]:
        with self._table_lock:
            state = self._sessions.get(session)
            if state is None:
                state = self._sessions[session] = self.engine.new_session()
                while len(self._sessions) > self.max_sessions:
                    old, _ = self._sessions.popitem(last=False)
                    self._seen.pop(old, None)
                    self._session_swarm.pop(old, None)
                    self.stats["evicted"] += 1
            else:
                self._sessions.move_to_end(session)
            self._seen[session] = now or 0.0  # under the table lock: evict_idle iterates over _seen
            if swarm is not None:
                self._session_swarm[session] = swarm
            swarm = self._session_swarm.get(session)
            shared = self._swarm_state(swarm, now) if swarm is not None else None
        return state, shared

    def _swarm_state(self, swarm: str, now: float | None) -> State:
        """A swarm's counts, the most recently used last; the least recently used go past ``max_swarms``.
        Call with the table lock held."""
        shared = self._swarms.get(swarm)
        if shared is None:
            shared = self._swarms[swarm] = new_swarm_state()
            while len(self._swarms) > self.max_swarms:
                old, _ = self._swarms.popitem(last=False)
                self._swarm_seen.pop(old, None)
                self.stats["evicted_swarms"] += 1
        else:
            self._swarms.move_to_end(swarm)
        self._swarm_seen[swarm] = now or 0.0
        return shared

    def _observe(self, session: str, event: Event, swarm: str | None) -> tuple[Verdict, list[dict[str, Any]]]:
        now = self._now()
        state, shared = self._state(session, swarm, now)
        self.stats["events"] += 1
        was_stopped = state["stopped"] is not None
        stamp = event.ts if event.ts is not None else now
        verdict = judge(self.engine, state, event, now=stamp, swarm=shared, worker=session)
        if verdict.action != "ok" and not was_stopped:
            return verdict, self._audit_records(session, event, verdict, stamp)
        return verdict, []

    def _observe_stored(self, session: str, event: Event, swarm: str | None) -> tuple[Verdict, list[dict[str, Any]]]:
        assert self._stored is not None
        now = self._now()
        stamp = event.ts if event.ts is not None else now
        self.stats["events"] += 1
        try:
            try:
                verdict, was_stopped, swarm = self._stored.observe(session, event, swarm=swarm, now=stamp)
            except DamagedStateError as damaged:
                if not self._damaged(session, event, damaged, stamp):
                    raise
                counted = (damaged.tally,) if damaged.counted else None  # the swarm count is added once
                verdict, was_stopped, swarm = self._stored.observe(
                    session, event, swarm=swarm, now=stamp, counted=counted
                )
        except StoreError as exc:
            return self._store_failed(session, event, exc, stamp)
        if verdict.action != "ok" and not was_stopped:
            return verdict, self._audit_records(session, event, verdict, stamp, swarm)
        return verdict, []

    def _damaged(self, session: str, event: Event, damaged: DamagedStateError, ts: float | None) -> bool:
        """A stored state this loopwatch cannot read: counted, logged, reported; started afresh when failing
        open (``True``), left for ``on_store_error`` to decide otherwise."""
        self.stats["damaged_states"] += 1
        fresh = self.on_store_error == "allow"
        _logger().warning(
            "loopwatch: the stored state of session %r is damaged (%s); %s",
            session,
            damaged.reason,
            "it starts afresh" if fresh else f"on_store_error={self.on_store_error!r} decides",
        )
        self._emit(
            {
                "event": "store.damaged_state",
                "ts": ts,
                "session": session,
                "worker": event.worker,
                "store": repr(self.store),
                "error": damaged.reason,
                "policy": self.on_store_error,
                "action": "started afresh" if fresh else "left as it is",
            }
        )
        if fresh:
            assert self._stored is not None
            self._stored.start_afresh(session, damaged.stored)
        return fresh

    def _recover(self, session: str, event: Event, swarm: str | None) -> tuple[Verdict, list[dict[str, Any]]] | None:
        """After an internal error: judge the event on a fresh state. When that works, the session's own state
        was what failed (a damaged snapshot restored, say): the session starts afresh with this event, and
        says so. When it fails too, the event itself is at fault and the session's state is kept."""
        now = self._now()
        stamp = event.ts if event.ts is not None else now
        fresh = self.engine.new_session()
        try:
            verdict = self.engine.observe(fresh, event, now=stamp, worker=session)
        except Exception:
            return None
        self.stats["state_resets"] += 1
        _logger().warning("loopwatch: the state of session %r failed on an event; the session starts afresh", session)
        if self._stored is not None:
            self._stored.replace(session, fresh, swarm)
        else:
            with self._table_lock:
                if session in self._sessions:
                    self._sessions[session] = fresh
        record = {
            "event": "session.state_reset",
            "ts": stamp,
            "session": session,
            "worker": event.worker,
            "reason": "the session's state failed on an event that a fresh state judges; it starts afresh",
        }
        records = [record]
        if verdict.action != "ok":
            records += self._audit_records(session, event, verdict, stamp, swarm)
        return verdict, records

    def _store_failed(
        self, session: str, event: Event, exc: StoreError, ts: float | None
    ) -> tuple[Verdict, list[dict[str, Any]]]:
        self.stats["store_errors"] += 1
        _logger().warning("loopwatch: store error on session %r: %s", session, exc)
        if self.on_store_error == "raise":
            raise _Raised(exc)
        record = {
            "event": "store.error",
            "ts": ts,
            "session": session,
            "worker": event.worker,
            "store": repr(self.store) if self.store is not None else None,
            "error": str(exc),
            "policy": self.on_store_error,
        }
        if self.on_store_error == "block" and isinstance(event, ToolCall):
            reason = f"loop guard unavailable ({exc}); calls are refused until it is back"
            verdict = Verdict(action="block", pattern="store_error", level=1, message=reason, reason=reason)
            return verdict, [record]
        return Verdict(reason=f"store error (fail open): {exc}"), [record]

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

    def _audit_records(
        self, session: str, event: Event, verdict: Verdict, ts: float | None, swarm: str | None = None
    ) -> list[dict[str, Any]]:
        swarm = swarm or self._session_swarm.get(session)
        record = _record(f"loop.{verdict.action}", session, event, verdict, ts, swarm)
        if verdict.action == "stop":
            return [record, dict(record, event="session.terminated")]
        return [record]

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


class _Raised(Exception):
    """Carries an error the caller asked to see (``on_error``, ``on_store_error="raise"``) past the guard's
    own handling of internal errors."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _name(value: object, field: str) -> str:
    """A session or swarm name as a plain, bounded string (an :class:`EventError` when it has no text)."""
    if type(value) is str and len(value) <= 1_024:
        return value
    return name_of(value, field)


def _event_of(event: object) -> Event:
    """The event to judge: an event object as it is, a subclass's fields as the plain class, a mapping parsed."""
    if type(event) in _EVENT_CLASSES:
        return event  # type: ignore[return-value]
    for kind in _EVENT_CLASSES:
        if isinstance(event, kind):
            try:
                fields = {name: getattr(event, name) for name in kind.__dataclass_fields__}
                rebuilt: Event = kind(**fields)
            except EventError:
                raise
            except Exception as exc:  # a subclass whose attributes raise
                raise EventError(f"the event could not be read ({type(exc).__name__})") from None
            return rebuilt
    return parse_event(event)


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."


def _record(
    name: str, session: str, event: Event, verdict: Verdict, ts: float | None, swarm: str | None
) -> dict[str, Any]:
    if verdict.pattern == "limit" and verdict.action == "nudge":
        name = "limit.warning"
    return {
        "event": name,
        "ts": ts,
        "session": session,
        "worker": event.worker,
        "swarm": swarm,
        "index": verdict.index,
        "action": verdict.action,
        "level": verdict.level,
        "pattern": verdict.pattern,
        "count": verdict.count,
        "loop_start": verdict.loop_start,
        "status": verdict.status,
        "detector": verdict.detector,
        "reason": verdict.reason,
        "message": verdict.message,
        "partial": verdict.partial,
        "evidence": dict(verdict.evidence),
    }


class AsyncGuard:
    """The async twin of :class:`Guard`: the same verdicts, awaitable methods.

    Detection is CPU work done inline. Webhook sinks queue their I/O in their own threads, so awaiting
    ``observe`` never waits on the network; a JSONL audit sink writes (and fsyncs) inline, by design: the
    record exists before the verdict is returned. With a ``store`` (SQLite, Redis...) or a ``judge`` (an LLM
    call), every call runs in a worker thread, so the event loop never waits on the store or the model.
    """

    def __init__(self, preset: str | Policy | None = None, **kwargs: Any) -> None:
        self._guard = Guard(preset, **kwargs)

    @property
    def policy(self) -> Policy:
        return self._guard.policy

    @property
    def stats(self) -> dict[str, int]:
        return self._guard.stats

    def __repr__(self) -> str:
        return f"Async{self._guard!r}"

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._guard.store is None and self._guard.judge is None:
            return fn(*args, **kwargs)
        import asyncio  # only async callers pay for importing it

        return await asyncio.to_thread(fn, *args, **kwargs)

    async def observe(self, session: str, event: Event | Mapping[str, Any], *, swarm: str | None = None) -> Verdict:
        verdict: Verdict = await self._call(self._guard.observe, session, event, swarm=swarm)
        return verdict

    async def reset(self, session: str, *, limits: bool = False) -> None:
        await self._call(self._guard.reset, session, limits=limits)

    async def forget(self, session: str) -> None:
        await self._call(self._guard.forget, session)

    async def snapshot(self, session: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call(self._guard.snapshot, session)
        return data

    async def restore(self, data: Mapping[str, Any], session: str | None = None) -> None:
        await self._call(self._guard.restore, data, session)

    async def sessions(self) -> list[str]:
        names: list[str] = await self._call(self._guard.sessions)
        return names

    async def swarm_snapshot(self, swarm: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call(self._guard.swarm_snapshot, swarm)
        return data

    async def restore_swarm(self, data: Mapping[str, Any]) -> None:
        await self._call(self._guard.restore_swarm, data)

    async def clear_swarm(self, swarm: str) -> None:
        await self._call(self._guard.clear_swarm, swarm)

    async def evict_idle(self, max_idle_seconds: float) -> int:
        return self._guard.evict_idle(max_idle_seconds)
