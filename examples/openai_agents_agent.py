"""loopwatch in an OpenAI Agents SDK run, offline: a scripted model stands in for the LLM.

    pip install '.[openai-agents]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/openai_agents_agent.py

Two runs through one ``LoopwatchGuard``:

1. a model that asks for the same search again and again: nudged after the 3rd call (the nudge is shown in
   its next input), refused from the 5th (the tool does not run; the model reads the refusal), stopped at the
   8th with ``LoopStopped``;
2. a model polling a build whose status changes on every poll: progress, never stopped.

No network, no API key: the model is a ``agents.Model`` answering from a script.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import agents
from agents import Agent, Model, ModelResponse, ModelSettings, ModelTracing, Usage, function_tool
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from loopwatch.adapters.openai_agents import LoopStopped, LoopwatchGuard

agents.set_tracing_disabled(True)  # tracing would upload to OpenAI


class ScriptedModel(Model):
    """Answers the n-th model call (from 0) with ``script(n, input_items)``, and prints what loopwatch added."""

    def __init__(self, script: Callable[[int, list[Any]], list[Any]]) -> None:
        self.script = script
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = items[-1]
        if self.calls and isinstance(last, dict) and last.get("role") == "user":
            print(f"    model input ends with a nudge: {last['content']!r}")
        for item in items:
            refused = isinstance(item, dict) and str(item.get("output", "")).startswith("Refused")
            if refused and item["call_id"] == f"call_{self.calls - 1}":
                print(f"    the model reads as the result of {item['call_id']}: {item['output'][:70]!r}...")
        output = self.script(self.calls, items)
        self.calls += 1
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


def call(name: str, args: dict[str, Any], n: int) -> ResponseFunctionToolCall:
    print(f"  model call {n}: {name}({json.dumps(args)})")
    return ResponseFunctionToolCall(type="function_call", call_id=f"call_{n}", name=name, arguments=json.dumps(args))


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


searches: list[str] = []
STAGES = ["queued", "compiling", "linking", "running tests", "packaging", "uploading", "done: success"]
polls: list[str] = []


@function_tool
def search(query: str) -> str:
    """Search the web."""
    searches.append(query)
    return "no results"


@function_tool
def build_status(build_id: str) -> str:
    """The status of a build."""
    polls.append(build_id)
    return f"build {build_id}: {STAGES[len(polls) - 1]}"


def looping(n: int, items: list[Any]) -> list[Any]:
    return [call("search", {"query": "weather in Paris"}, n)]


def polling(n: int, items: list[Any]) -> list[Any]:
    outputs = [i["output"] for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    if outputs and outputs[-1].endswith("done: success"):
        return [say("Build 42 succeeded.")]
    return [call("build_status", {"build_id": "42"}, n)]


def main() -> None:
    lw = LoopwatchGuard(preset="default")

    print("1. the same search again and again")
    agent = Agent(name="looper", instructions="Find the weather.", model=ScriptedModel(looping), tools=[search])
    try:
        lw.run_sync(agent, "What is the weather in Paris?", max_turns=50)
    except LoopStopped as stop:
        print(f"  LoopStopped: status={stop.status} pattern={stop.verdict.pattern} session={stop.session}")
        print(f"  reason: {stop.verdict.reason}")
    print(f"  the search tool ran {len(searches)} times (the refused calls never ran it)\n")

    print("2. polling a build whose status changes")
    agent = Agent(name="poller", instructions="Wait for the build.", model=ScriptedModel(polling), tools=[build_status])
    result = lw.run_sync(agent, "Wait for build 42.", max_turns=30)
    print(f"  final output: {result.final_output!r} after {len(polls)} polls; not stopped")


if __name__ == "__main__":
    main()
