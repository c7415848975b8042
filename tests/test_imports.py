"""Import-light entry points: ``import loopwatch`` loads no other module of the package (each public name is
imported on first use), and a Claude Code hook run (a new process per event) loads what judging needs and nothing
of the configuration, command-line or report code. Checked in fresh interpreters, as a user's process starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import loopwatch

DEFERRED_BY_IMPORT = (
    # the package's own modules: each public name's module loads when the name is first used
    "loopwatch.core._engine",
    "loopwatch._guard",
    "loopwatch.core.detectors",
    "loopwatch._presets",
    "loopwatch.core._policy",
    "loopwatch.core._limits",
    "loopwatch.core._messages",
    "loopwatch.core._events",
    "loopwatch.core._verdict",
    "loopwatch.errors",
    "loopwatch.core._judge",
    "loopwatch._stored",
    "loopwatch.stores",
    # and the standard library's heavier modules they need
    "dataclasses",
    "inspect",
    "typing",
    "json",
    "re",
    "threading",
)
NOT_IN_A_HOOK_RUN = (
    "loopwatch.config",  # found by walking up the directories; loaded only when a configuration file is there
    "loopwatch.cli",  # the command line's package: loaded by any of its modules (scans, reports, evaluation)
    "loopwatch._cli_options",  # the hook reads its few options without argparse
    "loopwatch._timeline",  # how the report and the dashboard draw a step
    "loopwatch.readers",
    "loopwatch.core._judge",
    "argparse",
    "pathlib",
    "difflib",
    "tomllib",
)


def _modules_after(code: str, cwd: Path, stdin: str = "") -> list[str]:
    """The modules loaded by a fresh interpreter after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


def test_import_loopwatch_loads_no_other_module_of_the_package(tmp_path: Path) -> None:
    loaded = _modules_after("import loopwatch", tmp_path)
    bare = _modules_after("pass", tmp_path)
    assert "loopwatch" in loaded
    # only the switch between the compiled modules and their source (it imports os and sys, loaded already)
    assert [m for m in loaded if m.startswith("loopwatch.")] == ["loopwatch._native"]
    heavy = [m for m in DEFERRED_BY_IMPORT if m in loaded and m not in bare]
    assert heavy == []
    added = sorted(set(loaded) - set(bare))
    assert added == ["__future__", "loopwatch", "loopwatch._native"]


def test_a_public_name_loads_its_module_on_first_use(tmp_path: Path) -> None:
    loaded = _modules_after("from loopwatch import ToolCall", tmp_path)
    assert "loopwatch.core._events" in loaded
    assert (
        "loopwatch._guard" not in loaded
        and "loopwatch.core._engine" not in loaded
        and "loopwatch.core.detectors" not in loaded
    )


def test_a_guard_without_a_store_loads_no_store(tmp_path: Path) -> None:
    code = "from loopwatch import Guard, ToolCall\nGuard().observe('s', ToolCall('read', {'path': 'a'}))"
    loaded = _modules_after(code, tmp_path)
    assert "loopwatch._guard" in loaded
    assert [m for m in loaded if m.startswith(("loopwatch.stores", "loopwatch._stored"))] == []
    with_store = _modules_after(f"from loopwatch import Guard\nGuard(store='sqlite:///{tmp_path}/s.db')", tmp_path)
    assert {"loopwatch.stores", "loopwatch._stored", "loopwatch.stores.sqlite"} <= set(with_store)


def test_import_loopwatch_core_loads_none_of_its_modules(tmp_path: Path) -> None:
    loaded = _modules_after("import loopwatch.core", tmp_path)
    assert [m for m in loaded if m.startswith("loopwatch.")] == ["loopwatch._native", "loopwatch.core"]
    loaded = _modules_after("from loopwatch.core import Pattern", tmp_path)
    assert "loopwatch.core._patterns" in loaded and "loopwatch.core._engine" not in loaded


def test_every_public_name_is_importable_and_is_its_modules_own() -> None:
    for name in loopwatch.__all__:
        value = getattr(loopwatch, name)
        assert value is not None, name
    namespace: dict[str, object] = {}
    exec("from loopwatch import *", namespace)
    assert set(loopwatch.__all__) <= set(namespace)
    from loopwatch._guard import Guard
    from loopwatch._presets import preset
    from loopwatch.core._judge import LoopJudge

    assert loopwatch.Guard is Guard and loopwatch.LoopJudge is LoopJudge and loopwatch.preset is preset
    assert set(loopwatch.__all__) <= set(dir(loopwatch))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Gaurd'"):
        _ = loopwatch.Gaurd  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from loopwatch import Gaurd", {})


HOOK_INPUT = {
    "session_id": "imports-1",
    "transcript_path": "/tmp/imports-1.jsonl",
    "cwd": "/tmp",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "ls -la"},
    "tool_use_id": "toolu_1",
}


@pytest.mark.parametrize(
    "entry",
    [
        "runpy.run_module('loopwatch.adapters.claude_code', run_name='__main__')",
        "from loopwatch._entry import main; main(['hook', 'claude-code'] + sys.argv[1:])",
    ],
    ids=["python -m loopwatch.adapters.claude_code", "loopwatch hook claude-code"],
)
def test_a_hook_run_loads_no_configuration_or_command_line_code(tmp_path: Path, entry: str) -> None:
    project = tmp_path / "project"  # no loopwatch.toml or pyproject.toml here or above
    project.mkdir()
    store = f"sqlite:///{tmp_path / 'hook.db'}"
    code = (
        "import sys, runpy, json\n"
        f"sys.argv = ['hook', '--store', {store!r}]\n"
        "try:\n"
        f"    {entry}\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )
    loaded = _modules_after(code, project, stdin=json.dumps(HOOK_INPUT))
    assert {"loopwatch._guard", "loopwatch._presets", "loopwatch.stores.sqlite", "sqlite3"} <= set(loaded)  # it judged
    assert [m for m in NOT_IN_A_HOOK_RUN if m in loaded] == []
