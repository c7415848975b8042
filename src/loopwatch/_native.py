"""Which of loopwatch's modules can run compiled, and the switch back to their source.

The checks of an event's fields as its constructor reads them (a call's arguments made plain and bounded, an event's
JSON form read field by field), each event's features (a call's payload and fingerprint, the program a command runs,
a result's masking and outcome, the step itself), the text helpers the rules share (error lines and sketches, packed
indices, state fields) and the rules themselves (:data:`MODULES`) are plain typed Python, checked by ``mypy
--strict``; when the package is built with a C compiler, mypyc compiles those very files into extension modules
installed beside them (``hatch_build.py``), which Python imports instead of the source. Compiled or not, it is one
program, so verdicts, fingerprints and stored states are the same either way; only the speed differs.

A compiled class keeps neither its constructor's annotations nor an instance dictionary, which a configuration file,
a sweep and a rule's ``repr`` read: the build writes them down from the source (:func:`constructors`, in
:data:`CONSTRUCTORS`), and :mod:`loopwatch.core._configured` reads that for a compiled rule. A rule of one's own,
run from its source, subclasses the compiled ``Detector`` as any class (mypyc is told to allow it). The engine that
runs the rules is compiled with them, and so are the sessions a guard keeps in its process (the in-process session
backend: an event's load, evaluate and save), the ladders' decisions (:mod:`loopwatch.core._decide`), the verdicts
(:mod:`loopwatch.core._verdict`) and the guard's work at each event (:mod:`loopwatch._guard_core`); the guard's
constructor and public methods, the stores and the rest stay interpreted.

The source runs instead, all of it (the modules are compiled together, against each other):

- with ``LOOPWATCH_PURE_PYTHON=1`` in the environment (which also selects the text kernels' pure-Python twins);
- when a compiled module or their shared library is missing;
- in a checkout, when a source file of the package is newer than the build (edited since: ``make kernels`` builds
  again). Any source file counts, since mypyc compiles into a module the constants it imports from others.

:func:`install` (``import loopwatch`` calls it) puts a finder first on ``sys.meta_path`` that does nothing until one
of :data:`MODULES` is imported; then it decides once (a few ``stat`` calls, one per source file in a checkout) and
from then on hands those modules' source to the import system, or leaves them to it. Where there is nothing compiled
to step around, or no source file (a zip, bytecode only), it leaves the import to the import system.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["CONSTRUCTORS", "MODULES", "compiled", "constructors", "install", "use_source"]

MODULES: tuple[str, ...] = (
    "loopwatch.core._canonical",
    "loopwatch.core._event_values",
    "loopwatch.core._failure_signs",
    "loopwatch.core._fingerprint",
    "loopwatch.core._masking",
    "loopwatch.core._session_state",
    "loopwatch.core._steps",
    "loopwatch.core._tools",
    "loopwatch.core._verdict",
    "loopwatch.core._decide",
    "loopwatch.core._engine",
    "loopwatch._session_backend",
    "loopwatch._guard_core",
    "loopwatch.core.detectors._failure_text",
    "loopwatch.core.detectors._packed",
    "loopwatch.core.detectors._rephrase_text",
    "loopwatch.core.detectors._rephrase_state",
    "loopwatch.core.detectors._state",
    "loopwatch.core.detectors._state_pack",
    "loopwatch.core.detectors._step",
    "loopwatch.core.detectors._base",
    "loopwatch.core.detectors._cycle",
    "loopwatch.core.detectors._error_retry",
    "loopwatch.core.detectors._failure_streak",
    "loopwatch.core.detectors._failures",
    "loopwatch.core.detectors._feedback",
    "loopwatch.core.detectors._ledger",
    "loopwatch.core.detectors._monologue",
    "loopwatch.core.detectors._progress",
    "loopwatch.core.detectors._repeat",
    "loopwatch.core.detectors._rerun",
    "loopwatch.core.detectors._revisit",
    "loopwatch.core.detectors._semantic",
    "loopwatch.core.detectors._swarm",
    "loopwatch.core.detectors._test_fix",
    "loopwatch.core.detectors._text",
)
"""The modules mypyc compiles (``hatch_build.py`` reads this tuple)."""

_HERE = os.path.dirname(os.path.abspath(__file__))
CONSTRUCTORS: str = "core/_compiled_constructors.json"
"""Where in the package the build writes the compiled classes' constructors as their source writes them
(:func:`constructors`; read by :mod:`loopwatch.core._configured`, whose ``TABLE_FILE`` it is): the compiled modules
do not run without it."""
TABLE = os.path.join(_HERE, *CONSTRUCTORS.split("/"))
_NAMES = frozenset(MODULES)
LIBRARY: str = "core/_compiled__mypyc"
"""The library the compiled modules share (mypyc's runtime and their code), inside the package, without its
extension suffix (``hatch_build.py`` names mypyc's group after it)."""
_CHECKOUT = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "pyproject.toml")
"""Beside ``src/loopwatch`` in a checkout: there sources may be edited after a build (an installed package's are
not looked at)."""


def _stem(name: str) -> str:
    """The path of a module of the package (``loopwatch.core._steps``) without its file's suffix."""
    return os.path.join(_HERE, *name.split(".")[1:])


def _source(name: str) -> str:
    """The source file of one of :data:`MODULES`."""
    return _stem(name) + ".py"


def _extension(stem: str) -> str | None:
    """The extension module at ``stem`` (a path without suffix) for this Python, or ``None``."""
    from importlib.machinery import EXTENSION_SUFFIXES

    for suffix in EXTENSION_SUFFIXES:
        if os.path.isfile(stem + suffix):
            return stem + suffix
    return None


def _built(name: str) -> str | None:
    """The compiled module of one of :data:`MODULES`, or ``None``."""
    return _extension(_stem(name))


def _edited_since(moment: float) -> bool:
    """Is a source file of the package newer than ``moment``? Any of them counts, not only :data:`MODULES`: mypyc
    compiles into a module the constants it imports from others."""
    folders = [_HERE]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif entry.name.endswith(".py") and entry.stat().st_mtime > moment:
                    return True
    return False


def _compiled_files() -> dict[str, str] | None:
    """The compiled file of each of :data:`MODULES`, when they are to run: all of them and their library compiled, not
    refused by the environment, and (in a checkout) built after the last edit of any source; else ``None``."""
    from .core._kernels import pure_forced  # the one reading of LOOPWATCH_PURE_PYTHON (no module of MODULES)

    if pure_forced():
        return None
    built = {name: _built(name) for name in MODULES}
    files = {name: path for name, path in built.items() if path is not None}
    library = _extension(os.path.join(_HERE, *LIBRARY.split("/")))
    if library is None or len(files) < len(MODULES) or not os.path.isfile(TABLE):
        return None
    if os.path.isfile(_CHECKOUT):
        try:
            if _edited_since(min(os.stat(path).st_mtime for path in (*files.values(), library))):
                return None
        except OSError:  # a checkout changing under us: its sources then
            return None
    return files


class _SourceFinder:
    """A meta path finder that imports :data:`MODULES` from their source when the compiled ones must not run, and
    loads the compiled ones itself when they do (see :func:`_placed`)."""

    loopwatch_native = True
    """How :func:`install` recognises it (a module reloaded makes a new class, not a new decision)."""

    def __init__(self) -> None:
        self.use_compiled: bool | None = None  # decided on the first import of one of MODULES
        self.files: dict[str, str] = {}
        """Each compiled module's file, found when deciding (empty unless they run)."""

    def decided(self) -> bool:
        if self.use_compiled is None:
            files = _compiled_files()
            self.files = files or {}
            self.use_compiled = files is not None
        return self.use_compiled

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in _NAMES:
            return None
        if self.decided():
            return _compiled_spec(name, self.files)
        source = _source(name)
        if _built(name) is None or not os.path.isfile(source):
            return None  # nothing compiled to step around, or no source file to run: the import system's own way
        from importlib.util import spec_from_file_location

        return spec_from_file_location(name, source)


def _compiled_spec(name: str, files: dict[str, str]) -> ModuleSpec | None:
    """The spec of one of :data:`MODULES` compiled (``files``: each one's file), loaded as the import system would load
    it, and then :func:`_placed`."""
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import spec_from_file_location

    class PlacingLoader(ExtensionFileLoader):
        def exec_module(self, module: ModuleType) -> None:
            super().exec_module(module)
            _placed(files)

    return spec_from_file_location(name, files[name], loader=PlacingLoader(name, files[name]))


def _placed(files: dict[str, str]) -> None:
    """Give each compiled module already imported its own file (``files``) as ``__file__`` and its spec's origin.

    A compiled module that imports another of the group loads it from their shared library, and mypyc names its file
    after where the library would be at the top of ``site-packages`` (``loopwatch/core/loopwatch/core/...``): a path
    that does not exist, which tracebacks, debuggers and coverage tools would show."""
    for name, built in files.items():
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None) != built:
            module.__file__ = built
            spec = getattr(module, "__spec__", None)
            if spec is not None:
                spec.origin = built


def _existing() -> _SourceFinder | None:
    """The finder an earlier import of this module installed (a reload must not add a second one)."""
    for finder in sys.meta_path:
        if getattr(finder, "loopwatch_native", False):
            return finder  # type: ignore[return-value]
    return None


_FINDER: _SourceFinder = _existing() or _SourceFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once per process, whatever reloads this module)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def use_source() -> None:
    """Run :data:`MODULES` from their source in this process, compiled or not (a profiler or a benchmark that puts
    timers inside them needs their Python code); call it before any of them is imported. ``RuntimeError`` when one
    already is. It is not passed on to other processes (a worker started by ``spawn`` decides for itself)."""
    loaded = [name for name in MODULES if name in sys.modules]
    if loaded and compiled():
        raise RuntimeError(f"the compiled {loaded[0]} is already imported: call use_source() before it is")
    install()
    _FINDER.use_compiled = False


def compiled() -> bool:
    """Do :data:`MODULES` run compiled in this process? (Decided now if none was imported yet.)"""
    return _FINDER.decided()


def constructors() -> dict[str, dict[str, object]]:
    """The constructor of each class :data:`MODULES` define that a configuration builds (a rule, the base of rules),
    as its source writes it: what the build writes to :data:`TABLE`. Call it where the modules run from source."""
    import importlib

    from .core._configured import Configured, constructor_table

    classes = []
    for name in MODULES:
        module = importlib.import_module(name)
        classes += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and value.__module__ == name and issubclass(value, Configured)
        ]
    return constructor_table(classes)
