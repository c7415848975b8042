"""Claude Agent SDK (``claude-agent-sdk``): ``HookMatcher`` callbacks built from a :class:`~loopwatch._guard.Guard`.

    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient
    from loopwatch.adapters.claude_agent_sdk import loopwatch_hooks

    options = ClaudeAgentOptions(hooks=loopwatch_hooks(preset="default"))
    async with ClaudeSDKClient(options) as client:
        await client.query("fix the failing test")
        async for message in client.receive_response():
            ...

:func:`loopwatch_hooks` returns ``{EVENT: [HookMatcher(matcher=None, hooks=[callback])]}`` for ``PreToolUse``,
``PostToolUse``, ``PostToolUseFailure``, ``UserPromptSubmit`` and ``Stop``: one async callback per event,
judging every tool (``matcher=None``). To keep hooks of your own, add loopwatch's matchers to your lists for
the same events (the SDK runs every matching callback).

The SDK's hook callbacks receive the same JSON as Claude Code's command hooks, and answer with the same JSON,
so this module uses the mapping of :mod:`loopwatch.adapters.claude_code` (:func:`~.claude_code.handle`):

- events: ``PreToolUse`` → ``ToolCall``; ``PostToolUse`` → ``ToolResult`` (the ``tool_response`` as text);
  ``PostToolUseFailure`` → a failed ``ToolResult``; ``UserPromptSubmit`` → ``Message("user", prompt)`` (a
  stopped session is reset first: the next prompt starts afresh); ``Stop`` → ``Message("assistant",
  last_assistant_message)``;
- sessions: ``session_id``, or ``session_id/agent-AGENT_ID`` inside a subagent; the main session and its
  subagents form a swarm;
- ``nudge``: ``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": MESSAGE}}`` (on ``Stop``:
  ``{"systemMessage": "loopwatch: MESSAGE"}``);
- ``block`` on ``PreToolUse``: ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
  "deny", "permissionDecisionReason": MESSAGE}}``: the tool does not run and Claude reads the reason;
- ``stop``: ``{"continue_": False, "stopReason": "loopwatch: STATUS (PATTERN): REASON"}`` (plus the deny on
  ``PreToolUse``). ``continue_`` is the SDK's Python name; the SDK sends it to the CLI as ``continue``;
- ``ok``: ``{}`` (no opinion: the SDK goes on; loopwatch never answers ``allow``).

The guard keeps its sessions in memory (or in the store of the ``guard`` you give); it is called synchronously
from the SDK's event loop (fine in memory; mind the latency of a networked store). A callback never raises:
input it cannot judge, or an error inside the guard, is logged (logger ``loopwatch.adapters.claude_agent_sdk``)
and answered with ``{}``, so the action goes ahead unjudged.

Tested with ``claude-agent-sdk`` 0.2.187: the real ``HookMatcher`` callbacks called with inputs typed as the
SDK's own ``TypedDict``\\ s (``PreToolUseHookInput``...), and ``ClaudeSDKClient`` driven through a custom
``Transport`` playing the CLI (the SDK's ``initialize`` and ``hook_callback`` control messages). The SDK's agent
loop with the real Claude Code CLI and a model was not run: it needs an API login.
"""

from __future__ import annotations

import logging
from typing import Any, Final, cast

from .._guard import Guard
from ..core._policy import Policy
from ..errors import MissingExtraError
from ._shared import default_guard
from .claude_code import HOOK_EVENTS, HookInputError, handle

try:
    from claude_agent_sdk import HookMatcher
    from claude_agent_sdk.types import HookCallback, HookContext, HookEvent, HookInput, HookJSONOutput
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise MissingExtraError("claude-agent-sdk", "claude-agent-sdk") from exc

__all__ = ["HOOK_EVENTS", "hook_callback", "hook_output", "loopwatch_hooks"]

_log: Final = logging.getLogger(__name__)


def hook_output(response: dict[str, Any] | None) -> HookJSONOutput:
    """A Claude Code hook response (:func:`~loopwatch.adapters.claude_code.response_for`) as the SDK's
    ``HookJSONOutput``: ``continue`` renamed ``continue_``; ``{}`` for no output."""
    if not response:
        return {}
    out = {("continue_" if key == "continue" else key): value for key, value in response.items()}
    return cast("HookJSONOutput", out)


def hook_callback(guard: Guard) -> HookCallback:
    """An async SDK hook callback judging every event it receives with ``guard`` (any of :data:`HOOK_EVENTS`;
    other events are answered with ``{}``)."""

    async def loopwatch_hook(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        try:
            return hook_output(handle(guard, input_data))
        except HookInputError as exc:
            _log.warning("loopwatch: %s; nothing judged", exc)
        except Exception:  # a hook must never break the agent: fail open
            _log.exception("loopwatch: could not judge the %s event", input_data.get("hook_event_name"))
        return {}

    return loopwatch_hook


def loopwatch_hooks(
    guard: Guard | None = None, *, preset: str | Policy = "default"
) -> dict[HookEvent, list[HookMatcher]]:
    """``ClaudeAgentOptions(hooks=...)``: one ``HookMatcher`` (all tools) per event of :data:`HOOK_EVENTS`,
    whose callback judges it with ``guard`` (else a new in-memory :class:`~loopwatch._guard.Guard` with
    ``preset``: a preset's name or a :class:`~loopwatch.core.Policy`; the loopwatch service when
    ``$LOOPWATCH_SERVICE_URL`` is set). All the events share the guard."""
    callback = hook_callback(guard if guard is not None else default_guard(preset))
    return {event: [HookMatcher(matcher=None, hooks=[callback])] for event in HOOK_EVENTS}
