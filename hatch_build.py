"""Builds loopwatch's optional compiled text kernels (``src/loopwatch/core/_kernels_c.c``) when a C compiler is there.

Used by hatchling as a build hook (``[tool.hatch.build.targets.wheel.hooks.custom]`` in ``pyproject.toml``): a
wheel gets the compiled module and a platform tag; an editable install (``pip install -e .``) gets it built next to
the source. Without a compiler, or with ``LOOPWATCH_NO_EXTENSION=1``, nothing is compiled and the wheel is the
pure-Python one (``py3-none-any``): loopwatch then uses the pure-Python twins of the kernels, which give the same
results. The compiler is called directly (the one Python was built with, from ``sysconfig``), so building needs no
other package.

Also a script: ``python hatch_build.py [--strict] [--sanitize] [OUTPUT_DIR]`` compiles the module into
``OUTPUT_DIR`` (default: ``src/loopwatch/core``); ``--strict`` turns the compiler's warnings into errors (``make test``
builds this way); ``--sanitize`` builds with AddressSanitizer and UBSan (see ``benchmarks/fuzz_kernels.py``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "src" / "loopwatch" / "core" / "_kernels_c.c"
MODULE = "_kernels_c"
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
    flags += SANITIZE_FLAGS if sanitize else []
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

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or not wanted():
            return
        try:
            if version == "editable":
                build(SOURCE.parent)
                return
            out_dir = Path(self.directory) / "kernels-build"
            built = build(out_dir)
        except RuntimeError as error:
            self.app.display_warning(f"loopwatch: the compiled kernels are not built ({error}); pure Python is used")
            return
        build_data["force_include"][str(built)] = f"loopwatch/core/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True


if __name__ == "__main__":
    args = sys.argv[1:]
    rest = [a for a in args if not a.startswith("--")]
    target = Path(rest[0]) if rest else SOURCE.parent
    print(build(target, sanitize="--sanitize" in args, strict="--strict" in args))
