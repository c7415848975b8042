"""Finding a headless Chromium for the tests that open pages in a real browser (the HTML reports, the dashboard).

The browser is ``LOOPWATCH_CHROMIUM`` if set, else the one ``tools/get_chromium.py`` unpacked into the
virtualenv (``.venv/chromium/chromium``; set up on the spot when ``npm`` and ``node`` are here), else a system
Chromium. When there is none (no ``npm`` to fetch one, no Playwright), the browser tests are skipped with the
reason, so ``make test`` runs everywhere; with ``LOOPWATCH_REQUIRE_BROWSER=1`` (what ``.ci/run`` sets) they fail
instead, so CI never passes without them. ``LOOPWATCH_SKIP_BROWSER=1`` skips them even where a browser is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
SYSTEM_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell")
HOW = (
    "set up a browser with `python tools/get_chromium.py .venv/chromium` (needs npm and node), or point "
    "LOOPWATCH_CHROMIUM at a Chromium"
)


def find_chromium(venvs: Sequence[Path] | None = None, *, setup: bool = True) -> str | None:
    """``LOOPWATCH_CHROMIUM``, else a virtualenv's unpacked browser (set up on the spot if npm is here and
    ``setup``), else a system Chromium; ``None`` when there is none."""
    override = os.environ.get("LOOPWATCH_CHROMIUM")
    if override:
        return override
    places = list(venvs) if venvs is not None else [Path(sys.prefix), REPO / ".venv"]
    for venv in places:
        candidate = venv / "chromium" / "chromium"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    if setup and sys.prefix != sys.base_prefix and shutil.which("npm") and shutil.which("node"):
        target = Path(sys.prefix) / "chromium"
        done = subprocess.run(
            [sys.executable, str(REPO / "tools" / "get_chromium.py"), str(target)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode == 0 and (target / "chromium").is_file():
            return str(target / "chromium")
    for name in SYSTEM_BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test saying why (or fail it, under ``LOOPWATCH_REQUIRE_BROWSER=1``)."""
    if os.environ.get("LOOPWATCH_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}: {HOW} (LOOPWATCH_REQUIRE_BROWSER=1 makes this a failure)")
    pytest.skip(f"{reason}: {HOW}")


def no_browser_reason() -> str:
    """Why no browser could be found: npm missing, or nothing found anyway."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "no Chromium found, and npm/node are not installed to fetch one"
    return "no Chromium found"


def chromium() -> str:
    """The browser's executable for a test, after checking Playwright is installed; skips (or fails) otherwise."""
    if os.environ.get("LOOPWATCH_SKIP_BROWSER") == "1":
        pytest.skip("browser tests skipped (LOOPWATCH_SKIP_BROWSER=1)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("Playwright is not installed (pip install -e '.[test]')")
    executable = find_chromium()
    if executable is None:
        unavailable(no_browser_reason())
    if not (Path(executable).is_file() and os.access(executable, os.X_OK)):
        unavailable(f"the browser {executable} is not an executable file")
    return executable
