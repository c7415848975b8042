"""The live dashboard's data: sessions active now, the feed of nudges/blocks/stops, per-session timelines and
loop rates per agent, worker and model over time.

Each observed event becomes a *note* (a small JSON-able dict, secrets redacted): the board applies it, and with a
Redis store the relay (:mod:`loopwatch.server._relay`) publishes it so every replica's board shows every replica's
traffic. The board is bounded: ``max_sessions`` rows (the least recently active go first), the last ``steps``
events of the ``timelines`` most recently active sessions, ``feed`` records, ``buckets`` time buckets of
``bucket_seconds`` each.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any, Final

from .._timeline import describe
from ..core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage
from ..core._verdict import Verdict
from ..redact import REDACTED, Redactor

__all__ = ["DIMENSIONS", "Board", "make_note"]

DIMENSIONS: Final = ("agent", "worker", "model")
_redactor = Redactor(max_string=2_000)


_WINDOW: Final = 200  # a label is made from the first few hundred characters of a text: only those are redacted


def _clean_event(event: Event) -> Event:
    """The event with what a label can show cut to its first ``_WINDOW`` characters, and the values of
    secret-looking argument keys (``api_key``, ``password``...) hidden."""
    if isinstance(event, ToolCall):
        args = {
            k: REDACTED if _redactor.is_secret_key(str(k), v) else (v[:_WINDOW] if isinstance(v, str) else v)
            for k, v in event.args.items()
        }
        return dataclasses.replace(event, args=args, thought=None)
    if isinstance(event, ToolResult):
        return dataclasses.replace(event, output=event.output[:_WINDOW])
    if isinstance(event, (Message, TextDelta)):
        return dataclasses.replace(event, text=event.text[:_WINDOW])
    return event


def _label(event: Event) -> tuple[str, str | None, str, bool]:
    """(kind, tool, label, failed) as the HTML report shows a step, secrets redacted. The label is redacted once it
    is cut; a long word cut at its end is dropped, since a secret cut in two may no longer look like one."""
    kind, tool, label, failed = describe(_clean_event(event))
    label = _redactor.scrub(label)
    if label.endswith("…"):
        head, _, last = label[:-1].rpartition(" ")
        if head and len(last) >= 12:
            label = head + " …"
    return kind, tool, label, failed


def _clipped(value: Any, depth: int = 0) -> Any:
    """``value`` with its strings cut to ``_WINDOW`` characters and its lists to 50 items (redacted after: a
    verdict's evidence can hold a whole command or file)."""
    if isinstance(value, str):
        return value if len(value) <= _WINDOW else value[:_WINDOW] + "…"
    if depth > 4:
        return "…"
    if isinstance(value, Mapping):
        return {str(k): _clipped(v, depth + 1) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [_clipped(v, depth + 1) for v in value[:50]]
    return value


def make_note(
    session: str,
    event: Event,
    verdict: Verdict,
    *,
    agent: str | None = None,
    model: str | None = None,
    swarm: str | None = None,
    now: float | None = None,
    repeated_stop: bool = False,
) -> dict[str, Any]:
    """The board's record of one observed event and its verdict (redacted, bounded). ``repeated_stop``: the
    session was already stopped, so its stop verdict is left out (it was fed and shown once)."""
    kind, tool, label, failed = _label(event)
    note: dict[str, Any] = {
        "session": session,
        "ts": event.ts if event.ts is not None else (now if now is not None else time.time()),
        "index": verdict.index,
        "kind": kind,
        "label": label,
    }
    if tool:
        note["tool"] = tool
    if failed:
        note["failed"] = True
    if event.worker:
        note["worker"] = event.worker
    if agent:
        note["agent"] = agent
    if model:
        note["model"] = model
    if swarm:
        note["swarm"] = swarm
    if isinstance(event, Usage):
        note["cost"] = event.cost or 0.0
        note["tokens"] = (event.input_tokens or 0) + (event.output_tokens or 0)
    if isinstance(event, Reset) or (isinstance(event, Message) and event.role == "user"):
        note["reset"] = "event" if isinstance(event, Reset) else "user"
    if not verdict.ok and not (repeated_stop and verdict.action == "stop"):
        note["verdict"] = _redactor(
            {
                "action": verdict.action,
                "pattern": verdict.pattern,
                "count": verdict.count,
                "level": verdict.level,
                "loop_start": verdict.loop_start,
                "reason": verdict.reason or "",
                "message": verdict.message or "",
                "rule": verdict.detector,
                "status": verdict.status,
                "evidence": _clipped(verdict.evidence),
            }
        )
    elif verdict.index < 0 and verdict.ok:
        note["unrecorded"] = verdict.reason or "not recorded"
    return note


class Board:
    """What the dashboard shows, kept in memory and updated from notes (thread-safe)."""

    def __init__(
        self,
        *,
        max_sessions: int = 20_000,
        timelines: int = 1_000,
        steps: int = 100,
        feed: int = 500,
        bucket_seconds: float = 10.0,
        buckets: int = 90,
        reset_on_user: bool = True,
    ) -> None:
        self.max_sessions = max_sessions
        self.max_timelines = timelines
        self.steps = steps
        self.bucket_seconds = bucket_seconds
        self.buckets = buckets
        self.reset_on_user = reset_on_user
        self._rows: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._timelines: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._feed: deque[dict[str, Any]] = deque(maxlen=feed)
        self._rates: OrderedDict[int, dict[str, dict[str, list[int]]]] = OrderedDict()
        self._lock = threading.Lock()
        self.version = 0
        self.feed_seq = 0
        self.notes = 0

    def __repr__(self) -> str:
        return f"Board(sessions={len(self._rows)}, feed={len(self._feed)})"

    # -- updates ----------------------------------------------------------------------------------------

    def apply(self, note: Mapping[str, Any]) -> None:
        """Take one note into the rows, the timeline, the feed and the loop rates."""
        session = str(note["session"])
        with self._lock:
            self.version += 1
            self.notes += 1
            row = self._row(session)
            row["v"] = self.version
            row["events"] += 1
            row["last_ts"] = note.get("ts")
            for key in ("worker", "agent", "model", "swarm"):
                if note.get(key):
                    row[key] = note[key]
            if "cost" in note:
                row["cost"] = round(row["cost"] + float(note["cost"] or 0.0), 6)
                row["tokens"] += int(note.get("tokens") or 0)
            reset = note.get("reset")
            if reset == "event" or (reset == "user" and self.reset_on_user):
                row["streaks"] = {}
                row["stopped"] = False if reset == "event" else row["stopped"]
            verdict = note.get("verdict")
            if verdict is not None and row["stopped"] and verdict.get("action") == "stop":
                verdict = None  # a stopped session's every event repeats its stop: fed and counted once
            if verdict is not None:
                row["loops"] += 1
                row["last"] = {k: verdict.get(k) for k in ("action", "pattern", "count", "level", "reason")}
                row["last"]["index"] = note.get("index")
                pattern = str(verdict.get("pattern"))
                row["streaks"][pattern] = {
                    "count": verdict.get("count"),
                    "level": verdict.get("level"),
                    "action": verdict.get("action"),
                }
                if verdict.get("action") == "stop":
                    row["stopped"] = True
                self.feed_seq += 1
                self._feed.append({"seq": self.feed_seq, **_feed_record(note, verdict)})
            timeline = self._timelines.pop(session, None) or deque(maxlen=self.steps)
            self._timelines[session] = timeline  # the most recently active last
            while len(self._timelines) > self.max_timelines:
                self._timelines.popitem(last=False)
            timeline.append({k: v for k, v in note.items() if k not in ("session", "agent", "model", "swarm")})
            self._count_rate(note, verdict is not None)

    def stopped(self, session: str) -> bool:
        """Whether the board has seen the session stopped (and not reset since)."""
        row = self._rows.get(session)
        return bool(row is not None and row["stopped"])

    def reset(self, session: str) -> None:
        """The session's streaks and stop cleared (a reset through the API)."""
        with self._lock:
            row = self._rows.get(session)
            if row is not None:
                self.version += 1
                row.update(v=self.version, streaks={}, stopped=False)

    def forget(self, session: str) -> None:
        with self._lock:
            self.version += 1
            self._rows.pop(session, None)
            self._timelines.pop(session, None)

    def _row(self, session: str) -> dict[str, Any]:
        row = self._rows.get(session)
        if row is not None:
            self._rows.move_to_end(session)
            return row
        row = self._rows[session] = {
            "session": session,
            "events": 0,
            "loops": 0,
            "cost": 0.0,
            "tokens": 0,
            "streaks": {},
            "last": None,
            "stopped": False,
            "worker": None,
            "agent": None,
            "model": None,
            "swarm": None,
        }
        while len(self._rows) > self.max_sessions:
            old, _ = self._rows.popitem(last=False)
            self._timelines.pop(old, None)
        return row

    def _count_rate(self, note: Mapping[str, Any], loop: bool) -> None:
        ts = note.get("ts")
        when = float(ts) if isinstance(ts, (int, float)) else time.time()
        bucket = int(when // self.bucket_seconds)
        counts = self._rates.get(bucket)
        if counts is None:
            counts = self._rates[bucket] = {d: {} for d in DIMENSIONS}
            for old in sorted(self._rates)[: max(len(self._rates) - self.buckets, 0)]:
                del self._rates[old]
        for dimension in DIMENSIONS:
            value = note.get(dimension)
            pair = counts[dimension].setdefault(str(value) if value else "(none)", [0, 0])
            pair[0] += 1
            pair[1] += int(loop)

    # -- reads ------------------------------------------------------------------------------------------

    def rows(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Rows changed after version ``since``, the most recently active first."""
        with self._lock:
            changed = [dict(r, streaks=dict(r["streaks"])) for r in reversed(self._rows.values()) if r["v"] > since]
        return changed[:limit] if limit is not None else changed

    def feed(self, since: int = 0) -> list[dict[str, Any]]:
        """Feed records (nudges, blocks, stops) after sequence number ``since``, oldest first."""
        with self._lock:
            return [r for r in self._feed if r["seq"] > since]

    def timeline(self, session: str) -> dict[str, Any] | None:
        with self._lock:
            steps = self._timelines.get(session)
            row = self._rows.get(session)
            if steps is None or row is None:
                return None
            return {"session": dict(row), "steps": list(steps)}

    def rates(self, dimension: str) -> dict[str, Any]:
        """Events and loops per value of ``dimension`` (agent, worker or model), per time bucket."""
        with self._lock:
            series: dict[str, list[list[float]]] = {}
            for bucket, counts in sorted(self._rates.items()):
                for value, (events, loops) in counts.get(dimension, {}).items():
                    series.setdefault(value, []).append([bucket * self.bucket_seconds, events, loops])
        return {"dimension": dimension, "bucket_seconds": self.bucket_seconds, "series": series}

    def summary(self) -> dict[str, Any]:
        with self._lock:
            stopped = sum(1 for r in self._rows.values() if r["stopped"])
            return {
                "sessions": len(self._rows),
                "stopped": stopped,
                "notes": self.notes,
                "version": self.version,
                "feed_seq": self.feed_seq,
            }


def _feed_record(note: Mapping[str, Any], verdict: Mapping[str, Any]) -> dict[str, Any]:
    record = {
        "session": note.get("session"),
        "ts": note.get("ts"),
        "index": note.get("index"),
        "action": verdict.get("action"),
        "pattern": verdict.get("pattern"),
        "count": verdict.get("count"),
        "level": verdict.get("level"),
        "reason": verdict.get("reason"),
    }
    for key in ("agent", "worker", "model", "tool"):
        if note.get(key):
            record[key] = note[key]
    return record
