"""OpenHands event streams: actions and observations as JSON (OpenHands' ``event_to_dict`` form).

Accepted layouts: a saved trajectory (a JSON list of events: one run, named after the file), JSON Lines with
one event per line (one run), and evaluation output (``{"instance_id", "history": [events], ...}``, one run per
object, named by its ``instance_id``; old outputs whose history holds ``[action, observation]`` pairs too).
Event ``i`` of the list (or line ``i`` of the events) is record ``i``.

Mapping: a ``message`` action is a user or assistant message (by ``source``); any other action the agent runs
is a call whose tool is the function the model called (``tool_call_metadata.function_name``, else a name by
action type: ``run`` -> ``execute_bash``) and whose args are the arguments the model sent (from the recorded
model response, else the action's ``args`` without OpenHands' bookkeeping fields); ``thought`` is the call's
thought. An observation is the result of the action it answers (``cause`` / the tool call id): ``run`` gives
``exit_code``, ``error`` (ErrorObservation) and ``user_rejected`` are errors, other results of a call are not.
Bookkeeping events (agent state changes, recalls, condensation, the system prompt) give no event. Spend
(``llm_metrics``' accumulated cost and tokens, else the model response's ``usage``) becomes ``usage`` events.
Events carry their ``timestamp`` as ``ts`` (OpenHands writes local times without a zone: read as UTC).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Final

from ..core._events import Event, Message, Role, ToolCall, ToolResult, Usage
from ..errors import InputError
from ._common import count, mapping, number
from ._run import ErrorHandler, Run, run_id_from_path

__all__ = ["read", "sniff"]

NAMES: Final = ("openhands",)

_TOOLS: Final = {
    "run": "execute_bash",
    "run_ipython": "execute_ipython_cell",
    "read": "str_replace_editor",
    "write": "str_replace_editor",
    "edit": "str_replace_editor",
    "browse": "browser",
    "browse_interactive": "browser",
}
_SILENT_ACTIONS: Final = frozenset(
    {"system", "recall", "change_agent_state", "null", "pause", "resume", "stop", "start", "condensation",
     "condensation_request", "push", "send_pr"}
)  # fmt: skip
_SILENT_OBSERVATIONS: Final = frozenset(
    {"agent_state_changed", "null", "recall", "condense", "microagent", "workspace_context", "system", "success"}
)
_BOOKKEEPING: Final = frozenset(
    {"thought", "impl_source", "translated_ipython_code", "security_risk", "confirmation_state", "hidden",
     "blocking", "is_confirmed", "kernel_init_code", "wait_for_response", "image_urls", "include_extra",
     "timeout", "is_static", "cwd", "outputs_include_extra", "file_urls"}
)  # fmt: skip


def _is_event(value: Any) -> bool:
    if not isinstance(value, Mapping) or "type" in value or "role" in value:
        return False
    kind = value.get("action", value.get("observation"))
    return isinstance(kind, str) and ("source" in value or "timestamp" in value or "id" in value)


def _first_event(history: list[Any]) -> Any:
    first = history[0] if history else None
    return first[0] if isinstance(first, list) and first else first


def sniff(first: Any, path: str) -> str | None:
    """``openhands`` for an event, a list of events, or an evaluation output with a ``history`` of events."""
    if isinstance(first, list):
        return NAMES[0] if first and _is_event(_first_event(first)) else None
    if _is_event(first):
        return NAMES[0]
    if isinstance(first, Mapping) and isinstance(first.get("history"), list) and "instance_id" in first:
        history = first["history"]
        return NAMES[0] if not history or _is_event(_first_event(history)) else None
    return None


class _Stream:
    """One run being built: its events, record indices and what later observations need from earlier actions."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.calls: dict[Any, tuple[str, str | None]] = {}  # action event id -> (tool, tool call id)
        self.last_tool: str | None = None
        self.cost = 0.0
        self.tokens = (0, 0)
        self.responses: set[str] = set()

    def add(self, index: int, record: Any) -> None:
        items = record if isinstance(record, list) else [record]  # old histories: [action, observation] pairs
        for item in items:
            events = self._events(item)
            self.run.events.extend(events)
            assert self.run.indices is not None
            self.run.indices.extend([index] * len(events))

    def _events(self, event: Any) -> list[Event]:
        if not isinstance(event, Mapping):
            raise ValueError(f"an event is a JSON object, got {type(event).__name__}")
        ts = _timestamp(event.get("timestamp"))
        if isinstance(event.get("action"), str):
            return self._action(event, event["action"], ts)
        if isinstance(event.get("observation"), str):
            return self._observation(event, event["observation"], ts)
        raise ValueError("neither an action nor an observation (no 'action' or 'observation' string)")

    def _action(self, event: Mapping[str, Any], kind: str, ts: float | None) -> list[Event]:
        args = mapping(event.get("args"))
        if kind == "message":
            text = args.get("content") if isinstance(args.get("content"), str) else event.get("message")
            role: Role = "user" if event.get("source") == "user" else "assistant"
            return [*self._usage(event, ts), Message(role=role, text=text if isinstance(text, str) else "", ts=ts)]
        if kind in _SILENT_ACTIONS:
            return []
        metadata = mapping(event.get("tool_call_metadata"))
        function = metadata.get("function_name")
        tool = function if isinstance(function, str) and function else _TOOLS.get(kind, kind)
        call_id = metadata.get("tool_call_id") if isinstance(metadata.get("tool_call_id"), str) else None
        call_args = _model_args(metadata, call_id)
        if call_args is None:
            call_args = {
                k: v
                for k, v in args.items()
                if v is not None and (k not in _BOOKKEEPING or (kind == "think" and k == "thought"))
            }
        thought = args.get("thought") if kind != "think" and isinstance(args.get("thought"), str) else None
        if isinstance(event.get("id"), (int, str)):
            self.calls[event["id"]] = (tool, call_id)
        self.last_tool = tool
        return [
            *self._usage(event, ts),
            ToolCall(tool=tool, args=call_args, id=call_id, thought=thought or None, ts=ts),
        ]

    def _observation(self, event: Mapping[str, Any], kind: str, ts: float | None) -> list[Event]:
        if kind in _SILENT_OBSERVATIONS:
            return []
        metadata = mapping(event.get("tool_call_metadata"))
        extras = mapping(event.get("extras"))
        content = event.get("content")
        output = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        cause = event.get("cause")
        tool, call_id = self.calls.get(cause, (None, None)) if isinstance(cause, (int, str)) else (None, None)
        function = metadata.get("function_name")
        tool = function if isinstance(function, str) and function else tool
        call_id = metadata.get("tool_call_id") if isinstance(metadata.get("tool_call_id"), str) else call_id
        answers_call = tool is not None or call_id is not None
        tool = tool or self.last_tool or kind
        exit_code = None
        is_error: bool | None
        if kind in ("error", "user_rejected"):
            is_error = True
        elif kind == "run":  # the exit code says
            exit_code, is_error = _exit_code(extras), None
        elif kind == "browse" and isinstance(extras.get("error"), bool):
            is_error = extras["error"]
        else:  # OpenHands reports a failed tool as an ErrorObservation
            is_error = False if answers_call else None
        return [ToolResult(output=output, tool=tool, is_error=is_error, exit_code=exit_code, id=call_id, ts=ts)]

    def _usage(self, event: Mapping[str, Any], ts: float | None) -> list[Event]:
        """Spend recorded since the previous event: deltas of ``llm_metrics``, else the response's usage."""
        metrics = event.get("llm_metrics")
        if isinstance(metrics, Mapping):
            cost = number(metrics.get("accumulated_cost"))
            usage = metrics.get("accumulated_token_usage")
            usage = usage if isinstance(usage, Mapping) else {}
            tokens = (count(usage.get("prompt_tokens")) or 0, count(usage.get("completion_tokens")) or 0)
            delta_cost = round(max(0.0, (cost or 0.0) - self.cost), 12)  # no float noise in the deltas
            delta_in, delta_out = max(0, tokens[0] - self.tokens[0]), max(0, tokens[1] - self.tokens[1])
            self.cost, self.tokens = (
                max(self.cost, cost or 0.0),
                (max(self.tokens[0], tokens[0]), max(self.tokens[1], tokens[1])),
            )
            if delta_cost or delta_in or delta_out:
                return [
                    Usage(
                        cost=delta_cost or None, input_tokens=delta_in or None, output_tokens=delta_out or None, ts=ts
                    )
                ]
            return []
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, Mapping) else None
        if not isinstance(response, Mapping) or not isinstance(response.get("usage"), Mapping):
            return []
        response_id = response.get("id")
        if isinstance(response_id, str):
            if response_id in self.responses:  # one response, several calls: count it once
                return []
            self.responses.add(response_id)
        usage = response["usage"]
        tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
        return (
            []
            if tokens_in is None and tokens_out is None
            else [Usage(input_tokens=tokens_in, output_tokens=tokens_out, ts=ts)]
        )


def read(name: str, records: Iterator[tuple[int, Any]], path: str, on_error: ErrorHandler) -> Iterator[Run]:
    """A run per saved trajectory or evaluation output; the events of a JSON Lines event file make one run."""
    base = run_id_from_path(path)
    stream: _Stream | None = None  # the run of a JSON Lines file of single events
    position = 0
    count = 0
    for lineno, record in records:
        if isinstance(record, list) or (isinstance(record, Mapping) and isinstance(record.get("history"), list)):
            history = record if isinstance(record, list) else record["history"]
            own = record.get("instance_id") if isinstance(record, Mapping) else None
            run_id = (
                str(own)
                if isinstance(own, (str, int)) and not isinstance(own, bool)
                else (base if count == 0 else f"{base}/{count}")
            )
            count += 1
            meta: dict[str, Any] = {}
            if isinstance(record, Mapping) and record.get("error"):
                meta = {"labels": {"outcome": {"error": record["error"]}}}
            whole = _Stream(Run(id=run_id, source=name, path=path, meta=meta, indices=[]))
            for index, item in enumerate(history):
                try:
                    whole.add(index, item)
                except ValueError as exc:
                    on_error(InputError(f"event {index}: {exc}", path=path, line=lineno))
                    yield whole.run
                    return
            yield whole.run
            continue
        if stream is None:
            stream = _Stream(Run(id=base, source=name, path=path, indices=[]))
        try:
            stream.add(position, record)
        except ValueError as exc:
            on_error(InputError(str(exc), path=path, line=lineno))
            break
        position += 1
    if stream is not None:
        yield stream.run


def _model_args(metadata: Mapping[str, Any], call_id: str | None) -> dict[str, Any] | None:
    """The arguments of the tool call ``call_id`` as the model sent them (``None`` when not recorded)."""
    response = metadata.get("model_response")
    choices = response.get("choices") if isinstance(response, Mapping) else None
    if not isinstance(choices, list):
        return None
    for choice in choices:
        message = choice.get("message") if isinstance(choice, Mapping) else None
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, Mapping) or (call_id is not None and call.get("id") != call_id):
                continue
            function = call.get("function")
            arguments = function.get("arguments") if isinstance(function, Mapping) else None
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments) if arguments.strip() else {}
                except json.JSONDecodeError:
                    return {"input": arguments}
            return dict(arguments) if isinstance(arguments, Mapping) else {"input": arguments}
    return None


def _exit_code(extras: Mapping[str, Any]) -> int | None:
    metadata = extras.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
    if code is None:
        code = extras.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
