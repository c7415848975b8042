"""What every adapter's tests share: a guard that records its verdicts, and loopwatch without the framework."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

from loopwatch import Guard, ToolCall, ToolResult
from loopwatch.core._events import Event
from loopwatch.core._policy import Policy
from loopwatch.core._verdict import Verdict


def check_missing_framework(hidden: str, adapter: str, extra: str, *, also_import: str = "") -> None:
    """In a fresh interpreter where ``hidden`` cannot be imported: loopwatch imports and judges an event,
    and importing ``loopwatch.adapters.<adapter>`` raises ``MissingExtraError`` naming ``extra``."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{hidden!r}] = None
        import loopwatch, loopwatch.adapters{", " + also_import if also_import else ""}
        from loopwatch import Guard, ToolCall
        assert Guard().observe("s", ToolCall("t")).action == "ok"
        try:
            import loopwatch.adapters.{adapter}
        except loopwatch.MissingExtraError as exc:
            assert isinstance(exc, ImportError) and exc.extra == {extra!r}, exc
            print(exc)
        else:
            raise SystemExit("imported without {hidden}")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'loopwatch[{extra}]'" in done.stdout


class RecordingGuard(Guard):
    """A guard that remembers every event it judged and its verdict, in ``seen``."""

    def __init__(self, preset: str | Policy = "default") -> None:
        super().__init__(preset)
        self.seen: list[tuple[str, Event, Verdict]] = []

    def observe(self, session: str, event: Any, *, swarm: str | None = None) -> Verdict:
        verdict = super().observe(session, event, swarm=swarm)
        self.seen.append((session, event, verdict))
        return verdict

    def calls(self) -> list[ToolCall]:
        return [e for _, e, _ in self.seen if isinstance(e, ToolCall)]

    def results(self) -> list[ToolResult]:
        return [e for _, e, _ in self.seen if isinstance(e, ToolResult)]

    def actions(self, kind: type = ToolCall) -> list[str]:
        """The actions of the verdicts on events of type ``kind``."""
        return [v.action for _, e, v in self.seen if isinstance(e, kind)]

    def verdicts(self, action: str) -> list[Verdict]:
        return [v for _, _, v in self.seen if v.action == action]


BUILD_STAGES = [  # what a polled build reports, one stage per poll: a changing result
    "queued",
    "fetching sources",
    "compiling core",
    "compiling plugins",
    "linking",
    "running unit tests",
    "running integration tests",
    "packaging",
    "uploading artifacts",
    "publishing docs",
    "cleaning workspace",
    "done: success",
]
