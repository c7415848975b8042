"""Message templates: what the model is told, per pattern and escalation level.

Templates use ``str.format`` fields from the finding: ``{tool}``, ``{call}``, ``{count}``, ``{error}``,
``{failures}`` (error retries: the failures so far), ``{outcome}`` (failure streaks: "failed" or "failed
or found nothing"), ``{calls}``, ``{period}``, ``{chunk}``, ``{workers}``, ``{ledger}`` (a progress ledger's
own reason), ``{reason}``. Unknown fields are left as written.
Users override them per pattern (every level) or per pattern and level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

_REPEAT_1 = (
    "You have called {call} {count} times in a row with the same arguments and got the same result each "
    "time, so calling it again will not tell you anything new. Use the result you already have or try a "
    "different approach; if something is blocking you, say what it is."
)
_REPEAT_BLOCK = (
    "Refused: {call} has already run {count} times with the same arguments and the same result. It was not "
    "run again. Change your approach (different arguments, a different tool) or explain what is blocking you."
)
_POLLING = (
    "You have polled {call} {count} times in a row. Its output is still changing, so the job is still "
    "running: instead of polling again, do ONE blocking wait sized to how long the job should take (a "
    "single command that waits until it finishes, or a longer timeout), then check the result once."
)
_CYCLE_1 = (
    "You are going round in a cycle: the same {period} calls have repeated {count} times without "
    "progress:\n{calls}\nRepeating the cycle will not change the outcome. Stop, look at what each step "
    "returned, and change the plan (a different step, tool or input) before continuing."
)
_CYCLE_BLOCK = (
    "Refused: this call continues a cycle of {period} calls that has repeated {count} times with the same "
    "results:\n{calls}\nIt was not run. Break the cycle with a different step."
)
_ERROR_1 = (
    "{tool} has failed {failures} times in a row with the same error:\n  {error}\nRetrying will fail the "
    "same way. Read the error message and fix its cause (the command, the path, the arguments, a missing "
    "dependency), or use a different tool."
)
_ERROR_BLOCK = (
    "Refused: {tool} has failed {failures} times in a row with the same error:\n  {error}\nThe call was not "
    "run. Read the error and change what caused it before calling {tool} again."
)
_FAILURES = (
    "The last {count} tool calls all {outcome} (last: {error}). Stop and re-read what they said before the "
    "next call: it tells you what to change."
)
_NO_PROGRESS = (
    "Your last {count} {kind} brought nothing new (last result: {result}). Trying small variations of the "
    "same thing will not either. Step back: use what you already know, try a different kind of step, or "
    "say what you are missing."
)
_NO_EFFECT = (
    "{tool} has returned the same result {count} times although you changed things in between ({result}). "
    "Your changes are probably not reaching what runs. Before the next change, check what the run actually "
    "executes: an installed copy instead of the file you edit (pip show, python -c 'import m; print(m.__file__)'), "
    "another import path, a stale cache or build (rebuild, reinstall, clear __pycache__), or a script that never "
    "calls the code you change."
)
_TEST_FIX = (
    "You've had {count} consecutive test failures. Step back and rethink:\n1. Re-read the error messages "
    "carefully\n2. Consider whether your approach is fundamentally wrong\n3. Try a DIFFERENT fix strategy "
    "instead of iterating on the same one"
)
_SIMILAR = (
    "Your last {count} replies say nearly the same thing. Saying it again will not move the task forward: "
    "take one concrete action (call a tool, ask one specific question) or say what is blocking you."
)
_CHANTING = (
    "Your reply keeps repeating the same text ({chunk}). Stop repeating it: finish the reply in a few "
    "sentences and continue with the task."
)
_MONOLOGUE = (
    "You have written {count} messages in a row without using a tool. Stop summarising: pick the next "
    "task and start using tools immediately."
)
_REPEAT_MESSAGE = (
    "You have sent the same message {count} times. Repeating it changes nothing: act on it, or say what is missing."
)
_SWARM = (
    "GLOBAL DOOM LOOP: {count} calls to {tool} across {workers} workers. The entire swarm is stuck on this "
    "approach.\n1. Try a fundamentally different strategy\n2. Do NOT retry the same tool/parameters\n"
    "3. Consider whether the task goal itself needs re-evaluation"
)
_REPHRASE = (
    "You have stated the same intent {count} times in different words and learned nothing new in between "
    "({intent}). Rewording the same request or plan will not change the outcome: say what is blocking you, "
    "use what you already have, or try a genuinely different approach."
)
_JUDGED = (
    "You appear to be going in circles: {reason}. Step back, summarise what you have learned so far, and "
    "change your approach instead of repeating it."
)
_STALLED = (
    "Your own progress ledger has said {count} times in a row that you are stuck ({ledger}). Believe it: do "
    "not hand out the same instruction again in other words. Change the plan (another source, another agent, "
    "another way to get the answer) or say what is blocking you."
)
_REVISIT = (
    "You have made {call} {count} times now, and it answered the same each time: nothing has changed since the "
    "first time, so it will answer the same again. Work with what it told you, or take a step that changes "
    "something (an edit, a different tool, another source); if what you need is not there, say so."
)
_STOP = "Stopping this run: {reason}. The loop was not going to end by itself."
_LIMIT = "{reason}."

DEFAULT_MESSAGES: Final[dict[str, dict[int | str, str]]] = {
    "repeat": {1: _REPEAT_1, "block": _REPEAT_BLOCK, "stop": _STOP},
    "polling": {1: _POLLING, "block": _POLLING, "stop": _STOP},
    "cycle": {1: _CYCLE_1, "block": _CYCLE_BLOCK, "stop": _STOP},
    "error_retry": {1: _ERROR_1, "block": _ERROR_BLOCK, "stop": _STOP},
    "failure_streak": {1: _FAILURES, "stop": _STOP},
    "no_progress": {1: _NO_PROGRESS, "stop": _STOP},
    "no_effect": {1: _NO_EFFECT, "stop": _STOP},
    "revisit": {1: _REVISIT, "stop": _STOP},
    "test_fix": {1: _TEST_FIX, "stop": _STOP},
    "similar_text": {1: _SIMILAR, "stop": _STOP},
    "chanting": {1: _CHANTING, "stop": _STOP},
    "monologue": {1: _MONOLOGUE, "stop": _STOP},
    "repeat_message": {1: _REPEAT_MESSAGE, "stop": _STOP},
    "swarm_repeat": {1: _SWARM, "block": _SWARM, "stop": _STOP},
    "rephrase": {1: _REPHRASE, "stop": _STOP},
    "stalled": {1: _STALLED, "stop": _STOP},
    "judged_loop": {1: _JUDGED},
    "limit": {1: _LIMIT, "stop": _LIMIT},
}

Overrides = Mapping[str, "str | Mapping[int | str, str]"]


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with ``fields`` filled in; unknown fields are left as written, never an error."""
    try:
        return template.format_map(_Fields(fields))
    except (ValueError, IndexError, AttributeError, KeyError):  # a malformed user template
        return template


class Messages:
    """Templates by pattern and level, with user overrides on top of the defaults.

    Lookup for (pattern, level, action): the level's own template, else the action's (``"block"``,
    ``"stop"``), else the highest level at or below ``level``, else the pattern's level 1.
    """

    def __init__(self, overrides: Overrides | None = None, base: Mapping[str, Mapping[int | str, str]] | None = None):
        table: dict[str, dict[int | str, str]] = {k: dict(v) for k, v in (base or DEFAULT_MESSAGES).items()}
        for pattern, value in (overrides or {}).items():
            if isinstance(value, str):
                table[pattern] = {1: value, "block": value, "stop": value}
            else:
                table.setdefault(pattern, {}).update({_level_key(k): v for k, v in value.items()})
        self.table = table

    def template(self, pattern: str, level: int, action: str) -> str:
        entry = self.table.get(pattern) or {}
        if level in entry:
            return entry[level]
        if action in entry:
            return entry[action]
        for lower in range(level - 1, 0, -1):
            if lower in entry:
                return entry[lower]
        return entry.get(1, "{reason}")

    def __repr__(self) -> str:
        return f"Messages(patterns={sorted(self.table)})"


def _level_key(key: int | str) -> int | str:
    if isinstance(key, str) and key.isdigit():
        return int(key)
    return key
