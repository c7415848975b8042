"""The smolagents adapter against the real framework (``ToolCallingAgent.run``), a scripted ``Model``: no network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("smolagents", reason="the smolagents extra is not installed")

from smolagents import ActionStep, ChatMessage, Model, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import LogLevel
from smolagents.utils import AgentError

from adapter_support import RecordingGuard, check_missing_framework
from loopwatch import ConfigError, Guard, LoopwatchError, ToolCall, ToolResult
from loopwatch.adapters.smolagents import LoopStopped, LoopwatchAgent, LoopwatchCallback
from loopwatch.core._verdict import LOOP_DETECTED

# -- the scripted model ----------------------------------------------------------------------------------

Script = Callable[[int], tuple[str, dict[str, Any]]]


class Scripted(Model):  # type: ignore[misc]
    """A smolagents ``Model`` answering request ``n`` (from 0) with a call ``script(n)``; records every input."""

    def __init__(self, script: Script) -> None:
        super().__init__(model_id="scripted")
        self.script = script
        self.inputs: list[str] = []

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        self.inputs.append(_text(messages))
        n = len(self.inputs) - 1
        name, args = self.script(n)
        call = ChatMessageToolCall(
            ChatMessageToolCallFunction(arguments=args, name=name), id=f"call_{n}", type="function"
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"thinking {n}", tool_calls=[call])


def _text(messages: list[Any]) -> str:
    out = []
    for m in messages:
        content = m.content if hasattr(m, "content") else m.get("content")
        if isinstance(content, list):
            out += [str(part.get("text", "")) for part in content if isinstance(part, dict)]
        elif content:
            out.append(str(content))
    return "\n".join(out)


def tools(ran: list[str], results: Callable[[], str] | None = None) -> list[Any]:
    @tool
    def search(query: str) -> str:
        """Search the web.

        Args:
            query: what to look for.
        """
        ran.append(f"search:{query}")
        return "no results"

    @tool
    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: the page.
        """
        ran.append(f"fetch:{url}")
        return "a page"

    @tool
    def status(job: str) -> str:
        """The status of a job.

        Args:
            job: the job's id.
        """
        ran.append(f"status:{job}")
        return results() if results is not None else "pending"

    return [search, fetch, status]


def make_agent(model: Scripted, guard: Guard, ran: list[str], **kwargs: Any) -> LoopwatchAgent:
    return LoopwatchAgent(
        tools=tools(ran, kwargs.pop("results", None)),
        model=model,
        loopwatch_guard=guard,
        verbosity_level=LogLevel.OFF,
        max_steps=kwargs.pop("max_steps", 30),
        **kwargs,
    )


# -- (1) the same call forever: nudge, then block, then stop ------------------------------------------------


def test_repeat_nudges_then_blocks_then_stops() -> None:
    model = Scripted(lambda n: ("search", {"query": "weather in Paris"}))
    guard = RecordingGuard()
    ran: list[str] = []
    agent = make_agent(model, guard, ran)

    with pytest.raises(LoopStopped) as caught:
        agent.run("What is the weather in Paris?", loop_session="repeat-1")

    stop = caught.value
    assert isinstance(stop, LoopwatchError) and isinstance(stop, AgentError)
    assert stop.verdict.action == "stop" and stop.verdict.pattern == "repeat"
    assert stop.status == LOOP_DETECTED and stop.session == "repeat-1"
    assert "LOOP_DETECTED" in str(stop)

    calls = guard.calls()
    assert all(c.tool == "search" and dict(c.args) == {"query": "weather in Paris"} for c in calls)
    assert calls[0].thought == "thinking 0"
    assert guard.actions() == ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]
    assert {s for s, _, _ in guard.seen} == {"repeat-1"}
    # the run ended at the step after the stop: no further model request
    assert len(model.inputs) == len(calls)

    # the nudge reached the model on its next turn (only from then on: it stays in memory)
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and "3 times" in nudge
    assert [n for n, text in enumerate(model.inputs) if nudge in text] == list(range(3, len(model.inputs)))

    # blocked (and stopping) calls never ran the tool; the model read the refusal as the call's observation
    assert len(ran) == 4
    block = guard.verdicts("block")[0].message
    assert block and block in model.inputs[5]


# -- (2) an A-B cycle -------------------------------------------------------------------------------------


def test_ab_cycle_is_caught() -> None:
    def script(n: int) -> tuple[str, dict[str, Any]]:
        return ("search", {"query": "paris"}) if n % 2 == 0 else ("fetch", {"url": "https://example.com"})

    model = Scripted(script)
    guard = RecordingGuard()
    ran: list[str] = []
    agent = make_agent(model, guard, ran)

    with pytest.raises(LoopStopped) as caught:
        agent.run("find it")

    assert caught.value.verdict.action == "stop" and caught.value.verdict.pattern == "cycle"
    assert {v.pattern for v in guard.verdicts("nudge") + guard.verdicts("block")} == {"cycle"}
    assert len(ran) < len(guard.calls())


# -- (3) polling with changing results is progress --------------------------------------------------------


def test_polling_with_changing_results_completes() -> None:
    counter = iter(range(1000))

    def script(n: int) -> tuple[str, dict[str, Any]]:
        return ("status", {"job": "42"}) if n < 12 else ("final_answer", {"answer": "done"})

    model = Scripted(script)
    guard = RecordingGuard()
    ran: list[str] = []
    agent = make_agent(model, guard, ran, results=lambda: f"running: {next(counter) * 8}% done")

    assert agent.run("wait for job 42") == "done"
    assert len(ran) == 12
    assert guard.verdicts("stop") == [] and guard.verdicts("block") == []
    results = [e for _, e, _ in guard.seen if isinstance(e, ToolResult)]
    assert len(results) == 12 and results[0].output == "running: 0% done"


# -- (4) two runs do not share state ----------------------------------------------------------------------


def test_two_runs_do_not_share_state() -> None:
    guard = RecordingGuard()
    ran: list[str] = []
    model = Scripted(lambda n: ("search", {"query": "x"}) if n % 3 < 2 else ("final_answer", {"answer": "ok"}))
    agent = make_agent(model, guard, ran)

    assert agent.run("first") == "ok"
    assert agent.run("second") == "ok"

    sessions = [s for s, e, _ in guard.seen if isinstance(e, ToolCall)]
    assert len(sessions) == 4 and sessions[0] == sessions[1] and sessions[2] == sessions[3]
    assert sessions[0] != sessions[2]
    assert guard.actions() == ["ok", "ok", "ok", "ok"]  # two calls per run: the second run starts afresh
    assert sessions[0] not in guard.sessions()  # the first run's fresh session was forgotten


def test_continuing_with_reset_false_keeps_the_session() -> None:
    guard = RecordingGuard()
    model = Scripted(lambda n: ("search", {"query": "x"}) if n % 2 == 0 else ("final_answer", {"answer": "ok"}))
    agent = make_agent(model, guard, [])
    agent.run("first")
    agent.run("more", reset=False)
    sessions = {s for s, e, _ in guard.seen if isinstance(e, ToolCall)}
    assert len(sessions) == 1


# -- the callback alone (any agent: observe after the step, stop by interrupt) ---------------------------------


def test_callback_alone_on_a_plain_agent_nudges_and_stops() -> None:
    model = Scripted(lambda n: ("search", {"query": "same"}))
    guard = RecordingGuard()
    cb = LoopwatchCallback(guard)
    ran: list[str] = []
    agent = ToolCallingAgent(
        tools=tools(ran), model=model, step_callbacks={ActionStep: cb}, verbosity_level=LogLevel.OFF, max_steps=30
    )

    with pytest.raises(AgentError, match="interrupted"):
        agent.run("loop")

    stop = cb.stopped(agent)
    assert stop is not None and stop.verdict.action == "stop"
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and any(nudge in text for text in model.inputs)
    # nothing can be refused after the fact: every call ran
    assert len(ran) == len(guard.calls())


# -- streaming, a stop on the last step, tool errors, the user's own callbacks --------------------------------


def test_streamed_run_raises_loop_stopped() -> None:
    model = Scripted(lambda n: ("search", {"query": "same"}))
    agent = make_agent(model, Guard(), [])
    steps = []
    with pytest.raises(LoopStopped):
        for step in agent.run("loop", stream=True):
            steps.append(step)
    assert any(isinstance(s, ActionStep) for s in steps)


def test_stop_on_the_last_step_still_raises_loop_stopped() -> None:
    model = Scripted(lambda n: ("search", {"query": "same"}))
    guard = RecordingGuard()
    agent = make_agent(model, guard, [], max_steps=8)
    with pytest.raises(LoopStopped) as caught:
        agent.run("loop")
    assert caught.value.verdict.action == "stop" and len(guard.calls()) == 8


def test_tool_errors_are_observed_and_user_callbacks_kept() -> None:
    @tool
    def broken(x: str) -> str:
        """Always fails.

        Args:
            x: anything.
        """
        raise RuntimeError("disk full")

    seen: list[int] = []
    guard = RecordingGuard()
    model = Scripted(lambda n: ("broken", {"x": "a"}) if n == 0 else ("final_answer", {"answer": "gave up"}))
    agent = LoopwatchAgent(
        tools=[broken],
        model=model,
        loopwatch_guard=guard,
        verbosity_level=LogLevel.OFF,
        step_callbacks={ActionStep: lambda step, agent: seen.append(step.step_number)},
    )
    assert agent.run("try") == "gave up"
    errors = [e for _, e, _ in guard.seen if isinstance(e, ToolResult) and e.is_error]
    assert len(errors) == 1 and "disk full" in errors[0].output and errors[0].tool == "broken"
    assert seen == [1, 2]


# -- configuration and the import without smolagents -------------------------------------------------------


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError):
        LoopwatchCallback(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchCallback(session=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LoopwatchAgent(
            tools=[], model=Scripted(lambda n: ("x", {})), loopwatch=LoopwatchCallback(), loopwatch_session="s"
        )
    assert "LoopwatchCallback(" in repr(LoopwatchCallback())


def test_loopwatch_imports_without_smolagents_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("smolagents", "smolagents", "smolagents")
