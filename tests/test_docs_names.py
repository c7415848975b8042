"""Every loopwatch name the README and the docs show can be imported, and none of them is private.

The pages show code (``from loopwatch.adapters.langchain import LoopwatchCallback``) and name things in prose
(``loopwatch.Guard.observe``); a user who copies either must find the name where the page says it is. A rename
that forgets a page fails here.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
"""The pages the repository and the docs site show (the site shows CHANGELOG.md as its changelog page)."""

_IMPORT = re.compile(r"^[ \t]*(?:>>> )?from (loopwatch[\w.]*) import (?:\(([^)]*)\)|([\w, \t]+))", re.M)
_INLINE_IMPORT = re.compile(r"`from (loopwatch[\w.]*)\s+import\s+([\w, \t\n]+)`")
"""An import shown in prose (`` `from loopwatch.adapters.litellm import LoopwatchGuardrail` ``), on one line or
broken over two."""
_DOTTED = re.compile(r"(?<![\w./-])loopwatch((?:\.[A-Za-z_]\w*)+)")
_PLACEHOLDERS = frozenset({"NAME"})
"""Parts that stand for a name the reader picks (``loopwatch.formats.NAME``): the only names not looked up."""
_NOT_PYTHON = frozenset({"action", "verdict"})
"""Dotted names that are not Python: the span event and its attributes (``loopwatch.verdict``, ``loopwatch.action``,
``loopwatch.pattern``)."""
_FILE_ENDINGS = frozenset({"toml", "jsonl", "json", "db", "md", "log", "yaml", "yml", "sqlite", "gz", "html", "py"})


def _imported(page: str) -> list[tuple[str, str]]:
    """(module, name) of each ``from loopwatch... import name`` the page shows."""
    found = []
    shown = [(module, grouped or names) for module, grouped, names in _IMPORT.findall(page)]
    for module, names in shown + _INLINE_IMPORT.findall(page):
        for item in names.replace("\n", " ").split(","):
            name = item.strip().split(" as ")[0].strip()
            if name:
                found.append((module, name))
    return found


def _dotted(page: str) -> list[list[str]]:
    """The parts of each ``loopwatch.a.b`` the page names (file names such as ``loopwatch.toml``, span attributes and
    placeholders such as ``loopwatch.formats.NAME`` aside; constants such as ``loopwatch.redact.KEY_FORMATS`` are
    looked up)."""
    chains = []
    for chain in _DOTTED.findall(page):
        parts = chain.strip(".").split(".")
        if parts[-1] not in _FILE_ENDINGS and parts[0] not in _NOT_PYTHON and _PLACEHOLDERS.isdisjoint(parts):
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


def _generated_reference() -> str:
    """The configuration reference the docs site generates at build time (``tools/docs_hooks.py``)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from config_reference import page
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text: str = page()
    return text


TEXTS = {**{str(p.relative_to(ROOT)): p for p in PAGES}, "reference/configuration.md (generated)": None}


def _text(name: str) -> str:
    path = TEXTS[name]
    return _generated_reference() if path is None else path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", TEXTS)
def test_every_loopwatch_name_a_page_shows_can_be_imported(name: str) -> None:
    text = _text(name)
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
    assert not missing, f"{name} names what loopwatch does not have: {sorted(set(missing))}"


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


@pytest.mark.parametrize("name", TEXTS)
def test_no_page_shows_a_private_name(name: str) -> None:
    text = _text(name)
    shown = [f"{m}.{n}" for m, n in _imported(text)] + ["loopwatch." + ".".join(p) for p in _dotted(text)]
    private = [item for item in shown if any(_private(part) for part in item.split("."))]
    assert not private, f"{name} shows private names: {private}"


def test_the_pages_show_names_at_all() -> None:
    # the patterns above must keep finding what the pages show: a page rewritten in another style would slip by
    shown = sum(len(_imported(p.read_text(encoding="utf-8"))) for p in PAGES)
    assert shown >= 20


def test_the_checker_reads_inline_imports_and_constants() -> None:
    page = (
        "a one-line `loopwatch_guardrail.py`\n(`from loopwatch.adapters.litellm import\nLoopwatchGuardrail`), "
        "`loopwatch.redact.KEY_FORMATS` and `loopwatch.formats.NAME`"
    )
    assert ("loopwatch.adapters.litellm", "LoopwatchGuardrail") in _imported(page)
    assert ["redact", "KEY_FORMATS"] in _dotted(page) and ["formats", "NAME"] not in _dotted(page)
    assert _resolve(["redact", "KEY_FORMATS"]) is None and _resolve(["redact", "NOT_A_CONSTANT"]) is not None
