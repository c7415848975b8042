"""No progress: the agent keeps doing the same kind of thing and learns nothing new.

Trivially varied look-ups that all come back empty (``find / -name jdk*``, then ``find /usr -name
java*``...), reworded searches with no match, or any call whose result the agent has already seen in
the streak: none of these are exact repeats, and none brings new information.
"""

from __future__ import annotations

import re
from typing import Final

from ..fingerprint import preview
from .base import Detector, Finding, State, Step, push, searches

_NO_RESULT: Final = re.compile(
    r"^\s*(?:No matches found|No such file|Found 0|0 results|No results|Nothing found|not found|"
    r"\[\]|\{\}|None|null|grep: .*: No such file)",
    re.I,
)
_SEEN: Final = 8


def fruitless_output(output: str) -> bool:
    """An empty result or one that says nothing was found."""
    head = output.strip()[:200]
    return not head or bool(_NO_RESULT.match(head))


class NoProgressDetector(Detector):
    """Consecutive calls of the same kind that bring nothing new.

    Look-ups (find, grep, ls, read, search... any of them: they are one kind) count when they fail, come
    back empty or say nothing matched, or return a result already seen in the streak; other calls of the
    same tool count when they return a result already seen in the streak. A result with new content ends
    the streak. Reported on the result, with the number of fruitless calls as count.
    """

    name = "no_progress"
    patterns = ("no_progress",)

    def new_state(self) -> State:
        return {"key": None, "n": 0, "start": None, "idx": [], "seen": [], "pending": None, "search": False}

    def observe(self, state: State, step: Step) -> Finding | None:
        if step.kind == "call":
            search = searches(step)
            key = "search" if search else step.tool_key
            if key != state["key"]:
                state.update(key=key, n=0, start=None, idx=[], seen=[])
            state.update(pending=step.index, search=search)
            return None
        if step.kind != "result" or step.call_index is None or step.call_index != state["pending"]:
            return None
        state["pending"] = None
        output = step.output or ""
        seen = step.outcome_fp in state["seen"]
        fruitless = seen or (state["search"] and (step.failed or fruitless_output(output)))
        push(state["seen"], step.outcome_fp, _SEEN)
        if not fruitless:
            state.update(n=0, start=None, idx=[])
            return None
        if state["n"] == 0:
            state["start"] = step.call_index
        state["n"] += 1
        push(state["idx"], step.call_index, 8)
        n = state["n"]
        if n < 2:
            return None
        what = "look-ups" if state["search"] else f"{step.tool} calls"
        return Finding(
            pattern="no_progress",
            count=n,
            key=f"no_progress:{state['key']}:{state['start']}",
            loop_start=state["start"],
            reason=f"{n} {what} in a row brought nothing new (last result: {preview(output, 80) or 'empty'})",
            indices=tuple(state["idx"]),
            facts={"tool": step.tool, "kind": what, "result": preview(output, 120)},
        )


def no_progress() -> NoProgressDetector:
    """The no-progress detector (see :class:`NoProgressDetector`)."""
    return NoProgressDetector()
