"""The OpenAI Agents SDK adapter against the real SDK (``Runner.run``), with a scripted model: no network."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import agents
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    function_tool,
)
from agents import Usage as SdkUsage
from agents.run_config import CallModelData, ModelInputData
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import loopwatch
from adapter_support import BUILD_STAGES, RecordingGuard, check_missing_framework
from loopwatch import ConfigError, LoopwatchError, Message, ToolCall, ToolResult
from loopwatch.adapters.openai_agents import DEFAULT_SESSION, LoopStopped, LoopwatchGuard, LoopwatchHooks
from loopwatch.core._verdict import LOOP_DETECTED, Verdict

agents.set_tracing_disabled(True)


# -- the scripted model ----------------------------------------------------------------------------------

Step = list[Any]  # the output items of one model response


def call(name: str, args: Mapping[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=call_id, name=name, arguments=json.dumps(args))


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{abs(hash(text)) % 10**8}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers model call ``n`` (from 0) with ``script(n, input)``; records every input it receives."""

    def __init__(self, script: Callable[[int, list[Any]], Step]) -> None:
        self.script = script
        self.inputs: list[list[Any]] = []
        self.emitted: list[str] = []  # the call ids of every function call it produced

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
        self.inputs.append(items)
        output = self.script(len(self.inputs) - 1, items)
        self.emitted += [item.call_id for item in output if isinstance(item, ResponseFunctionToolCall)]
        return ModelResponse(output=output, usage=SdkUsage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def text_of(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    return content if isinstance(content, str) else ""


def outputs_of(items: list[Any]) -> dict[str, str]:
    return {i["call_id"]: i["output"] for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"}


def make_search() -> tuple[FunctionTool, list[str]]:
    ran: list[str] = []

    @function_tool
    def search(query: str) -> str:
        """Search the web."""
        ran.append(query)
        return "no results"

    return search, ran


# -- (1) the same call again and again: nudge, then block, then stop ---------------------------------------


def test_repeat_nudges_then_blocks_then_stops() -> None:
    search, ran = make_search()
    model = ScriptedModel(lambda n, _: [call("search", {"query": "weather in Paris"}, f"call_{n}")])
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    agent = Agent(name="looper", model=model, tools=[search])

    with pytest.raises(LoopStopped) as caught:
        lw.run_sync(agent, "What is the weather in Paris?", max_turns=50, loop_session="repeat-1")

    stop = caught.value
    assert isinstance(stop, LoopwatchError) and isinstance(stop, agents.AgentsException)
    assert isinstance(stop, loopwatch.LoopStopped)  # one except catches the stop of any framework
    assert stop.verdict.action == "stop" and stop.verdict.pattern == "repeat"
    assert stop.status == LOOP_DETECTED and stop.session == "repeat-1"
    assert "LOOP_DETECTED" in str(stop)

    # the guard saw every call the model made, once each, with its arguments
    calls = guard.calls()
    assert [c.id for c in calls] == model.emitted
    assert all(c.tool == "search" and dict(c.args) == {"query": "weather in Paris"} for c in calls)
    actions = guard.actions(ToolCall)
    assert actions == ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]
    assert {s for s, _, _ in guard.seen} == {"repeat-1"}

    # the nudge reached the model on its next turn, as a user message, and on that turn only
    nudge = guard.verdicts("nudge")[0]
    assert nudge.message and "3 times" in nudge.message
    nudged = [n for n, items in enumerate(model.inputs) if any(nudge.message in text_of(i) for i in items)]
    assert nudged == [3]
    assert model.inputs[3][-1] == {"role": "user", "content": nudge.message}

    # blocked calls never ran the tool; the model read the refusal as the call's output
    assert len(ran) == 4
    blocks = guard.verdicts("block")
    outputs = outputs_of(model.inputs[-1])
    for index in (4, 5, 6):
        assert outputs[f"call_{index}"] == blocks[index - 4].message
    assert all(outputs[f"call_{i}"] == "no results" for i in range(4))
    # a refused call is a call without a result: only the four real outputs were fed as results
    results = [e for _, e, _ in guard.seen if isinstance(e, ToolResult)]
    assert [r.id for r in results] == [f"call_{i}" for i in range(4)]
    assert all(r.output == "no results" for r in results)


# -- (2) an A-B cycle -------------------------------------------------------------------------------------


def test_ab_cycle_is_caught() -> None:
    ran: list[str] = []

    @function_tool
    def open_file(path: str) -> str:
        """Open a file."""
        ran.append(f"open {path}")
        return "def main():\n    return 1\n"

    @function_tool
    def run_tests(target: str) -> str:
        """Run the tests."""
        ran.append(f"test {target}")
        return "1 failed: test_main expected 2"

    def script(n: int, _: list[Any]) -> Step:
        if n % 2 == 0:
            return [call("open_file", {"path": "main.py"}, f"call_{n}")]
        return [call("run_tests", {"target": "tests/"}, f"call_{n}")]

    model = ScriptedModel(script)
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    agent = Agent(name="cycler", model=model, tools=[open_file, run_tests])

    with pytest.raises(LoopStopped) as caught:
        lw.run_sync(agent, "Fix the failing test.", max_turns=60)

    assert caught.value.verdict.pattern == "cycle"
    assert [c.id for c in guard.calls()] == model.emitted
    actions = guard.actions(ToolCall)
    assert actions == ["ok"] * 5 + ["nudge"] + ["ok"] * 3 + ["block"] * 4 + ["stop"]
    # every refused call left the tool counters alone
    assert len(ran) == actions.count("ok") + actions.count("nudge")
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and any(nudge in text_of(i) for items in model.inputs for i in items)


# -- (3) polling with a changing result: never stopped ------------------------------------------------------


def test_polling_with_changing_results_completes() -> None:
    polls: list[int] = []

    @function_tool
    def build_status(build_id: str) -> str:
        """The status of a build."""
        polls.append(1)
        return f"build {build_id}: {BUILD_STAGES[len(polls) - 1]}"

    def script(n: int, items: list[Any]) -> Step:
        outputs = list(outputs_of(items).values())
        if outputs and outputs[-1].endswith("done: success"):
            return [say("The build succeeded.")]
        return [call("build_status", {"build_id": "42"}, f"call_{n}")]

    model = ScriptedModel(script)
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    agent = Agent(name="poller", model=model, tools=[build_status])

    result = lw.run_sync(agent, "Wait for build 42.", max_turns=30)

    assert result.final_output == "The build succeeded."
    assert len(polls) == len(BUILD_STAGES)
    assert [c.id for c in guard.calls()] == model.emitted
    assert {v.action for _, _, v in guard.seen} == {"ok"}  # progress: not even a nudge
    # the final answer was observed as an assistant message
    assert [e.text for _, e, _ in guard.seen if isinstance(e, Message)] == ["The build succeeded."]


# -- (4) runs do not share state -----------------------------------------------------------------------------


def four_searches_then_answer(n: int, _: list[Any]) -> Step:
    return [call("search", {"query": "same"}, f"call_{n}")] if n < 4 else [say("Nothing found.")]


def test_two_runs_do_not_share_state() -> None:
    search, ran = make_search()
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    first = Agent(name="a", model=ScriptedModel(four_searches_then_answer), tools=[search])
    second = Agent(name="b", model=ScriptedModel(four_searches_then_answer), tools=[search])

    assert lw.run_sync(first, "find it", max_turns=20).final_output == "Nothing found."
    assert lw.run_sync(second, "find it", max_turns=20).final_output == "Nothing found."

    assert len(ran) == 8  # with one shared session, the second run's calls would have been refused
    assert not guard.verdicts("block")
    sessions = [s for s, _, _ in guard.seen]
    assert len(set(sessions)) == 2 and all(s.startswith(f"{DEFAULT_SESSION}-") for s in sessions)
    assert guard.actions(ToolCall) == ["ok", "ok", "nudge", "ok"] * 2


def test_concurrent_runs_by_hand_with_context_objects() -> None:
    """Wired by hand (Runner.run, no run_session): one session per run's context object, even concurrently."""
    search, ran = make_search()
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    config = RunConfig(call_model_input_filter=lw.input_filter)

    class Ctx:
        pass

    async def main() -> None:
        runs = [
            Runner.run(
                lw.protect(Agent(name=f"r{i}", model=ScriptedModel(four_searches_then_answer), tools=[search])),
                "find it",
                context=Ctx(),
                hooks=lw.hooks,
                run_config=config,
            )
            for i in range(2)
        ]
        await asyncio.gather(*runs)

    asyncio.run(main())
    assert len(ran) == 8 and not guard.verdicts("block")
    assert len({s for s, _, _ in guard.seen}) == 2


def test_fixed_session_and_run_session() -> None:
    search, _ = make_search()
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard, session="fixed")
    agent = lw.protect(Agent(name="a", model=ScriptedModel(four_searches_then_answer), tools=[search]))
    Runner.run_sync(agent, "x", hooks=lw.hooks, run_config=lw.run_config())
    assert {s for s, _, _ in guard.seen} == {"fixed"}
    with lw.run_session("mine") as name:
        assert name == "mine"
        agent = Agent(name="b", model=ScriptedModel(four_searches_then_answer), tools=[search])
        Runner.run_sync(lw.protect(agent), "x", hooks=lw.hooks, run_config=lw.run_config())
    assert {s for s, _, _ in guard.seen} == {"fixed", "mine"}
    assert lw.session_of(None) == "fixed"
    assert LoopwatchGuard(guard, session=lambda ctx: f"user-{ctx['user']}").session_of({"user": 7}) == "user-7"
    assert LoopwatchGuard(guard).session_of(None) == DEFAULT_SESSION


# -- details ------------------------------------------------------------------------------------------------


def test_thought_goes_with_the_calls_and_text_alone_is_a_message() -> None:
    search, _ = make_search()

    def script(n: int, _: list[Any]) -> Step:
        if n == 0:
            return [say("Let me search."), call("search", {"query": "q"}, "call_0")]
        return [say("Done.")]

    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    lw.run_sync(Agent(name="a", model=ScriptedModel(script), tools=[search]), "go")
    events = [e for _, e, _ in guard.seen]
    assert events[0] == ToolCall("search", {"query": "q"}, id="call_0", thought="Let me search.")
    assert isinstance(events[1], ToolResult) and events[1].output == "no results"
    assert events[2] == Message("assistant", "Done.")


def test_unprotected_tool_is_observed_in_on_tool_start() -> None:
    """Without the guardrail the hooks still see calls and results; a block can no longer refuse (nudge)."""
    search, ran = make_search()
    model = ScriptedModel(lambda n, _: [call("search", {"query": "x"}, f"call_{n}")])
    guard = RecordingGuard()
    lw = LoopwatchGuard(guard)
    agent = Agent(name="a", model=model, tools=[search])
    with pytest.raises(LoopStopped), lw.run_session("bare"):
        Runner.run_sync(agent, "go", hooks=lw.hooks, run_config=lw.run_config(), max_turns=50)
    assert search.tool_input_guardrails is None
    assert [c.id for c in guard.calls()] == model.emitted
    assert len(ran) == 7  # the stop (8th call) is raised before the tool runs
    refusal = guard.verdicts("block")[0].message
    assert refusal and any(refusal in text_of(i) for items in model.inputs for i in items)


def test_protect_is_idempotent_and_walks_handoffs() -> None:
    search, _ = make_search()
    other, _ = make_search()
    lw = LoopwatchGuard()
    helper = Agent(name="helper", tools=[other])
    agent = Agent(name="main", tools=[search], handoffs=[helper])
    assert lw.protect(agent) is agent
    lw.protect(agent)
    lw.protect([search, other])
    assert search.tool_input_guardrails == [lw.guardrail]
    assert other.tool_input_guardrails == [lw.guardrail]
    with pytest.raises(ConfigError):
        lw.protect(42)


def test_run_config_chains_an_existing_filter_and_hooks_are_checked() -> None:
    search, _ = make_search()
    seen: list[int] = []

    def mine(data: CallModelData[Any]) -> ModelInputData:
        seen.append(len(data.model_data.input))
        return data.model_data

    model = ScriptedModel(lambda n, _: [call("search", {"query": "x"}, f"call_{n}")] if n < 4 else [say("ok")])
    lw = LoopwatchGuard()
    config = lw.run_config(RunConfig(call_model_input_filter=mine, workflow_name="w"))
    assert config.workflow_name == "w"
    assert lw.run_config(lw.run_config()).call_model_input_filter == lw.input_filter
    result = lw.run_sync(Agent(name="a", model=model, tools=[search]), "go", run_config=config)
    assert result.final_output == "ok" and len(seen) == 5
    assert any(text_of(items[-1]).startswith("You have called search") for items in model.inputs)

    class MyHooks(LoopwatchHooks):
        pass

    lw.run_sync(Agent(name="b", model=ScriptedModel(lambda n, _: [say("hi")]), tools=[]), "x", hooks=MyHooks(lw))
    with pytest.raises(ConfigError):
        lw.run_sync(Agent(name="c", model=model, tools=[]), "x", hooks=agents.RunHooks())


def test_pending_nudges_are_delivered_once_with_the_chosen_role() -> None:
    lw = LoopwatchGuard(session="s", nudge_role="developer")
    nudge = Verdict(action="nudge", message="Try something else.")
    assert lw._act("s", nudge, can_block=True) is None
    assert lw._act("s", nudge, can_block=True) is None  # the same message is queued once
    assert lw._act("s", Verdict(action="block", message="Refused."), can_block=True) == "Refused."
    assert lw._act("s", Verdict(action="block", message="Late."), can_block=False) is None  # nothing to refuse
    assert lw.pending("s") == ["Try something else.", "Late."]
    data = CallModelData(model_data=ModelInputData(input=[], instructions=None), agent=Agent(name="a"), context=None)
    out = lw.input_filter(data)
    assert out.input == [{"role": "developer", "content": "Try something else.\n\nLate."}]
    assert lw.pending("s") == []
    assert lw.input_filter(data).input == out.input  # nothing more appended
    with pytest.raises(LoopStopped) as caught:
        lw._act("s", Verdict(action="stop", status="MAX_ITERATIONS", reason="too many"), can_block=True)
    assert caught.value.status == "MAX_ITERATIONS" and "too many" in str(caught.value)
    with pytest.raises(ConfigError):
        LoopwatchGuard(nudge_role="tool")  # type: ignore[arg-type]


# -- without the SDK -----------------------------------------------------------------------------------------


def test_loopwatch_imports_without_the_sdk_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("agents", "openai_agents", "openai-agents")
