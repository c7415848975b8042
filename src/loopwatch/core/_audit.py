"""The audit records a guard writes to its sinks and listeners: plain JSON-able dicts, one per thing that happened.

Each record has ``event`` (what happened), ``ts`` (seconds since the epoch: the event's own time stamp, else the
guard's clock) and ``session``. A verdict other than ``ok`` gives ``loop.nudge``, ``loop.block`` or ``loop.stop``
(``limit.warning`` for a limit's early warning), and a stop also ``session.terminated``; a loop judge's answer gives
``judge.verdict`` (``judge.error`` when it failed); the guard's own troubles give ``store.error``,
``store.damaged_state`` and ``session.state_reset``.
"""

from __future__ import annotations

from typing import Any

from ._events import Event
from ._messages import Messages, render
from ._verdict import Verdict

Record = dict[str, Any]


def verdict_records(
    session: str, event: Event, verdict: Verdict, ts: float | None, swarm: str | None
) -> tuple[Record, ...]:
    """The records of a verdict other than ``ok``: its own, and ``session.terminated`` after a stop."""
    name = "limit.warning" if verdict.pattern == "limit" and verdict.action == "nudge" else f"loop.{verdict.action}"
    record = {
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
    if verdict.action == "stop":
        return record, dict(record, event="session.terminated")
    return (record,)


def judge_record(session: str, index: int, ts: float | None, *, judge: str, **answer: Any) -> Record:
    """``judge.verdict`` (the judge's answer: ``loop``, ``confidence``, ``reason``, and the ``suspicion`` it was
    asked about) or, given ``error``, ``judge.error``."""
    name = "judge.error" if "error" in answer else "judge.verdict"
    return {"event": name, "ts": ts, "session": session, "index": index, "judge": judge, **answer}


def state_reset_record(session: str, event: Event, ts: float | None) -> Record:
    """``session.state_reset``: the session's state failed on an event that a fresh state judges."""
    return {
        "event": "session.state_reset",
        "ts": ts,
        "session": session,
        "worker": event.worker,
        "reason": "the session's state failed on an event that a fresh state judges; it starts afresh",
    }


def store_error_block(messages: Messages, error: str) -> Verdict:
    """The verdict on a tool call while the guard's store (or its service) fails and ``on_store_error="block"``
    (fail closed): the call is refused, with the ``store_error`` pattern's message (``error``: what failed)."""
    reason = f"loop guard unavailable ({error}); calls are refused until it is back"
    message = render(messages.template("store_error", 1, "block"), {"reason": reason})
    return Verdict(action="block", pattern="store_error", level=1, message=message, reason=reason)


def store_error_record(
    session: str,
    event: Event | None,
    ts: float | None,
    store: str | None,
    error: str,
    policy: str,
    operation: str = "observe",
) -> Record:
    """``store.error``: the store failed on an event (``operation`` ``"observe"``), or on a session's ``reset`` or
    ``forget`` (no event); ``policy``: the guard's ``on_store_error``."""
    return {
        "event": "store.error",
        "ts": ts,
        "session": session,
        "worker": event.worker if event is not None else None,
        "store": store,
        "error": error,
        "policy": policy,
        "operation": operation,
    }


def damaged_state_record(
    session: str, event: Event, ts: float | None, store: str, error: str, policy: str, fresh: bool
) -> Record:
    """``store.damaged_state``: a stored state this loopwatch cannot read; ``fresh``: started afresh. The fields of a
    ``store.error`` record (in the same order), and the action taken."""
    record = store_error_record(session, event, ts, store, error, policy)
    record["event"] = "store.damaged_state"
    record["action"] = "started afresh" if fresh else "left as it is"
    return record
