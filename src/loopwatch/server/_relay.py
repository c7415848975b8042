"""Shares the dashboard's notes between replicas through Redis/Valkey publish/subscribe.

With a Redis store every replica (and every worker process) publishes the notes of the events it judged, in
batches every ``interval`` seconds, on one channel, and applies the batches of the others to its own board: the
dashboard of any replica shows the traffic of all. The relay is best effort and never slows judging: a note that
cannot be published (Redis down) is counted in ``dropped`` and the relay reconnects by itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit, urlunsplit

__all__ = ["Relay", "relay_url"]

logger = logging.getLogger("loopwatch")
_MAX_PENDING: Final = 50_000


def relay_url(store: str) -> tuple[str, str] | None:
    """(redis-py URL, channel) for a Redis/Valkey store URL, else None."""
    parts = urlsplit(store)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "valkey", "valkeys"):
        return None
    prefix = (parse_qs(parts.query).get("prefix") or ["loopwatch"])[0]
    scheme = {"valkey": "redis", "valkeys": "rediss"}.get(scheme, scheme)
    return urlunsplit((scheme, parts.netloc, parts.path, "", "")), f"{prefix}:board"


class Relay:
    """Publishes local notes and applies remote ones (``apply`` is called from the relay's thread)."""

    def __init__(self, url: str, channel: str, apply: Callable[[dict[str, Any]], None], *, interval: float = 0.1):
        import redis

        self.url = url
        self.channel = channel
        self.interval = interval
        self.origin = uuid.uuid4().hex
        self._apply = apply
        self._client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.dropped = 0
        self.published = 0
        self.received = 0
        self._threads = [
            threading.Thread(target=self._publish_loop, name="loopwatch-relay-out", daemon=True),
            threading.Thread(target=self._subscribe_loop, name="loopwatch-relay-in", daemon=True),
        ]

    def __repr__(self) -> str:
        return f"Relay(channel={self.channel!r}, published={self.published}, dropped={self.dropped})"

    def start(self) -> Relay:
        for thread in self._threads:
            thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=3)
        self._client.close()

    def send(self, note: dict[str, Any]) -> None:
        with self._lock:
            if len(self._pending) >= _MAX_PENDING:
                self.dropped += 1
                return
            self._pending.append(note)

    def _publish_loop(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                self._client.publish(self.channel, json.dumps({"origin": self.origin, "notes": batch}))
                self.published += len(batch)
            except Exception as exc:  # Redis down: the board is best effort, judging goes on
                self.dropped += len(batch)
                logger.warning("loopwatch: dashboard relay could not publish %d notes: %r", len(batch), exc)

    def _subscribe_loop(self) -> None:
        while not self._stop.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self.channel)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None:
                        self._receive(message.get("data"))
            except Exception as exc:
                logger.warning("loopwatch: dashboard relay lost its subscription: %r", exc)
                self._stop.wait(1.0)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _receive(self, data: Any) -> None:
        try:
            batch = json.loads(data)
        except (TypeError, ValueError):
            return
        if not isinstance(batch, dict) or batch.get("origin") == self.origin:
            return
        for note in batch.get("notes") or ():
            if isinstance(note, dict) and isinstance(note.get("session"), str):
                self.received += 1
                self._apply(note)
