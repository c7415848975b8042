"""Events made steps: each event's features, computed once for every rule (a call's projected arguments, payload,
fingerprint, tool key and command; a result's call, failure and outcome fingerprint), and the session's table of
calls awaiting their results kept up to date."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from ._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage
from ._failure_signs import infer_failure
from ._fingerprint import call_payload, command_of, outcome_fingerprints, payload_fingerprint, tool_key
from ._session_state import SessionState, UsageCounters
from .detectors._base import Step, masked_of

Projection = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]
"""The arguments a call's fingerprint sees, from its tool and arguments (see ``Engine._projected``)."""
_MAX_IDS: Final = 16
"""Calls awaiting their results remembered by id."""


def step_of(session: SessionState, event: Event, index: int, projected: Projection) -> Step:
    """The step of ``event``, the session's ``index``-th: its features computed (a call's fingerprint, the program
    it runs; a result's call, failure and outcome fingerprint), the table of calls awaiting their results updated.
    ``projected`` gives the arguments a call's fingerprint sees."""
    if isinstance(event, ToolCall):
        return _call_step(session, event, index, projected)
    if isinstance(event, ToolResult):
        return _result_step(session, event, index)
    if isinstance(event, Message):
        return Step(index, "message", event, event.worker, role=event.role, text=event.text)
    if isinstance(event, TextDelta):
        return Step(index, "delta", event, event.worker, text=event.text)
    if isinstance(event, Usage):
        return Step(index, "usage", event, event.worker)
    if isinstance(event, Reset):
        return Step(index, "reset", event, event.worker)
    raise TypeError(f"not a loopwatch event: {type(event).__name__}")


def _call_step(session: SessionState, event: ToolCall, index: int, projected: Projection) -> Step:
    tool, args = event.tool, event.args
    shown = projected(tool, args)
    payload, canonical = call_payload(shown)
    command = command_of(args)
    key = sys.intern(tool_key(tool, args, command=command))  # one string for all the sessions
    step = Step(index, "call", event, event.worker, tool=tool, tool_key=key, args=args, text=event.thought)
    step.command = command
    step.projected = shown
    step.payload = payload
    step.canonical = canonical
    step.call_fp = payload_fingerprint(tool, payload)
    step.call_index = index
    record = (index, tool, key, step.call_fp, command[:200] if command else None)
    session.last_call = record
    if event.id is not None:
        ids = session.call_ids
        if ids is None:
            ids = session.call_ids = {}
        ids[event.id] = record
        if len(ids) > _MAX_IDS:
            del ids[next(iter(ids))]
    return step


def _result_step(session: SessionState, event: ToolResult, index: int) -> Step:
    ids = session.call_ids
    record = ids.pop(event.id, None) if ids is not None and event.id is not None else None
    if record is not None and not ids:
        session.call_ids = None  # an emptied table keeps its room: none takes less
    if record is None:
        last = session.last_call
        if last is not None and (event.tool is None or event.tool == last[1]):
            record = last
    output = event.output
    failed = infer_failure(output, event.is_error, event.exit_code)
    step = Step(index, "result", event, event.worker, output=output, failed=failed)
    if record is not None:
        step.call_index, step.tool, step.tool_key, step.call_fp = (
            record[0],
            record[1],
            record[2],
            record[3],
        )
        step.command = record[4]
        last = session.last_call
        session.last_call = None if last is not None and last[0] == record[0] else last
    else:
        step.tool = step.tool_key = event.tool
    step.outcome_fp, step.error_sig = outcome_fingerprints(
        output, event.is_error, event.exit_code, error=failed, masked_output=masked_of(step)
    )
    return step


def account_usage(usage: UsageCounters, step: Step, now: float | None) -> None:
    """Count ``step`` into ``usage`` (the session's counters, never reset by loop resets): an action, a failure in a
    row, spend and tokens, the first and last time stamps: what a policy's limits read
    (:meth:`~loopwatch.core.Limits.check`), kept at every event by the compiled engine."""
    # Any, and no test that narrows it to a float: a time stamp given as an int stays one in the counters (and their
    # JSON) compiled too, where a float's type would make it a float
    ts: Any = now
    if ts is None:
        ts = getattr(step.event, "ts", None)
    if ts is not None:
        if usage.first_ts is None:
            usage.first_ts = ts
        usage.last_ts = ts
    if step.kind == "call" or (step.kind == "message" and step.role == "assistant"):
        usage.iterations += 1
    elif step.kind == "result":
        usage.failures = usage.failures + 1 if step.failed else 0
    elif step.kind == "usage":
        event = step.event
        usage.cost += getattr(event, "cost", None) or 0.0
        usage.tokens += (getattr(event, "input_tokens", None) or 0) + (getattr(event, "output_tokens", None) or 0)
