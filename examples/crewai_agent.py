"""A CrewAI crew stuck in a loop, guarded by loopwatch: runs offline with a scripted CrewAI ``BaseLLM``.

    pip install '.[crewai]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/crewai_agent.py

The scripted model asks for the same search again and again. CrewAI answers the repeats itself ("I tried reusing
the same input...") but lets the agent go on. loopwatch nudges the model (a message added to its next call), then
refuses the call (the tool does not run; the model reads loopwatch's reason), then ends the run: ``lw.kickoff``
raises ``LoopStopped``, which carries the verdict. (CrewAI 1.6 prints a few error lines of its own as the run ends:
it retries the stopped task, and each retry is refused at once.)
"""

from __future__ import annotations

import os
from typing import Any

# an offline demo: no telemetry, no tracing (nor CrewAI's first-run prompt about it), no price-list download
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("CREWAI_TESTING", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

from loopwatch import Guard
from loopwatch.adapters.crewai import LoopStopped, LoopwatchCrewAI


class SameSearchForever(BaseLLM):  # type: ignore[misc]
    """Answers every request with the same search, in CrewAI's text (ReAct) format."""

    def __init__(self) -> None:
        super().__init__(model="scripted")
        self.requests: list[list[dict[str, str]]] = []

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.requests.append([dict(m) for m in messages] if isinstance(messages, list) else [])
        return 'Thought: Let me search the tracker.\nAction: search\nAction Input: {"query": "flaky test"}'

    def supports_function_calling(self) -> bool:
        return False


searches_run = 0


@tool("search")
def search(query: str) -> str:
    """Search the issue tracker."""
    global searches_run
    searches_run += 1
    return "No results."


def main() -> None:
    llm = SameSearchForever()
    agent = Agent(
        role="maintainer", goal="find why the test is flaky", backstory="a maintainer", llm=llm, tools=[search]
    )
    task = Task(description="Why is the test flaky?", expected_output="the cause", agent=agent)
    crew = Crew(agents=[agent], tasks=[task])

    guard = Guard(preset="default", listeners=[lambda record: print(f"  [audit] {record.get('event')}")])
    try:
        result = LoopwatchCrewAI(guard).kickoff(crew)
        print(f"answer: {result.raw}")
        return
    except LoopStopped as stop:
        last = llm.requests[-1] if llm.requests else []
        print("\nthe model's last request ended with:")
        for message in last[-4:]:
            print(f"  {message.get('role')}: {message.get('content', '').strip()[:300]}")
        print(f"\nthe model was called {len(llm.requests)} times; search ran {searches_run} time(s)")
        print(f"the run ended with: {stop.status}")
        print(f"pattern={stop.verdict.pattern} count={stop.verdict.count} reason={stop.verdict.reason}")


if __name__ == "__main__":
    main()
