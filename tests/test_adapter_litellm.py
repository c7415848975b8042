"""The LiteLLM adapter against the real litellm: ``acompletion`` / ``completion`` with a scripted ``CustomLLM``
provider driven by a small agent loop, and the proxy's guardrail hooks called as the proxy calls them. No network.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no fetch of the model cost map on import
pytest.importorskip("litellm", reason="the litellm extra is not installed")

import litellm
from litellm import CustomLLM, ModelResponse
from litellm.caching import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.types_utils.utils import get_instance_fn
from litellm.types.guardrails import GuardrailEventHooks, LitellmParams
from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Message, Usage

from adapter_support import RecordingGuard, check_missing_framework
from loopwatch import ConfigError, Guard, LoopwatchError, ToolCall
from loopwatch.adapters.litellm import MARK, LoopStopped, LoopwatchGuardrail, default_session
from loopwatch.core._events import Message as LoopMessage
from loopwatch.core._events import Usage as LoopUsage
from loopwatch.core._verdict import LOOP_DETECTED

# litellm queues its async success logging on the event loop of the call; each asyncio.run closes its loop
pytestmark = pytest.mark.filterwarnings("ignore:coroutine 'Logging.async_success_handler' was never awaited")

# -- the scripted model: a litellm custom provider -----------------------------------------------------------

Script = Callable[[int], "tuple[str, dict[str, Any]] | str"]


class Scripted(CustomLLM):  # type: ignore[misc]
    """Answers request ``n`` (from 0) with the call ``script(n)`` (or text, for a string); records every input."""

    def __init__(self, script: Script) -> None:
        super().__init__()
        self.script = script
        self.inputs: list[list[dict[str, Any]]] = []

    def _answer(self, messages: list[Any]) -> ModelResponse:
        self.inputs.append([m if isinstance(m, dict) else m.model_dump() for m in messages])
        n = len(self.inputs) - 1
        step = self.script(n)
        if isinstance(step, str):
            message = Message(content=step, role="assistant")
            finish = "stop"
        else:
            name, args = step
            call = ChatCompletionMessageToolCall(
                id=f"call_{n}", type="function", function=Function(name=name, arguments=json.dumps(args))
            )
            message = Message(content=f"thinking {n}", role="assistant", tool_calls=[call])
            finish = "tool_calls"
        usage = Usage(prompt_tokens=100 + n, completion_tokens=10, total_tokens=110 + n)
        return ModelResponse(
            choices=[Choices(message=message, finish_reason=finish, index=0)], model="scripted", usage=usage
        )

    def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> ModelResponse:
        return self._answer(messages)

    def texts(self, n: int) -> list[str]:
        return [str(m.get("content") or "") for m in self.inputs[n]]

    def got(self, text: str) -> list[int]:
        """The requests whose messages contain ``text``."""
        return [n for n in range(len(self.inputs)) if any(text in t for t in self.texts(n))]


@pytest.fixture
def provider() -> Iterator[Callable[[Script], Scripted]]:
    """Registers a scripted model as litellm's ``scripted/`` provider; restores litellm's globals after."""
    saved = (list(litellm.custom_provider_map), list(litellm.callbacks))

    def install(script: Script) -> Scripted:
        model = Scripted(script)
        litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": model}]
        return model

    yield install
    litellm.custom_provider_map, litellm.callbacks = saved


# -- a small agent: runs the tools the model asks for and sends the whole history again ----------------------

Tools = dict[str, Callable[..., str]]


def make_tools(ran: list[str], results: Callable[[], str] | None = None) -> Tools:
    def search(q: str) -> str:
        ran.append(f"search:{q}")
        return "no results"

    def fetch(url: str) -> str:
        ran.append(f"fetch:{url}")
        return "a page"

    def status(job: str) -> str:
        ran.append(f"status:{job}")
        return results() if results is not None else "pending"

    return {"search": search, "fetch": fetch, "status": status}


class Agent:
    """Calls the model with its history until the model calls ``final_answer`` (text answers: it goes on)."""

    def __init__(self, tools: Tools, task: str = "find it", **request: Any) -> None:
        self.tools = tools
        self.request = request
        self.history: list[Any] = [
            {"role": "system", "content": "You are a research agent."},
            {"role": "user", "content": task},
        ]
        self.answer: str | None = None

    def _act(self, response: Any) -> bool:
        message = response.choices[0].message
        self.history.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            args = json.loads(call.function.arguments)
            if call.function.name == "final_answer":
                self.answer = str(args.get("answer"))
                return True
            output = self.tools[call.function.name](**args)
            self.history.append({"role": "tool", "tool_call_id": call.id, "content": output})
        return False

    async def arun(self, turns: int = 40) -> str | None:
        for _ in range(turns):
            response = await litellm.acompletion(model="scripted/loop", messages=self.history, **self.request)
            if self._act(response):
                break
        return self.answer

    def run(self, guard: LoopwatchGuardrail, turns: int = 40) -> str | None:
        for _ in range(turns):
            if self._act(guard.completion(model="scripted/loop", messages=self.history, **self.request)):
                break
        return self.answer


def same_search(n: int) -> tuple[str, dict[str, Any]]:
    return ("search", {"q": "weather in Paris"})


LADDER = ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]


def check_repeat_run(model: Scripted, guard: RecordingGuard, agent: Agent, ran: list[str], stop: LoopStopped) -> None:
    """What a run of the same search forever must show, whichever path (async, sync, proxy) ran it."""
    assert isinstance(stop, LoopwatchError)
    assert stop.verdict.action == "stop" and stop.verdict.pattern == "repeat"
    assert stop.status == LOOP_DETECTED and stop.status_code == 400 and stop.type == "loop_detected"
    assert "LOOP_DETECTED" in str(stop) and stop.message == str(stop)

    # every proposed call was judged once, before the agent could run it
    calls = guard.calls()
    assert guard.actions() == LADDER
    assert [c.id for c in calls] == [f"call_{n}" for n in range(len(model.inputs))]
    assert all(c.tool == "search" and dict(c.args) == {"q": "weather in Paris"} for c in calls)
    assert calls[0].thought == "thinking 0"
    assert len(guard.results()) == 4 and all(r.tool == "search" for r in guard.results())
    assert [e.role for _, e, _ in guard.seen if isinstance(e, LoopMessage)] == ["system", "user"]  # once each
    assert len([e for _, e, _ in guard.seen if isinstance(e, LoopUsage)]) == len(model.inputs) - 1  # not the stop's

    # the nudge reached the model in the next request, as a new last message, and only there
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and "3 times" in nudge
    assert model.got(nudge) == [3]
    last = model.inputs[3][-1]
    assert last["role"] == "user" and last["content"].startswith(MARK)
    assert not any(nudge in str(m) for m in agent.history)  # the agent's own history is untouched

    # blocked and stopping calls never ran; the refusal replaced the call in the response the agent got
    assert ran == ["search:weather in Paris"] * 4
    block = guard.verdicts("block")[0].message
    assert block
    refused = [m for m in agent.history if m.get("role") == "assistant" and "was not run" in str(m.get("content"))]
    assert len(refused) == 3 and all(not m.get("tool_calls") for m in refused) and block in refused[0]["content"]
    assert model.got(block)[0] == 5  # the model reads the refusal in its own message from then on


# -- (1) the same call forever: nudge, then block, then stop ---------------------------------------------------


def test_acompletion_repeat_nudges_then_blocks_then_stops(provider: Callable[[Script], Scripted]) -> None:
    model = provider(same_search)
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    ran: list[str] = []
    agent = Agent(make_tools(ran), metadata={"loopwatch_session": "repeat-1"})

    with pytest.raises(LoopStopped) as caught:
        asyncio.run(agent.arun())

    check_repeat_run(model, guard, agent, ran, caught.value)
    assert caught.value.session == "repeat-1" and {s for s, _, _ in guard.seen} == {"repeat-1"}
    assert len(model.inputs) == 8  # the stop rejected the 8th response: no further request


def test_sync_completion_repeat_nudges_then_blocks_then_stops(provider: Callable[[Script], Scripted]) -> None:
    model = provider(same_search)
    guard = RecordingGuard()
    lw = LoopwatchGuardrail(guard)
    litellm.callbacks = [lw]  # registered too: the wrapper must not be judged twice
    ran: list[str] = []
    agent = Agent(make_tools(ran))

    with pytest.raises(LoopStopped) as caught:
        agent.run(lw)

    check_repeat_run(model, guard, agent, ran, caught.value)
    assert caught.value.session.startswith("litellm-")  # the fallback: a hash of the conversation's start


def test_a_stored_guard_runs_off_the_event_loop(provider: Callable[[Script], Scripted], tmp_path: Path) -> None:
    model = provider(same_search)
    lw = LoopwatchGuardrail(store=f"sqlite:///{tmp_path / 'loops.db'}")
    litellm.callbacks = [lw]
    ran: list[str] = []
    with pytest.raises(LoopStopped) as caught:
        asyncio.run(Agent(make_tools(ran), metadata={"loopwatch_session": "stored"}).arun())
    assert caught.value.verdict.pattern == "repeat" and len(ran) == 4 and len(model.inputs) == 8
    assert model.got(MARK)[0] == 3
    again = Guard(store=f"sqlite:///{tmp_path / 'loops.db'}")  # another process would see the same session
    assert "stored" in again.sessions()


def test_plain_sync_completion_is_not_guarded(provider: Callable[[Script], Scripted]) -> None:
    """litellm.completion runs no request hook (the reason for ``guard.completion``)."""
    provider(same_search)
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    litellm.completion(model="scripted/loop", messages=[{"role": "user", "content": "hi"}])
    assert guard.seen == []


# -- (2) an A-B cycle ----------------------------------------------------------------------------------------


def test_ab_cycle_is_caught(provider: Callable[[Script], Scripted]) -> None:
    def script(n: int) -> tuple[str, dict[str, Any]]:
        return ("search", {"q": "paris"}) if n % 2 == 0 else ("fetch", {"url": "https://example.com"})

    model = provider(script)
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    ran: list[str] = []

    with pytest.raises(LoopStopped) as caught:
        asyncio.run(Agent(make_tools(ran)).arun())

    assert caught.value.verdict.pattern == "cycle"
    assert {v.pattern for v in guard.verdicts("nudge") + guard.verdicts("block")} == {"cycle"}
    assert guard.verdicts("block") and len(ran) < len(guard.calls()) == len(model.inputs)
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and len(model.got(nudge)) == 1


# -- (3) polling with changing results is progress -------------------------------------------------------------


def test_polling_with_changing_results_completes(provider: Callable[[Script], Scripted]) -> None:
    counter = iter(range(1000))
    model = provider(lambda n: ("status", {"job": "42"}) if n < 12 else ("final_answer", {"answer": "done"}))
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    ran: list[str] = []
    agent = Agent(make_tools(ran, results=lambda: f"running: {next(counter) * 8}% done"))

    assert asyncio.run(agent.arun()) == "done"

    assert len(ran) == 12 and len(model.inputs) == 13
    assert guard.verdicts("stop") == [] and guard.verdicts("block") == []
    assert [r.output for r in guard.results()][:2] == ["running: 0% done", "running: 8% done"]
    assert len(guard.results()) == 12
    assert not model.got(MARK)


# -- what a request carries: new messages only, re-syncing, sticky stops ---------------------------------------


def test_a_request_sent_again_observes_nothing_new(provider: Callable[[Script], Scripted]) -> None:
    provider(lambda n: "hello")
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}]

    async def twice() -> None:
        for _ in range(2):
            await litellm.acompletion(model="scripted/x", messages=history, metadata={"loopwatch_session": "s"})

    asyncio.run(twice())
    history_events = [e for _, e, _ in guard.seen if isinstance(e, LoopMessage) and e.text in ("hi", "hey")]
    assert len(history_events) == 2  # the retry added nothing
    assert [e.text for _, e, _ in guard.seen if isinstance(e, LoopMessage) and e.role == "assistant"] == [
        "hey",
        "hello",
        "hello",
    ]


def test_an_edited_history_is_resynced(provider: Callable[[Script], Scripted]) -> None:
    model = provider(lambda n: ("search", {"q": f"page {n}"}))
    guard = RecordingGuard()
    lw = LoopwatchGuardrail(guard)
    litellm.callbacks = [lw]
    ran: list[str] = []
    agent = Agent(make_tools(ran), metadata={"loopwatch_session": "edit"})
    asyncio.run(agent.arun(turns=4))
    assert len(guard.results()) == 3 and len(guard.calls()) == 4

    # the agent trims its context: system, task, and the last exchange only
    agent.history = agent.history[:2] + agent.history[-2:]
    asyncio.run(agent.arun(turns=1))
    assert len(guard.results()) == 4  # only the new result, nothing observed twice
    assert len(guard.calls()) == 5 and len({c.id for c in guard.calls()}) == 5
    assert [e.role for _, e, _ in guard.seen if isinstance(e, LoopMessage)] == ["system", "user"]

    # a history the session never saw (a new task in the same named session) is observed whole
    agent.history = [{"role": "user", "content": "something else"}]
    asyncio.run(agent.arun(turns=1))
    assert [e.text for _, e, _ in guard.seen if isinstance(e, LoopMessage)][-1] == "something else"
    assert len(model.inputs) == 6


def test_a_stop_rejects_later_requests_until_reset(provider: Callable[[Script], Scripted]) -> None:
    model = provider(same_search)
    guard = RecordingGuard()
    lw = LoopwatchGuardrail(guard)
    litellm.callbacks = [lw]
    agent = Agent(make_tools([]), metadata={"loopwatch_session": "sticky"})
    with pytest.raises(LoopStopped):
        asyncio.run(agent.arun())
    asked = len(model.inputs)
    stopped = lw.stopped("sticky")
    assert stopped is not None and stopped.verdict.action == "stop"

    with pytest.raises(LoopStopped) as again:  # the agent retries: the model is not asked
        asyncio.run(agent.arun(turns=1))
    assert again.value.verdict == stopped.verdict and len(model.inputs) == asked
    agent.history.append({"role": "user", "content": "try something else"})
    with pytest.raises(LoopStopped):  # nor after a new message: a stop lasts until the session is reset
        asyncio.run(agent.arun(turns=1))
    assert len(model.inputs) == asked

    lw.reset("sticky")
    model.script = lambda n: ("final_answer", {"answer": "ok"})
    assert asyncio.run(agent.arun()) == "ok"
    assert len(model.inputs) == asked + 1 and lw.stopped("sticky") is None


def test_calls_seen_only_in_the_history_are_judged_there(provider: Callable[[Script], Scripted]) -> None:
    """pre_call alone (as for streamed responses): calls are judged from the history, when they already ran."""
    model = provider(same_search)
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard, event_hook=[GuardrailEventHooks.pre_call])]
    ran: list[str] = []
    with pytest.raises(LoopStopped) as caught:
        asyncio.run(Agent(make_tools(ran)).arun())

    assert caught.value.verdict.pattern == "repeat"
    assert guard.actions() == LADDER
    assert len(ran) == len(guard.calls()) == len(model.inputs) == 8  # nothing refused: every call ran
    block = guard.verdicts("block")[0].message
    assert block and model.got(block) == [5]  # a block is a nudge here, in the request that carried the call
    assert not any(isinstance(e, LoopUsage) for _, e, _ in guard.seen)  # the responses were not read


# -- sessions --------------------------------------------------------------------------------------------------


def test_session_rules() -> None:
    first = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task A"}]
    later = [*first, {"role": "assistant", "content": "x"}, {"role": "user", "content": "more"}]
    assert default_session({"messages": first}) == default_session({"messages": later})
    assert default_session({"messages": first}) != default_session(
        {"messages": [first[0], {"role": "user", "content": "task B"}]}
    )
    assert default_session({"messages": first, "user": "u1"}) != default_session({"messages": first, "user": "u2"})
    nudged = [first[0], {"role": "user", "content": f"{MARK} a nudge"}]
    assert default_session({"messages": nudged}) == default_session({"messages": first[:1]})  # ours never count
    assert default_session({"messages": first, "metadata": {"loopwatch_session": "m"}}) == "m"
    assert default_session({"messages": first, "litellm_metadata": {"loopwatch_session": "lm"}}) == "lm"
    headers = {"proxy_server_request": {"headers": {"X-Loopwatch-Session": "h"}}}
    assert default_session({"messages": first, **headers, "litellm_session_id": "ls"}) == "h"
    assert default_session({"messages": first, "litellm_session_id": "ls"}) == "ls"
    assert default_session({"messages": first, "metadata": {"session_id": "sid"}}) == "sid"
    lw = LoopwatchGuardrail(session_key=lambda data: data.get("user"))
    assert lw.session_of({"messages": first, "user": "u1"}) == "u1"
    assert lw.session_of({"messages": first}) == default_session({"messages": first})


def test_two_conversations_do_not_share_state(provider: Callable[[Script], Scripted]) -> None:
    provider(lambda n: ("search", {"q": "x"}) if n % 3 < 2 else ("final_answer", {"answer": "ok"}))
    guard = RecordingGuard()
    litellm.callbacks = [LoopwatchGuardrail(guard)]

    assert asyncio.run(Agent(make_tools([]), task="first").arun()) == "ok"
    assert asyncio.run(Agent(make_tools([]), task="second").arun()) == "ok"
    searches = [(s, v.action) for s, e, v in guard.seen if isinstance(e, ToolCall) and e.tool == "search"]
    sessions = [s for s, _ in searches]
    assert len(sessions) == 4 and sessions[0] == sessions[1] != sessions[2] == sessions[3]
    assert [a for _, a in searches] == ["ok", "ok", "ok", "ok"]  # two calls per conversation: no repeat


# -- the proxy: the guardrail built from config and its hooks called as the proxy calls them -------------------


def proxy_guardrail(tmp_path: Path, **params: Any) -> LoopwatchGuardrail:
    """As ``InMemoryGuardrailHandler.initialize_custom_guardrail`` does for a ``guardrails:`` config entry."""
    (tmp_path / "loopwatch_guardrail.py").write_text("from loopwatch.adapters.litellm import LoopwatchGuardrail\n")
    config = tmp_path / "config.yaml"
    config.write_text("model_list: []\n")
    cls = get_instance_fn("loopwatch_guardrail.LoopwatchGuardrail", config_file_path=str(config))
    litellm_params = LitellmParams(guardrail="loopwatch_guardrail.LoopwatchGuardrail", **params)
    extra = litellm_params.model_dump(exclude_none=True)
    for key in ("guardrail", "mode", "default_on"):
        extra.pop(key, None)
    guardrail = cls(
        guardrail_name="loopwatch", event_hook=litellm_params.mode, default_on=litellm_params.default_on, **extra
    )
    assert isinstance(guardrail, LoopwatchGuardrail)
    return guardrail


def test_proxy_hooks_nudge_block_and_stop(provider: Callable[[Script], Scripted], tmp_path: Path) -> None:
    model = provider(same_search)
    guardrail = proxy_guardrail(tmp_path, mode=["pre_call", "post_call"], default_on=True, preset="default")
    guard = RecordingGuard()
    guardrail.guard = guard
    litellm.callbacks = [guardrail]  # the proxy adds it there: its deployment hooks must leave proxy requests alone
    key = UserAPIKeyAuth(user_id="alice")
    ran: list[str] = []
    agent = Agent(make_tools(ran))

    async def serve(body: dict[str, Any]) -> Any:
        """One /chat/completions request through the proxy's hooks, the router's call in between."""
        data = {
            **body,
            "metadata": {"user_api_key_hash": "hashed-key", "headers": {}},
            "proxy_server_request": {"url": "/chat/completions", "headers": {"x-loopwatch-session": "agent-7"}},
            "litellm_call_id": f"req-{len(model.inputs)}",
        }
        assert guardrail.should_run_guardrail(data, GuardrailEventHooks.pre_call)
        data = await guardrail.async_pre_call_hook(
            user_api_key_dict=key, cache=DualCache(), data=data, call_type="acompletion"
        )
        response = await litellm.acompletion(**data)
        assert guardrail.should_run_guardrail(data, GuardrailEventHooks.post_call)
        return await guardrail.async_post_call_success_hook(data=data, user_api_key_dict=key, response=response)

    async def run() -> None:
        for _ in range(40):
            if agent._act(await serve({"model": "scripted/loop", "messages": agent.history})):
                return

    with pytest.raises(LoopStopped) as caught:
        asyncio.run(run())

    check_repeat_run(model, guard, agent, ran, caught.value)
    assert caught.value.session == "agent-7"


def test_proxy_config_validation_and_preset(tmp_path: Path) -> None:
    guardrail = proxy_guardrail(tmp_path, mode="pre_call", preset="doom-loop")
    assert guardrail.guard.policy.name == "doom-loop" and guardrail.event_hook == "pre_call"
    assert not guardrail.should_run_guardrail({"messages": []}, GuardrailEventHooks.pre_call)  # default_on: false
    assert guardrail.should_run_guardrail({"messages": [], "guardrails": ["loopwatch"]}, GuardrailEventHooks.pre_call)
    with pytest.raises(ValueError):
        proxy_guardrail(tmp_path, mode="during_call")


def test_anthropic_messages_response_is_rewritten() -> None:
    """The proxy's /v1/messages: Anthropic history in, an Anthropic message out (tool_use blocks)."""
    guard = RecordingGuard()
    guardrail = LoopwatchGuardrail(guard)
    key = UserAPIKeyAuth(user_id="bob")
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "find it"}]}]

    async def turn(n: int) -> dict[str, Any]:
        data = {"model": "claude", "messages": list(history), "metadata": {"loopwatch_session": "claude-1"}}
        data = await guardrail.async_pre_call_hook(key, DualCache(), data, "anthropic_messages")
        response = {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Searching ({n})."},
                {"type": "tool_use", "id": f"toolu_{n}", "name": "search", "input": {"q": "x"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        out: dict[str, Any] = await guardrail.async_post_call_success_hook(data, key, response)
        history.append({"role": "assistant", "content": out["content"]})
        for block in out["content"]:
            if block["type"] == "tool_use":
                history.append(
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "no results"}],
                    }
                )
        return data

    async def run() -> list[dict[str, Any]]:
        return [await turn(n) for n in range(5)]

    requests = asyncio.run(run())
    assert guard.actions() == ["ok", "ok", "nudge", "ok", "block"]
    assert [r.tool for r in guard.results()] == ["search"] * 4  # tool names found from the tool_use ids
    nudged = requests[3]["messages"][-1]
    assert nudged["role"] == "user" and nudged["content"].startswith(MARK)
    refused = history[-1]
    assert [b["type"] for b in refused["content"]] == ["text", "text"]
    assert "was not run" in refused["content"][-1]["text"]


# -- configuration and the import without litellm ------------------------------------------------------------


def test_configuration() -> None:
    with pytest.raises(ConfigError):
        LoopwatchGuardrail(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchGuardrail(Guard(), store="memory://")
    with pytest.raises(ConfigError):
        LoopwatchGuardrail(nudge_role="assistant")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LoopwatchGuardrail(max_sessions=0)
    with pytest.raises(ConfigError, match=r"event_hook: .*expected one of 'pre_call', 'post_call'"):
        LoopwatchGuardrail(event_hook="no-such-hook")  # LiteLLM's own ValueError, named
    assert LoopwatchGuardrail(event_hook="pre_call").event_hook == "pre_call"
    lw = LoopwatchGuardrail(preset="doom-loop")
    assert lw.guard.policy.name == "doom-loop" and "LoopwatchGuardrail(" in repr(lw)
    assert lw.guardrail_name == "loopwatch" and lw.default_on


def test_sessions_are_bounded_and_forgotten(provider: Callable[[Script], Scripted]) -> None:
    provider(lambda n: "ok")
    guard = RecordingGuard()
    lw = LoopwatchGuardrail(guard, max_sessions=2)
    litellm.callbacks = [lw]

    async def ask(session: str) -> None:
        await litellm.acompletion(
            model="scripted/x", messages=[{"role": "user", "content": "hi"}], metadata={"loopwatch_session": session}
        )

    for name in ("a", "b", "c"):
        asyncio.run(ask(name))
    assert set(guard.sessions()) == {"b", "c"}  # "a" dropped with its bookkeeping
    lw.forget("b")
    assert guard.sessions() == ["c"]


def test_loopwatch_imports_without_litellm_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("litellm", "litellm", "litellm")
