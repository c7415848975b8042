"""Every loopwatch name the README and the docs show can be imported, and none of them is private.

The pages show code (``from loopwatch.adapters.langchain import LoopwatchCallback``) and name things in prose
(``loopwatch.Guard.observe``); a user who copies either must find the name where the page says it is. A rename
that forgets a page fails here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_IMPORT = re.compile(r"^[ \t]*(?:>>> )?from (loopwatch[\w.]*) import (?:\(([^)]*)\)|([\w, \t]+))", re.M)
_DOTTED = re.compile(r"(?<![\w./-])loopwatch((?:\.[A-Za-z_]\w*)+)")
_NOT_PYTHON = frozenset({"action", "verdict"})
"""Dotted names that are not Python: the span event and its attributes (``loopwatch.verdict``, ``loopwatch.action``,
``loopwatch.pattern``)."""
_FILE_ENDINGS = frozenset({"toml", "jsonl", "json", "db", "md", "log", "yaml", "yml", "sqlite", "gz", "html", "py"})


def _imported(page: str) -> list[tuple[str, str]]:
    """(module, name) of each ``from loopwatch... import name`` the page shows."""
    found = []
    for module, grouped, names in _IMPORT.findall(page):
        for item in (grouped or names).replace("\n", " ").split(","):
            name = item.strip().split(" as ")[0].strip()
            if name:
                found.append((module, name))
    return found


def _dotted(page: str) -> list[list[str]]:
    """The parts of each ``loopwatch.a.b`` the page names (file names such as ``loopwatch.toml``, span attributes and
    placeholders such as ``loopwatch.formats.NAME`` aside)."""
    chains = []
    for chain in _DOTTED.findall(page):
        parts = chain.strip(".").split(".")
        if parts[-1] not in _FILE_ENDINGS and parts[0] not in _NOT_PYTHON and not any(p.isupper() for p in parts):
            chains.append(parts)
    return chains


def _resolve(parts: list[str]) -> str | None:
    """Follow ``loopwatch.<parts>`` through modules and attributes; the part that cannot be found, if any.

    Past a class or function the rest is an attribute of it (a method, a field): those are followed too, up to an
    instance attribute, which a class does not have before it is made (the page then names a field of an object).
    """
    obj: object = importlib.import_module("loopwatch")
    path = "loopwatch"
    for part in parts:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif isinstance(obj, ModuleType):
            try:
                obj = importlib.import_module(f"{path}.{part}")
            except ImportError:
                return f"{path}.{part}"
        elif isinstance(obj, type) and part in getattr(obj, "__annotations__", {}):
            return None  # a dataclass field, or an attribute set in __init__ and annotated on the class
        elif isinstance(obj, type) and part in {s for k in obj.__mro__ for s in getattr(k, "__slots__", ())}:
            return None
        else:
            return f"{path}.{part}"
        path = f"{path}.{part}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_loopwatch_name_a_page_shows_can_be_imported(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = []
    for module, name in _imported(text):
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            missing.append(module)
            continue
        if not hasattr(loaded, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    missing += [unknown for parts in _dotted(text) if (unknown := _resolve(parts))]
    assert not missing, f"{page.name} names what loopwatch does not have: {sorted(set(missing))}"


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_page_shows_a_private_name(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    shown = [f"{m}.{n}" for m, n in _imported(text)] + ["loopwatch." + ".".join(p) for p in _dotted(text)]
    private = [name for name in shown if any(_private(part) for part in name.split("."))]
    assert not private, f"{page.name} shows private names: {private}"


def test_the_pages_show_names_at_all() -> None:
    # the patterns above must keep finding what the pages show: a page rewritten in another style would slip by
    shown = sum(len(_imported(p.read_text(encoding="utf-8"))) for p in PAGES)
    assert shown >= 20
