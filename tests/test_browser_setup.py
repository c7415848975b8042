"""Where no browser can run (no npm to fetch one, none installed), the browser tests are skipped with the reason;
CI (``LOOPWATCH_REQUIRE_BROWSER=1``) fails them instead; ``make test`` fetches the browser only when npm is there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import browser

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine with no browser anywhere and no npm: an empty PATH, no LOOPWATCH_CHROMIUM, no virtualenv's copy."""
    monkeypatch.delenv("LOOPWATCH_CHROMIUM", raising=False)
    monkeypatch.delenv("LOOPWATCH_SKIP_BROWSER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    real = browser.find_chromium
    monkeypatch.setattr(browser, "find_chromium", lambda: real([tmp_path], setup=False))


def test_no_browser_and_no_npm_is_a_skip_saying_why(no_browser: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPWATCH_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception) as info:
        browser.chromium()
    assert "npm/node are not installed" in str(info.value)
    assert "tools/get_chromium.py" in str(info.value)


def test_ci_requires_the_browser(no_browser: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWATCH_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception) as info:
        browser.chromium()
    assert "LOOPWATCH_REQUIRE_BROWSER=1" in str(info.value)


def test_a_named_browser_that_is_not_a_program_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LOOPWATCH_REQUIRE_BROWSER", raising=False)
    monkeypatch.delenv("LOOPWATCH_SKIP_BROWSER", raising=False)
    monkeypatch.setenv("LOOPWATCH_CHROMIUM", str(tmp_path / "nothing-here"))
    with pytest.raises(pytest.skip.Exception) as info:
        browser.chromium()
    assert "is not an executable file" in str(info.value)


def test_ci_entry_point_requires_the_browser() -> None:
    assert "LOOPWATCH_REQUIRE_BROWSER=1" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_make_fetches_the_browser_only_where_npm_is() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    (line,) = [line for line in makefile.splitlines() if "get_chromium.py" in line]
    assert "--optional" in line.split()


def test_without_npm_the_browser_set_up_says_the_tests_will_be_skipped(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "get_chromium.py"), "--optional", str(tmp_path / "chromium")],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},  # no npm, no node
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "npm and node are needed" in done.stderr
    assert "the browser tests will be skipped" in done.stderr
    assert not (tmp_path / "chromium").exists()
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "get_chromium.py"), str(tmp_path / "chromium")],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 1 and "npm and node are needed" in done.stderr
