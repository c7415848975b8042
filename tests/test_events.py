"""Events (docs/formats.md, section 1): parsing, validation errors naming the field, immutability, round trips."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from loopwatch.core._events import (
    EVENT_TYPES,
    UNREADABLE,
    Message,
    Reset,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
    event_to_json,
    event_type,
    parse_event,
    session_of,
)
from loopwatch.errors import EventError, LoopwatchError

# One event of every type with every field docs/formats.md, section 1 gives it.
FULL_EVENTS: list[dict[str, Any]] = [
    {
        "type": "tool_call",
        "session": "run-1",
        "worker": "w1",
        "ts": 1732240000.5,
        "tool": "bash",
        "args": {"command": "ls -la", "nested": {"b": [1, 2], "a": None}},
        "id": "call_1",
        "thought": "let me look around",
    },
    {
        "type": "tool_result",
        "session": "run-1",
        "worker": "w1",
        "ts": 1732240001.0,
        "tool": "bash",
        "output": "total 0\n",
        "is_error": False,
        "exit_code": 0,
        "id": "call_1",
    },
    {"type": "message", "session": "run-1", "worker": "w1", "ts": 1732240002.0, "role": "assistant", "text": "Done."},
    {"type": "message", "session": "run-1", "ts": 1732240003.0, "role": "user", "text": "Thanks, next task"},
    {"type": "message", "session": "run-1", "role": "system", "text": "You are helpful."},
    {"type": "text_delta", "session": "run-1", "worker": "w1", "ts": 1732240004.0, "text": "Hel"},
    {
        "type": "usage",
        "session": "run-1",
        "worker": "w1",
        "ts": 1732240005.0,
        "cost": 0.0123,
        "input_tokens": 1200,
        "output_tokens": 35,
    },
    {"type": "reset", "session": "run-1", "worker": "ops", "ts": 1732240006.0},
]


# -- parsing every type ---------------------------------------------------------------------------------


def test_every_format_type_has_a_parser() -> None:
    assert set(EVENT_TYPES) == {"tool_call", "tool_result", "message", "text_delta", "usage", "reset"}
    assert {e["type"] for e in FULL_EVENTS} == set(EVENT_TYPES)


def test_parse_tool_call_with_all_fields() -> None:
    event = parse_event(FULL_EVENTS[0])
    assert isinstance(event, ToolCall)
    assert event.tool == "bash"
    assert event.args == {"command": "ls -la", "nested": {"b": [1, 2], "a": None}}
    assert event.id == "call_1"
    assert event.thought == "let me look around"
    assert event.ts == 1732240000.5
    assert event.worker == "w1"
    assert event_type(event) == "tool_call"


def test_parse_tool_call_defaults() -> None:
    event = parse_event({"type": "tool_call", "tool": "ls"})
    assert event == ToolCall("ls", {})
    assert isinstance(event, ToolCall)
    assert event.id is None and event.thought is None and event.ts is None and event.worker is None


def test_parse_tool_result_with_all_fields() -> None:
    event = parse_event(FULL_EVENTS[1])
    assert event == ToolResult(
        output="total 0\n", tool="bash", is_error=False, exit_code=0, id="call_1", ts=1732240001.0, worker="w1"
    )
    assert event_type(event) == "tool_result"


def test_parse_tool_result_negative_exit_code_and_id_only() -> None:
    event = parse_event({"type": "tool_result", "id": "c9", "output": "Killed", "exit_code": -9, "is_error": True})
    assert event == ToolResult(output="Killed", tool=None, is_error=True, exit_code=-9, id="c9")


def test_parse_tool_result_output_defaults_to_empty() -> None:
    event = parse_event({"type": "tool_result", "tool": "x"})
    assert isinstance(event, ToolResult)
    assert event.output == ""


@pytest.mark.parametrize("role", ["assistant", "user", "system"])
def test_parse_message_every_role(role: str) -> None:
    event = parse_event({"type": "message", "role": role, "text": f"hi from {role}", "ts": 5})
    assert event == Message(role=role, text=f"hi from {role}", ts=5.0)  # type: ignore[arg-type]
    assert event_type(event) == "message"


def test_parse_text_delta_usage_reset() -> None:
    assert parse_event(FULL_EVENTS[5]) == TextDelta("Hel", ts=1732240004.0, worker="w1")
    assert parse_event(FULL_EVENTS[6]) == Usage(
        cost=0.0123, input_tokens=1200, output_tokens=35, ts=1732240005.0, worker="w1"
    )
    assert parse_event(FULL_EVENTS[7]) == Reset(ts=1732240006.0, worker="ops")


def test_usage_fields_are_all_optional() -> None:
    assert parse_event({"type": "usage"}) == Usage()
    assert parse_event({"type": "usage", "cost": 3}) == Usage(cost=3.0)


def test_ts_and_cost_accept_integers_as_floats() -> None:
    event = parse_event({"type": "usage", "cost": 2, "ts": 10})
    assert isinstance(event, Usage)
    assert event.cost == 2.0 and isinstance(event.cost, float)
    assert event.ts == 10.0 and isinstance(event.ts, float)


def test_session_of() -> None:
    assert session_of({"type": "reset"}) == "default"
    assert session_of({"type": "reset", "session": None}) == "default"
    assert session_of({"type": "reset", "session": "abc"}) == "abc"
    with pytest.raises(EventError) as info:
        session_of({"type": "reset", "session": 7})
    assert info.value.field == "session"


# -- errors name the field ------------------------------------------------------------------------------

BAD_EVENTS: list[tuple[Any, str | None]] = [
    # (event, the field the error must name)
    ({"type": "bogus"}, "type"),
    ({"type": 3}, "type"),
    ({"type": None, "tool": "x"}, "type"),
    ({"tool": "bash", "args": {}}, "type"),
    ({"type": "tool_call"}, "tool"),
    ({"type": "tool_call", "args": {"a": 1}}, "tool"),
    ({"type": "tool_call", "tool": 5}, "tool"),
    ({"type": "tool_call", "tool": "x", "args": [1, 2]}, "args"),
    ({"type": "tool_call", "tool": "x", "args": "ls -la"}, "args"),
    ({"type": "tool_call", "tool": "x", "id": 12}, "id"),
    ({"type": "tool_call", "tool": "x", "thought": ["a"]}, "thought"),
    ({"type": "tool_call", "tool": "x", "worker": 1}, "worker"),
    ({"type": "tool_result", "output": "hello"}, "tool"),
    ({"type": "tool_result", "tool": "x", "output": 42}, "output"),
    ({"type": "tool_result", "tool": "x", "output": {"a": 1}}, "output"),
    ({"type": "tool_result", "tool": "x", "is_error": "yes"}, "is_error"),
    ({"type": "tool_result", "tool": "x", "is_error": 1}, "is_error"),
    ({"type": "tool_result", "tool": "x", "exit_code": True}, "exit_code"),
    ({"type": "tool_result", "tool": "x", "exit_code": 1.5}, "exit_code"),
    ({"type": "tool_result", "tool": "x", "exit_code": "1"}, "exit_code"),
    ({"type": "message", "text": "hello"}, "role"),
    ({"type": "message", "role": "robot", "text": "hello"}, "role"),
    ({"type": "message", "role": 1, "text": "hello"}, "role"),
    ({"type": "message", "role": "user", "text": 5}, "text"),
    ({"type": "text_delta"}, "text"),
    ({"type": "text_delta", "text": None}, "text"),
    ({"type": "text_delta", "text": b"bytes"}, "text"),
    ({"type": "usage", "input_tokens": True}, "input_tokens"),
    ({"type": "usage", "output_tokens": False}, "output_tokens"),
    ({"type": "usage", "input_tokens": 1.5}, "input_tokens"),
    ({"type": "usage", "input_tokens": -1}, "input_tokens"),
    ({"type": "usage", "cost": True}, "cost"),
    ({"type": "usage", "cost": "0.1"}, "cost"),
    ({"type": "usage", "cost": math.nan}, "cost"),
    ({"type": "usage", "cost": math.inf}, "cost"),
    ({"type": "usage", "cost": -math.inf}, "cost"),
    ({"type": "usage", "cost": -0.01}, "cost"),
    ({"type": "usage", "cost": 10**400}, "cost"),
    ({"type": "usage", "input_tokens": 10**400}, "input_tokens"),
    ({"type": "reset", "ts": math.nan}, "ts"),
    ({"type": "reset", "ts": math.inf}, "ts"),
    ({"type": "reset", "ts": -1}, "ts"),
    ({"type": "reset", "ts": "yesterday"}, "ts"),
    ({"type": "reset", "ts": True}, "ts"),
    ({"type": "tool_call", "tool": "x", "ts": math.nan}, "ts"),
    ({"type": "tool_result", "tool": "x", "ts": -5.0}, "ts"),
]


@pytest.mark.parametrize(("obj", "field"), BAD_EVENTS, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD_EVENTS)])
def test_bad_events_raise_event_error_naming_the_field(obj: Any, field: str) -> None:
    with pytest.raises(EventError) as info:
        parse_event(obj)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert isinstance(info.value, LoopwatchError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("obj", [None, "tool_call", 42, ["type", "tool_call"], b"{}"])
def test_non_objects_are_rejected(obj: Any) -> None:
    with pytest.raises(EventError, match="JSON object"):
        parse_event(obj)


def test_unknown_type_lists_the_valid_ones() -> None:
    with pytest.raises(EventError) as info:
        parse_event({"type": "bogus"})
    assert "bogus" in str(info.value)
    for name in EVENT_TYPES:
        assert name in str(info.value)


def test_missing_tool_names_the_problem() -> None:
    with pytest.raises(EventError, match="missing"):
        parse_event({"type": "tool_call"})


def test_tool_result_with_neither_tool_nor_id_explains() -> None:
    with pytest.raises(EventError) as info:
        parse_event({"type": "tool_result", "output": "x", "is_error": True})
    assert info.value.field == "tool"
    assert "id" in str(info.value)


def test_huge_integer_cost_is_an_event_error_not_an_overflow() -> None:
    # JSON allows integers of any length: float() of one overflows; it must still be a clean EventError
    with pytest.raises(EventError) as info:
        parse_event(json.loads('{"type": "usage", "cost": 1' + "0" * 400 + "}"))
    assert info.value.field == "cost"


# -- immutability ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("obj", FULL_EVENTS, ids=[e["type"] for e in FULL_EVENTS])
def test_events_are_immutable(obj: dict[str, Any]) -> None:
    event = parse_event(obj)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.ts = 1.0  # type: ignore[misc]
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        event.extra = 1  # type: ignore[union-attr]
    assert parse_event(obj) == event  # nothing changed
    assert hash(ToolResult("x", tool="t")) == hash(ToolResult("x", tool="t"))


# -- round trip -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("obj", FULL_EVENTS, ids=[f"{i}-{e['type']}" for i, e in enumerate(FULL_EVENTS)])
def test_event_to_json_round_trip(obj: dict[str, Any]) -> None:
    event = parse_event(obj)
    out = event_to_json(event, session=obj["session"])
    assert out == obj
    # and through real JSON text
    again = parse_event(json.loads(json.dumps(out)))
    assert again == event
    assert event_to_json(again, session=obj["session"]) == obj


def test_event_to_json_omits_empty_fields_and_session() -> None:
    assert event_to_json(ToolCall("ls")) == {"type": "tool_call", "tool": "ls", "args": {}}
    assert event_to_json(Reset()) == {"type": "reset"}
    assert event_to_json(ToolResult("out", id="c1")) == {"type": "tool_result", "output": "out", "id": "c1"}


@pytest.mark.parametrize(
    "event",
    [
        ToolCall("edit", {"path": "a.py", "edits": [{"old": "x", "new": "y"}]}, id="c", thought="t", ts=1.0),
        ToolResult("boom", tool="edit", is_error=True, exit_code=2, id="c", ts=2.0, worker="w"),
        Message("user", "again", ts=3.0),
        TextDelta("chunk"),
        Usage(cost=0.5, input_tokens=1, output_tokens=2),
        Reset(worker="ops"),
    ],
)
def test_parse_event_inverts_event_to_json(event: Any) -> None:
    assert parse_event(event_to_json(event)) == event
    assert parse_event(json.loads(json.dumps(event_to_json(event, "s")))) == event


# -- a subclass's own methods are never called, compiled or not (the tests run both ways) --------------------------


def test_an_int_subclass_in_the_json_form_is_read_as_its_int() -> None:
    import enum

    class Tokens(enum.IntEnum):
        NEGATIVE = -5

    with pytest.raises(EventError, match=r"expected a non-negative integer, got -5$"):
        parse_event({"type": "usage", "input_tokens": Tokens.NEGATIVE})

    class Loud(int):
        def __abs__(self) -> int:
            raise RuntimeError("not called")

    result = parse_event({"type": "tool_result", "tool": "bash", "exit_code": Loud(3)})
    assert isinstance(result, ToolResult) and result.exit_code == 3 and type(result.exit_code) is int


def test_a_str_subclass_in_the_json_form_is_read_as_its_text() -> None:
    class Loud(str):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("not called")

        __hash__ = str.__hash__

    message = parse_event({"type": "message", "role": Loud("assistant"), "text": "hi"})
    assert isinstance(message, Message) and type(message.role) is str and message.role == "assistant"
    call = parse_event({"type": "tool_call", "tool": Loud("bash"), "id": Loud("c1")})
    assert isinstance(call, ToolCall) and type(call.tool) is str and type(call.id) is str


def test_a_mapping_whose_items_are_not_pairs_is_described_alike_compiled_or_not() -> None:
    from collections.abc import Iterator, Mapping

    class ThreeItems(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return 1

        def __iter__(self) -> Iterator[str]:
            return iter(["a"])

        def __len__(self) -> int:
            return 1

        def items(self) -> Any:
            return [("a", 1, 2)]

    assert dict(ToolCall("t", ThreeItems()).args) == {UNREADABLE: "<ThreeItems: ValueError>"}
    assert dict(ToolCall("t", {"nested": ThreeItems()}).args) == {"nested": "<ThreeItems: unreadable>"}
