"""The package's layers, checked on its source: data flows one way, events -> features -> rules -> policy ->
engine -> guard -> stores and sinks, with readers and adapters at the edges and the command line driving.

Every ``import`` of a loopwatch module counts, those made inside a function (lazily) included. The core (the events,
the rules and what they compute with, the policy and the engine: the package ``loopwatch.core``) imports nothing else
of loopwatch: not the guard, a store, a sink, a trace format, an adapter, the service or the command line (its error
classes are its own, shown at their public home ``loopwatch.errors``). A module added to the package belongs to a
layer below, or this test names it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import loopwatch
from import_homes import home_of, imported_by_name

PACKAGE = Path(loopwatch.__file__).parent

CORE = "loopwatch.core"
"""The core package: the events, their features, the rules (``loopwatch.core.detectors``), the policy and the
engine."""

ERRORS = "loopwatch.errors"
"""The error tree, one for the whole package (``except LoopwatchError`` catches what any layer raises): the public home
of the core's error classes (``loopwatch.core._errors``), which every layer may import."""

EDGES = ("loopwatch.adapters", "loopwatch.cli", "loopwatch.server", "loopwatch.formats")
"""Packages at the edges or driving: nothing in the core, the stores or the sinks imports them."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def in_core(name: str) -> bool:
    return under(name, CORE)


def core_or_errors(name: str) -> bool:
    """What every layer below the guard may import: the core, and the error tree's public home."""
    return in_core(name) or name == ERRORS


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imported(name: str) -> Iterator[tuple[str, int]]:
    """The loopwatch modules ``name`` imports (a name taken from a package counts as the module it lives in, or as
    the package when it lives there), with the line."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if not under(source, "loopwatch"):
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES or sub == "loopwatch.core._kernels_c":
                    yield sub, node.lineno
                elif source in MODULES and MODULES[source].name != "__init__.py":
                    yield source, node.lineno  # a name taken from a module: that module is what is loaded
                else:  # a name the package re-exports counts as the module it lives in
                    yield home_of(source, alias.name) or source, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if under(alias.name, "loopwatch"):
                    yield alias.name, node.lineno
        elif (by_name := imported_by_name(node)) is not None and under(by_name, "loopwatch"):
            yield by_name, getattr(node, "lineno", 0)  # importlib.import_module("loopwatch.stores")


def test_the_module_list_is_read() -> None:
    assert "loopwatch.core._engine" in MODULES and "loopwatch.core.detectors._repeat" in MODULES
    assert ("loopwatch.core.detectors._base", 0) not in set(imported("loopwatch.core._engine"))
    assert "loopwatch.core.detectors._base" in {what for what, _ in imported("loopwatch.core._engine")}
    assert sum(under(name, CORE) for name in MODULES) > 40  # the core package is walked, its rules included


def test_the_error_tree_is_a_leaf() -> None:
    # errors.py shows the core's error classes and imports nothing else; the classes' module imports nothing of
    # loopwatch at run time (the verdict's type, for type checking only; its status, inside the one method using it)
    assert {what for what, _ in imported(ERRORS)} == {"loopwatch.core._errors"}
    tree = ast.parse(MODULES["loopwatch.core._errors"].read_text(encoding="utf-8"))
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(node, ast.ImportFrom) and not node.level for node in top_level)
    assert loopwatch.errors.ConfigError.__module__ == ERRORS  # a traceback names the public home


def test_the_core_imports_nothing_else_of_loopwatch() -> None:
    wrong = [
        f"{name} imports {what} (line {line})"
        for name in MODULES
        if in_core(name)
        for what, line in imported(name)
        if what != "loopwatch" and not in_core(what)
    ]
    assert wrong == []


@pytest.mark.parametrize("layer", ["loopwatch.stores", "loopwatch.sinks", "loopwatch.formats"])
def test_stores_sinks_and_trace_formats_use_the_core_only(layer: str) -> None:
    # a store keeps what the engine decided, a sink delivers it, a trace format reads events: none needs a guard,
    # an adapter, the service or the command line (a sink may redact; a format reader may use the others)
    extra = {"loopwatch.sinks": ("loopwatch.redact",), "loopwatch.formats": ("loopwatch.readers",)}.get(layer, ())
    wrong = [
        f"{name} imports {what} (line {line})"
        for name in MODULES
        if under(name, layer)
        for what, line in imported(name)
        if not (core_or_errors(what) or under(what, layer) or what == "loopwatch" or any(under(what, e) for e in extra))
    ]
    assert wrong == []


ENTRY_POINTS = ("loopwatch._entry", "loopwatch.__main__")
"""The ``loopwatch`` command and ``python -m loopwatch``: they start the command line."""


def test_nothing_below_the_command_line_imports_it() -> None:
    wrong = [
        f"{name} imports {what} (line {line})"
        for name in MODULES
        if not under(name, "loopwatch.cli") and name not in ENTRY_POINTS
        for what, line in imported(name)
        if under(what, "loopwatch.cli")
    ]
    assert wrong == []


def test_the_guard_and_the_stores_do_not_reach_the_edges() -> None:
    inner = [
        name
        for name in MODULES
        if core_or_errors(name) or any(under(name, p) for p in ("loopwatch.stores", "loopwatch.sinks"))
    ]
    inner += ["loopwatch._guard", "loopwatch._guard_inputs", "loopwatch._async_guard"]
    inner += ["loopwatch._session_backend", "loopwatch._stored"]
    wrong = [
        f"{name} imports {what} (line {line})"
        for name in inner
        for what, line in imported(name)
        if any(under(what, edge) for edge in EDGES)
    ]
    assert wrong == []


LONG_MODULE_LINES = 500
"""A module longer than this is one cohesive algorithm, and its head says why it stays in one piece."""


def test_long_modules_say_why_they_stay_in_one_piece() -> None:
    sources = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.c")]
    long = {path.relative_to(PACKAGE).as_posix(): path for path in sources if _lines(path) > LONG_MODULE_LINES}
    assert long, "no long module: the check below would check nothing (lower the bar or drop the test)"
    for name, path in long.items():
        head = " ".join(path.read_text(encoding="utf-8").splitlines()[:60])
        assert "in one piece" in head, f"{name} has {_lines(path)} lines and does not say why it stays in one piece"


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())
