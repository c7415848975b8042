"""The "never" arrows of the design, read from the source (every import statement, at any depth, type-only ones
included; nothing is executed): data flows events -> features -> rules -> policy -> guard -> stores and sinks, and
the edges (adapters, the service, the command line) drive it.

- the rules (and the features they read) never import their driver (the engine, the guard), a store, a sink,
  a framework adapter, the service or the command line, nor any agent framework;
- the core (events, policy, limits, messages, verdict, presets, the engine) never imports the guard, a store, a
  sink, an adapter, the service or the command line;
- the stores never import a rule;
- the adapters never import the command line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import loopwatch

PACKAGE = Path(loopwatch.__file__).parent

RULES = (
    "loopwatch.detectors",
    "loopwatch.chanting",
    "loopwatch.similarity",
    "loopwatch.fingerprint",
    "loopwatch.masking",
    "loopwatch.canonical",
    "loopwatch.tools",
    "loopwatch.configured",
    "loopwatch._lazy_re",
)
CORE = (
    "loopwatch.events",
    "loopwatch.patterns",
    "loopwatch.ladder",
    "loopwatch.policy",
    "loopwatch.limits",
    "loopwatch.messages",
    "loopwatch.verdict",
    "loopwatch.presets",
    "loopwatch.engine",
    "loopwatch.audit",
    "loopwatch.swarm_tally",
)
GUARD = ("loopwatch.guard", "loopwatch.session_backend", "loopwatch.stored", "loopwatch.remote")
STORES = ("loopwatch.stores", "loopwatch.stored")
SINKS = ("loopwatch.sinks", "loopwatch.telemetry")
ADAPTERS = ("loopwatch.adapters",)
SERVER = ("loopwatch.server",)
CLI = (
    "loopwatch.cli",
    "loopwatch.cli_options",
    "loopwatch.batch",
    "loopwatch.scan",
    "loopwatch.explain",
    "loopwatch.evaluation",
    "loopwatch.eval_report",
    "loopwatch.report",
    "loopwatch.report_page",
    "loopwatch.summary",
    "loopwatch.labelfile",
    "loopwatch.metrics",
    "loopwatch.progress",
    "loopwatch._entry",
    "loopwatch.__main__",
)
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

COMMAND_LINE_OPTIONS = frozenset({"add_policy_options", "add_store_option", "add_audit_option"})
ALLOWED = {
    # The Claude Code hook (`loopwatch hook`) and the MCP proxy (`loopwatch mcp-proxy`) have command lines of
    # their own, and spell --preset, --config, --no-config, --store and --audit with the argparse helpers every
    # loopwatch command shares (cli_options). Only those helpers: the policy they name is built by
    # loopwatch.policy_spec, which is not command-line code. Moving the helpers out of cli_options, or these
    # parsers out of the adapters, is left to the layout change that gives the command line a package.
    ("loopwatch.adapters.claude_code", "loopwatch.cli_options"): COMMAND_LINE_OPTIONS,
    ("loopwatch.adapters.mcp", "loopwatch.cli_options"): COMMAND_LINE_OPTIONS,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, frozenset[str], int]]:
    """Each import in the file: the module imported (relative imports resolved), the names taken from it, the line.
    ``from . import x`` imports module ``<package>.x``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, frozenset[str], int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, frozenset(), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = frozenset(alias.name for alias in node.names)
            if node.module is None:  # from . import errors, guard
                found.extend((f"{base}.{n}", frozenset(), node.lineno) for n in names)
            else:
                found.append((base, names, node.lineno))
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
        for target, names, line in imports:
            if _within(target, forbidden) and not (names and names <= ALLOWED.get((module, target), frozenset())):
                bad.append(f"{module}:{line} -> {target}")
    return bad


def test_the_parser_sees_relative_absolute_and_nested_imports() -> None:
    graph = _graph()
    assert len(graph) > 80
    engine = {target for target, _, _ in graph["loopwatch.engine"]}
    assert {"loopwatch.detectors.base", "loopwatch.errors", "loopwatch.policy"} <= engine  # from .x import y
    guard = {target for target, _, _ in graph["loopwatch.guard"]}
    assert "loopwatch.remote" in guard or "loopwatch.stores" in guard
    claude = {target for target, _, _ in graph["loopwatch.adapters.claude_code"]}
    assert "loopwatch.policy_spec" in claude  # an import inside a function
    assert "loopwatch.errors" in {target for target, _, _ in graph["loopwatch.adapters.langchain"]}


def test_the_crossing_finder_reports_an_import_it_is_told_to_forbid() -> None:
    assert _crossings(("loopwatch.engine",), ("loopwatch.detectors",))  # the engine drives the rules
    assert any(
        "loopwatch.adapters.mcp" in line for line in _crossings(("loopwatch.adapters.mcp",), ("loopwatch.guard",))
    )


@pytest.mark.parametrize(
    "forbidden",
    [("loopwatch.engine", *GUARD), STORES, SINKS, ADAPTERS, SERVER, CLI, FRAMEWORKS],
    ids=["driver", "stores", "sinks", "adapters", "server", "cli", "frameworks"],
)
def test_rules_never_import_their_driver_a_store_a_framework_or_the_cli(forbidden: tuple[str, ...]) -> None:
    assert _crossings(RULES, forbidden) == []


@pytest.mark.parametrize(
    "forbidden",
    [GUARD, STORES, SINKS, ADAPTERS, SERVER, CLI],
    ids=["guard", "stores", "sinks", "adapters", "server", "cli"],
)
def test_the_core_never_imports_what_drives_it(forbidden: tuple[str, ...]) -> None:
    assert _crossings(CORE, forbidden) == []


def test_stores_never_import_a_rule() -> None:
    assert _crossings(STORES, RULES) == []


def test_adapters_never_import_the_command_line() -> None:
    assert _crossings(ADAPTERS, CLI) == []


def test_the_allowed_crossings_are_still_needed() -> None:
    """An exception nobody uses any more is removed from the list."""
    used = set()
    for module, imports in _graph().items():
        for target, names, _ in imports:
            if (module, target) in ALLOWED and names:
                used.add((module, target))
    assert used == set(ALLOWED)
