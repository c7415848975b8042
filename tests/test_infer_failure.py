"""When a tool result says nothing about failing, the engine reads failure from the output's ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch._guard import Guard
from loopwatch.core._events import ToolCall, ToolResult
from loopwatch.core._failure_signs import _FAILURE_LINE_START, _FAILURE_STARTS, infer_failure

FAILED = [
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'",
    "/bin/bash: line 7: javac: command not found",
    "./run.sh: 3: java: not found",  # POSIX sh (dash)
    "building...\n/bin/bash: line 53237: type: mvnw.cmd: not found",
    "Reading package lists...\nBuilding dependency tree...\nE: Unable to locate package default-jdk",  # apt
    "\nEXECUTION TIMED OUT",  # SWE-agent
    "The last command <command>python run.py</command> timed out and has been killed.",  # mini-swe-agent
    "Segmentation fault (core dumped)",
    "running\nSegmentation fault",
    "npm ERR! code ENOENT",
    "error: pathspec 'x' did not match any file(s) known to git",
    "fatal: not a git repository",
    "<returncode>2</returncode>\n<output>boom</output>",
]

SUCCEEDED = [
    "",
    "Reading package lists...\nBuilding dependency tree...\nnet-tools is already the newest version.",
    "<returncode>0</returncode>\n<output>ok</output>",
    'No matches found for "install" in /repo',
    "3 passed in 0.12s",
    "SEVERE: not yet\nEvery item handled",
    "a1b2 Fix Segmentation fault in parser",  # git log
    'run.sh:12:  echo "$cmd: not found"',  # a script's text
    "cache key user-42: not found, fetching\nDone.",
    "Checking for program 'clang' : not found\n'configure' finished successfully",
    "npm notice New minor version of npm available! npm ERR! is what failures look like",
]


@pytest.mark.parametrize("output", FAILED)
def test_failure_text_marks_a_failure(output: str) -> None:
    assert infer_failure(output, None, None) is True


@pytest.mark.parametrize("output", SUCCEEDED)
def test_plain_output_is_not_a_failure(output: str) -> None:
    assert infer_failure(output, None, None) is False


def test_explicit_status_wins_over_the_text() -> None:
    assert infer_failure("E: Unable to locate package x", False, None) is False
    assert infer_failure("all good", True, None) is True
    assert infer_failure("EXECUTION TIMED OUT", None, 0) is False
    assert infer_failure("fine", None, 1) is True


def test_only_the_ends_of_a_long_output_are_read() -> None:
    middle = "x" * 2_000 + "\nE: hidden in the middle\n" + "y" * 2_000
    assert infer_failure(middle, None, None) is False
    assert infer_failure(middle + "\nE: Unable to correct problems", None, None) is True


def _apt_session(last_line: str) -> list[str]:
    """Installs of five different packages, each answered by the same apt output without a status."""
    guard = Guard("default-lexical", clock=None)
    seen = []
    for i, package in enumerate(["default-jdk", "openjdk-11-jdk", "openjdk-17-jdk", "temurin-17-jdk", "zulu17-jdk"]):
        call = ToolCall(tool="bash", args={"command": f"sudo apt-get install -y {package}"}, id=f"c{i}")
        seen.append(guard.observe("s", call).pattern or "ok")
        output = (
            f"Reading package lists...\nBuilding dependency tree...\nSome packages could not be installed.\n{last_line}"
        )
        seen.append(guard.observe("s", ToolResult(id=f"c{i}", output=output)).pattern or "ok")
    return seen


def test_apt_failures_with_other_packages_are_an_error_retry() -> None:
    """The same apt error after installing another package each time: trying other packages is trying things, so
    the fifth install's failure (not the third) is nudged as an error retry, found only because ``E:`` lines are
    read as failures (the results carry no status)."""
    seen = _apt_session("E: Unable to correct problems, you have held broken packages.")
    assert seen[9] == "error_retry" and "error_retry" not in seen[:9]
    assert "error_retry" not in _apt_session("Unable to correct problems, you have held broken packages.")


_PARTS = st.sampled_from(["\n", "Error", "ERROR", "error", ":", " ", "fatal", "E", "npm ERR!", "Segmentation fault"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PARTS, max_size=12).map("".join))
def test_a_failing_line_start_is_found_as_each_start_looked_for_is(text: str) -> None:
    # one search for every start after a newline gives what a search for each one gives
    each = any(f"\n{start}" in text for start in _FAILURE_STARTS)
    assert (_FAILURE_LINE_START.search(text) is not None) == each
