"""The documentation for users: the README stays short and opens with the make block, the configuration reference
generated from the code lists everything the configuration accepts, the pages speak to users (no internal history,
no files that are not in the repository), and the format page carries the contract's sections. ``make test`` also
builds the site with ``mkdocs build --strict`` (a broken link or a page left out of the navigation fails it)."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from loopwatch import config
from loopwatch._presets import PRESETS, preset

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
sys.path.insert(0, str(REPO / "tools"))

import config_reference  # noqa: E402

PAGES = sorted(DOCS.rglob("*.md"))


def test_the_readme_is_short_and_opens_with_make_demo_and_make_test() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    assert lines[0] == "# loopwatch"
    block = lines[2:6]
    assert block[0] == "```" and block[1].startswith("make demo") and block[2].startswith("make test")


def test_the_reference_lists_every_setting_pattern_rule_and_parameter() -> None:
    page = config_reference.page()
    for key in (*config._TOP_KEYS, *config._LADDER_KEYS, *config._RUNG_KEYS, *config._LIMIT_KEYS, *config._TOOL_KEYS):
        assert f"| {key} |" in page, key
    for pattern in config.PATTERNS:
        assert f"| `{pattern}` |" in page, pattern
    for name in PRESETS:
        for detector in preset(name).detectors:
            assert f"### `{detector.name}` ({type(detector).__name__})" in page
            for param in inspect.signature(type(detector)).parameters:
                assert f"| `{param}` |" in page, (detector.name, param)
    assert "seed 0" not in page.lower()


def test_the_reference_describes_what_the_code_accepts_and_nothing_else() -> None:
    assert set(config_reference.TOP_SETTINGS) == set(config._TOP_KEYS)
    assert set(config_reference.LADDER_SETTINGS) == set(config._LADDER_KEYS)
    assert set(config_reference.RUNG_SETTINGS) == set(config._RUNG_KEYS)
    assert set(config_reference.LIMIT_SETTINGS) == set(config._LIMIT_KEYS)
    assert set(config_reference.TOOL_SETTINGS) == set(config._TOOL_KEYS)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_pages_speak_to_users(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for internal in ("FORMAT.md", "RUBRIC.md", "../shared", "seed 00", "Seed 00", "this stop", "previous stop"):
        assert internal not in text, internal
    assert not re.search(r"\bissue \d+\b", text)


def test_the_readme_speaks_to_users() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for internal in ("FORMAT.md", "RUBRIC.md", "../shared", "seed 00", "this stop"):
        assert internal not in text


def test_the_format_page_carries_the_public_contract() -> None:
    formats = (DOCS / "formats.md").read_text(encoding="utf-8")
    for heading in ("## 1. Event stream", "## 2. Trajectory", "## 3. Scan output", "## Foreign formats"):
        assert heading in formats
    for event_type in ("tool_call", "tool_result", "message", "text_delta", "usage", "reset"):
        assert f"`{event_type}`" in formats
    from loopwatch.readers import FORMATS

    for name in FORMATS:
        assert f"`{name}`" in formats, name  # every reader is documented
    labels = (DOCS / "labels.md").read_text(encoding="utf-8")
    for heading in ("## 4. Labels", "## 5. Metrics", "## The labelling rubric"):
        assert heading in labels


def test_the_docs_build_is_part_of_make_test() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in makefile
    assert re.search(r"^test: .*\bdocs\b", makefile, re.MULTILINE)
