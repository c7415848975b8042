"""The test-fix-cycle rule: the same test failure after each edit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._ladder import Ladder
from .._lazy_re import lazy_compile
from .._patterns import Pattern
from ._base import (
    Detector,
    Finding,
    Step,
    pushed,
)
from ._failure_text import excerpt_of
from ._state import (
    Reader,
    fields_json,
    from_fields,
    integer,
    integer_tuple,
    keys_of,
    optional_integer,
    optional_text,
    text,
)

_TEST_COMMAND: Final = lazy_compile(
    r"\b(pytest|py\.test|unittest|nosetests|tox|go\s+test|cargo\s+(?:test|nextest)|"
    r"(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|jest|vitest|mocha|mvn\b[^\n]*\b(?:test|verify)|"
    r"gradlew?\b[^\n]*\btest|dotnet\s+test|rspec|phpunit|ctest|make\s+(?:test|check)|manage\.py\s+test|"
    r"runtests\.py|bin/test)\b"
)
_TEST_FAILED: Final = lazy_compile(
    r"\b(FAILED|FAILURES?!?|failed|ERRORS?\b|BUILD FAILURE|Tests run:.*(?:Failures|Errors): [1-9]|"
    r"test result: FAILED|AssertionError|panicked|Traceback)\b"
)


_TEST_HINTS: Final = ("test", "jest", "mocha", "spec", "verify", "check", "tox")


def is_test_command(text: str) -> bool:
    """True when a command runs a test suite (pytest, go test, cargo test, npm test, mvn test...)."""
    head = text[:400]
    return any(hint in head for hint in _TEST_HINTS) and bool(_TEST_COMMAND.search(head))


@dataclass(slots=True)
class TestFixState:
    """A :class:`TestFixDetector`'s session state."""

    sig: str | None = None
    """The error signature of the failing runs."""
    n: int = 0
    start: int | None = None
    idx: tuple[int, ...] = ()
    pending: int | None = None
    """The test run awaiting its result."""
    summary: str = ""


_TEST_FIX_READERS: Final[dict[str, Reader]] = {
    "sig": optional_text,
    "n": integer,
    "start": optional_integer,
    "idx": integer_tuple,
    "pending": optional_integer,
    "summary": text,
}


class TestFixDetector(Detector[TestFixState]):
    """Consecutive failing test runs whose failure stays the same, whatever edits happen in between.

    Re-running tests after edits that change the failure (or make it pass) is progress and restarts the
    count. The ``doom-loop`` design's rethink prompt.
    """

    __test__ = False  # not a pytest test class
    name = "test_fix"
    kinds = frozenset({"call", "result"})
    patterns = (
        Pattern(
            "test_fix",
            "You've had {count} consecutive test failures. Step back and rethink:\n1. Re-read the error messages "
            "carefully\n2. Consider whether your approach is fundamentally wrong\n3. Try a DIFFERENT fix strategy "
            "instead of iterating on the same one",
            ladder=Ladder.of(nudge=3),
            specificity=5,
            evidence=("tool", "error"),
        ),
    )

    def new_state(self) -> TestFixState:
        return TestFixState()

    def dump_state(self, state: TestFixState) -> dict[str, Any]:
        return fields_json(state)

    def load_state(self, data: dict[str, Any]) -> TestFixState:
        keys_of("test_fix", data, _TEST_FIX_READERS)
        return from_fields(TestFixState, data, "test_fix", _TEST_FIX_READERS)

    def observe(self, state: TestFixState, step: Step) -> Finding | None:
        if step.kind == "call":
            command = step.command or step.tool or ""
            # is_test_command reads 400 characters: no need to copy a long command whole
            state.pending = step.index if is_test_command(f"{step.tool} {command[:400]}") else None
            return None
        if step.kind != "result" or state.pending is None or step.call_index != state.pending:
            return None
        state.pending = None
        output = step.output or ""
        if not step.failed and not _TEST_FAILED.search(output[-1500:]):  # the tests passed (or did not run)
            state.sig, state.n, state.start, state.idx = None, 0, None, ()
            return None
        if step.error_sig != state.sig:
            state.sig, state.n, state.start, state.idx = step.error_sig, 0, step.call_index, ()
            state.summary = excerpt_of(step)
        state.n += 1
        state.idx = pushed(state.idx, step.call_index if step.call_index is not None else step.index, 8)
        n = state.n
        if n < 2:
            return None
        return Finding(
            pattern="test_fix",
            count=n,
            key=f"test_fix:{state.sig}",
            loop_start=state.start,
            reason=f"the tests failed {n} times in a row with the same failure: {state.summary}",
            indices=state.idx,
            facts={"tool": step.tool, "error": state.summary},
        )


def test_fix_cycle() -> TestFixDetector:
    """The test-fix cycle detector (see :class:`TestFixDetector`)."""
    return TestFixDetector()
