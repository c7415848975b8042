"""A smolagents agent stuck in a loop, guarded by loopwatch: runs offline with a scripted smolagents ``Model``.

    pip install '.[smolagents]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/smolagents_agent.py

The scripted model asks for the same search again and again. loopwatch nudges it (a note appended to the step's
observations, which the model reads on its next turn), then refuses the call (the tool does not run; the refusal
is the call's observation), then ends the run: ``agent.run`` raises ``LoopStopped``, which carries the verdict.
"""

from __future__ import annotations

from typing import Any

from smolagents import ActionStep, ChatMessage, Model, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import LogLevel

from loopwatch import Guard
from loopwatch.adapters.smolagents import LoopStopped, LoopwatchAgent


class SameSearchForever(Model):  # type: ignore[misc]
    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        call = ChatMessageToolCall(
            ChatMessageToolCallFunction(arguments={"query": "flaky test"}, name="search"), id="call", type="function"
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content="Let me search.", tool_calls=[call])


searches_run = 0


@tool
def search(query: str) -> str:
    """Search the issue tracker.

    Args:
        query: what to look for.
    """
    global searches_run
    searches_run += 1
    return "No results."


def main() -> None:
    guard = Guard(preset="default", listeners=[lambda record: print(f"  [audit] {record.get('event')}")])
    agent = LoopwatchAgent(
        tools=[search],
        model=SameSearchForever(model_id="scripted"),
        loopwatch_guard=guard,
        verbosity_level=LogLevel.OFF,
    )
    try:
        answer = agent.run("Why is the test flaky?")
        print(f"answer: {answer}")
        return
    except LoopStopped as stop:
        for step in agent.memory.steps:
            if isinstance(step, ActionStep):
                calls = ", ".join(f"{c.name}({c.arguments})" for c in step.tool_calls or [])
                print(f"step {step.step_number}: {calls}\n  observation: {step.observations}")
        print(f"\nsearch ran {searches_run} times; the run ended with: {stop.status}")
        print(f"pattern={stop.verdict.pattern} count={stop.verdict.count} reason={stop.verdict.reason}")


if __name__ == "__main__":
    main()
