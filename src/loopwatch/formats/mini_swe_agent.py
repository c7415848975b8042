"""mini-swe-agent trajectories (``.traj.json``): one JSON document per run with the chat ``messages``.

Message ``i`` of ``messages`` is record ``i``. The system prompt and the task (the messages before the model's
first reply) are skipped. An assistant message with exactly one action (mini-swe-agent 1.x: one bash code
block in its text; 2.x: ``extra.actions``) becomes a ``bash`` call (args ``{"command": ...}``, the whole reply as
thought), one without becomes an assistant message. The message that answers a call becomes its result:
``<returncode>N</returncode>`` (or ``extra.returncode``) gives ``exit_code`` and ``is_error = N != 0``, the text
is what ``<output>`` holds (the whole message when the output was too long or the command timed out; both of
those and the final submission have no return code: ``is_error`` unknown). Any other user message (the
format-error feedback "provide EXACTLY ONE action") is a user message. The model's spend on a reply
(``extra.response.usage`` or ``extra.cost``) becomes a ``usage`` event just before the reply's events.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ._common import count, mapping, number, parts_text, read_documents
from ._run import ErrorHandler, Run

__all__ = ["read", "sniff"]

NAMES: Final = ("mini-swe-agent",)

_ACTION_REGEX: Final = r"```bash\s*\n(.*?)\n```"
_OBSERVATION: Final = re.compile(r"<returncode>(-?\d+)</returncode>\s*(?:<output>\n?(.*)</output>\s*\Z)?", re.DOTALL)
_TOOL: Final = "bash"


def sniff(first: Any, path: str) -> str | None:
    """``mini-swe-agent`` for an object with ``messages`` and a ``mini-swe-agent`` trajectory format."""
    if not isinstance(first, Mapping) or not isinstance(first.get("messages"), list):
        return None
    fmt = first.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return NAMES[0]
    info = first.get("info")
    return NAMES[0] if fmt is None and isinstance(info, Mapping) and "mini_version" in info else None


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """One run per trajectory document (a JSON Lines file of trajectories gives one per line)."""
    return read_documents(name, records, path, on_error, _run)


def _run(name: str, record: Any, fallback_id: str, path: str) -> tuple[Run | None, str | None]:
    if not isinstance(record, Mapping):
        return None, f"a mini-swe-agent trajectory is a JSON object, got {type(record).__name__}"
    messages = record.get("messages")
    if not isinstance(messages, list):
        return None, "messages: expected a list"
    info = mapping(record.get("info"))
    own = record.get("instance_id")
    run_id = own if isinstance(own, str) and own else fallback_id
    stats = mapping(info.get("model_stats"))
    outcome = {"exit_status": info.get("exit_status"), **stats}
    run = Run(id=run_id, source=name, path=path, meta={"labels": {"outcome": outcome}}, indices=[])
    assert run.indices is not None
    pattern = _action_pattern(info)
    pending: list[str | None] = []  # ids of the calls still waiting for their result
    started = False
    for index, message in enumerate(messages):
        try:
            events, started = _message_events(message, pattern, pending, started)
        except ValueError as exc:
            return run, f"messages[{index}]: {exc}"
        run.events.extend(events)
        run.indices.extend([index] * len(events))
    return run, None


def _action_pattern(info: Mapping[str, Any]) -> re.Pattern[str]:
    """The run's own ``action_regex`` when its configuration records one, else mini-swe-agent's default."""
    config = info.get("config")
    for part in ("agent", "model"):
        section = config.get(part) if isinstance(config, Mapping) else None
        regex = section.get("action_regex") if isinstance(section, Mapping) else None
        if isinstance(regex, str):
            try:
                return re.compile(regex, re.DOTALL)
            except re.error:
                break
    return re.compile(_ACTION_REGEX, re.DOTALL)


def _message_events(
    message: Any, pattern: re.Pattern[str], pending: list[str | None], started: bool
) -> tuple[list[Event], bool]:
    if not isinstance(message, Mapping):
        raise ValueError(f"a message is a JSON object, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str):
        raise ValueError("role: expected a string")
    content = parts_text(message.get("content"))
    extra = mapping(message.get("extra"))
    if role == "assistant":
        events: list[Event] = []
        usage = _usage(extra)
        if usage is not None:
            events.append(usage)
        pending.clear()
        actions = _actions(content, extra, pattern)
        for n, (command, call_id) in enumerate(actions):
            events.append(
                ToolCall(
                    tool=_TOOL, args={"command": command}, id=call_id, thought=(content or None) if n == 0 else None
                )
            )
            pending.append(call_id)
        if not actions:
            events.append(Message(role="assistant", text=content))
        return events, True
    if not started or role == "system":
        return [], started
    if role in ("user", "tool", "exit") and pending:
        answered = message.get("tool_call_id")
        call_id = pending.pop(pending.index(answered) if answered in pending else 0)
        return [_result(content, extra, call_id, exit_message=role == "exit")], started
    if role in ("user", "tool"):
        return [Message(role="user", text=content)], started
    return [], started


def _actions(content: str, extra: Mapping[str, Any], pattern: re.Pattern[str]) -> list[tuple[str, str | None]]:
    """(command, call id) of each action of an assistant message."""
    recorded = extra.get("actions")
    if isinstance(recorded, list):
        out: list[tuple[str, str | None]] = []
        for action in recorded:
            command = action.get("command") if isinstance(action, Mapping) else action
            if isinstance(command, str):
                call_id = action.get("tool_call_id") if isinstance(action, Mapping) else None
                out.append((command, call_id if isinstance(call_id, str) else None))
        return out
    found = [action.strip() for action in pattern.findall(content) if isinstance(action, str)]
    return [(found[0], None)] if len(found) == 1 else []


def _result(content: str, extra: Mapping[str, Any], call_id: str | None, *, exit_message: bool) -> ToolResult:
    code = extra.get("returncode")
    output = content
    match = None if exit_message else _OBSERVATION.match(content)
    if match is not None:
        if match.group(2) is not None:
            output = match.group(2)
        if not isinstance(code, int) or isinstance(code, bool):
            code = int(match.group(1))
    if not isinstance(code, int) or isinstance(code, bool) or exit_message:
        code = None
    return ToolResult(
        output=output, tool=_TOOL, is_error=None if code is None else code != 0, exit_code=code, id=call_id
    )


def _usage(extra: Mapping[str, Any]) -> Usage | None:
    response = extra.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    usage = usage if isinstance(usage, Mapping) else {}
    cost = number(extra.get("cost"))
    if cost is None:
        cost = number(usage.get("cost"))
    tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    if cost is None and tokens_in is None and tokens_out is None:
        return None
    return Usage(cost=cost, input_tokens=tokens_in, output_tokens=tokens_out, ts=number(extra.get("timestamp")))
