"""A rule's state packed for a store: plain values in tuples, as the rule keeps them in memory.

The JSON form (:meth:`~loopwatch.core.detectors._base.Detector.dump_state`) is what snapshots hold and people read;
writing it costs a rule a few microseconds (each set of hashes turned into base64 text, each record into a list).
A store only hands the state back to a process of the same loopwatch, so there a rule's state is written as it is:
a dataclass state as the tuple of its fields' values, in their order (the packed bytes and integers kept in memory,
as they are), a record nested in it (a dataclass the rule keeps per call, per tool...) as the tuple of its own.
Such values are what :mod:`marshal` writes, in C; the engine adds the session's own fields and the layout
(:func:`layout_of`) that says which fields the values stand for.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from itertools import chain
from operator import attrgetter
from typing import Any, Final, TypeVar

from .._configured import is_compiled

S = TypeVar("S")

_NAMES: dict[type, tuple[str, ...]] = {}


def record_names(kind: type) -> tuple[str, ...]:
    """The fields of a record class (a dataclass), in their order: its ``__slots__`` when it runs from source, and
    the same names when it is compiled (mypyc keeps a dataclass's fields, not its ``__slots__``). ``()`` for a class
    that is not a dataclass and has no ``__slots__``."""
    names = _NAMES.get(kind)
    if names is None:
        if dataclasses.is_dataclass(kind):
            names = tuple(f.name for f in dataclasses.fields(kind))
        else:
            names = tuple(getattr(kind, "__slots__", ()))
        _NAMES[kind] = names
    return names


_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
"""Per dataclass with slots: a getter of all its fields' values at once, in their order."""


def _getter(kind: type) -> Callable[[Any], tuple[Any, ...]]:
    names = record_names(kind)
    if len(names) == 1:
        name = names[0]
        getter: Callable[[Any], tuple[Any, ...]] = lambda record: (getattr(record, name),)  # noqa: E731
    else:
        getter = attrgetter(*names)
    _GETTERS[kind] = getter
    return getter


def fields_of(record: Any) -> tuple[Any, ...]:
    """The values of ``record``'s fields (a dataclass with slots), in their order."""
    kind = type(record)
    return (_GETTERS.get(kind) or _getter(kind))(record)


_PACKABLE: dict[type, bool] = {}


def packable(kind: type) -> bool:
    """Is ``kind`` a dataclass with slots made from its fields' values in order (``kind(*values)``)? What
    :func:`pack_fields` packs; a rule whose state is of another class is kept as JSON."""
    known = _PACKABLE.get(kind)
    if known is None:
        slots = getattr(kind, "__slots__", None)
        fields = dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else ()
        known = _PACKABLE[kind] = (
            ((type(slots) is tuple and slots == record_names(kind)) or is_compiled(kind))  # compiled: fields are fixed
            and bool(fields)
            and all(f.init and not f.kw_only for f in fields)
        )
    return known


def pack_fields(state: Any) -> Any:
    """A rule's state packed: a dataclass state's field values (:func:`fields_of`; ``kind(*values)`` makes it again), a
    plain JSON dict state as it is. ``TypeError`` for a state of a class that is not :func:`packable`."""
    if type(state) is dict:
        return state
    if not packable(type(state)):
        raise TypeError(f"a state of class {type(state).__qualname__} cannot be packed")
    return fields_of(state)


def pack_with(state: Any, **nested: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``state``'s field values, those named in ``nested`` packed by the function given (records in them)."""
    values = list(fields_of(state))
    names = record_names(type(state))
    for name, pack in nested.items():
        at = names.index(name)
        values[at] = pack(values[at])
    return tuple(values)


def unpack_with(kind: Callable[..., S], packed: tuple[Any, ...], **nested: Callable[[Any], Any]) -> S:
    """:func:`pack_with` undone: a ``kind`` from its field values, those named in ``nested`` unpacked first."""
    values = list(packed)
    names = record_names(kind)  # type: ignore[arg-type]
    for name, unpack in nested.items():
        at = names.index(name)
        values[at] = unpack(values[at])
    return kind(*values)


def pack_record(record: Any) -> tuple[Any, ...] | None:
    """A record (or ``None``) packed."""
    return None if record is None else fields_of(record)


def record_maker(kind: Callable[..., Any]) -> Callable[[Any], Any]:
    """A function that makes a ``kind`` record from its packed values (``None`` as it is)."""

    def make(packed: Any) -> Any:
        return None if packed is None else kind(*packed)

    return make


def pack_table(table: tuple[Any, ...], pack: Callable[[Any], Any] = fields_of) -> tuple[Any, ...]:
    """A small table (key, record, key, record...: :data:`~._state.Flat`) packed: its keys, then its records, each
    packed by ``pack`` (:func:`fields_of`: a dataclass record's field values)."""
    return table[::2], tuple(map(pack, table[1::2]))


def table_unpacker(make: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A function that undoes :func:`pack_table`, each record made by ``make`` from its packed form
    (:func:`record_maker`)."""

    def unpack(packed: Any) -> tuple[Any, ...]:
        keys, records = packed
        if len(keys) != len(records):
            raise ValueError("a packed table's keys and records differ in number")
        return tuple(chain.from_iterable(zip(keys, map(make, records), strict=True)))

    return unpack


LAYOUT_VERSION: Final = 1
"""The version of this packed form; part of every layout."""


def layout_of(parts: Iterable[tuple[str, Iterable[type]]]) -> str:
    """A short digest naming a packed state's layout: for each part (a rule, the session), its name and the fields
    of each class its packed state holds, in order. Two loopwatch versions whose rules keep the same fields write
    the same layout; a state of another layout cannot be read field by field (its JSON form can)."""
    text = repr(
        (
            LAYOUT_VERSION,
            [(name, [(k.__qualname__, record_names(k)) for k in kinds]) for name, kinds in parts],
        )
    )
    return hashlib.blake2b(text.encode("utf-8"), digest_size=6).hexdigest()
