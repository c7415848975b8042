"""A rule's constructor and identity: the parameters it takes (what a configuration file and a sweep set), the
attributes it keeps (what its ``repr`` shows and equality compares), for a class run from its source or compiled.

Equality and hashing go by those attributes, for detectors and limits alike (their ``repr`` differ).

mypyc compiles a class's constructor without its annotations and with its keyword-only parameters marked
positional, and a compiled class's instances keep no ``__dict__``. So the build that compiles the rules also writes
down, from their source, each compiled class's constructor (its parameters, with their annotations and defaults)
and the attributes its instances keep (:func:`constructor_table`, in :data:`TABLE_FILE` beside this module), and
:func:`constructor_signature`, :func:`constructor_hints` and :meth:`Configured._params` read that for a compiled
class. A class that runs from its source (any rule of a user's, every rule without the compiled build) is asked
directly.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import typing
from collections.abc import Iterable
from types import FunctionType
from typing import Any, Final

TABLE_FILE: Final = "_compiled_constructors.json"
"""Where the compiled build writes :func:`constructor_table` (beside this module)."""

Record = dict[str, Any]
"""One class's constructor as written down: ``params`` (name, annotation, ``repr`` of the default) and
``attributes`` (the public attributes its instances keep, in the order they are set)."""

_NOTHING: Final[Record] = {"params": [], "attributes": []}
_TABLE: dict[str, Record] | None = None
_RECORDS: dict[type, Record | None] = {}


class Configured:
    """A rule whose identity is its type and its public attributes (its thresholds)."""

    def _params(self) -> dict[str, Any]:
        record = compiled_record(type(self))
        if record is None:  # (a rule of one's own that keeps no attributes of its own may hold no dictionary)
            return {k: v for k, v in getattr(self, "__dict__", {}).items() if not k.startswith("_")}
        return {name: getattr(self, name) for name in record["attributes"]}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configured) and type(self) is type(other) and self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


def is_compiled(cls: type) -> bool:
    """Is ``cls`` a class mypyc compiled (not one of its subclasses written in Python)?"""
    return "__mypyc_attrs__" in vars(cls)


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _constructor_class(cls: type) -> type | None:
    """The class of ``cls``'s MRO whose ``__init__`` it runs (``None``: ``object``'s)."""
    for klass in cls.__mro__:
        if klass is not object and "__init__" in vars(klass):
            return klass
    return None


def compiled_record(cls: type) -> Record | None:
    """The constructor written down for ``cls`` when the constructor it runs is compiled; ``None`` when it runs from
    source (ask the class itself). ``LookupError`` for a compiled constructor the table lacks (a build that did not
    write it down)."""
    if cls in _RECORDS:
        return _RECORDS[cls]
    owner = _constructor_class(cls)
    record: Record | None = None
    if owner is None and is_compiled(cls):
        record = _NOTHING  # compiled, with object's constructor
    elif owner is not None and not isinstance(vars(owner)["__init__"], FunctionType):
        found = _table().get(_key(owner))
        if found is None:
            raise LookupError(f"the compiled build did not write down the constructor of {_key(owner)}")
        record = found
    _RECORDS[cls] = record
    return record


def _table() -> dict[str, Record]:
    global _TABLE
    if _TABLE is None:
        import json

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), TABLE_FILE)
        try:
            with open(path, encoding="utf-8") as handle:
                _TABLE = json.load(handle)
        except FileNotFoundError:
            _TABLE = {}
    return _TABLE


def constructor_signature(cls: type) -> inspect.Signature:
    """The signature of ``cls``'s constructor as its source writes it (without ``self``)."""
    record = compiled_record(cls)
    if record is None:
        return inspect.signature(cls)
    return inspect.Signature(
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if default is None else ast.literal_eval(default),
                annotation=annotation,
            )
            for name, annotation, default in record["params"]
        ]
    )


def constructor_hints(cls: type) -> dict[str, Any]:
    """The types of ``cls``'s constructor parameters (``typing.get_type_hints`` of its ``__init__``); raises what
    that raises for an annotation that cannot be resolved (``NameError``, ``TypeError``)."""
    owner = _constructor_class(cls)
    if owner is None:
        return {}
    record = compiled_record(cls)
    if record is None:
        return typing.get_type_hints(vars(owner)["__init__"])
    namespace = dict(vars(sys.modules[owner.__module__]))
    return {name: eval(annotation, namespace) for name, annotation, _ in record["params"]}


def constructor_table(classes: Iterable[type]) -> dict[str, Record]:
    """Each class's constructor as its source writes it, for the compiled build to write down (see the module's
    docstring). Each class must be buildable with its defaults and take keyword-only parameters with literal
    defaults; ``ValueError`` names one that does not."""
    table: dict[str, Record] = {}
    for cls in classes:
        init = vars(cls).get("__init__")
        if not isinstance(init, FunctionType):
            continue
        params = []
        for name, param in inspect.signature(init).parameters.items():
            if name == "self":
                continue
            annotation = init.__annotations__.get(name)
            if param.kind is not param.KEYWORD_ONLY or not isinstance(annotation, str):
                raise ValueError(f"{_key(cls)}: parameter {name!r} must be keyword-only and annotated")
            default = None if param.default is param.empty else repr(param.default)
            if default is not None and not _literal(default, param.default):
                raise ValueError(f"{_key(cls)}: the default of {name!r} is not a literal")
            params.append((name, annotation, default))
        attributes = [name for name in vars(cls()) if not name.startswith("_")]
        table[_key(cls)] = {"params": params, "attributes": attributes}
    return table


def _literal(text: str, value: object) -> bool:
    """Does ``text`` (a ``repr``) read back as ``value`` with ``ast.literal_eval``?"""
    try:
        return bool(ast.literal_eval(text) == value)
    except (ValueError, SyntaxError):
        return False
