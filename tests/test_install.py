"""Installing loopwatch outside its checkout: the wheel and the sdist are built (``make dist`` builds the same two
with the standard build front end), the wheel is installed into a fresh virtualenv in a temporary folder, and the
installed ``loopwatch`` scans the bundled examples there as the checkout does. The version is written once."""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import loopwatch
from loopwatch import _native

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _one(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


def test_the_wheel_carries_the_one_version_and_the_licence(dist: Path) -> None:
    wheel = _one(dist, "loopwatch-*.whl")
    assert wheel.name.startswith(f"loopwatch-{loopwatch.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = email.message_from_bytes(archive.read(f"loopwatch-{loopwatch.__version__}.dist-info/METADATA"))
    assert metadata["Version"] == loopwatch.__version__
    assert "License-File" in metadata and any(n.endswith("licenses/LICENSE") for n in names)
    assert "loopwatch/py.typed" in names and "loopwatch/server/static/index.html" in names
    report_assets = {f"loopwatch/cli/assets/{n}" for n in ("report-head.html", "report.css", "report.js")}
    assert report_assets <= set(names)  # the HTML report's page, style sheet and script are package data
    assert not any(n.startswith(("tests/", "examples/")) for n in names)


def test_the_sdist_has_what_a_build_from_source_needs(dist: Path) -> None:
    sdist = _one(dist, "loopwatch-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed_files = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "mkdocs.yml", "hatch_build.py")
    for needed in (*needed_files, "src/loopwatch/cli/_main.py", "src/loopwatch/core/_kernels_c.c"):
        assert needed in names, needed
    assert any(n.startswith("docs/") for n in names) and any(n.startswith("examples/") for n in names)
    assert not any("node_modules" in n for n in names)


def test_the_wheel_installed_outside_the_checkout_scans_the_examples(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    wheel = _one(dist, "loopwatch-*.whl")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    work = tmp_path / "project"
    shutil.copytree(REPO / "examples", work / "examples")
    code = (
        "import loopwatch, loopwatch._native as n, loopwatch.core._steps as e; "
        "print(loopwatch.__version__); print(loopwatch.__file__); print(n.compiled(), e.__file__)"
    )
    imported = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=work, env=env, check=True
    ).stdout.splitlines()
    assert imported[0] == loopwatch.__version__
    assert Path(imported[1]).is_relative_to(venv) and not Path(imported[1]).is_relative_to(REPO)
    if _native.compiled():  # built here with mypyc: so is the wheel, and its compiled core runs without mypy
        assert imported[2].startswith("True ") and imported[2].endswith(sysconfig.get_config_var("EXT_SUFFIX"))
        version = subprocess.run(
            [str(bin_dir / "loopwatch"), "--version"], capture_output=True, text=True, cwd=work, env=env, check=True
        )
        assert version.stdout.endswith("(compiled: text kernels, engine, rules and step features)\n")
    scanned = subprocess.run(
        [str(bin_dir / "loopwatch"), "scan", "examples", "--json", "--no-config"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=False,
    )
    assert scanned.returncode == 0, scanned.stderr
    here = subprocess.run(
        [sys.executable, "-m", "loopwatch", "scan", "examples", "--json", "--no-config"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    installed_runs = [json.loads(line) for line in scanned.stdout.splitlines()]
    assert len(installed_runs) == 7 and any(run["detections"] for run in installed_runs)
    assert scanned.stdout == here.stdout
    summary = subprocess.run(
        [str(bin_dir / "loopwatch"), "scan", "examples"], capture_output=True, text=True, cwd=work, env=env, check=False
    )
    assert summary.returncode == 0 and "runs with loops" in summary.stdout  # plain text: rich is an extra
    page = work / "report.html"
    drawn = subprocess.run(
        [str(bin_dir / "loopwatch"), "scan", "examples", "--no-config", "--html", str(page)],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=False,
    )
    assert drawn.returncode == 0, drawn.stderr
    html = page.read_text(encoding="utf-8")
    assets = REPO / "src" / "loopwatch" / "cli" / "assets"
    for asset in ("report.css", "report.js"):  # inlined from the installed package's data files
        assert assets.joinpath(asset).read_text(encoding="utf-8") in html, asset


def test_the_version_is_written_once() -> None:
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"^version\s*=", pyproject, re.MULTILINE)
    sources = [p for p in (REPO / "src").rglob("*.py") if re.search(r"__version__\s*=", p.read_text("utf-8"))]
    assert sources == [REPO / "src" / "loopwatch" / "__init__.py"]


def test_the_changelog_starts_with_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## \[?(\d+\.\d+\.\d+[^\]\s]*)", changelog, re.MULTILINE)
    assert first is not None and first.group(1) == loopwatch.__version__


def test_with_a_compiler_the_wheel_carries_the_compiled_kernels(dist: Path) -> None:
    wheel = _one(dist, "loopwatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    compiled = [n for n in names if n.startswith("loopwatch/core/_kernels_c.")]
    if shutil.which(sysconfig.get_config_var("CC").split()[0]) is None and not os.environ.get(
        "LOOPWATCH_REQUIRE_COMPILED"
    ):  # pragma: no cover - no compiler here
        pytest.skip("no C compiler: the wheel is pure Python")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert compiled == [f"loopwatch/core/_kernels_c{suffix}"]
    assert "-py3-none-any" not in wheel.name  # a platform wheel
    assert not any(n.endswith(".c") for n in names)
    # the per-event path compiled by mypyc, each module beside its source, and the library they share
    for module in _native.MODULES:
        path = module.replace(".", "/")
        assert f"{path}{suffix}" in names and f"{path}.py" in names, module
    assert f"loopwatch/core/_compiled__mypyc{suffix}" in names and not any(
        "__mypyc" in n for n in names if "/" not in n
    )


def test_without_a_compiler_the_wheel_is_pure_python_and_scans_the_same(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "LOOPWATCH_PURE_PYTHON")}
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "CC": "/nonexistent/cc"},
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = _one(out, "loopwatch-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        assert not any("_kernels_c" in n or n.endswith(suffix) for n in archive.namelist())
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--quiet", str(wheel)], env=env, check=True)
    work = tmp_path / "project"
    shutil.copytree(REPO / "examples", work / "examples")
    code = "import loopwatch._native as n; from loopwatch.core import _kernels; print(_kernels.COMPILED, n.compiled())"
    assert subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=work, env=env).stdout == (
        "False False\n"
    )
    scan = ["-m", "loopwatch", "scan", "examples", "--json", "--no-config"]
    pure = subprocess.run([str(python), *scan], capture_output=True, text=True, cwd=work, env=env, check=True)
    here = subprocess.run([sys.executable, *scan], capture_output=True, text=True, cwd=REPO, check=True)
    assert pure.stdout == here.stdout and '"detections": [{' in pure.stdout
