"""Builds loopwatch's optional compiled parts when a C compiler is there: the text kernels
(``src/loopwatch/core/_kernels_c.c``) and, with mypyc, each event's features and the text helpers the rules share (the
modules :data:`loopwatch._native.MODULES` names, compiled from their own typed source).

Used by hatchling as a build hook (``[tool.hatch.build.targets.wheel.hooks.custom]`` in ``pyproject.toml``): a
wheel gets the compiled module and a platform tag; an editable install (``pip install -e .``) gets it built next to
the source. Without a compiler, or with ``LOOPWATCH_NO_EXTENSION=1``, nothing is compiled and the wheel is the
pure-Python one (``py3-none-any``): loopwatch then uses the pure-Python twins of the kernels, which give the same
results. The kernels' compiler is called directly (the one Python was built with, from ``sysconfig``); the modules
are compiled by mypyc (it comes with mypy, which the hook asks for when there is a compiler), through setuptools,
with the same compiler. Either part
that cannot be built is left out with a warning, and the source runs in its place.

Also a script: ``python hatch_build.py [--strict] [--sanitize] [OUTPUT_DIR]`` compiles the module into
``OUTPUT_DIR`` (default: ``src/loopwatch/core``); ``--strict`` turns the compiler's warnings into errors (``make test``
builds this way); ``--sanitize`` builds with AddressSanitizer and UBSan (see ``benchmarks/fuzz_kernels.py``).
``python hatch_build.py --core [OUTPUT_DIR]`` compiles the modules with mypyc into ``OUTPUT_DIR`` (default: ``src``,
the folder that holds the package; ``make kernels`` builds both).
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "src" / "loopwatch" / "core" / "_kernels_c.c"
MODULE = "_kernels_c"
NATIVE = ROOT / "src" / "loopwatch" / "_native.py"
MYPY_CONFIG = """[mypy]
ignore_missing_imports = True
"""
"""The scratch build's own mypy settings: the optional extras' packages (rapidfuzz, orjson...) are not in a build's
environment, and a user's mypy configuration must not change what is compiled."""
CORE_REQUIRES = ["mypy>=2.4", "setuptools>=61"]
"""What building the compiled modules needs (mypy brings mypyc; mypyc builds through setuptools); asked of the build
front end only when a compiler is there."""
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]


def module_filename() -> str:
    """The compiled module's file name for this Python (``_kernels_c.cpython-311-x86_64-linux-gnu.so``...)."""
    return MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compiler() -> list[str] | None:
    """The C compiler command (``$CC``, else the one Python was built with), or ``None`` when there is none."""
    command = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "")
    if not command or shutil.which(command[0]) is None:
        return None
    return command


def build(out_dir: Path, *, sanitize: bool = False, strict: bool = False, source: Path = SOURCE) -> Path:
    """Compiles the kernels (``source``: another version of ``_kernels_c.c``, for a benchmark) into ``out_dir``
    (``strict``: a warning is an error); raises ``RuntimeError`` (with the compiler's output) on failure."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc or clang)")
    include = sysconfig.get_paths()["include"]
    target = out_dir / module_filename()
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    # NDEBUG as Python builds its own modules: the type assertions in Python's headers (PyBytes_AS_STRING...) go, and
    # the sanitized build, which fuzzing runs, keeps them
    flags += SANITIZE_FLAGS if sanitize else ["-DNDEBUG"]
    flags += ["-Werror"] if strict else []
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        built = Path(scratch) / target.name  # then moved in one step: a running process never sees half a file
        done = subprocess.run(
            [*cc, *flags, f"-I{include}", str(source), "-o", str(built)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"compiling {source.name} failed:\n{done.stdout}{done.stderr}")
        os.replace(built, target)
    return target


def _native_value(name: str) -> Any:
    """An annotated constant of :mod:`loopwatch._native`, read from its source (the build cannot import the package it
    builds)."""
    for node in ast.parse(NATIVE.read_text("utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return ast.literal_eval(node.value)  # type: ignore[arg-type]
    raise RuntimeError(f"no {name} in {NATIVE}")


def core_modules() -> list[str]:
    """The modules mypyc compiles: :data:`loopwatch._native.MODULES`."""
    return list(_native_value("MODULES"))


def core_group() -> str:
    """mypyc's name for the compiled modules' shared library, from :data:`loopwatch._native.LIBRARY` (where the finder
    looks for it): ``loopwatch.core._compiled`` makes ``loopwatch/core/_compiled__mypyc`` inside the package."""
    library: str = _native_value("LIBRARY")
    return "loopwatch." + library.removesuffix("__mypyc").replace("/", ".")


def build_core(out_dir: Path) -> list[Path]:
    """Compiles :func:`core_modules` with mypyc into ``out_dir`` (the folder that holds the ``loopwatch`` package: the
    checkout's ``src``, or a wheel's root), each beside where its source is, with the shared library they use
    (:func:`core_group`); returns the files made. Raises ``RuntimeError`` (with mypyc's or the compiler's output) when
    mypyc or a compiler is missing or the build fails.

    The package is copied to a scratch folder and compiled there (mypyc writes C, objects and modules next to what it
    compiles), then each module is moved into place in one step."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc or clang)")
    try:
        import mypyc.build  # noqa: F401  (only whether it is there: the build runs in its own process)
    except ImportError as error:
        raise RuntimeError("mypyc is not installed (it comes with mypy: pip install mypy)") from error
    paths = [name.replace(".", "/") + ".py" for name in core_modules()]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        junk = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c")
        shutil.copytree(NATIVE.parent, work / "loopwatch", ignore=junk)
        script = f"""
            from setuptools import setup
            from mypyc.build import mypycify

            modules = mypycify(["--config-file", "mypy.ini", *{paths!r}], opt_level="3", group_name={core_group()!r})
            setup(name="loopwatch-core", ext_modules=modules, script_args=["build_ext", "--inplace"])
        """
        (work / "setup_core.py").write_text(textwrap.dedent(script), "utf-8")
        (work / "mypy.ini").write_text(MYPY_CONFIG, "utf-8")
        done = subprocess.run(
            [sys.executable, "setup_core.py"],
            cwd=work,
            capture_output=True,
            text=True,
            env={**os.environ, "CC": shlex.join(cc)},
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"compiling the core with mypyc failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
        made = [p for p in work.rglob(f"*{suffix}") if "build" not in p.relative_to(work).parts]
        made.append(_write_constructors(work))
        targets = []
        for built in made:
            target = out_dir / built.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(target.name + ".new")
            shutil.copyfile(built, staged)
            os.replace(staged, target)  # a running process never sees half a file
            targets.append(target)
    if len(targets) != len(paths) + 2:
        raise RuntimeError(f"mypyc made {len(targets) - 1} modules for {len(paths)} sources and their library")
    _drop_strays(out_dir / "loopwatch", set(targets), suffix)
    return targets


def _write_constructors(work: Path) -> Path:
    """Writes the compiled classes' constructors, read from their source in ``work`` (mypyc keeps neither their
    annotations nor their keyword-only marks; see ``loopwatch.core._configured``), beside the modules; returns the
    file."""
    table = work / "loopwatch" / _native_value("CONSTRUCTORS")
    script = "import json, sys; from loopwatch._native import constructors; json.dump(constructors(), sys.stdout)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=work,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(work), "LOOPWATCH_PURE_PYTHON": "1"},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading the compiled classes' constructors failed:\n{done.stderr[-4000:]}")
    table.write_text(done.stdout, "utf-8")
    return table


def _drop_strays(package: Path, made: set[Path], suffix: str) -> None:
    """Removes compiled modules an earlier build left beside a source that is no longer compiled: Python would import
    them instead of the source."""
    for found in package.rglob(f"*{suffix}"):
        source = found.with_name(found.name[: -len(suffix)] + ".py")
        if found not in made and source.exists():
            found.unlink()


def wanted() -> bool:
    """False when ``LOOPWATCH_NO_EXTENSION`` asks for the pure-Python build."""
    return os.environ.get("LOOPWATCH_NO_EXTENSION", "") in ("", "0")


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script without hatchling
    BuildHookInterface = object  # type: ignore[assignment,misc]


class KernelsBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type,type-arg]
    """Compiles the kernels into the wheel (or next to the source for an editable install), when it can."""

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        """mypy and setuptools for the compiled modules, when they can be built (a compiler is there, and the build
        is not asked to be pure Python)."""
        return CORE_REQUIRES if self.target_name == "wheel" and wanted() and compiler() is not None else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or not wanted():
            return
        editable = version == "editable"
        self.scratch = tempfile.mkdtemp(prefix="loopwatch-build-")  # removed by finalize, once the wheel is written
        out_dir = Path(self.scratch)
        made: list[Path] = []
        try:
            made.append(build(SOURCE.parent if editable else out_dir / "loopwatch" / "core"))
        except RuntimeError as error:
            self.app.display_warning(f"loopwatch: the compiled kernels are not built ({error}); pure Python is used")
        try:
            made += build_core(SOURCE.parents[2] if editable else out_dir)
        except RuntimeError as error:
            self.app.display_warning(f"loopwatch: the compiled core is not built ({error}); its source runs instead")
        if editable or not made:
            return
        for built in made:
            build_data["force_include"][str(built)] = built.relative_to(out_dir).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    rest = [a for a in args if not a.startswith("--")]
    if "--core" in args:
        for made in build_core(Path(rest[0]) if rest else SOURCE.parents[2]):
            print(made)
    else:
        print(build(Path(rest[0]) if rest else SOURCE.parent, sanitize="--sanitize" in args, strict="--strict" in args))
