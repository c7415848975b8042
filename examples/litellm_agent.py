"""An agent stuck in a loop behind LiteLLM, guarded by loopwatch: runs offline with a scripted LiteLLM provider.

    pip install '.[litellm]'          # from a checkout of loopwatch (other ways: docs/install.md)
    python examples/litellm_agent.py

The agent below is any agent you cannot change: it sends its whole history to ``litellm.acompletion`` on every
turn and runs whatever tool the model asks for. The scripted model asks for the same search again and again.
loopwatch, registered once in ``litellm.callbacks``, reads each request's new messages and each response:
it adds a nudge to the next request, then removes the repeated call from the model's answer (the tool does not
run; the answer says why), then rejects the request: ``acompletion`` raises ``LoopStopped``, which carries the
verdict. In the LiteLLM proxy the same class is a guardrail (see ``loopwatch.adapters.litellm``).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no fetch of the model cost map

import litellm
from litellm import CustomLLM, ModelResponse
from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Message

from loopwatch import Guard
from loopwatch.adapters.litellm import MARK, LoopStopped, LoopwatchGuardrail


class SameSearchForever(CustomLLM):  # type: ignore[misc]
    """A LiteLLM provider whose model always asks for the same search."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0

    async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        self.turn += 1
        last = messages[-1]
        if isinstance(last, dict) and str(last.get("content", "")).startswith(MARK):
            print(f"  model reads: {last['content'][:100]}...")
        call = ChatCompletionMessageToolCall(
            id=f"call_{self.turn}", type="function", function=Function(name="search", arguments='{"q": "flaky test"}')
        )
        message = Message(role="assistant", content="Let me search.", tool_calls=[call])
        return ModelResponse(choices=[Choices(message=message, finish_reason="tool_calls", index=0)], model=model)


searches_run = 0


def search(q: str) -> str:
    global searches_run
    searches_run += 1
    return "No results."


async def agent(task: str) -> None:
    """A plain tool-calling loop: it knows nothing of loopwatch."""
    history: list[Any] = [{"role": "user", "content": task}]
    for turn in range(1, 30):
        response = await litellm.acompletion(model="scripted/loop", messages=history)
        message = response.choices[0].message
        history.append(message.model_dump(exclude_none=True))
        calls = message.tool_calls or []
        print(f"turn {turn}: " + (", ".join(f"{c.function.name}({c.function.arguments})" for c in calls) or "-"))
        if not calls:
            print(f"  answer: {message.content}")
        for call in calls:
            output = search(**json.loads(call.function.arguments))
            history.append({"role": "tool", "tool_call_id": call.id, "content": output})


def main() -> None:
    litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": SameSearchForever()}]
    guard = Guard(preset="default", listeners=[lambda record: print(f"  [audit] {record.get('event')}")])
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    try:
        asyncio.run(agent("Why is the test flaky?"))
    except LoopStopped as stop:
        print(f"\nsearch ran {searches_run} times; the request was rejected with: {stop.status}")
        print(f"pattern={stop.verdict.pattern} count={stop.verdict.count} reason={stop.verdict.reason}")


if __name__ == "__main__":
    main()
