"""The LangChain v1 / LangGraph adapter, driven through real ``create_agent`` runs with a scripted model."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

import loopwatch
from adapter_support import RecordingGuard
from loopwatch import Guard, Message, ToolCall, ToolResult

HAVE_LANGCHAIN = importlib.util.find_spec("langchain") is not None and importlib.util.find_spec("langgraph") is not None
needs_langchain = pytest.mark.skipif(not HAVE_LANGCHAIN, reason="needs loopwatch[langchain]")

if HAVE_LANGCHAIN:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt
    from pydantic import Field

    from loopwatch.adapters.langchain import LoopStopped, LoopwatchMiddleware, stop_verdict

    Script = Callable[[int, list[BaseMessage]], AIMessage]

    class ScriptedModel(BaseChatModel):
        """A chat model that answers from a script (turn number, messages) and records what it was sent."""

        script: Any
        seen: list[list[BaseMessage]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            self.seen.append(list(messages))
            reply = self.script(len(self.seen), list(messages))
            return ChatResult(generations=[ChatGeneration(message=reply)])


def call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> Any:
    return AIMessage(content=text, tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def tool_call_ids(messages: list[Any]) -> list[str]:
    return [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]


def human_texts(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, HumanMessage)]


USER = {"messages": [{"role": "user", "content": "find x"}]}


def make_search(counter: list[str], output: str = "no results") -> Any:
    @tool
    def search(q: str) -> str:
        """Search the index."""
        counter.append(q)
        return output

    return search


# -- the core package needs no framework ------------------------------------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_core_imports_without_langchain() -> None:
    proc = _run(
        """
        import sys
        for name in ("langchain", "langchain_core", "langgraph"):
            sys.modules[name] = None
        import loopwatch
        import loopwatch.adapters
        loopwatch.Guard().observe("s", loopwatch.ToolCall("t"))
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_adapter_without_langchain_names_the_extra() -> None:
    proc = _run(
        """
        import sys
        sys.modules["langchain"] = None
        from loopwatch.errors import MissingExtraError
        try:
            from loopwatch.adapters.langchain import LoopwatchMiddleware
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError)
            print(exc)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'loopwatch[langchain]'" in proc.stdout


# -- the same call again and again: nudge, block, stop ------------------------------------------------------------


def _run_same_call_forever(middleware_kwargs: dict[str, Any] | None = None) -> tuple[Any, ...]:
    ran: list[str] = []
    guard = RecordingGuard()
    model = ScriptedModel(script=lambda n, _: call("search", {"q": "x"}, f"call-{n}"))
    agent = create_agent(
        model, [make_search(ran)], middleware=[LoopwatchMiddleware(guard, **(middleware_kwargs or {}))]
    )
    return agent, model, guard, ran


@needs_langchain
def test_same_call_forever_is_nudged_blocked_and_stopped() -> None:
    agent, model, guard, ran = _run_same_call_forever()
    result = agent.invoke(USER, {"recursion_limit": 100})
    messages = result["messages"]

    # the guard saw every call the model made, once
    ids = tool_call_ids(messages)
    assert [c.id for c in guard.calls()] == ids
    assert all(c.tool == "search" and dict(c.args) == {"q": "x"} for c in guard.calls())

    # the nudge reached the model: a later model call was sent the nudge's text
    nudges = guard.verdicts("nudge")
    assert nudges, "expected a nudge"
    assert any(nudges[0].message in human_texts(sent) for sent in model.seen)
    first_nudged = next(i for i, sent in enumerate(model.seen) if nudges[0].message in human_texts(sent))
    assert first_nudged > 0 and nudges[0].message not in human_texts(model.seen[first_nudged - 1])

    # blocked calls never ran the tool; their result is the block's reason
    blocks = guard.verdicts("block")
    assert blocks, "expected a block"
    refused = [m for m in messages if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.content for m in refused[: len(blocks)]] == [v.message for v in blocks]
    assert len(ran) == len(ids) - len(refused)

    # the run ended with the documented stop: the verdict in the state, a last AI message, no further model call
    verdict = stop_verdict(result)
    assert verdict is not None and verdict.action == "stop" and verdict.status == "LOOP_DETECTED"
    assert verdict.pattern == "repeat"
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls
    assert "LOOP_DETECTED" in messages[-1].content
    assert len(model.seen) == len(ids)  # the model was not called again after the stop
    assert guard.sessions() == []  # the run had no thread: its session was forgotten when it ended


@needs_langchain
def test_stop_can_raise_loop_stopped() -> None:
    agent, _model, guard, ran = _run_same_call_forever({"on_stop": "raise"})
    with pytest.raises(loopwatch.LoopStopped) as info:  # the stop of every framework adapter
        agent.invoke(USER, {"recursion_limit": 100})
    assert type(info.value) is LoopStopped
    assert info.value.verdict.action == "stop"
    assert info.value.verdict.status == "LOOP_DETECTED" == info.value.status
    assert info.value.session is not None and info.value.session.startswith("langchain")
    assert str(info.value).startswith("loopwatch: LOOP_DETECTED (repeat): ")
    assert len(ran) == len(guard.calls()) - len(guard.verdicts("block")) - 1


@needs_langchain
def test_async_run_is_stopped_too() -> None:
    agent, _model, guard, ran = _run_same_call_forever()
    result = asyncio.run(agent.ainvoke(USER, {"recursion_limit": 100}))
    verdict = stop_verdict(result)
    assert verdict is not None and verdict.status == "LOOP_DETECTED"
    assert guard.verdicts("nudge") and guard.verdicts("block")
    assert len(ran) < len(guard.calls())


# -- an A-B cycle ---------------------------------------------------------------------------------------------------


@needs_langchain
def test_ab_cycle_is_caught() -> None:
    ran: list[str] = []

    @tool
    def open_file(path: str) -> str:
        """Open a file."""
        ran.append(path)
        return f"contents of {path}"

    def script(n: int, _: list[BaseMessage]) -> AIMessage:
        if n > 40:
            return AIMessage(content="giving up")
        return call("open_file", {"path": "a.py" if n % 2 else "b.py"}, f"call-{n}")

    guard = RecordingGuard()
    model = ScriptedModel(script=script)
    agent = create_agent(model, [open_file], middleware=[LoopwatchMiddleware(guard)])
    result = agent.invoke(USER, {"recursion_limit": 200})

    cycle = [v for _, _, v in guard.seen if v.pattern == "cycle"]
    assert cycle, "the A-B cycle was not caught"
    assert {v.action for v in cycle} >= {"nudge", "block"}
    assert [c.id for c in guard.calls()] == tool_call_ids(result["messages"])
    assert len(ran) == len(guard.calls()) - len(guard.verdicts("block")) - len(guard.verdicts("stop"))
    assert any(cycle[0].message in human_texts(sent) for sent in model.seen)
    verdict = stop_verdict(result)
    assert verdict is not None and verdict.pattern == "cycle"


# -- polling with a changing result is progress ----------------------------------------------------------------


@needs_langchain
def test_polling_with_changing_results_completes() -> None:
    stages = [
        "queued",
        "fetching",
        "compiling",
        "linking",
        "testing",
        "packaging",
        "uploading",
        "signing",
        "verifying",
        "done",
    ]
    polls: list[str] = []

    @tool
    def get_job_status(job: str) -> str:
        """The status of a build job."""
        polls.append(job)
        return f"{job} stage: {stages[len(polls) - 1]}"

    def script(n: int, _: list[BaseMessage]) -> AIMessage:
        if n > len(stages):
            return AIMessage(content="The build is done.")
        return call("get_job_status", {"job": "job-7"}, f"poll-{n}")

    guard = RecordingGuard()
    model = ScriptedModel(script=script)
    agent = create_agent(model, [get_job_status], middleware=[LoopwatchMiddleware(guard)])
    result = agent.invoke(USER, {"recursion_limit": 100})

    assert len(polls) == len(stages)
    assert not guard.verdicts("block") and not guard.verdicts("stop")
    assert stop_verdict(result) is None
    assert result["messages"][-1].content == "The build is done."
    assert len(guard.calls()) == len(stages)


# -- sessions: threads never share state; runs without a thread get their own -------------------------------------


def _three_searches_then_answer(prefix: str) -> Callable[[int, list[BaseMessage]], AIMessage]:
    def script(n: int, messages: list[BaseMessage]) -> AIMessage:
        turns = sum(isinstance(m, AIMessage) for m in messages[messages.index(_last_user(messages)) :])
        if turns >= 3:
            return AIMessage(content="done")
        return call("search", {"q": "x"}, f"{prefix}-{n}")

    return script


def _last_user(messages: list[BaseMessage]) -> BaseMessage:
    return next(
        m for m in reversed(messages) if isinstance(m, HumanMessage) and not (m.id or "").startswith("loopwatch-")
    )


@needs_langchain
def test_two_threads_do_not_share_state() -> None:
    ran: list[str] = []
    guard = RecordingGuard()
    middleware = LoopwatchMiddleware(guard)
    model = ScriptedModel(script=_three_searches_then_answer("c"))
    agent = create_agent(model, [make_search(ran)], middleware=[middleware], checkpointer=InMemorySaver())

    for thread in ("thread-1", "thread-2"):
        agent.invoke(USER, {"configurable": {"thread_id": thread}})
    sessions = [s for s, e, _ in guard.seen if isinstance(e, ToolCall)]
    assert sessions == ["thread-1"] * 3 + ["thread-2"] * 3
    # each thread got exactly its own nudge (on its third call), none a block: the counts did not add up
    assert [s for s, _, v in guard.seen if v.action == "nudge"] == ["thread-1", "thread-2"]
    assert not guard.verdicts("block")
    assert sorted(guard.sessions()) == ["thread-1", "thread-2"]


@needs_langchain
def test_runs_without_a_thread_get_sessions_of_their_own() -> None:
    ran: list[str] = []
    guard = RecordingGuard()
    model = ScriptedModel(script=_three_searches_then_answer("c"))
    agent = create_agent(model, [make_search(ran)], middleware=[LoopwatchMiddleware(guard)])

    agent.invoke(USER)
    agent.invoke(USER)
    sessions = [s for s, e, _ in guard.seen if isinstance(e, ToolCall)]
    assert len(set(sessions[:3])) == 1 and len(set(sessions[3:])) == 1 and sessions[0] != sessions[3]
    assert all(s.startswith("langchain-") for s in sessions)
    assert len(guard.verdicts("nudge")) == 2 and not guard.verdicts("block")
    assert guard.sessions() == []  # a run of its own is forgotten when it ends


@needs_langchain
def test_a_run_ends_normally_while_its_store_is_down() -> None:
    # the middleware forgets a run of its own at its end: with the store unreachable and on_store_error="allow",
    # that failure is counted like the events' own, not raised out of agent.invoke
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ran: list[str] = []
    records: list[dict[str, Any]] = []
    guard = Guard(store=f"redis://127.0.0.1:{port}/0?timeout=0.5", clock=None, listeners=[records.append])
    model = ScriptedModel(script=_three_searches_then_answer("s"))
    agent = create_agent(model, [make_search(ran)], middleware=[LoopwatchMiddleware(guard)])
    result = agent.invoke(USER)
    assert result["messages"][-1].content == "done" and len(ran) == 3
    # each event failed open (the prompt, three calls, three results, the answer), then the forget at the run's end
    assert [r["operation"] for r in records] == ["observe"] * 8 + ["forget"]
    assert guard.stats["store_errors"] == 9


@needs_langchain
def test_a_stopped_thread_starts_afresh_on_the_next_prompt() -> None:
    ran: list[str] = []
    guard = RecordingGuard()

    def script(n: int, messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].content == "try something else":
            return AIMessage(content="ok, something else")
        return call("search", {"q": "x"}, f"call-{n}")

    model = ScriptedModel(script=script)
    agent = create_agent(
        model, [make_search(ran)], middleware=[LoopwatchMiddleware(guard)], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    first = agent.invoke(USER, config)
    assert stop_verdict(first) is not None
    second = agent.invoke({"messages": [{"role": "user", "content": "try something else"}]}, config)
    assert stop_verdict(second) is None
    assert second["messages"][-1].content == "ok, something else"


@needs_langchain
def test_session_key_callable() -> None:
    guard = RecordingGuard()
    middleware = LoopwatchMiddleware(guard, session_key=lambda config: config["configurable"].get("user"))
    model = ScriptedModel(script=_three_searches_then_answer("c"))
    agent = create_agent(model, [make_search([])], middleware=[middleware])
    agent.invoke(USER, {"configurable": {"user": "alice"}})
    assert {s for s, _, _ in guard.seen} == {"alice"}


# -- interrupt / resume ---------------------------------------------------------------------------------------


@needs_langchain
def test_interrupt_and_resume_keep_the_session_and_count_once() -> None:
    ran: list[str] = []
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy after a human confirms."""
        answer = interrupt(f"deploy {target}?")
        deployed.append(answer)
        return f"deployed {target}: {answer}"

    def script(n: int, messages: list[BaseMessage]) -> AIMessage:
        if n <= 2:
            return call("search", {"q": "x"}, f"call-{n}")
        if n == 3:  # the third identical search (nudged) and a deploy that waits for a human
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "search", "args": {"q": "x"}, "id": "call-3", "type": "tool_call"},
                    {"name": "deploy", "args": {"target": "prod"}, "id": "deploy-1", "type": "tool_call"},
                ],
            )
        return AIMessage(content="done")

    guard = RecordingGuard()
    model = ScriptedModel(script=script)
    agent = create_agent(
        model, [make_search(ran), deploy], middleware=[LoopwatchMiddleware(guard)], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "job-42"}}
    paused = agent.invoke(USER, config)
    assert "__interrupt__" in paused
    assert len(model.seen) == 3
    nudges = guard.verdicts("nudge")
    assert len(nudges) == 1

    result = agent.invoke(Command(resume="yes"), config)
    assert deployed == ["yes"]
    assert result["messages"][-1].content == "done"
    # the re-executed tool node did not count the deploy call twice; everything stayed in the thread's session
    assert [c.id for c in guard.calls()] == ["call-1", "call-2", "call-3", "deploy-1"]
    assert {s for s, _, _ in guard.seen} == {"job-42"}
    results = [e for _, e, _ in guard.seen if isinstance(e, ToolResult)]
    assert sorted(r.id for r in results) == ["call-1", "call-2", "call-3", "deploy-1"]
    # the nudge pending across the interrupt reached the model exactly once, after the resume
    assert sum(nudges[0].message in human_texts(sent) for sent in model.seen[-1:]) == 1
    assert human_texts(result["messages"]).count(nudges[0].message) == 1


# -- details ------------------------------------------------------------------------------------------------------


@needs_langchain
def test_tool_errors_are_observed_and_propagate() -> None:
    @tool
    def flaky(q: str) -> str:
        """Always fails."""
        raise RuntimeError("backend down")

    guard = RecordingGuard()
    model = ScriptedModel(script=lambda n, _: call("flaky", {"q": "x"}, f"call-{n}"))
    agent = create_agent(model, [flaky], middleware=[LoopwatchMiddleware(guard)])
    with pytest.raises(RuntimeError, match="backend down"):
        agent.invoke(USER)
    results = [e for _, e, _ in guard.seen if isinstance(e, ToolResult)]
    assert len(results) == 1 and results[0].is_error and "backend down" in results[0].output


@needs_langchain
def test_assistant_text_is_observed() -> None:
    guard = RecordingGuard()

    def script(n: int, _: list[BaseMessage]) -> AIMessage:
        if n == 1:
            return call("search", {"q": "x"}, "call-1", text="Let me search.")
        return AIMessage(content="Nothing found.")

    agent = create_agent(ScriptedModel(script=script), [make_search([])], middleware=[LoopwatchMiddleware(guard)])
    agent.invoke(USER)
    events = [e for _, e, _ in guard.seen]
    assert events[0] == Message("user", "find x")
    assert isinstance(events[1], ToolCall) and events[1].thought == "Let me search."
    assert events[-1] == Message("assistant", "Nothing found.")


def test_guard_and_preset_are_exclusive() -> None:
    if not HAVE_LANGCHAIN:
        pytest.skip("needs loopwatch[langchain]")
    from loopwatch.errors import ConfigError

    with pytest.raises(ConfigError):
        LoopwatchMiddleware(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchMiddleware(on_stop="explode")  # type: ignore[arg-type]
