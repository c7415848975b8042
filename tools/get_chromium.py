"""Set up a headless Chromium for the HTML report's browser test, without root and without a browser CDN.

    python tools/get_chromium.py [--optional] DIR        # e.g. .venv/chromium; prints the executable's path

Chromium comes from the npm package ``@sparticuz/chromium`` (a headless Chromium for x86_64 Linux, brotli
compressed, with the few libraries it needs), fetched with ``npm pack`` from the npm registry and unpacked with
Node's zlib (so it needs ``npm`` and ``node`` on the PATH, nothing else). ``DIR/chromium`` is a small wrapper
script that runs the browser with its libraries; tests find it there, or wherever ``LOOPWATCH_CHROMIUM`` points.

Does nothing when ``DIR/chromium`` already runs. Exit status 0 when a browser is ready, 1 when it could not be set
up (the reason is printed). With ``--optional`` (what ``make test`` uses), a browser that cannot be set up (no npm
or node here, no network) is a note, exit status 0: the browser tests then skip, saying why.
"""

from __future__ import annotations

import platform
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@sparticuz/chromium"
VERSION = "147.0.0"
_UNBROTLI = (
    "const fs=require('fs'),z=require('zlib');"
    "fs.writeFileSync(process.argv[2],z.brotliDecompressSync(fs.readFileSync(process.argv[1])));"
)
_WRAPPER = """#!/bin/sh
# Headless Chromium from {package}@{version}, unpacked by tools/get_chromium.py.
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
if [ ! -e /etc/fonts/fonts.conf ] && [ -z "${{FONTCONFIG_FILE:-}}" ]; then
  export FONTCONFIG_FILE="$here/fonts.conf"
fi
exec "$here/headless_shell" "$@"
"""
_FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>{fonts}</dir><cachedir>{cache}</cachedir></fontconfig>
"""


def works(executable: Path) -> str | None:
    """The browser's version line if ``executable`` runs, else None."""
    try:
        done = subprocess.run([str(executable), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def install(target: Path) -> Path:
    """Unpack the browser into ``target``; the wrapper's path."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise RuntimeError(f"{PACKAGE} ships Chromium for x86_64 Linux only, not {sys.platform}/{platform.machine()}")
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise RuntimeError("npm and node are needed to fetch and unpack the browser (apt-get install nodejs npm)")
    with tempfile.TemporaryDirectory(prefix="loopwatch-chromium-") as tmp:
        work = Path(tmp)
        subprocess.run(
            [npm, "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", str(work)],
            check=True,
            cwd=work,
            stdout=subprocess.DEVNULL,
        )
        tgz = next(work.glob("*.tgz"))
        with tarfile.open(tgz) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith("package/bin/") and member.name.endswith(".br"):
                    source = archive.extractfile(member)
                    assert source is not None
                    (work / Path(member.name).name).write_bytes(source.read())
        staging = Path(tempfile.mkdtemp(prefix=".chromium-", dir=target.parent))
        staging.chmod(0o755)
        try:
            for name in ("chromium", "al2023.tar", "swiftshader.tar", "fonts.tar"):
                packed = work / f"{name}.br"
                if not packed.exists():
                    continue
                out = work / name
                subprocess.run([node, "-e", _UNBROTLI, str(packed), str(out)], check=True)
                if name == "chromium":
                    shutil.move(str(out), staging / "headless_shell")
                else:
                    with tarfile.open(out) as archive:
                        _extract(archive, staging)
            binary = staging / "headless_shell"
            binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            (staging / "fonts.conf").write_text(
                _FONTS_CONF.format(fonts=target / "fonts", cache=target / "fonts-cache"), encoding="utf-8"
            )
            wrapper = staging / "chromium"
            wrapper.write_text(_WRAPPER.format(package=PACKAGE, version=VERSION), encoding="utf-8")
            wrapper.chmod(0o755)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target / "chromium"


def _extract(archive: tarfile.TarFile, dest: Path) -> None:
    for member in archive.getmembers():
        path = (dest / member.name).resolve()
        if not (path == dest.resolve() or dest.resolve() in path.parents) or not (member.isfile() or member.isdir()):
            continue  # only plain files and folders inside dest
        if member.isdir():
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        source = archive.extractfile(member)
        assert source is not None
        path.write_bytes(source.read())
        path.chmod(0o755 if member.mode & 0o111 else 0o644)


def main(argv: list[str]) -> int:
    optional = "--optional" in argv
    argv = [a for a in argv if a != "--optional"]
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    failed = 0 if optional else 1
    note = " (the browser tests will be skipped)" if optional else ""
    target = Path(argv[0]).absolute()
    executable = target / "chromium"
    version = works(executable)
    if version is None:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            executable = install(target)
        except (OSError, RuntimeError, subprocess.CalledProcessError, StopIteration, tarfile.TarError) as exc:
            print(f"get_chromium: could not set up {PACKAGE}@{VERSION}: {exc}{note}", file=sys.stderr)
            return failed
        version = works(executable)
        if version is None:
            print(f"get_chromium: {executable} does not run{note}", file=sys.stderr)
            return failed
    print(f"{executable} ({version})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
