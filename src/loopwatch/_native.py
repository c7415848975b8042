"""Which of loopwatch's modules can run compiled, and the switch back to their source.

Each event's features (a call's payload and fingerprint, the program a command runs, a result's masking and
outcome, the step itself) and the text helpers the rules share (error lines and sketches, packed indices, state
fields: :data:`MODULES`) are plain typed Python, checked by ``mypy --strict``; when the package is built with a C
compiler, mypyc compiles those very files into extension modules installed beside them (``hatch_build.py``), which
Python imports instead of the source. Compiled or not, it is one program, so verdicts, fingerprints and stored
states are the same either way; only the speed differs. (The rules and the engine stay interpreted: a rule's
constructor is what a configuration file and a sweep read, its parameters and their types, and a compiled function
keeps neither.)

The source runs instead, all of it (the modules are compiled together, against each other):

- with ``LOOPWATCH_PURE_PYTHON=1`` in the environment (which also selects the text kernels' pure-Python twins);
- when a compiled module is missing, or a source file is newer than its compiled module (a checkout edited since it
  was built: ``make kernels`` builds again).

:func:`install` (``import loopwatch`` calls it) puts a finder first on ``sys.meta_path`` that does nothing until one
of :data:`MODULES` is imported; then it decides once, with a few ``stat`` calls, and from then on hands those
modules' source to the import system, or leaves them to it.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["MODULES", "compiled", "install", "use_source"]

MODULES: tuple[str, ...] = (
    "loopwatch.core._canonical",
    "loopwatch.core._fingerprint",
    "loopwatch.core._masking",
    "loopwatch.core._steps",
    "loopwatch.core.detectors._failure_text",
    "loopwatch.core.detectors._packed",
    "loopwatch.core.detectors._rephrase_text",
    "loopwatch.core.detectors._state",
)
"""The modules mypyc compiles (``hatch_build.py`` reads this tuple)."""

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAMES = frozenset(MODULES)


def _source(name: str) -> str:
    """The source file of one of :data:`MODULES`."""
    return os.path.join(_HERE, *name.split(".")[1:]) + ".py"


def _built(name: str) -> str | None:
    """The compiled module of one of :data:`MODULES` (the first extension suffix this Python imports), or ``None``."""
    from importlib.machinery import EXTENSION_SUFFIXES

    stem = os.path.join(_HERE, *name.split(".")[1:])
    for suffix in EXTENSION_SUFFIXES:
        if os.path.exists(stem + suffix):
            return stem + suffix
    return None


def _compiled_usable() -> bool:
    """Are all of :data:`MODULES` compiled, none older than its source, and not refused by the environment?"""
    if os.environ.get("LOOPWATCH_PURE_PYTHON", "") not in ("", "0"):
        return False
    for name in MODULES:
        built = _built(name)
        if built is None:
            return False
        try:
            if os.stat(_source(name)).st_mtime > os.stat(built).st_mtime:
                return False
        except OSError:  # a source not shipped (an install of compiled modules only): the compiled ones it is
            continue
    return True


class _SourceFinder:
    """A meta path finder that imports :data:`MODULES` from their source when the compiled ones must not run."""

    def __init__(self) -> None:
        self.use_compiled: bool | None = None  # decided on the first import of one of MODULES

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in _NAMES:
            return None
        if self.use_compiled is None:
            self.use_compiled = _compiled_usable()
        if self.use_compiled:
            return None  # the import system finds the compiled module before the source
        from importlib.util import spec_from_file_location

        return spec_from_file_location(name, _source(name))


_FINDER = _SourceFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def use_source() -> None:
    """Run :data:`MODULES` from their source in this process, compiled or not (a profiler or a benchmark that puts
    timers inside the rules needs their Python code); call it before any of them is imported. ``RuntimeError`` when
    one already is."""
    loaded = [name for name in MODULES if name in sys.modules]
    if loaded and compiled():
        raise RuntimeError(f"the compiled {loaded[0]} is already imported: call use_source() before it is")
    install()
    _FINDER.use_compiled = False


def compiled() -> bool:
    """Do :data:`MODULES` run compiled in this process? (Decided now if none was imported yet.)"""
    if _FINDER.use_compiled is None:
        _FINDER.use_compiled = _compiled_usable()
    return _FINDER.use_compiled
