"""A PydanticAI agent stuck in a loop, guarded by loopwatch: runs offline with PydanticAI's ``FunctionModel``.

    pip install '.[pydantic-ai]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/pydantic_ai_agent.py

The scripted model asks for the same search again and again. loopwatch nudges it (a message the model reads
on its next request), then refuses the call (the tool does not run; the refusal is the tool's result), then
ends the run: ``lw.run_sync`` raises ``LoopStopped``, which carries the verdict and the run's history.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from loopwatch import Guard
from loopwatch.adapters.pydantic_ai import LoopStopped, LoopwatchCapability


def same_search_forever(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("search", {"query": "flaky test"}, tool_call_id=f"call-{len(messages)}")])


searches_run = 0
guard = Guard(preset="default", listeners=[lambda record: print(f"  [audit] {record.get('event')}")])
lw = LoopwatchCapability(guard)
agent = Agent(FunctionModel(same_search_forever), capabilities=[lw])


@agent.tool_plain
def search(query: str) -> str:
    """Search the issue tracker."""
    global searches_run
    searches_run += 1
    return "No results."


def main() -> None:
    try:
        result = lw.run_sync(agent, "Why is the test flaky?")
        print(f"answer: {result.output}")
        return
    except LoopStopped as stop:
        for message in stop.all_messages():
            for part in message.parts:
                if isinstance(message, ModelResponse) and isinstance(part, ToolCallPart):
                    print(f"model calls: {part.tool_name}({part.args_as_dict()})")
                elif isinstance(message, ModelRequest) and isinstance(part, ToolReturnPart):
                    print(f"tool: {part.content}")
                elif isinstance(part, UserPromptPart):
                    print(f"user: {part.content}")
        print(f"\nsearch ran {searches_run} times; the run ended with: {stop.status}")
        print(f"pattern={stop.verdict.pattern} count={stop.verdict.count} reason={stop.verdict.reason}")


if __name__ == "__main__":
    main()
