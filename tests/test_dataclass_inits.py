"""A dataclass whose ``__init__`` is written out (``@dataclass(init=False)``, so that mypyc compiles it instead of
running the one ``dataclasses`` writes as Python) takes exactly its fields, in their order, with their defaults, and
sets each one: a field added to the class and forgotten in ``__init__`` would be left unset."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "src" / "loopwatch"


def _written_out() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(_init_false(d) for d in node.decorator_list):
                found.append((f"{path.relative_to(SOURCE)}:{node.name}", node))
    return found


def _init_false(decorator: ast.expr) -> bool:
    return (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Name)
        and decorator.func.id == "dataclass"
        and any(
            k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in decorator.keywords
        )
    )


WRITTEN_OUT = _written_out()


def test_the_hot_records_have_their_init_written_out() -> None:
    """The records made on every event (a step; a call awaiting its result; a call's answers; a failure streak)."""
    names = {name.rsplit(":", 1)[1] for name, _ in WRITTEN_OUT}
    assert {"Step", "Pending", "Answered", "Streak"} <= names


@pytest.mark.parametrize(("name", "cls"), WRITTEN_OUT, ids=[name for name, _ in WRITTEN_OUT])
def test_a_written_out_init_takes_and_sets_every_field(name: str, cls: ast.ClassDef) -> None:
    fields = [
        (s.target.id, s.value) for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]
    inits = [s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
    assert len(inits) == 1, f"{name}: init=False and no __init__ of its own"
    arguments = inits[0].args
    assert not arguments.kwonlyargs and arguments.vararg is None and arguments.kwarg is None
    params = [a.arg for a in arguments.args[1:]]
    assert params == [field for field, _ in fields], f"{name}: __init__ takes {params}"
    defaults = [None] * (len(params) - len(arguments.defaults)) + list(arguments.defaults)
    for (field, value), default in zip(fields, defaults, strict=True):
        if _factory(value):  # field(default_factory=...): None in __init__, which makes a new value for it
            assert isinstance(default, ast.Constant) and default.value is None, f"{name}.{field}: default {default}"
            continue
        expected, written = (ast.dump(value) if value else None), (ast.dump(default) if default else None)
        assert written == expected, f"{name}.{field}: default {written} in __init__, {expected} in the class"
    assigned = [
        (s.targets[0].attr, _set_from(s.value))
        for s in inits[0].body
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Attribute) and _set_from(s.value)
    ]
    assert assigned == [(field, field) for field, _ in fields], f"{name}: __init__ sets {assigned}"


def _factory(value: ast.expr | None) -> bool:
    """Is ``value`` (a field's default in the class) ``field(default_factory=...)``?"""
    return isinstance(value, ast.Call) and any(k.arg == "default_factory" for k in value.keywords)


def _set_from(value: ast.expr) -> str | None:
    """The parameter an assignment in ``__init__`` sets a field from: ``x``, or ``x`` in ``{} if x is None else x``
    (a field whose default is made by a factory)."""
    if isinstance(value, ast.Name):
        return value.id
    if isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.Name):
        return value.orelse.id
    return None
