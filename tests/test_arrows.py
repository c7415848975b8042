"""The "never" arrows of the design, read from the source (every import statement, at any depth, type-only ones
included; nothing is executed): data flows events -> features -> rules -> policy -> guard -> stores and sinks, and
the edges (adapters, the service, the command line) drive it.

- the rules (and the features they read) never import their driver (the engine, the guard), a store, a sink,
  a framework adapter, the service or the command line, nor any agent framework;
- the core (events, policy, limits, messages, verdict, presets, the engine) never imports the guard, a store, a
  sink, an adapter, the service or the command line;
- the stores never import a rule;
- the adapters never import the command line, and nothing but the program's entry does: the command line
  (``loopwatch.cli``) is a driver at the edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import loopwatch
from import_homes import home_of, imported_by_name

PACKAGE = Path(loopwatch.__file__).parent

RULES = (
    "loopwatch.core.detectors",
    "loopwatch.core._chanting",
    "loopwatch.core._similarity",
    "loopwatch.core._fingerprint",
    "loopwatch.core._masking",
    "loopwatch.core._canonical",
    "loopwatch.core._tools",
    "loopwatch.core._configured",
    "loopwatch.core._lazy_re",
)
CORE = (
    "loopwatch.core._events",
    "loopwatch.core._patterns",
    "loopwatch.core._ladder",
    "loopwatch.core._policy",
    "loopwatch.core._decide",
    "loopwatch.core._limits",
    "loopwatch.core._messages",
    "loopwatch.core._verdict",
    "loopwatch._presets",
    "loopwatch.core._engine",
    "loopwatch.core._audit",
    "loopwatch.core._swarm_tally",
)
GUARD = (
    "loopwatch._guard",
    "loopwatch._guard_core",
    "loopwatch._async_guard",
    "loopwatch._guard_inputs",
    "loopwatch._session_backend",
    "loopwatch._stored",
    "loopwatch.remote",
)
STORES = ("loopwatch.stores", "loopwatch._stored")
SINKS = ("loopwatch.sinks", "loopwatch.telemetry")
ADAPTERS = ("loopwatch.adapters",)
SERVER = ("loopwatch.server",)
CLI = ("loopwatch.cli",)
PROGRAM = ("loopwatch._entry", "loopwatch.__main__")
"""The ``loopwatch`` program's entry (the console script, ``python -m loopwatch``): it hands ``hook`` to the Claude
Code adapter, ``mcp-proxy`` to the MCP adapter and the rest to the command line, so it alone may import all three."""
COMMAND_LINES = ("loopwatch._cli_options", *PROGRAM)
"""What the command lines share: the program's entry and the argparse helpers that the command line, the hook, the
MCP proxy and the service spell their options with."""
FRAMEWORKS = (
    "langchain",
    "langchain_core",
    "langgraph",
    "agents",
    "pydantic_ai",
    "autogen_agentchat",
    "autogen_core",
    "smolagents",
    "crewai",
    "litellm",
    "claude_agent_sdk",
    "mcp",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, source: str | None = None) -> list[tuple[str, frozenset[str], int]]:
    """Each import in the file (or in ``source``, read as that file): the module imported (relative imports
    resolved), the names taken from it, the line; ``from . import x`` imports module ``<package>.x``, and a name
    taken from a package also imports the module it lives in (:func:`import_homes.home_of`)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, frozenset[str], int]] = []
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, frozenset(), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = frozenset(alias.name for alias in node.names)
            if node.module is None:  # from . import errors, guard (modules), or from ... import Guard (a name)
                for n in sorted(names):
                    home = home_of(base, n)
                    if home is None or home == f"{base}.{n}":
                        found.append((f"{base}.{n}", frozenset(), node.lineno))
                    else:
                        found.extend(((base, frozenset({n}), node.lineno), (home, frozenset(), node.lineno)))
            else:
                found.append((base, names, node.lineno))
                # and where each name lives: `from loopwatch import Guard` imports loopwatch._guard
                homes = {home_of(base, n) for n in names} - {None, base}
                found.extend((home, frozenset(), node.lineno) for home in sorted(h for h in homes if h))
        elif (by_name := imported_by_name(node)) is not None:  # importlib.import_module("loopwatch.cli")
            found.append((by_name, frozenset(), getattr(node, "lineno", 0)))
    return found


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _graph() -> dict[str, list[tuple[str, frozenset[str], int]]]:
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _crossings(sources: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    """``module:line -> imported`` for every import from a module of ``sources`` into ``forbidden``."""
    bad = []
    for module, imports in _graph().items():
        if not _within(module, sources):
            continue
        for target, _names, line in imports:
            if _within(target, forbidden):
                bad.append(f"{module}:{line} -> {target}")
    return bad


def test_the_parser_sees_relative_absolute_and_nested_imports() -> None:
    graph = _graph()
    assert len(graph) > 80
    engine = {target for target, _, _ in graph["loopwatch.core._engine"]}
    assert {
        "loopwatch.core.detectors._base",
        "loopwatch.errors",
        "loopwatch.core._policy",
    } <= engine  # from .x import y
    guard = {target for target, _, _ in graph["loopwatch._guard"]}
    assert "loopwatch.remote" in guard or "loopwatch.stores" in guard
    claude = {target for target, _, _ in graph["loopwatch.adapters.claude_code"]}
    assert "loopwatch._policy_spec" in claude  # an import inside a function
    assert "loopwatch.errors" in {target for target, _, _ in graph["loopwatch.adapters.langchain"]}
    assert "loopwatch.cli" in {target for target, _, _ in graph["loopwatch._entry"]}  # inside a function
    assert "loopwatch.cli._scan" in {target for target, _, _ in graph["loopwatch.cli._batch"]}  # inside the package


def test_a_name_taken_from_a_package_counts_as_the_module_it_lives_in() -> None:
    # a rule that took the guard from the package's front door would reach its driver all the same
    rule = PACKAGE / "core" / "detectors" / "_repeat.py"
    for source in ("from loopwatch import Guard\n", "from ... import Guard\n", "from loopwatch import AsyncGuard\n"):
        targets = {target for target, _, _ in _imports(rule, source)}
        assert "loopwatch" in targets and any(_within(target, GUARD) for target in targets), source
    assert home_of("loopwatch", "preset") == "loopwatch._presets"
    assert home_of("loopwatch.core", "detectors") == "loopwatch.core.detectors"  # a module of the package
    assert home_of("loopwatch", "__version__") is None  # a constant: the package itself


def test_a_module_imported_by_its_name_in_a_text_counts_too() -> None:
    adapter = PACKAGE / "adapters" / "_shared.py"
    for source in (
        "import importlib\nimportlib.import_module('loopwatch.cli')\n",
        "from importlib import import_module\ndef f():\n    return import_module('loopwatch.cli._main')\n",
        "__import__('loopwatch.cli')\n",
    ):
        assert any(_within(target, CLI) for target, _, _ in _imports(adapter, source)), source


def test_the_crossing_finder_reports_an_import_it_is_told_to_forbid() -> None:
    assert _crossings(("loopwatch.core._engine",), ("loopwatch.core.detectors",))  # the engine drives the rules
    assert any(
        "loopwatch.adapters.mcp" in line for line in _crossings(("loopwatch.adapters.mcp",), ("loopwatch._guard",))
    )


@pytest.mark.parametrize(
    "forbidden",
    [("loopwatch.core._engine", *GUARD), STORES, SINKS, ADAPTERS, SERVER, CLI, COMMAND_LINES, FRAMEWORKS],
    ids=["driver", "stores", "sinks", "adapters", "server", "cli", "command-lines", "frameworks"],
)
def test_rules_never_import_their_driver_a_store_a_framework_or_the_cli(forbidden: tuple[str, ...]) -> None:
    assert _crossings(RULES, forbidden) == []


@pytest.mark.parametrize(
    "forbidden",
    [GUARD, STORES, SINKS, ADAPTERS, SERVER, CLI, COMMAND_LINES],
    ids=["guard", "stores", "sinks", "adapters", "server", "cli", "command-lines"],
)
def test_the_core_never_imports_what_drives_it(forbidden: tuple[str, ...]) -> None:
    assert _crossings(CORE, forbidden) == []


def test_stores_never_import_a_rule() -> None:
    assert _crossings(STORES, RULES) == []


def test_adapters_never_import_the_command_line() -> None:
    assert _crossings(ADAPTERS, CLI) == []


def test_only_the_program_s_entry_imports_the_command_line() -> None:
    """The guard, the stores, the sinks, the adapters and the service included: the command line drives them."""
    graph = _graph()
    others = [module for module in graph if not _within(module, (*CLI, *PROGRAM))]
    assert {"loopwatch", "loopwatch._guard", "loopwatch.server._board", "loopwatch.adapters.mcp"} <= set(others)
    bad = [
        f"{module}:{line} -> {target}" for module in others for target, _, line in graph[module] if _within(target, CLI)
    ]
    assert bad == []
    assert any(_within(target, CLI) for target, _, _ in graph["loopwatch._entry"])  # the one door
