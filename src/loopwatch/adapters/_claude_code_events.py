"""Claude Code hook events in and out: a hook input (``hook_event_name``'s JSON) as the event the guard judges,
and a verdict as the JSON the hook prints (see :mod:`loopwatch.adapters.claude_code` for both mappings).

The translation only: no guard, no store, no settings. It is on every hook run's path, so it imports no more than
the events and the verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult
from ..core._lazy_re import lazy_compile
from ..core._verdict import Verdict
from ..errors import LoopwatchError

HOOK_EVENTS: Final = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop")
"""The events ``--install`` registers (and the only ones the hook judges)."""

TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
"""The events of a tool call (``--install`` gives them a ``"matcher": "*"``)."""
MAX_TEXT: Final = 9_500
"""Characters of a message given to Claude Code (it moves anything over 10,000 to a file)."""

_EXIT_CODE: Final = lazy_compile(r"\s*Exit code (-?\d+)")
# fields of a tool response that change on every run while the result does not
_VOLATILE: Final = frozenset(
    {
        "durationMs",
        "duration_ms",
        "durationSeconds",
        "totalDurationMs",
        "totalTokens",
        "totalToolUseCount",
        "usage",
        "agentId",
        "resolvedModel",
        "modelsUsed",
        "bashEditDiff",
    }
)


class HookInputError(LoopwatchError, ValueError):
    """The hook's stdin is not a Claude Code hook event loopwatch can judge."""


# -- hook input -> events ---------------------------------------------------------------------------------


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _blocks_text(blocks: list[Any]) -> str | None:
    """The text of a list of content blocks (``[{"type": "text", "text": ...}]``), None when it is not one."""
    parts = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            return None
    return "\n".join(parts)


def response_text(response: object) -> tuple[str, bool]:
    """A ``tool_response`` as the text the guard compares, and whether it reports a failure."""
    if response is None:
        return "", False
    if isinstance(response, str):
        return response, False
    if isinstance(response, list):
        text = _blocks_text(response)
        return (text if text is not None else _text(response)), False
    if not isinstance(response, Mapping):
        return _text(response), False
    failed = response.get("is_error") is True or response.get("isError") is True or response.get("interrupted") is True
    if "stdout" in response or "stderr" in response:  # Bash, PowerShell
        out, err = response.get("stdout"), response.get("stderr")
        out = out if isinstance(out, str) else ("" if out is None else _text(out))
        err = err if isinstance(err, str) else ("" if err is None else _text(err))
        return (f"{out}\n{err}" if out and err else out or err), failed
    content = response.get("content")
    if isinstance(content, list):  # MCP tools, the Agent tool
        text = _blocks_text(content)
        if text is not None:
            return text, failed
    file = response.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("content"), str):  # Read
        return file["content"], failed
    return _text({k: v for k, v in response.items() if k not in _VOLATILE}), failed


def _opt_str(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _tool(payload: Mapping[str, Any]) -> str:
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError(f"{payload.get('hook_event_name')} without a tool_name")
    return tool


def session_of(payload: Mapping[str, Any]) -> str:
    """The guard's session of a hook event: ``session_id``, or ``session_id/agent-AGENT_ID`` in a subagent."""
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise HookInputError("no session_id in the hook input")
    agent = _opt_str(payload, "agent_id")
    return f"{session}/agent-{agent}" if agent else session


def event_of(payload: Mapping[str, Any]) -> Event | None:
    """The event a hook input stands for (None: nothing to judge); :class:`HookInputError` when malformed."""
    name = payload.get("hook_event_name")
    if name == "PreToolUse":
        args = payload.get("tool_input")
        if args is None:
            args = {}
        elif not isinstance(args, Mapping):
            args = {"input": args}
        return ToolCall(_tool(payload), args, id=_opt_str(payload, "tool_use_id"))
    if name == "PostToolUse":
        output, failed = response_text(payload.get("tool_response"))
        return ToolResult(output, tool=_tool(payload), is_error=failed, id=_opt_str(payload, "tool_use_id"))
    if name == "PostToolUseFailure":
        error = payload.get("error")
        failure = "" if error is None else _text(error)
        code = _EXIT_CODE.match(failure)
        return ToolResult(
            failure,
            tool=_tool(payload),
            is_error=True,
            exit_code=int(code.group(1)) if code else None,
            id=_opt_str(payload, "tool_use_id"),
        )
    if name == "UserPromptSubmit":
        prompt = payload.get("prompt")
        return Message("user", prompt if isinstance(prompt, str) else "")
    if name == "Stop":
        last = payload.get("last_assistant_message")
        return Message("assistant", last) if isinstance(last, str) and last.strip() else None
    return None


# -- verdicts -> hook output ------------------------------------------------------------------------------


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def stop_reason(verdict: Verdict) -> str:
    """``loopwatch: STATUS (PATTERN): REASON``, what the user reads when loopwatch stops Claude."""
    pattern = f" ({verdict.pattern})" if verdict.pattern else ""
    return _clip(f"loopwatch: {verdict.status or 'LOOP_DETECTED'}{pattern}: {verdict.reason or verdict.message or ''}")


def _deny(reason: str) -> dict[str, Any]:
    return {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": _clip(reason)}


def response_for(hook_event: str, verdict: Verdict) -> dict[str, Any] | None:
    """The hook's JSON output for ``verdict`` on ``hook_event`` (None: print nothing)."""
    if verdict.action == "ok":
        return None
    message = verdict.message or verdict.reason or f"loopwatch: {verdict.pattern or 'loop'} detected"
    if verdict.action == "stop":
        out: dict[str, Any] = {"continue": False, "stopReason": stop_reason(verdict)}
        if hook_event == "PreToolUse":
            out["hookSpecificOutput"] = _deny(message)
        return out
    if verdict.action == "block" and hook_event == "PreToolUse":
        return {"hookSpecificOutput": _deny(message)}
    if hook_event == "Stop":  # additionalContext (or decision: block) would keep Claude going
        return {"systemMessage": _clip(f"loopwatch: {message}")}
    return {"hookSpecificOutput": {"hookEventName": hook_event, "additionalContext": _clip(message)}}
