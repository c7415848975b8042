"""A LangChain v1 agent stuck in a loop, guarded by loopwatch: runs offline with LangChain's fake chat model.

    pip install '.[langchain]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/langchain_agent.py

The fake model asks for the same search again and again. loopwatch nudges it (a message the model reads on
its next turn), then refuses the call (the tool does not run; the refusal is the tool's result), then ends
the run: the stop verdict is in the final state (``stop_verdict(result)``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from loopwatch import Guard
from loopwatch.adapters.langchain import LoopwatchMiddleware, stop_verdict


class FakeToolCallingModel(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools (it answers from its script whatever they are)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolCallingModel:
        return self


def same_search_forever() -> Iterator[AIMessage]:
    for n in itertools.count(1):
        yield AIMessage(content="", tool_calls=[{"name": "search", "args": {"query": "flaky test"}, "id": f"call-{n}"}])


searches_run = 0


@tool
def search(query: str) -> str:
    """Search the issue tracker."""
    global searches_run
    searches_run += 1
    return "No results."


def main() -> None:
    guard = Guard(preset="default", listeners=[lambda record: print(f"  [audit] {record.get('event')}")])
    agent = create_agent(
        FakeToolCallingModel(messages=same_search_forever()),
        [search],
        middleware=[LoopwatchMiddleware(guard)],
    )
    result = agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]}, {"recursion_limit": 100})

    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            print(f"tool ({message.status}): {message.content}")
        elif isinstance(message, AIMessage) and message.tool_calls:
            print(f"model calls: {message.tool_calls[0]['name']}({message.tool_calls[0]['args']})")
        else:
            print(f"{message.type}: {message.content}")

    verdict = stop_verdict(result)
    print(f"\nsearch ran {searches_run} times; the run ended with: {verdict.status if verdict else 'no stop'}")
    if verdict is not None:
        print(f"pattern={verdict.pattern} count={verdict.count} reason={verdict.reason}")


if __name__ == "__main__":
    main()
