"""In-process objects at the edge: what the agent hands over is made plain and bounded (or refused with a
typed error) before any rule sees it, and nothing escapes ``Guard.observe``."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
import uuid
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import numpy
import pytest

from loopwatch import EventError, Guard, Message, TextDelta, ToolCall, ToolResult, Usage, preset
from loopwatch._session_backend import InProcessSessions
from loopwatch.core._canonical import canonical_json
from loopwatch.core._events import MAX_ARG_TEXT, MAX_MESSAGE_TEXT, MAX_NAME, MAX_TEXT, Reset, cut_text
from loopwatch.core._limits import max_runtime
from loopwatch.core._swarm_tally import SwarmTally
from loopwatch.core.detectors import Detector, Finding, Step
from loopwatch.stores import MemoryStore
from raising_rule import RaisingRule


class HostileStr(str):
    """A str whose every method one might call raises."""

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __len__(self) -> int:
        raise RuntimeError("len")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode")

    def split(self, *args: Any, **kwargs: Any) -> list[str]:
        raise RuntimeError("split")


class OddKey(str):
    """A str subclass that can be a dict key (its hash works) but refuses everything else."""

    def __str__(self) -> str:
        raise RuntimeError("str")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode")

    def lower(self) -> str:
        raise RuntimeError("lower")


class HostileMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        raise RuntimeError("len")


class HalfHostile(Mapping[str, Any]):
    """Readable keys, one value that cannot be read."""

    def __getitem__(self, key: str) -> Any:
        if key == "bad":
            raise KeyError(key)
        return "fine"

    def __iter__(self) -> Iterator[str]:
        return iter(["good", "bad"])

    def __len__(self) -> int:
        return 2


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr")


class Colour(enum.IntEnum):
    RED = 3


class Weird(int):
    def __int__(self) -> int:
        raise RuntimeError("int")

    def __index__(self) -> int:
        raise RuntimeError("index")


def test_str_subclasses_become_plain_strings_without_their_methods_being_called() -> None:
    call = ToolCall(HostileStr("bash"), {OddKey("command"): HostileStr("ls -la")}, id=HostileStr("c1"))
    assert type(call.tool) is str and call.tool == "bash"
    assert call.args == {"command": "ls -la"} and all(type(k) is str for k in call.args)
    assert type(call.args["command"]) is str and type(call.id) is str
    result = ToolResult(HostileStr("No such file"), tool=HostileStr("bash"), worker=HostileStr("w1"))
    assert type(result.output) is str and result.output == "No such file" and type(result.worker) is str
    message = Message(HostileStr("assistant"), HostileStr("hello"))  # type: ignore[arg-type]
    assert (type(message.role), type(message.text)) == (str, str)


def test_mappings_that_raise_are_described_and_the_readable_parts_kept() -> None:
    assert ToolCall("t", HostileMapping()).args == {"<unreadable>": "<HostileMapping: RuntimeError>"}
    nested = ToolCall("t", {"outer": HalfHostile(), "also": [BadRepr()]})
    assert nested.args == {"outer": "<HalfHostile: unreadable>", "also": ["<BadRepr:<BadRepr>>"]}


def test_foreign_values_in_arguments_keep_the_fingerprint_they_had() -> None:
    """The plain copy has the canonical JSON the original had: the same calls stay the same calls."""
    args = {
        "enum": Colour.RED,
        "bytes": b"\x00\xff",
        "set": {3, 1, 2},
        "tuple": (1, "a"),
        "object": uuid.UUID(int=7),
        "huge": 10**5000,
        "long": "x" * (MAX_ARG_TEXT + 10),
        "float": 2.5,
        7: "int key",
        "deep": [[[[[[[[[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]]]]]]]]],
    }
    call = ToolCall("t", args)
    assert canonical_json(call.args) == canonical_json(args)
    assert type(call.args["enum"]) is int and len(call.args["long"]) < MAX_ARG_TEXT
    assert ToolCall("t", {"n": Weird(5)}).args == {"n": 5}  # int.__int__ of the value, not its own __int__
    assert ToolResult("x", tool="t", exit_code=Weird(1)).exit_code == 1


def test_a_cyclic_or_huge_argument_tree_is_copied_in_bounded_size() -> None:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    assert ToolCall("t", loop).args == {"a": 1, "self": "<cycle>"}
    wide = {f"k{i}": list(range(50)) for i in range(1_000)}  # 51,000 values
    copied = ToolCall("t", wide).args
    assert len(copied) < 200 and copied["…"].endswith("more")


def test_texts_are_cut_keeping_head_and_tail() -> None:
    long = "head " + "x" * (3 * MAX_TEXT) + " tail"
    for event, limit in (
        (ToolResult(long, tool="t"), MAX_TEXT),
        (Message("assistant", long), MAX_MESSAGE_TEXT),
        (TextDelta(long), MAX_MESSAGE_TEXT),
    ):
        text = event.output if isinstance(event, ToolResult) else event.text
        assert len(text) < limit + 100 and text.startswith("head ") and text.endswith(" tail")
        assert f"[... {len(long) - limit} characters cut ...]" in text
    assert ToolCall("t", {}, thought=long).thought == cut_text(long)
    assert cut_text("short") == "short"


def test_long_names_keep_a_head_and_a_digest() -> None:
    a, b = "w" * 5_000 + "a", "w" * 5_000 + "b"
    first, second = ToolCall(a, {}).tool, ToolCall(b, {}).tool
    assert len(first) <= MAX_NAME + 20 and first != second


def test_time_stamps_numbers_and_ids_are_coerced() -> None:
    when = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    assert ToolCall("t", ts=when).ts == when.timestamp()  # type: ignore[arg-type]
    assert ToolCall("t", ts=numpy.float64(12.5)).ts == 12.5  # type: ignore[arg-type]
    assert ToolCall("t", ts=Decimal("3.5")).ts == 3.5  # type: ignore[arg-type]
    assert ToolResult("x", tool="t", exit_code=numpy.int64(2)).exit_code == 2  # type: ignore[arg-type]
    assert ToolResult("x", tool="t", is_error=1).is_error is True  # type: ignore[arg-type]
    identifier = uuid.uuid4()
    assert ToolCall("t", id=identifier, worker=7).id == str(identifier)  # type: ignore[arg-type]
    assert Usage(cost=Decimal("0.25"), input_tokens=numpy.int32(10)).input_tokens == 10  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ToolCall("t", ts="yesterday"), "ts"),  # type: ignore[arg-type]
        (lambda: ToolCall("t", ts=float("nan")), "ts"),
        (lambda: ToolCall("t", ts=-5), "ts"),
        (lambda: ToolCall("t", [1, 2]), "args"),  # type: ignore[arg-type]
        (lambda: ToolCall(None, {}), "tool"),  # type: ignore[arg-type]
        (lambda: Message("wizard", "hi"), "role"),  # type: ignore[arg-type]
        (lambda: ToolResult("x", tool="t", exit_code=2.5), "exit_code"),  # type: ignore[arg-type]
        (lambda: ToolResult("x", tool="t", is_error="no"), "is_error"),  # type: ignore[arg-type]
        (lambda: Usage(cost=True), "cost"),
        (lambda: Reset(worker=BadRepr()), "worker"),  # type: ignore[arg-type]
        (lambda: ToolResult(b"bytes", tool="t"), "output"),  # type: ignore[arg-type]
    ],
)
def test_values_of_the_wrong_kind_are_refused_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(EventError) as caught:
        build()
    assert caught.value.field == field


def test_a_datetime_time_stamp_keeps_runtime_limits_working() -> None:
    """Before, a ``datetime`` ts was kept as is and every later runtime check failed: the limit was off."""
    start = datetime.datetime(2025, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
    guard = Guard(policy=preset("default").replace(limits=max_runtime(60)))
    verdicts = [
        guard.observe("s", ToolCall("bash", {"command": f"step {i}"}, ts=start + datetime.timedelta(seconds=40 * i)))
        for i in range(3)
    ]
    assert [v.action for v in verdicts] == ["ok", "ok", "stop"]  # 80 s after the first event: over the limit
    assert verdicts[-1].status == "MAX_RUNTIME" and guard.stats["errors"] == 0


def test_observe_never_raises_whatever_the_agent_hands_over(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard()
    hostile: list[tuple[Any, Any]] = [
        (HostileStr("s"), ToolCall("bash", {"command": "ls"})),
        (uuid.uuid4(), ToolCall("bash", {"command": "ls"})),
        (12345, Message("user", "hi")),
        (None, Message("user", "hi")),
        (BadRepr(), Message("user", "hi")),
        ("s", HostileMapping()),
        ("s", {"type": HostileStr("tool_call"), "tool": "x"}),
        ("s", {"type": "tool_call", "tool": HostileStr("x"), "args": HostileMapping()}),
        ("s", BadRepr()),
        ("s", None),
        ("s", ["not", "an", "event"]),
    ]
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        verdicts = [guard.observe(session, event) for session, event in hostile]
    assert all(v.action == "ok" for v in verdicts)
    assert guard.stats["errors"] == 0  # nothing reached the rules that they could not handle
    # skipped: two sessions with no text (None, BadRepr), a mapping that cannot be read, 3 things that are not
    # events; the events holding hostile strings were made plain and judged
    assert guard.stats["skipped"] == 6 and guard.stats["events"] == 5
    assert "Logging error" not in caplog.text


def test_a_uuid_session_is_the_session_of_its_text() -> None:
    guard = Guard()
    session = uuid.uuid4()
    for _ in range(3):
        guard.observe(session, ToolCall("read", {"path": "a"}))  # type: ignore[arg-type]
        guard.observe(session, ToolResult("same", tool="read"))  # type: ignore[arg-type]
    assert guard.sessions() == [str(session)]
    assert guard.snapshot(str(session))["state"]["index"] == 6


def test_swarm_counts_kept_in_the_process_are_bounded_and_evicted_when_idle() -> None:
    now = [0.0]
    guard = Guard(clock=lambda: now[0], max_swarms=100)
    for i in range(1_000):
        guard.observe(f"worker-{i}", ToolCall("search", {"q": "x"}), swarm=f"swarm-{i}")
    assert isinstance(guard.backend, InProcessSessions)
    assert len(guard.backend.swarms()) == 100 and guard.stats["evicted_swarms"] == 900
    assert guard.swarm_snapshot("swarm-999")["counts"] and not guard.swarm_snapshot("swarm-0")["counts"]
    now[0] = 1_000.0
    guard.observe("worker-new", ToolCall("search", {"q": "y"}), swarm="fresh")
    guard.evict_idle(500)
    assert guard.backend.swarms() == ["fresh"]


def test_with_on_error_raise_a_malformed_event_raises_a_typed_error() -> None:
    guard = Guard(on_error="raise")
    with pytest.raises(EventError):
        guard.observe(uuid.uuid4() if False else None, ToolCall("t", {}))  # type: ignore[arg-type]
    with pytest.raises(EventError):
        guard.observe("s", {"type": "tool_call"})


# -- a damaged state accepted by restore: the session starts afresh, and says so ------------------------------


def _damaged_snapshot() -> dict[str, Any]:
    guard = Guard()
    for _ in range(2):
        guard.observe("s", ToolCall("bash", {"command": "cd srcc"}))
        guard.observe("s", ToolResult("bash: cd: srcc: No such file or directory", tool="bash", is_error=True))
    snapshot = guard.snapshot("s")
    snapshot["state"]["stopped"] = {"bogus": 1}  # restore accepts it (a stop's fields are not checked); every later
    # event fails on it
    return snapshot


def test_a_damaged_restored_state_is_started_afresh_and_detection_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    records: list[dict[str, Any]] = []
    guard = Guard(listeners=[records.append])
    guard.restore(_damaged_snapshot())
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        verdicts = [guard.observe("s", ToolCall("read", {"path": "same"})) for _ in range(4)]
    assert [v.action for v in verdicts] == ["ok", "ok", "nudge", "ok"]  # judged again from the first event on
    assert guard.stats["errors"] == 1 and guard.stats["state_resets"] == 1
    assert [r["event"] for r in records] == ["session.state_reset", "loop.nudge"]
    assert "starts afresh" in caplog.text


class _SwarmSeen(Detector):
    """Records the swarm tally each call step carries (what the swarm rule reads), and finds nothing."""

    name = "swarm_seen"
    kinds = frozenset({"call"})

    def __init__(self) -> None:
        self.seen: list[SwarmTally | None] = []

    def new_state(self) -> None:
        return None

    def observe(self, state: None, step: Step) -> Finding | None:
        self.seen.append(step.swarm)
        return None

    def dump_state(self, state: None) -> dict[str, Any]:
        return {}

    def load_state(self, data: dict[str, Any]) -> None:
        return None


@pytest.mark.parametrize("stored", [False, True], ids=["in process", "in a store"])
def test_a_session_started_afresh_in_a_swarm_hands_the_swarm_rule_the_call_s_tally(stored: bool) -> None:
    # the failed attempt counted the call in the swarm; the fresh one reads the tally without counting it again
    seen = _SwarmSeen()
    base = preset("default-lexical")
    policy = dataclasses.replace(base, name="with a recorder", detectors=(*base.detectors, seen))
    guard = Guard(policy, store=MemoryStore() if stored else None, clock=None)
    call = ToolCall("read", {"path": "same"})
    for _ in range(2):
        guard.observe("a", call, swarm="team")
    guard.observe("b", ToolCall("bash", {"command": "ls"}))  # before b joined the swarm: not counted there
    damaged = guard.snapshot("b")
    damaged["state"]["stopped"] = {"bogus": 1}  # as in _damaged_snapshot: every later event fails on it
    guard.restore({**damaged, "swarm": "team"})
    guard.observe("b", call, swarm="team")
    assert guard.stats["state_resets"] == 1
    assert seen.seen[-1] == SwarmTally(calls=3, workers=2)  # a's two calls and b's one, by two workers
    guard.observe("b", call, swarm="team")
    assert seen.seen[-1] == SwarmTally(calls=4, workers=2)  # counted once each, the restarted one included


@pytest.mark.parametrize("stored", [False, True], ids=["in process", "in a store"])
def test_an_event_that_fails_on_any_state_leaves_the_session_judging(stored: bool) -> None:
    """An event the rules fail on whatever the state (a fresh one too): the event is unjudged, the session is not
    started afresh, and its loops are still caught. With a store nothing is written, so its state stays as it was
    (in this process, the rules that ran before the failing one have seen the event)."""
    base = preset("default-lexical")
    policy = dataclasses.replace(base, name="with a bug", detectors=(*base.detectors, RaisingRule(tool="explode")))
    guard = Guard(policy, store=MemoryStore() if stored else None, clock=None)
    guard.observe("s", ToolCall("read", {"path": "a"}))
    verdict = guard.observe("s", ToolCall("explode", {}))
    assert verdict.index == -1 and "a rule's bug" in (verdict.reason or "")
    assert guard.stats["errors"] == 1 and guard.stats["state_resets"] == 0
    if stored:
        assert guard.snapshot("s")["state"]["index"] == 1
    actions = [guard.observe("s", ToolCall("read", {"path": "a"})).action for _ in range(4)]
    assert "nudge" in actions  # the read before the failure counts: still the same session


def test_restore_refuses_a_hostile_snapshot_with_a_state_error() -> None:
    from loopwatch.errors import StateError

    guard = Guard()
    for data in (HostileMapping(), {"session": BadRepr(), "state": {}}, {"session": "s", "state": HostileMapping()}):
        with pytest.raises(StateError):
            guard.restore(data)  # type: ignore[arg-type]
