"""The PydanticAI adapter against the real framework (``Agent.run``), with a scripted ``FunctionModel``: no network."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from adapter_support import BUILD_STAGES, RecordingGuard, check_missing_framework
from loopwatch import ConfigError, Guard, LoopwatchError, Message, ToolCall, ToolResult, Usage
from loopwatch.adapters.pydantic_ai import DEFAULT_SESSION, LoopStopped, LoopwatchCapability
from loopwatch.core._verdict import LOOP_DETECTED, Verdict

# -- the scripted model ----------------------------------------------------------------------------------

Script = Callable[[int, list[ModelMessage]], ModelResponse]


class Scripted:
    """A ``FunctionModel`` answering request ``n`` (from 0) with ``script(n, messages)``; records every request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[list[ModelMessage]] = []
        self.emitted: list[str] = []
        self.model = FunctionModel(self._answer)

    def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        response = self.script(len(self.requests) - 1, list(messages))
        self.emitted += [p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart)]
        return response

    def prompts(self, n: int) -> list[str]:
        """The user prompt texts of request ``n``'s last message (where nudges land)."""
        last = self.requests[n][-1]
        assert isinstance(last, ModelRequest)
        return [p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)]


def call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> ModelResponse:
    parts: list[Any] = [TextPart(text)] if text else []
    return ModelResponse(parts=[*parts, ToolCallPart(name, args, tool_call_id=call_id)])


def say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def returns(messages: list[ModelMessage]) -> dict[str, Any]:
    return {
        p.tool_call_id: p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }


def search_agent(model: Scripted, **kwargs: Any) -> tuple[Agent[Any, str], list[str]]:
    ran: list[str] = []
    agent: Agent[Any, str] = Agent(model.model, **kwargs)

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the web."""
        ran.append(query)
        return "no results"

    return agent, ran


# -- (1) the same call again and again: nudge, then block, then stop ---------------------------------------


def test_repeat_nudges_then_blocks_then_stops() -> None:
    model = Scripted(lambda n, _: call("search", {"query": "weather in Paris"}, f"call_{n}"))
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent, ran = search_agent(model, capabilities=[lw])

    with pytest.raises(LoopStopped) as caught:
        lw.run_sync(agent, "What is the weather in Paris?", loop_session="repeat-1")

    stop = caught.value
    assert isinstance(stop, LoopwatchError) and isinstance(stop, RunCancelled)
    assert stop.verdict.action == "stop" and stop.verdict.pattern == "repeat"
    assert stop.status == LOOP_DETECTED and stop.session == "repeat-1"
    assert "LOOP_DETECTED" in str(stop)

    # every call the model made was observed once, with its arguments, in the named session
    calls = guard.calls()
    assert [c.id for c in calls] == model.emitted
    assert all(c.tool == "search" and dict(c.args) == {"query": "weather in Paris"} for c in calls)
    assert guard.actions(ToolCall) == ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]
    assert {s for s, _, _ in guard.seen} == {"repeat-1"}

    # the nudge reached the model on its next request, right after the tool's return, and stays in the history
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and "3 times" in nudge
    assert model.prompts(3) == [nudge]
    assert [n for n in range(len(model.requests)) if nudge in model.prompts(n)] == [3]

    # blocked calls never ran the tool; the model read the refusal as the call's result
    assert len(ran) == 4
    blocks = guard.verdicts("block")
    results = returns(model.requests[-1])
    for index in (4, 5, 6):
        assert results[f"call_{index}"] == blocks[index - 4].message
    assert all(results[f"call_{i}"] == "no results" for i in range(4))
    observed = [e for _, e, _ in guard.seen if isinstance(e, ToolResult)]
    assert [r.id for r in observed] == [f"call_{i}" for i in range(4)]

    # the run ended cleanly after the stopped call (which did not run), its history kept for a resumed run
    history = stop.all_messages()
    assert isinstance(history[-1], ModelResponse) and history[-1].tool_calls[0].tool_call_id == "call_7"
    assert len(model.requests) == 8


# -- (2) an A-B cycle -------------------------------------------------------------------------------------


def test_ab_cycle_is_caught() -> None:
    def script(n: int, _: list[ModelMessage]) -> ModelResponse:
        if n % 2 == 0:
            return call("open_file", {"path": "main.py"}, f"call_{n}")
        return call("run_tests", {"target": "tests/"}, f"call_{n}")

    model = Scripted(script)
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent: Agent[Any, str] = Agent(model.model)
    ran: list[str] = []

    @agent.tool_plain
    def open_file(path: str) -> str:
        """Open a file."""
        ran.append(f"open {path}")
        return "def main():\n    return 1\n"

    @agent.tool_plain
    def run_tests(target: str) -> str:
        """Run the tests."""
        ran.append(f"test {target}")
        return "1 failed: test_main expected 2"

    with pytest.raises(LoopStopped) as caught:
        lw.run_sync(agent, "Fix the failing test.")  # the capability is added for this run

    assert caught.value.verdict.pattern == "cycle"
    assert [c.id for c in guard.calls()] == model.emitted
    actions = guard.actions(ToolCall)
    assert actions == ["ok"] * 5 + ["nudge"] + ["ok"] * 3 + ["block"] * 4 + ["stop"]
    assert len(ran) == actions.count("ok") + actions.count("nudge")
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and any(nudge in model.prompts(n) for n in range(len(model.requests)))


# -- (3) polling with a changing result: never stopped ------------------------------------------------------


def test_polling_with_changing_results_completes() -> None:
    def script(n: int, messages: list[ModelMessage]) -> ModelResponse:
        outputs = list(returns(messages).values())
        if outputs and str(outputs[-1]).endswith("done: success"):
            return say("The build succeeded.")
        return call("build_status", {"build_id": "42"}, f"call_{n}")

    model = Scripted(script)
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent: Agent[Any, str] = Agent(model.model, capabilities=[lw])
    polls: list[int] = []

    @agent.tool_plain
    def build_status(build_id: str) -> str:
        """The status of a build."""
        polls.append(1)
        return f"build {build_id}: {BUILD_STAGES[len(polls) - 1]}"

    result = lw.run_sync(agent, "Wait for build 42.")

    assert result.output == "The build succeeded."
    assert len(polls) == len(BUILD_STAGES)
    assert [c.id for c in guard.calls()] == model.emitted
    assert {v.action for _, _, v in guard.seen} == {"ok"}  # progress: not even a nudge
    assert [e.text for _, e, _ in guard.seen if isinstance(e, Message)] == ["The build succeeded."]


# -- (4) runs do not share state -----------------------------------------------------------------------------


def four_searches_then_answer(n: int, _: list[ModelMessage]) -> ModelResponse:
    return call("search", {"query": "same"}, f"call_{n}") if n < 4 else say("Nothing found.")


def test_two_runs_do_not_share_state() -> None:
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    first, ran_first = search_agent(Scripted(four_searches_then_answer), capabilities=[lw])
    second, ran_second = search_agent(Scripted(four_searches_then_answer), capabilities=[lw])

    assert first.run_sync("find it").output == "Nothing found."  # plain agent.run_sync, capability on the agent
    assert lw.run_sync(second, "find it").output == "Nothing found."

    assert len(ran_first) == len(ran_second) == 4  # with one shared session, the second run would be refused
    assert not guard.verdicts("block")
    sessions = [s for s, _, _ in guard.seen]
    assert len(set(sessions)) == 2 and all(s.startswith(f"{DEFAULT_SESSION}-") for s in sessions)
    assert guard.actions(ToolCall) == ["ok", "ok", "nudge", "ok"] * 2
    assert "sessions=0" in repr(guard)  # a run's fresh session is forgotten when it ends


def test_concurrent_runs_of_one_agent_have_their_own_sessions() -> None:
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent, ran = search_agent(Scripted(lambda n, ms: call("search", {"query": "same"}, f"c{len(ms)}")))

    async def one(i: int) -> str:
        model = Scripted(four_searches_then_answer)
        result = await lw.run(agent, "find it", model=model.model)
        return str(result.output)

    async def main() -> list[str]:
        return list(await asyncio.gather(one(0), one(1)))

    assert asyncio.run(main()) == ["Nothing found."] * 2
    assert len(ran) == 8 and not guard.verdicts("block")
    assert len({s for s, _, _ in guard.seen}) == 2


def test_named_sessions_carry_state_across_runs() -> None:
    ids = itertools.count()

    def two_searches_then_answer(n: int, messages: list[ModelMessage]) -> ModelResponse:
        if len(returns(messages)) < 2:
            return call("search", {"query": "same"}, f"c{next(ids)}")
        return say("Nothing yet.")

    guard = RecordingGuard()
    lw = LoopwatchCapability(guard, session=lambda ctx: f"user-{ctx.deps['user']}")
    agent, ran = search_agent(Scripted(two_searches_then_answer), deps_type=dict)

    assert lw.run_sync(agent, "find it", deps={"user": 7}).output == "Nothing yet."
    assert lw.run_sync(agent, "find it", deps={"user": 7}).output == "Nothing yet."
    assert guard.actions(ToolCall) == ["ok", "ok", "nudge", "ok"]  # the second run went on counting
    assert lw.run_sync(agent, "find it", deps={"user": 8}).output == "Nothing yet."
    assert guard.actions(ToolCall)[4:] == ["ok", "ok"]  # another user: another session
    assert {s for s, _, _ in guard.seen} == {"user-7", "user-8"}
    assert len(ran) == 6

    fixed = LoopwatchCapability(RecordingGuard(), session="fixed")
    with fixed.run_session("mine") as name:
        assert name == "mine"
        agent2, _ = search_agent(Scripted(four_searches_then_answer))
        fixed.run_sync(agent2, "x")
    agent3, _ = search_agent(Scripted(four_searches_then_answer))
    fixed.run_sync(agent3, "x")
    assert isinstance(fixed.guard, RecordingGuard)
    assert [s for s, _, _ in fixed.guard.seen if s != "mine"] == ["fixed"] * (len(fixed.guard.seen) // 2)
    assert fixed.guard.seen[0][0] == "mine" and fixed.guard.seen[-1][0] == "fixed"


# -- the stop without lw.run --------------------------------------------------------------------------------


def test_plain_agent_run_ends_with_run_cancelled_and_stopped_recovers_the_verdict() -> None:
    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent, ran = search_agent(Scripted(lambda n, _: call("search", {"query": "x"}, f"call_{n}")), capabilities=[lw])

    with pytest.raises(RunCancelled) as caught:
        agent.run_sync("go")
    assert not isinstance(caught.value, LoopStopped)
    stop = lw.stopped(caught.value)
    assert isinstance(stop, LoopStopped) and stop.verdict == guard.verdicts("stop")[0]
    assert stop.run_id == caught.value.run_id and stop.all_messages() == caught.value.all_messages()
    assert lw.stopped(caught.value) is None  # given out once
    assert lw.stopped(RunCancelled("someone else's")) is None
    assert lw.stopped(stop) is stop
    assert len(ran) == 4
    assert "sessions=0" in repr(guard)  # the stopped run's fresh session was forgotten too


# -- details ------------------------------------------------------------------------------------------------


def test_thought_errors_and_messages_are_observed() -> None:
    def script(n: int, _: list[ModelMessage]) -> ModelResponse:
        if n == 0:
            return call("search", {"query": "q"}, "call_0", text="Let me search.")
        if n == 1:
            return call("explode", {}, "call_1")
        return say("Done.")

    guard = RecordingGuard()
    lw = LoopwatchCapability(guard)
    agent, _ = search_agent(Scripted(script))

    @agent.tool_plain
    def explode() -> str:
        """Always fails."""
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):  # a tool's error goes on, after it was observed
        lw.run_sync(agent, "go")
    events = [e for _, e, _ in guard.seen if not isinstance(e, Usage)]  # FunctionModel estimates token counts
    assert events[0] == ToolCall("search", {"query": "q"}, id="call_0", thought="Let me search.")
    assert isinstance(events[1], ToolResult) and events[1].output == "no results"
    assert events[2] == ToolCall("explode", {}, id="call_1")
    assert isinstance(events[3], ToolResult) and events[3].is_error and "boom" in events[3].output

    guard2 = RecordingGuard()
    agent2, _ = search_agent(Scripted(lambda n, _: say("Done.")))
    assert LoopwatchCapability(guard2).run_sync(agent2, "go").output == "Done."
    assert [e for _, e, _ in guard2.seen if not isinstance(e, Usage)] == [Message("assistant", "Done.")]
    assert any(isinstance(e, Usage) and e.input_tokens for _, e, _ in guard2.seen)


def test_configuration_errors_and_repr() -> None:
    with pytest.raises(ConfigError):
        LoopwatchCapability(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchCapability(session=42)  # type: ignore[arg-type]
    lw = LoopwatchCapability(preset="default")
    assert "LoopwatchCapability" in repr(lw) and lw.run_session_name == DEFAULT_SESSION
    assert lw != LoopwatchCapability() and len({lw, lw}) == 1
    stop = LoopStopped(Verdict(action="stop", status="MAX_ITERATIONS", reason="too many"), "s")
    assert stop.status == "MAX_ITERATIONS" and "too many" in str(stop) and stop.all_messages() == []


# -- without PydanticAI --------------------------------------------------------------------------------------


def test_loopwatch_imports_without_pydantic_ai_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("pydantic_ai", "pydantic_ai", "pydantic-ai")
