"""An AutoGen AgentChat team stuck in a loop, guarded by loopwatch: runs offline with ``ReplayChatCompletionClient``.

    pip install '.[autogen]' 'autogen-ext==0.7.5'   # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/autogen_agent.py

The scripted model asks for the same search again and again. loopwatch nudges it (a message the model reads
on its next request), then refuses the call (the tool does not run; the refusal is the tool's result), then
ends the run: the team's ``TaskResult.stop_reason`` starts with ``"loopwatch: LOOP_DETECTED"``, and
``lw.stopped(result)`` gives the verdict.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import ToolCallExecutionEvent, ToolCallRequestEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage, UserMessage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

from loopwatch.adapters.autogen import STOP_SOURCE, LoopwatchAutoGen

logging.getLogger("autogen_ext").setLevel(logging.ERROR)

MODEL_INFO: Any = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}

searches_run = 0


def search(query: str) -> str:
    """Search the issue tracker."""
    global searches_run
    searches_run += 1
    return "No results."


def same_search(n: int) -> CreateResult:
    call = FunctionCall(id=f"call-{n}", name="search", arguments='{"query": "flaky test"}')
    return CreateResult(
        finish_reason="function_calls",
        content=[call],
        usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
        cached=False,
    )


async def main() -> None:
    lw = LoopwatchAutoGen(preset="default")
    model = ReplayChatCompletionClient([same_search(n) for n in range(50)], model_info=MODEL_INFO)
    context = lw.model_context()
    agent = AssistantAgent(
        "coder",
        model,
        workbench=lw.workbench([FunctionTool(search, description="Search the issue tracker.")]),
        model_context=context,
    )
    team = RoundRobinGroupChat([agent], termination_condition=lw.termination() | MaxMessageTermination(100))
    result = await lw.run(team, "Why is the test flaky?")

    for message in result.messages:
        if isinstance(message, ToolCallRequestEvent):
            print(f"model calls: {', '.join(f'{c.name}({c.arguments})' for c in message.content)}")
        elif isinstance(message, ToolCallExecutionEvent):
            print(f"tool: {' | '.join(r.content for r in message.content)}")
    nudges = [m.content for m in await context.get_messages() if isinstance(m, UserMessage) and m.source == STOP_SOURCE]
    print(f"\nnudges the model read: {len(nudges)}")
    print(f"search ran {searches_run} times; stop_reason: {result.stop_reason}")
    stop = lw.stopped(result)
    if stop is not None:
        print(f"status={stop.status} pattern={stop.verdict.pattern} count={stop.verdict.count}")


if __name__ == "__main__":
    asyncio.run(main())
