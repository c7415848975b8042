"""The nudge queue the adapters that deliver a nudge on the model's next turn share (OpenAI Agents SDK, AutoGen)."""

from __future__ import annotations

import logging
import threading

import pytest

from loopwatch import ConfigError
from loopwatch.adapters._shared import NudgeQueue


def test_a_session_takes_its_own_nudges_once_in_order_and_a_repeat_is_not_queued_twice() -> None:
    queue = NudgeQueue()
    queue.add("a", "stop repeating")
    queue.add("b", "for b")
    queue.add("a", "try another tool")
    queue.add("a", "stop repeating")  # already waiting
    queue.add("a", "")  # nothing to say
    assert queue.peek("a") == ["stop repeating", "try another tool"]
    assert len(queue) == 2
    assert queue.take("a") == ["stop repeating", "try another tool"]
    assert queue.take("a") == []
    queue.discard("b")
    assert queue.take("b") == [] and len(queue) == 0
    assert repr(queue) == "NudgeQueue(max_sessions=4096, per_session=16)"


def test_past_its_bounds_the_oldest_are_dropped_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    queue = NudgeQueue(max_sessions=2, per_session=2)
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        for n in range(3):
            queue.add("a", f"note {n}")
        assert queue.peek("a") == ["note 1", "note 2"] and queue.dropped == 1
        queue.add("b", "for b")
        queue.add("a", "note 3")  # "a" is now the most recent session
        queue.add("c", "for c")  # three sessions waiting: the oldest, "b", goes
    assert queue.take("b") == [] and queue.take("a") == ["note 2", "note 3"] and queue.take("c") == ["for c"]
    assert queue.dropped == 3  # note 0, note 1 and b's note
    assert sum("dropped" in r.getMessage() for r in caplog.records) == 3


def test_threads_adding_at_once_lose_nothing() -> None:
    queue = NudgeQueue(per_session=1000)

    def add(worker: int) -> None:
        for n in range(100):
            queue.add("shared", f"{worker}-{n}")

    threads = [threading.Thread(target=add, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(queue.take("shared")) == 800 and queue.dropped == 0


def test_bounds_are_checked() -> None:
    with pytest.raises(ConfigError, match="max_sessions"):
        NudgeQueue(max_sessions=0)
    with pytest.raises(ConfigError, match="per_session"):
        NudgeQueue(per_session=0)
