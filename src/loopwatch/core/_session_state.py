"""A session's state as the engine keeps it: typed, compact in memory, the same JSON as ever in a snapshot.

:class:`SessionState` holds what the engine knows of one session besides its rules' own states: the events seen,
each pattern's ladder (:class:`LadderState`), the limits' counters (:class:`UsageCounters`), the
tool calls awaiting their results, the limit warnings given, a stop, the last user replies, the last verdict and a
refused call. Records are tuples and containers are made when first needed (an empty one costs as much as a small
one); a guard keeps a session in its own process as a :class:`HeldSession` (the same state, when it was last seen,
its swarm). :func:`session_json` writes the JSON object snapshots have always held, in the same key order;
:func:`read_session` reads it back, raising ``ValueError`` or ``TypeError`` (which the engine reports as a
:class:`~loopwatch.errors.StateError`) when it is malformed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Final

from ._errors import OtherLayoutError
from .detectors._state import Flat, flat_items, flat_of, integer, optional_integer, table, text, text_tuple
from .detectors._state_pack import layout_of, pack_table, record_maker, table_unpacker

STATE_VERSION: Final = 1

CallRecord = tuple[int, str, str, str, str | None]
"""A tool call awaiting its result: (index, tool, tool key, call fingerprint, the first 200 characters of the
command it runs)."""
LastVerdict = tuple[int, str, str | None, int]
"""The last verdict that was not ``ok``: (index, action, pattern, level)."""
Refused = tuple[int, str | None, int]
"""The last refused call: (index, call fingerprint, times in a row it was refused and made again)."""


@dataclass(slots=True)
class UsageCounters:
    """A session's counters the limits read (never reset by loop resets): agent actions, spend, tokens, failed
    tool results in a row, and the time stamps of its first and last events."""

    iterations: int = 0
    cost: float | int = 0.0  # (`| int`: an int read from a snapshot stays one, compiled too)
    tokens: int = 0
    failures: int = 0
    first_ts: float | int | None = None
    last_ts: float | int | None = None


@dataclass(slots=True)
class LadderState:
    """One pattern's ladder in a session: the streak it climbs (``key``, the finding's), the highest level emitted
    in it, its detections, the event of the last verdict and of the one before the streak, and the nudges given in
    it ((index, level), the last four)."""

    key: str = ""
    emitted: int = 0
    detections: int = 0
    last: int | None = None
    previous: int | None = None
    nudges: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True, kw_only=True)
class SessionState(UsageCounters):
    """One session's state (see the module docstring); the rules' states are in ``detectors``, in the policy's
    order. The limits' counters are its own fields (a session is its :attr:`usage`: one object less)."""

    detectors: list[Any]
    index: int = 0
    ladders: Flat = ()
    """Per pattern, its ladder, in a small table (:data:`~loopwatch.core.detectors._state.Flat`: pattern, ladder,
    pattern...)."""
    last_call: CallRecord | None = None
    """The last tool call, until its result comes."""
    call_ids: dict[str, CallRecord] | None = None
    """Tool calls awaiting their results by call id, the oldest first (``None``: none)."""
    warned: tuple[str, ...] = ()
    """The statuses of the limit warnings given."""
    stopped: dict[str, Any] | None = None
    """The stop verdict's fields once the session was stopped."""
    last_user: tuple[str, ...] = ()
    """The signatures of the last user replies."""
    last: LastVerdict | None = None
    refused: Refused | None = None

    @property
    def usage(self) -> UsageCounters:
        """The limits' counters: the session itself."""
        return self

    def reset_usage(self) -> None:
        """Give the limits' counters their fresh values."""
        UsageCounters.__init__(self)


@dataclass(slots=True, kw_only=True)
class HeldSession(SessionState):
    """A session a guard keeps in its own process: its state, and when it was last seen and its swarm (in the same
    object: one object less per session)."""

    seen: float = 0.0
    swarm: str | None = None


_STATE_FIELDS: Final = tuple(f.name for f in fields(SessionState))


def held_session(state: SessionState, seen: float, swarm: str | None) -> HeldSession:
    """``state`` as a session kept in this process (its fields, not the object)."""
    return HeldSession(**{name: getattr(state, name) for name in _STATE_FIELDS}, seen=seen, swarm=swarm)


def session_json(state: SessionState, detectors: list[Any], policy: str) -> dict[str, Any]:
    """The JSON form of ``state`` with its rules' states already written (``detectors``)."""
    usage = state.usage
    ids = state.call_ids
    return {
        "v": STATE_VERSION,
        "index": state.index,
        "detectors": detectors,
        "ladders": {
            pattern: {
                "key": ladder.key,
                "emitted": ladder.emitted,
                "detections": ladder.detections,
                "last": ladder.last,
                "previous": ladder.previous,
                "nudges": [list(nudge) for nudge in ladder.nudges],
            }
            for pattern, ladder in flat_items(state.ladders)
        },
        "usage": {
            "iterations": usage.iterations,
            "cost": usage.cost,
            "tokens": usage.tokens,
            "failures": usage.failures,
            "first_ts": usage.first_ts,
            "last_ts": usage.last_ts,
        },
        "calls": {
            "last": None if state.last_call is None else list(state.last_call),
            "ids": {} if ids is None else {call: list(record) for call, record in ids.items()},
        },
        "warned": list(state.warned),
        "stopped": state.stopped,
        "last_user": list(state.last_user),
        "last": None if state.last is None else list(state.last),
        "refused": None if state.refused is None else list(state.refused),
        "policy": policy,
    }


_PACKED: Final = (
    "index",
    "ladders",
    "last_call",
    "call_ids",
    "warned",
    "stopped",
    "last_user",
    "last",
    "refused",
    "iterations",
    "cost",
    "tokens",
    "failures",
    "first_ts",
    "last_ts",
)
"""The session's own fields in its packed form, in this order (:func:`session_packed`)."""
_packed_values: Final = attrgetter(*_PACKED)
_unpack_ladders: Final = table_unpacker(record_maker(LadderState))


def packed_layout(detectors: Sequence[Any]) -> str:
    """The layout of a policy's packed sessions (see :func:`~.detectors._state_pack.layout_of`): its rules, in order,
    with the fields of their states' classes, and the session's own fields."""
    rules = [(f"{type(d).__module__}.{type(d).__qualname__}", [d.state_class(), *d.state_records]) for d in detectors]
    return layout_of([*rules, ("session " + " ".join(_PACKED), [LadderState])])


def session_packed(state: SessionState, detectors: Sequence[Any], layout: str) -> tuple[Any, ...]:
    """The packed form of ``state`` (for a store: see :mod:`~.detectors._state_pack`), judged by ``detectors`` (the
    policy's rules): ``layout`` (:func:`packed_layout`), each rule's packed state, then the session's fields."""
    values = list(_packed_values(state))
    values[1] = pack_table(state.ladders)
    rules = tuple(None if s is None else d.pack_state(s) for d, s in zip(detectors, state.detectors, strict=True))
    return (layout, rules, tuple(values))


def read_packed(packed: Any, detectors: Sequence[Any], layout: str) -> SessionState:
    """A session from :func:`session_packed`'s form; :class:`~loopwatch.errors.OtherLayoutError` when it was written
    with another ``layout``, ``ValueError`` or ``TypeError`` when ``packed`` is not of that form."""
    if not (type(packed) is tuple and len(packed) == 3 and type(packed[1]) is tuple and type(packed[2]) is tuple):
        raise ValueError("not a packed session state")
    written, rules, values = packed
    if written != layout:
        raise OtherLayoutError(
            f"packed by a loopwatch whose rules keep other fields (layout {written!r}, this one's is {layout!r})"
        )
    if len(values) != len(_PACKED) or len(rules) != len(detectors):
        raise ValueError("packed with another number of rules or session fields")
    fields = dict(zip(_PACKED, values, strict=True))
    fields["ladders"] = _unpack_ladders(fields["ladders"])
    states = [None if s is None else d.unpack_state(s) for d, s in zip(detectors, rules, strict=True)]
    return SessionState(detectors=states, **fields)


def read_session(data: Mapping[str, Any], detectors: list[Any]) -> SessionState:
    """A session's state from its JSON form (version :data:`STATE_VERSION`; ``last`` and ``refused`` may be
    missing, as in snapshots taken before they were kept) with its rules' states already read (``detectors``)."""
    index = data["index"]
    if type(index) is not int or index < 0:
        raise ValueError("index must be a non-negative integer")
    calls = data["calls"]
    if not isinstance(calls, dict) or set(calls) != {"last", "ids"}:
        raise ValueError(f"calls must be an object with 'last' and 'ids', got {calls!r}")
    ids = table(calls["ids"], "calls: ids", _call)
    stopped = data["stopped"]
    if stopped is not None and not (isinstance(stopped, dict) and all(type(k) is str for k in stopped)):
        raise ValueError(f"stopped must be an object or null, got {stopped!r}")
    last_user = data["last_user"]
    if last_user is None or type(last_user) is str:  # a session saved when one reply was kept
        last_user = [] if last_user is None else [last_user]
    last = data.get("last")
    refused = data.get("refused")
    ladders = table(data["ladders"], "ladders", _ladder)
    usage = _usage(data["usage"])
    return SessionState(
        detectors=detectors,
        iterations=usage.iterations,
        cost=usage.cost,
        tokens=usage.tokens,
        failures=usage.failures,
        first_ts=usage.first_ts,
        last_ts=usage.last_ts,
        index=index,
        ladders=flat_of(ladders),
        last_call=None if calls["last"] is None else _call(calls["last"], "calls: last"),
        call_ids=ids or None,
        warned=text_tuple(data["warned"], "warned"),
        stopped=stopped,
        last_user=text_tuple(last_user, "last_user"),
        last=None if last is None else _last(last),
        refused=None if refused is None else _refused(refused),
    )


def _number(value: object, what: str) -> float | int:
    if type(value) not in (int, float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    return value  # type: ignore[return-value]  # an int as it was (`float | int`: compiled, a `float` is a double)


def _optional_number(value: object, what: str) -> float | int | None:
    return None if value is None else _number(value, what)


_USAGE: Final = ("iterations", "cost", "tokens", "failures", "first_ts", "last_ts")


def _usage(value: object) -> UsageCounters:
    if not isinstance(value, dict) or set(value) != set(_USAGE):
        raise ValueError(f"usage must be an object with {', '.join(_USAGE)}, got {value!r}")
    return UsageCounters(
        iterations=integer(value["iterations"], "usage: iterations"),
        cost=_number(value["cost"], "usage: cost"),
        tokens=integer(value["tokens"], "usage: tokens"),
        failures=integer(value["failures"], "usage: failures"),
        first_ts=_optional_number(value["first_ts"], "usage: first_ts"),
        last_ts=_optional_number(value["last_ts"], "usage: last_ts"),
    )


_LADDER: Final = frozenset({"key", "emitted", "detections", "last"})
_LADDER_LATER: Final = frozenset({"previous", "nudges"})
"""Ladder keys added after version 1: a snapshot without them loads with their fresh values."""


def _ladder(value: object, what: str) -> LadderState:
    if not isinstance(value, dict) or not _LADDER <= set(value) <= _LADDER | _LADDER_LATER:
        raise ValueError(f"{what} must be a ladder's state, got {value!r}")
    nudges = value.get("nudges", [])
    if not isinstance(nudges, list) or not all(
        isinstance(n, list) and len(n) == 2 and type(n[0]) is int and type(n[1]) is int for n in nudges
    ):
        raise ValueError(f"{what}: nudges must be a list of [index, level], got {nudges!r}")
    return LadderState(
        key=text(value["key"], f"{what}: key"),
        emitted=integer(value["emitted"], f"{what}: emitted"),
        detections=integer(value["detections"], f"{what}: detections"),
        last=optional_integer(value["last"], f"{what}: last"),
        previous=optional_integer(value.get("previous"), f"{what}: previous"),
        nudges=tuple((index, level) for index, level in nudges),
    )


def _call(value: object, what: str) -> CallRecord:
    if not (
        isinstance(value, list)
        and len(value) == 5
        and type(value[0]) is int
        and all(type(part) is str for part in value[1:4])
        and (value[4] is None or type(value[4]) is str)
    ):
        raise ValueError(f"{what} must be [index, tool, key, fingerprint, command], got {value!r}")
    return (value[0], value[1], value[2], value[3], value[4])


def _last(value: object) -> LastVerdict:
    if not (
        isinstance(value, list)
        and len(value) == 4
        and type(value[0]) is int
        and type(value[1]) is str
        and (value[2] is None or type(value[2]) is str)
        and type(value[3]) is int
    ):
        raise ValueError(f"last must be [index, action, pattern, level], got {value!r}")
    return (value[0], value[1], value[2], value[3])


def _refused(value: object) -> Refused:
    if not (
        isinstance(value, list)
        and len(value) == 3
        and type(value[0]) is int
        and (value[1] is None or type(value[1]) is str)
        and type(value[2]) is int
    ):
        raise ValueError(f"refused must be [index, fingerprint, refusals], got {value!r}")
    return (value[0], value[1], value[2])
