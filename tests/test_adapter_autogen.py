"""The AutoGen AgentChat adapter against the real framework (``RoundRobinGroupChat`` of an ``AssistantAgent``), with
a scripted model client (``ReplayChatCompletionClient`` from ``autogen-ext``, recording its inputs): no network."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("autogen_agentchat", reason="the autogen extra is not installed")
pytest.importorskip("autogen_ext.models.replay", reason="autogen-ext (the tests' replay client) is not installed")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResultMessage, LLMMessage, RequestUsage, UserMessage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

from adapter_support import check_missing_framework
from loopwatch import ConfigError, Guard
from loopwatch.adapters.autogen import STOP_SOURCE, LoopStopped, LoopwatchAutoGen
from loopwatch.core._verdict import LOOP_DETECTED, Verdict

logging.getLogger("autogen_ext").setLevel(logging.ERROR)  # "Token count has been done only on string content"

_INFO: Any = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}

# -- the scripted model ----------------------------------------------------------------------------------


class Scripted(ReplayChatCompletionClient):
    """Replays ``responses`` in order; records the messages of every request."""

    def __init__(self, responses: Sequence[str | CreateResult]) -> None:
        super().__init__(list(responses), model_info=_INFO)
        self.requests: list[list[LLMMessage]] = []

    async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
        self.requests.append(list(messages))
        return await super().create(messages, **kwargs)

    def nudges(self) -> list[tuple[int, str]]:
        """(request, text) of every loopwatch user message, the first request each appeared in."""
        seen: dict[str, int] = {}
        for n, messages in enumerate(self.requests):
            for m in messages:
                if isinstance(m, UserMessage) and m.source == STOP_SOURCE and isinstance(m.content, str):
                    seen.setdefault(m.content, n)
        return [(n, text) for text, n in seen.items()]

    def results(self) -> list[str]:
        """The tool results the model read in its last request, in order."""
        return [
            r.content for m in self.requests[-1] if isinstance(m, FunctionExecutionResultMessage) for r in m.content
        ]


def call(name: str, args: dict[str, Any], call_id: str) -> CreateResult:
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=call_id, name=name, arguments=json.dumps(args))],
        usage=RequestUsage(prompt_tokens=10, completion_tokens=5),
        cached=False,
    )


class Tools:
    """A ``search`` and a ``read`` tool that count their runs; ``poll`` returns a new value each time."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def all(self) -> list[FunctionTool]:
        def search(q: str) -> str:
            self.ran.append(f"search:{q}")
            return "no results"

        def read(path: str) -> str:
            self.ran.append(f"read:{path}")
            return "empty file"

        def poll(job: str) -> str:
            self.ran.append(f"poll:{job}")
            return f"job {job}: {len(self.ran) * 10}% done"

        return [
            FunctionTool(search, description="search"),
            FunctionTool(read, description="read a file"),
            FunctionTool(poll, description="poll a job"),
        ]


def team_of(lw: LoopwatchAutoGen, model: Scripted, tools: Tools, max_messages: int = 80) -> RoundRobinGroupChat:
    agent = AssistantAgent("coder", model, workbench=lw.workbench(tools.all()), model_context=lw.model_context())
    stop = lw.termination() | TextMentionTermination("DONE", sources=["coder"]) | MaxMessageTermination(max_messages)
    return RoundRobinGroupChat([agent], termination_condition=stop)


def run(lw: LoopwatchAutoGen, team: RoundRobinGroupChat, **kwargs: Any) -> TaskResult:
    return asyncio.run(lw.run(team, "fix the failing test", **kwargs))


# -- scenarios -------------------------------------------------------------------------------------------


def test_same_call_forever_nudges_then_blocks_then_stops() -> None:
    lw = LoopwatchAutoGen(preset="default")
    model = Scripted([call("search", {"q": "bug"}, f"c{i}") for i in range(40)])
    tools = Tools()
    result = run(lw, team_of(lw, model, tools))

    # stop: the run ended by loopwatch's termination condition, with the verdict's status in the stop reason
    assert result.stop_reason is not None and result.stop_reason.startswith(f"loopwatch: {LOOP_DETECTED}")
    stop = lw.stopped(result)
    assert stop is not None and stop.status == LOOP_DETECTED and stop.verdict.action == "stop"
    assert stop.result is result and stop.session.startswith("autogen-") and "search" in (stop.verdict.reason or "")
    assert len(model.requests) < 40  # ended well before the script ran out

    # nudge: the text reached the model's input, as a loopwatch user message after the tool results
    nudges = model.nudges()
    assert nudges and "search" in nudges[0][1]
    first = nudges[0][0]
    last = model.requests[first][-1]
    assert isinstance(last, UserMessage) and last.source == STOP_SOURCE

    # block: refused calls never ran; the model read the refusal as the call's result (is_error)
    calls_made = len(model.requests)
    assert len(tools.ran) < calls_made
    assert all(r == "search:bug" for r in tools.ran)
    refused = [
        r for m in model.requests[-1] if isinstance(m, FunctionExecutionResultMessage) for r in m.content if r.is_error
    ]
    assert refused and all("no results" not in r.content for r in refused)

    # raise_on_stop turns the same end into an exception
    lw2 = LoopwatchAutoGen(preset="default")
    model2 = Scripted([call("search", {"q": "bug"}, f"c{i}") for i in range(40)])
    with pytest.raises(LoopStopped) as caught:
        run(lw2, team_of(lw2, model2, Tools()), raise_on_stop=True)
    assert caught.value.status == LOOP_DETECTED and caught.value.result is not None
    assert str(caught.value).startswith("loopwatch: LOOP_DETECTED")


def test_ab_cycle_is_caught() -> None:
    lw = LoopwatchAutoGen(preset="default")
    script = [
        call("search", {"q": "bug"}, f"c{i}") if i % 2 == 0 else call("read", {"path": "a.py"}, f"c{i}")
        for i in range(60)
    ]
    model = Scripted(script)
    tools = Tools()
    result = run(lw, team_of(lw, model, tools, max_messages=200))
    stop = lw.stopped(result)
    assert stop is not None, result.stop_reason
    assert stop.status == LOOP_DETECTED and "loopwatch" in (result.stop_reason or "")
    assert len(model.requests) < 60
    assert model.nudges()


def test_polling_with_changing_results_is_not_stopped() -> None:
    lw = LoopwatchAutoGen(preset="default")
    model = Scripted([*(call("poll", {"job": "j1"}, f"c{i}") for i in range(12)), "all finished DONE"])
    tools = Tools()
    result = run(lw, team_of(lw, model, tools))
    assert lw.stopped(result) is None
    assert result.stop_reason is not None and "DONE" in result.stop_reason
    assert len(tools.ran) == 12  # every poll ran
    assert not any("Refused" in r for r in model.results())


def test_two_runs_do_not_share_state() -> None:
    lw = LoopwatchAutoGen(preset="default")
    tools = Tools()
    for _ in range(2):
        # two identical calls per run: a third in the same session would be nudged
        model = Scripted([call("search", {"q": "bug"}, "a"), call("search", {"q": "bug"}, "b"), "DONE"])
        result = run(lw, team_of(lw, model, tools))
        assert lw.stopped(result) is None and "DONE" in (result.stop_reason or "")
        assert model.nudges() == []
    assert tools.ran == ["search:bug"] * 4


def test_named_session_carries_state_across_runs() -> None:
    lw = LoopwatchAutoGen(preset="default")
    tools = Tools()
    nudged = []
    for _ in range(2):
        model = Scripted([call("search", {"q": "bug"}, "a"), call("search", {"q": "bug"}, "b"), "DONE"])
        run(lw, team_of(lw, model, tools), loop_session="conversation")
        nudged.append(model.nudges())
    assert nudged[0] == [] and nudged[1]


def test_termination_composes_with_max_message_termination() -> None:
    lw = LoopwatchAutoGen(preset="default")
    # | : whichever comes first; here MaxMessageTermination, before loopwatch sees any loop
    model = Scripted([call("search", {"q": f"q{i}"}, f"c{i}") for i in range(20)])
    agent = AssistantAgent("coder", model, workbench=lw.workbench(Tools().all()), model_context=lw.model_context())
    team = RoundRobinGroupChat([agent], termination_condition=lw.termination() | MaxMessageTermination(3))
    result = run(lw, team)
    assert lw.stopped(result) is None and "Maximum number of messages 3 reached" in (result.stop_reason or "")

    # and loopwatch first when the loop comes before the limit
    model = Scripted([call("search", {"q": "bug"}, f"c{i}") for i in range(40)])
    agent = AssistantAgent("coder", model, workbench=lw.workbench(Tools().all()), model_context=lw.model_context())
    team = RoundRobinGroupChat([agent], termination_condition=lw.termination() | MaxMessageTermination(500))
    result = run(lw, team)
    assert lw.stopped(result) is not None

    # & : both must have fired
    condition = lw.termination() & MaxMessageTermination(500)
    assert type(condition).__name__ == "AndTerminationCondition"


def test_termination_observes_text_and_usage() -> None:
    seen: list[str] = []

    class Recording(Guard):
        def observe(self, session: str, event: Any, **kwargs: Any) -> Verdict:
            seen.append(type(event).__name__)
            return super().observe(session, event, **kwargs)

    lw = LoopwatchAutoGen(Recording("default"))
    model = Scripted([call("search", {"q": "bug"}, "a"), "thinking it over", "DONE"])
    run(lw, team_of(lw, model, Tools()))
    assert {"ToolCall", "ToolResult", "Message", "Usage"} <= set(seen)


def test_configuration_errors_and_repr() -> None:
    with pytest.raises(ConfigError):
        LoopwatchAutoGen(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchAutoGen(session=3)  # type: ignore[arg-type]
    lw = LoopwatchAutoGen(session="fixed")
    assert lw.current_session == "fixed" and "fixed" in repr(lw)
    with lw.run_session("named") as name:
        assert name == "named" and lw.current_session == "named"
    stop = LoopStopped(Verdict(action="stop", status="MAX_ITERATIONS", reason="too many"), "s")
    assert stop.status == "MAX_ITERATIONS" and "too many" in str(stop) and stop.result is None


# -- without AutoGen ----------------------------------------------------------------------------------------


def test_loopwatch_imports_without_autogen_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("autogen_agentchat", "autogen", "autogen")
