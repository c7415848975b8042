"""loopwatch in a Claude Agent SDK agent: ``ClaudeAgentOptions(hooks=loopwatch_hooks())``.

    pip install '.[claude-agent-sdk]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/claude_agent_sdk_agent.py "fix the failing test in tests/test_x.py"   # a real agent
    python examples/claude_agent_sdk_agent.py --offline                                  # no CLI, no login

A real run needs what the SDK needs: the Claude Code CLI (bundled with the SDK) and an API login
(``ANTHROPIC_API_KEY``, or ``claude`` logged in). loopwatch's hooks run inside it: a call repeated without a
new result gets a nudge (``additionalContext``), then is denied (``permissionDecision: "deny"``), then the
run is stopped (``continue_: False``: the SDK ends the turn and the ``ResultMessage`` follows).

``--offline`` calls the same hook callbacks with the inputs Claude Code would send for an agent running
``pytest`` again and again on a test that keeps failing, and prints what each callback answers.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage
from claude_agent_sdk.types import HookContext, HookJSONOutput, PostToolUseHookInput, PreToolUseHookInput

from loopwatch.adapters.claude_agent_sdk import loopwatch_hooks


async def run_agent(task: str) -> None:
    options = ClaudeAgentOptions(hooks=loopwatch_hooks(preset="default"), allowed_tools=["Bash", "Read", "Edit"])
    async with ClaudeSDKClient(options) as client:
        await client.query(task)
        async for message in client.receive_response():
            print(type(message).__name__, getattr(message, "content", "") or "")
            if isinstance(message, ResultMessage):
                print("result:", message.subtype, message.result)


def _show(label: str, answer: HookJSONOutput) -> str:
    """Print what a callback answered; returns ``stop``, ``deny``, ``nudge`` or ``ok``."""
    data: dict[str, Any] = dict(answer)
    specific: dict[str, Any] = data.get("hookSpecificOutput") or {}
    if data.get("continue_") is False:
        print(f"{label}: STOP the run: {data['stopReason']}")
        return "stop"
    if specific.get("permissionDecision") == "deny":
        print(f"{label}: DENY: {specific['permissionDecisionReason'][:100]}...")
        return "deny"
    if specific.get("additionalContext"):
        print(f"{label}: NUDGE: {' '.join(specific['additionalContext'].split())[:100]}...")
        return "nudge"
    print(f"{label}: ok")
    return "ok"


async def offline() -> None:
    hooks = loopwatch_hooks(preset="default")
    context: HookContext = {"signal": None}
    command = {"command": "pytest tests/test_x.py"}
    response = {"stdout": "FAILED tests/test_x.py::test_a - assert 1 == 2", "stderr": "", "interrupted": False}
    for turn in range(1, 11):
        use_id = f"toolu_{turn:02d}"
        pre_input = PreToolUseHookInput(
            session_id="demo",
            transcript_path="/tmp/demo.jsonl",
            cwd="/repo",
            hook_event_name="PreToolUse",
            tool_name="Bash",
            tool_input=command,
            tool_use_id=use_id,
        )
        answer = await hooks["PreToolUse"][0].hooks[0](pre_input, use_id, context)
        verdict = _show(f"call {turn:2d} PreToolUse ", answer)
        if verdict == "stop":
            break
        if verdict == "deny":
            continue  # the tool does not run: no PostToolUse
        post_input = PostToolUseHookInput(
            session_id="demo",
            transcript_path="/tmp/demo.jsonl",
            cwd="/repo",
            hook_event_name="PostToolUse",
            tool_name="Bash",
            tool_input=command,
            tool_response=response,
            tool_use_id=use_id,
        )
        answer = await hooks["PostToolUse"][0].hooks[0](post_input, use_id, context)
        if _show(f"call {turn:2d} PostToolUse", answer) == "stop":
            break


if __name__ == "__main__":
    if sys.argv[1:] == ["--offline"]:
        asyncio.run(offline())
    else:
        asyncio.run(run_agent(" ".join(sys.argv[1:]) or "Run the test suite and fix what fails."))
