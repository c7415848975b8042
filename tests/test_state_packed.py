"""The packed form a store keeps of a session: written and read back, it is the very state, of the very types.

The same traffic as ``test_state_json`` (example traces, two corpus files, the format samples, scripted chanting and
ledgers, the benchmark's sessions) is judged by every preset, the session written as a store writes it
(:func:`~loopwatch._stored.state_text`) and read back (:func:`~loopwatch._stored.read_state_text`) after every event,
and judged on from the state read back every 7th event: the state read back must write the same JSON as the one
that was packed, hold values of exactly the same types (a tuple of its own class, an array, would come back as
something else), and the verdicts must be those of the run that was never packed.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
import marshal
from typing import Any

import pytest

from loopwatch import Guard
from loopwatch._presets import preset
from loopwatch._stored import PACKED_PREFIX, read_state_text, state_text
from loopwatch.core._engine import Engine
from loopwatch.core._events import Event, Message, ToolCall, ToolResult
from loopwatch.core.detectors._repeat import RepeatState
from loopwatch.core.detectors._state_pack import layout_of
from loopwatch.errors import OtherLayoutError, StateError
from loopwatch.stores import MemoryStore
from test_state_json import PRESETS, _runs


@pytest.fixture(scope="module")
def runs() -> list[list[Event]]:
    return _runs()


def same_types(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` are equal and of exactly the same types, all the way down."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            same_types(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_types(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            same_types(a[key], b[key], f"{where}[{key!r}]")
    else:
        assert a == b or (a != a and b != b), where  # NaN is itself


def records_in(value: Any) -> set[type]:
    """The dataclasses held in ``value`` (not counting ``value`` itself)."""
    found: set[type] = set()
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            inner = getattr(value, field.name)
            if dataclasses.is_dataclass(inner):
                found.add(type(inner))
            found |= records_in(inner)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if dataclasses.is_dataclass(item):
                found.add(type(item))
            found |= records_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            found |= records_in(item)
    return found


@pytest.mark.parametrize("preset_name", PRESETS)
def test_a_packed_state_reads_back_as_the_very_state(preset_name: str, runs: list[list[Event]]) -> None:
    engine = Engine(preset(preset_name), replay=True)
    rules = engine.policy.detectors
    packed = 0
    for events in runs:
        straight, stored = engine.new_session(), engine.new_session()
        for i, event in enumerate(events):
            expected = engine.observe(straight, event)
            verdict = engine.observe(stored, event)
            assert verdict == expected
            text = state_text(engine, stored, "swarm-1")
            assert text.startswith(PACKED_PREFIX)  # real traffic never needs the JSON form
            back, swarm = read_state_text(engine, text)
            assert swarm == "swarm-1"
            assert json.dumps(engine.dump(back)) == json.dumps(engine.dump(stored))
            same_types(back, stored)
            for rule, state in zip(rules, back.detectors, strict=True):
                assert records_in(state) <= set(rule.state_records), f"{rule.name} holds records it does not declare"
            packed += 1
            if i % 7 == 6:
                stored = back
            if expected.action == "stop":
                break
    assert packed > 1_000


def test_a_state_marshal_cannot_write_is_stored_as_json_and_reads_back() -> None:
    class Tag(str):
        """A string of a class of its own (marshal writes only str itself)."""

    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    engine.observe(session, ToolCall("bash", {"command": "ls"}))
    session.stopped = {"reason": Tag("a restored snapshot brought it")}
    text = state_text(engine, session, None)
    assert text.startswith("{")
    back, swarm = read_state_text(engine, text)
    assert back.stopped == {"reason": "a restored snapshot brought it"} and back.index == 1 and swarm is None


def test_the_json_form_older_releases_stored_still_reads() -> None:
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    for _ in range(3):
        engine.observe(session, ToolCall("bash", {"command": "pytest -x"}))
        engine.observe(session, ToolResult("bash", "1 failed"))
    old = json.dumps({"swarm": "team", "state": engine.dump(session)})
    back, swarm = read_state_text(engine, old)
    assert swarm == "team" and engine.dump(back) == engine.dump(session)


def test_a_state_packed_with_other_rules_or_damaged_is_refused() -> None:
    lexical, doom = Engine(preset("default-lexical")), Engine(preset("doom-loop"))
    session = doom.new_session()
    doom.observe(session, Message("assistant", "Let me look."))
    text = state_text(doom, session, None)
    assert lexical.layout != doom.layout
    with pytest.raises(OtherLayoutError, match="layout"):
        read_state_text(lexical, text)
    with pytest.raises(ValueError, match="damaged packed state"):
        read_state_text(doom, text[: len(PACKED_PREFIX) + 40])
    with pytest.raises(ValueError):
        read_state_text(doom, PACKED_PREFIX + "not base64 at all!")
    # well-formed marshal data that is not a session: refused as a state error, not an exception of its own
    alien = PACKED_PREFIX + binascii.b2a_base64(marshal.dumps((None, (doom.layout, (1, 2), ())), 4)).decode()
    with pytest.raises(StateError):
        read_state_text(doom, alien.strip())


def test_the_layout_names_the_fields_the_states_keep() -> None:
    @dataclasses.dataclass(slots=True)
    class Grown:
        fps: bytes = b""
        count: int = 0
        added: int = 0

    base = layout_of([("repeat", [RepeatState])])
    assert layout_of([("repeat", [RepeatState])]) == base
    assert layout_of([("repeat", [Grown])]) != base
    assert layout_of([("cycle", [RepeatState])]) != base


def test_guards_sharing_a_store_judge_as_one_guard_would() -> None:
    store = MemoryStore()
    guards = [Guard("default-lexical", store=store, clock=None) for _ in range(2)]
    alone = Guard("default-lexical", clock=None)
    events: list[Event] = [
        ToolCall("bash", {"command": "pytest tests/test_api.py"}),
        ToolResult("bash", "1 failed, 3 passed"),
    ] * 6
    expected = [alone.observe("s", event).action for event in events]
    actions = [guards[i % 2].observe("s", event).action for i, event in enumerate(events)]
    assert actions == expected and "nudge" in actions  # each guard judged on the other's packed writes
    stored = store.load("s")
    assert stored is not None and stored.state.startswith(PACKED_PREFIX)
    assert guards[0].snapshot("s")["state"]["index"] == len(events)


def test_the_default_presets_rephrase_vectors_pack_too(runs: list[list[Event]]) -> None:
    """With the built-in embedder (the semantic extra), the rephrase rule keeps quantized vectors: packed as well."""
    engine = Engine(preset("default"), replay=True)
    checked = 0
    for events in runs[:40]:
        session = engine.new_session()
        for event in events[:60]:
            engine.observe(session, event)
            text = state_text(engine, session, None)
            assert text.startswith(PACKED_PREFIX)
            back, _ = read_state_text(engine, text)
            same_types(back, session)
            checked += 1
    assert checked > 500


def test_a_state_packed_by_another_release_starts_the_session_afresh(caplog: pytest.LogCaptureFixture) -> None:
    """Two releases whose rules keep other fields, sharing a store during an upgrade: not a damaged state."""
    store = MemoryStore()
    old = Guard("default-lexical", store=store, clock=None, on_store_error="block")
    for _ in range(3):
        old.observe("s", ToolCall("bash", {"command": "make"}))
    # what a release whose rules keep other fields would have written: its own layout at the head of the packed form
    stored = store.load("s")
    assert stored is not None and stored.state.startswith(PACKED_PREFIX)
    swarm, (layout, rules, fields) = marshal.loads(binascii.a2b_base64(stored.state[len(PACKED_PREFIX) :]))
    assert len(layout) == 12
    other = marshal.dumps((swarm, ("000000000000", rules, fields)), 4)
    text = PACKED_PREFIX + binascii.b2a_base64(other, newline=False).decode("ascii")
    assert store.compare_and_set("s", stored.token, text, "an older release") is None
    new = Guard("default-lexical", store=store, clock=None, on_store_error="block")
    with caplog.at_level("WARNING", logger="loopwatch"):
        verdict = new.observe("s", ToolCall("bash", {"command": "make"}))
    assert verdict.action == "ok" and new.stats["damaged_states"] == 0  # afresh, even failing closed
    assert any("starts afresh" in r.getMessage() and "other fields" in r.getMessage() for r in caplog.records)
    assert new.snapshot("s")["state"]["index"] == 1


def test_a_rule_of_ones_own_whose_state_cannot_be_packed_is_stored_as_json() -> None:
    """A third-party rule whose state is a plain class (or a dict): the store keeps the session as JSON, and judges
    on from it as from a packed one."""
    from loopwatch import Policy
    from loopwatch.core.detectors import Detector, Finding, Step

    class Tally:  # no slots, no dataclass: marshal cannot write it, pack_fields refuses it
        def __init__(self, calls: int = 0) -> None:
            self.calls = calls

    class CallCounter(Detector):
        name = "call_counter"
        kinds = frozenset({"call"})

        def new_state(self) -> Tally:
            return Tally()

        def observe(self, state: Tally, step: Step) -> Finding | None:
            state.calls += 1
            return None

        def dump_state(self, state: Tally) -> dict[str, Any]:
            return {"calls": state.calls}

        def load_state(self, data: dict[str, Any]) -> Tally:
            return Tally(int(data["calls"]))

    base = preset("default-lexical")
    policy = Policy(name="counted", detectors=(*base.detectors, CallCounter()), ladders=base.ladders)
    store = MemoryStore()
    guards = [Guard(policy, store=store, clock=None) for _ in range(2)]
    for i in range(4):
        guards[i % 2].observe("s", ToolCall("bash", {"command": f"echo {i}"}))
    stored = store.load("s")
    assert stored is not None and stored.state.startswith("{")
    assert guards[0].snapshot("s")["state"]["detectors"][-1] == {"calls": 4}
    assert guards[0].stats["damaged_states"] == guards[1].stats["damaged_states"] == 0
