"""Failures: the same error retried, failure streaks across tools, and test-fix cycles."""

from __future__ import annotations

import re
from typing import Final

from ..fingerprint import command_of, preview
from .base import Detector, Finding, State, Step, push

_FILE_OPS: Final = re.compile(r"^\s*(cat|echo|sed|printf|tee|head|tail|awk)\b")


def error_excerpt(output: str, limit: int = 200) -> str:
    """The most telling line of an error output (the last non-empty line that mentions an error)."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"error|exception|fail|not found|no such|denied|invalid|cannot", line, re.I):
            return preview(line, limit)
    return preview(lines[-1] if lines else output, limit)


class ErrorRetryDetector(Detector):
    """The same tool failing with the same (normalised) error consecutively, whatever its arguments.

    "Tool" is the tool key: for shell-like tools, the program run (``bash:python``, ``bash:cd``...). The
    error is compared with digits, hex ids, timestamps and temp paths removed. Any successful result ends
    the streak. Reported on the result that completes each retry, and (blockable) on a further call to
    the same tool once the streak is established.
    """

    name = "error_retry"
    patterns = ("error_retry",)

    def __init__(self, *, threshold: int = 3) -> None:
        self.threshold = threshold

    def new_state(self) -> State:
        return {"key": None, "tool": None, "n": 0, "start": None, "idx": [], "error": ""}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind == "result":
            if not step.failed:
                state.update(key=None, tool=None, n=0, start=None, idx=[])
                return None
            key = f"{step.tool_key}\x00{step.error_sig}"
            if key != state["key"]:
                state.update(key=key, tool=step.tool_key, n=0, start=step.call_index, idx=[])
                state["error"] = error_excerpt(step.output or "")
            state["n"] += 1
            push(state["idx"], step.call_index if step.call_index is not None else step.index, 8)
            return self._finding(state, step, blockable=False) if state["n"] >= 2 else None
        if step.kind == "call" and state["key"] is not None and step.tool_key == state["tool"]:
            if state["n"] >= self.threshold:
                return self._finding(state, step, blockable=True)
        return None

    def _finding(self, state: State, step: Step, *, blockable: bool) -> Finding:
        n = state["n"]
        return Finding(
            pattern="error_retry",
            count=n,
            key=f"error_retry:{state['key']}",
            loop_start=state["start"],
            reason=f"{state['tool']} failed {n} times in a row with the same error: {state['error']}",
            indices=tuple(state["idx"]),
            facts={"tool": step.tool or state["tool"], "error": state["error"], "call": step.tool},
            blockable=blockable,
        )


class FailureStreakDetector(Detector):
    """Consecutive failed tool results, whatever the tool (seed 002's limit, seed 003's bash cascade).

    When every failure in the streak came from a shell file operation (cat, echo, sed...), the finding
    says so (``file_ops``) so the message can point to the proper file tools.
    """

    name = "failure_streak"
    patterns = ("failure_streak",)

    def __init__(self, *, shell_only: bool = False) -> None:
        self.shell_only = shell_only

    def new_state(self) -> State:
        return {"n": 0, "start": None, "idx": [], "file_ops": True, "last": ""}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind != "result":
            return None
        shell = step.tool_key is not None and step.tool_key != step.tool
        if not step.failed or (self.shell_only and not shell):
            state.update(n=0, start=None, idx=[], file_ops=True)
            return None
        if state["n"] == 0:
            state["start"] = step.call_index
        state["n"] += 1
        push(state["idx"], step.call_index if step.call_index is not None else step.index, 8)
        command = command_of(step.args or {}) or ""
        state["file_ops"] = bool(state["file_ops"] and _FILE_OPS.match(command))
        state["last"] = error_excerpt(step.output or "")
        n = state["n"]
        return Finding(
            pattern="failure_streak",
            count=n,
            key=f"failure_streak:{state['start']}",
            loop_start=state["start"],
            reason=f"{n} tool calls failed in a row (last: {state['last']})",
            indices=tuple(state["idx"]),
            facts={"tool": step.tool, "error": state["last"], "advice": _advice(state["file_ops"])},
        )


def _advice(file_ops: bool) -> str:
    if file_ops:
        return "These are file operations: use the file tools (read_file, write_file, edit_file) instead of the shell."
    return "Read the errors before the next command: they say what to change."


_TEST_COMMAND: Final = re.compile(
    r"\b(pytest|py\.test|unittest|nosetests|tox|go\s+test|cargo\s+(?:test|nextest)|"
    r"(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|jest|vitest|mocha|mvn\b[^\n]*\b(?:test|verify)|"
    r"gradlew?\b[^\n]*\btest|dotnet\s+test|rspec|phpunit|ctest|make\s+(?:test|check)|manage\.py\s+test|"
    r"runtests\.py|bin/test)\b"
)
_TEST_FAILED: Final = re.compile(
    r"\b(FAILED|FAILURES?!?|failed|ERRORS?\b|BUILD FAILURE|Tests run:.*(?:Failures|Errors): [1-9]|"
    r"test result: FAILED|AssertionError|panicked|Traceback)\b"
)
_TEST_PASSED: Final = re.compile(r"\b(\d+ passed|OK\b|BUILD SUCCESS|test result: ok|Tests:\s+\d+ passed|PASS\b)")


def is_test_command(text: str) -> bool:
    """True when a command runs a test suite (pytest, go test, cargo test, npm test, mvn test...)."""
    return bool(_TEST_COMMAND.search(text))


class TestFixDetector(Detector):
    """Consecutive failing test runs whose failure stays the same, whatever edits happen in between.

    Re-running tests after edits that change the failure (or make it pass) is progress and restarts the
    count. Seed 003's rethink prompt.
    """

    __test__ = False  # not a pytest test class
    name = "test_fix"
    patterns = ("test_fix",)

    def new_state(self) -> State:
        return {"sig": None, "n": 0, "start": None, "idx": [], "pending": None, "summary": ""}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind == "call":
            command = command_of(step.args or {}) or step.tool or ""
            state["pending"] = step.index if is_test_command(f"{step.tool} {command}") else None
            return None
        if step.kind != "result" or state["pending"] is None or step.call_index != state["pending"]:
            return None
        state["pending"] = None
        output = step.output or ""
        if not (step.failed or _TEST_FAILED.search(output[-4000:])) or (
            not step.failed and _TEST_PASSED.search(output[-2000:]) and not _TEST_FAILED.search(output[-2000:])
        ):
            state.update(sig=None, n=0, start=None, idx=[])
            return None
        if step.error_sig != state["sig"]:
            state.update(sig=step.error_sig, n=0, start=step.call_index, idx=[], summary=error_excerpt(output))
        state["n"] += 1
        push(state["idx"], step.call_index if step.call_index is not None else step.index, 8)
        n = state["n"]
        if n < 2:
            return None
        return Finding(
            pattern="test_fix",
            count=n,
            key=f"test_fix:{state['sig']}",
            loop_start=state["start"],
            reason=f"the tests failed {n} times in a row with the same failure: {state['summary']}",
            indices=tuple(state["idx"]),
            facts={"tool": step.tool, "error": state["summary"]},
        )


def error_retry(*, threshold: int = 3) -> ErrorRetryDetector:
    """The error-retry detector (see :class:`ErrorRetryDetector`)."""
    return ErrorRetryDetector(threshold=threshold)


def failure_streak(*, shell_only: bool = False) -> FailureStreakDetector:
    """The consecutive-failure detector (see :class:`FailureStreakDetector`)."""
    return FailureStreakDetector(shell_only=shell_only)


def test_fix_cycle() -> TestFixDetector:
    """The test-fix cycle detector (see :class:`TestFixDetector`)."""
    return TestFixDetector()
