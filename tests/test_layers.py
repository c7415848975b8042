"""The package's layers, checked on its source: data flows one way, events -> features -> rules -> policy ->
engine -> guard -> stores and sinks, with readers and adapters at the edges and the command line driving.

Every ``import`` of a loopwatch module counts, those made inside a function (lazily) included. The core (the
events, the rules and what they compute with, the policy and the engine) imports nothing else of loopwatch: not the
guard, a store, a sink, a trace format, an adapter, the service or the command line. A module added to the package
belongs to a layer below, or this test names it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import loopwatch

PACKAGE = Path(loopwatch.__file__).parent

CORE = frozenset(
    {
        "loopwatch._chant_lines",
        "loopwatch._chant_text",
        "loopwatch._event_values",
        "loopwatch._failure_signs",
        "loopwatch._kernels",
        "loopwatch._kernels_c",
        "loopwatch._kernels_py",
        "loopwatch._lazy_re",
        "loopwatch._session_state",
        "loopwatch._steps",
        "loopwatch.audit",
        "loopwatch.canonical",
        "loopwatch.chanting",
        "loopwatch.configured",
        "loopwatch.engine",
        "loopwatch.errors",
        "loopwatch.events",
        "loopwatch.fingerprint",
        "loopwatch.judge",
        "loopwatch.ladder",
        "loopwatch.limits",
        "loopwatch.masking",
        "loopwatch.messages",
        "loopwatch.patterns",
        "loopwatch.policy",
        "loopwatch.similarity",
        "loopwatch.swarm_tally",
        "loopwatch.tools",
        "loopwatch.verdict",
    }
)
"""The core's modules outside ``loopwatch.detectors`` (the rules), which is core as a whole."""

EDGES = ("loopwatch.adapters", "loopwatch.cli", "loopwatch.server", "loopwatch.formats")
"""Packages at the edges or driving: nothing in the core, the stores or the sinks imports them."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def in_core(name: str) -> bool:
    return name in CORE or name == "loopwatch.detectors" or name.startswith("loopwatch.detectors.")


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imported(name: str) -> Iterator[tuple[str, int]]:
    """The loopwatch modules ``name`` imports (a name taken from a package counts as the package, unless it is a
    module of its own), with the line."""
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
                yield (sub if sub in MODULES or sub == "loopwatch._kernels_c" else source), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if under(alias.name, "loopwatch"):
                    yield alias.name, node.lineno


def test_the_module_list_is_read() -> None:
    assert "loopwatch.engine" in MODULES and "loopwatch.detectors.repeat" in MODULES
    assert ("loopwatch.detectors.base", 0) not in set(imported("loopwatch.engine"))
    assert "loopwatch.detectors.base" in {what for what, _ in imported("loopwatch.engine")}
    assert all(name in MODULES or name == "loopwatch._kernels_c" for name in CORE)


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
        if not (in_core(what) or under(what, layer) or what == "loopwatch" or any(under(what, e) for e in extra))
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
        if in_core(name) or any(under(name, p) for p in ("loopwatch.stores", "loopwatch.sinks"))
    ]
    inner += ["loopwatch.guard", "loopwatch._guard_inputs", "loopwatch._async_guard"]
    inner += ["loopwatch.session_backend", "loopwatch.stored"]
    wrong = [
        f"{name} imports {what} (line {line})"
        for name in inner
        for what, line in imported(name)
        if any(under(what, edge) for edge in EDGES)
    ]
    assert wrong == []
