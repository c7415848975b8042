"""Where a name taken from a package really lives, for the tests that read the package's imports from its source
(``test_arrows.py``, ``test_layers.py``): ``from loopwatch import Guard`` imports ``loopwatch._guard``, and a test
that only saw ``loopwatch`` would let a rule reach its driver through the package's front door; and the module a call
imports by its name."""

from __future__ import annotations

import ast
import importlib
from functools import cache


def imported_by_name(node: ast.AST) -> str | None:
    """The module a call imports by its name in a text (``importlib.import_module("loopwatch.cli")``,
    ``import_module(...)``, ``__import__(...)``), when the text is written out and absolute; else ``None``."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    by_name = (
        func.attr == "import_module"
        if isinstance(func, ast.Attribute)
        else (isinstance(func, ast.Name) and func.id in {"import_module", "__import__"})
    )
    first = node.args[0]
    if by_name and isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None


@cache
def home_of(package: str, name: str) -> str | None:
    """The module ``name`` (as ``from package import name`` takes it) is defined in: the submodule of that name, or
    the loopwatch module a class or function re-exported by ``package`` comes from; ``None`` for a loopwatch package
    that cannot be imported here (an optional extra missing), a name with no module (a constant) or one from
    outside loopwatch (a type alias)."""
    if not (package == "loopwatch" or package.startswith("loopwatch.")):
        return None
    try:
        module = importlib.import_module(package)
        if hasattr(module, "__path__"):  # a package: the name may be a module of it
            try:
                return importlib.import_module(f"{package}.{name}").__name__
            except ImportError:
                pass
        value = getattr(module, name)  # a lazy export is imported here
    except Exception:  # an optional extra missing, say: the import statement is checked as written
        return None
    home = getattr(value, "__module__", None)
    if not isinstance(home, str) or home == package or not home.startswith("loopwatch."):
        return None  # the package's own, or a type alias (its module is typing's)
    return home
