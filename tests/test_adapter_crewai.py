"""The CrewAI adapter against the real framework (``Crew.kickoff``), a scripted ``BaseLLM``: no network."""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import pytest

# CrewAI: no telemetry, no tracing (nor its interactive prompt), its data files in a scratch directory; LiteLLM
# (which CrewAI uses when it is installed): no download of its model price list
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    LITELLM_LOCAL_MODEL_COST_MAP="True",
    CREWAI_DISABLE_TRACKING="true",
    CREWAI_TRACING_ENABLED="false",
    CREWAI_TESTING="true",
    OTEL_SDK_DISABLED="true",
    XDG_DATA_HOME=os.path.join(tempfile.gettempdir(), "loopwatch-crewai-tests"),
)

pytest.importorskip("crewai", reason="the crewai extra is not installed")

from crewai import Agent, Crew, Task
from crewai import hooks as crewai_hooks
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

from adapter_support import RecordingGuard, check_missing_framework
from loopwatch import ConfigError, Guard, LoopwatchError, ToolCall
from loopwatch.adapters.crewai import LoopStopped, LoopwatchCrewAI
from loopwatch.core._events import Usage
from loopwatch.core._limits import max_tokens
from loopwatch.core._policy import Policy
from loopwatch.core._verdict import LOOP_DETECTED, Verdict

BLOCKED = "Tool execution blocked by hook. Tool:"  # what CrewAI shows the model for a refused call
REPEATED = "I tried reusing the same input"  # CrewAI's own refusal of a call that repeats the previous one
# newer CrewAI (e.g. 1.15) runs after_tool_call for a refused call, and ends a run itself on the 5th identical
# (tool, arguments, result); older CrewAI (e.g. 1.6, the version the test extra pins) does neither
AFTER_HOOK_ON_REFUSAL = importlib.util.find_spec("crewai.hooks.dispatch") is not None
REPEAT_CHECK = hasattr(importlib.import_module("crewai.utilities.agent_utils"), "check_repeated_tool_call")

# -- the scripted model ----------------------------------------------------------------------------------


def action(tool_name: str, thought: str = "", **args: Any) -> str:
    head = f"Thought: {thought}\n" if thought else ""
    return f"{head}Action: {tool_name}\nAction Input: {json.dumps(args)}"


def final(answer: str) -> str:
    return f"Thought: I now know the final answer\nFinal Answer: {answer}"


class Scripted(BaseLLM):  # type: ignore[misc]
    """A CrewAI ``BaseLLM`` answering request ``n`` (from 0) with ``script(n)`` in CrewAI's text (ReAct) format;
    records the text of every input. ``tokens``: the (input, output) tokens it counts for each call."""

    def __init__(self, script: Callable[[int], str], tokens: tuple[int, int] = (0, 0)) -> None:
        super().__init__(model="scripted")
        self.script = script
        self.tokens = tokens
        self.inputs: list[str] = []

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.inputs.append(_text(messages))
        if any(self.tokens):
            self._track_token_usage_internal({"prompt_tokens": self.tokens[0], "completion_tokens": self.tokens[1]})
        return self.script(len(self.inputs) - 1)

    def supports_function_calling(self) -> bool:
        return False


def _text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    return "\n".join(str(m.get("content", "")) for m in messages)


class LoggingGuard(RecordingGuard):
    """A recording guard that also appends every (event, verdict) to ``log`` (shared with the tools)."""

    def __init__(self, preset: str | Policy = "default", log: list[Any] | None = None) -> None:
        super().__init__(preset)
        self.log = log if log is not None else []

    def observe(self, session: str, event: Any, *, swarm: str | None = None) -> Verdict:
        verdict = super().observe(session, event, swarm=swarm)
        self.log.append((event, verdict))
        return verdict


def runs_per_call(log: list[Any]) -> list[tuple[str, int]]:
    """For each tool call the guard judged: its verdict and how many times a tool body ran before the next one."""
    out: list[tuple[str, int]] = []
    for entry in log:
        if entry == "ran" and out:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        elif isinstance(entry, tuple) and isinstance(entry[0], ToolCall):
            out.append((entry[1].action, 0))
    return out


def make_tools(log: list[Any], info: Callable[[], str] | None = None, fail: bool = False) -> list[Any]:
    @tool("search")
    def search(query: str) -> str:
        """Search the web."""
        log.append("ran")
        if fail:
            raise RuntimeError("search backend: disk full")
        return "no results"

    @tool("fetch")
    def fetch(url: str) -> str:
        """Fetch a page."""
        log.append("ran")
        return "a page"

    @tool("build_info")
    def build_info(build: str) -> str:
        """What a build is doing."""
        log.append("ran")
        return info() if info is not None else "running: 40% done"

    @tool("pause")
    def pause(seconds: int) -> str:
        """Wait a while."""
        log.append("ran")
        return f"paused {seconds} s"

    return [search, fetch, build_info, pause]


def make_crew(llm: BaseLLM, tools: list[Any], *, max_iter: int = 25, cache: bool = True) -> Crew:
    """One agent, one task. ``cache=False``: neither the agent nor the crew serves repeated calls from CrewAI's
    cache, so every call that is let through runs the tool."""
    agent = Agent(
        role="researcher",
        goal="answer the question",
        backstory="a careful researcher",
        llm=llm,
        tools=tools,
        max_iter=max_iter,
        cache=cache,
        verbose=False,
    )
    task = Task(description="Answer the question.", expected_output="the answer", agent=agent)
    return Crew(agents=[agent], tasks=[task], cache=cache, verbose=False)


def global_hooks() -> list[list[Any]]:
    return [
        crewai_hooks.get_before_tool_call_hooks(),
        crewai_hooks.get_after_tool_call_hooks(),
        crewai_hooks.get_before_llm_call_hooks(),
        crewai_hooks.get_after_llm_call_hooks(),
    ]


# -- (1) the same call forever: nudge, then block, then stop ------------------------------------------------


def test_repeat_nudges_then_blocks_then_stops() -> None:
    llm = Scripted(lambda n: action("search", "I should search.", query="weather in Paris"))
    log: list[Any] = []
    guard = LoggingGuard(log=log)
    crew = make_crew(llm, make_tools(log))
    hooks_before = global_hooks()

    with pytest.raises(LoopStopped) as caught:
        LoopwatchCrewAI(guard).kickoff(crew, loop_session="repeat-1")

    stop = caught.value
    assert isinstance(stop, LoopwatchError)
    assert stop.verdict.action == "stop" and stop.verdict.pattern == "repeat"
    assert stop.status == LOOP_DETECTED and stop.session == "repeat-1" and stop.output is None
    assert "LOOP_DETECTED" in str(stop)
    if AFTER_HOOK_ON_REFUSAL:  # newer CrewAI: a HookAborted, which CrewAI passes on as is
        assert isinstance(stop, importlib.import_module("crewai.hooks.dispatch").HookAborted)

    # the guard saw every call the model made, and the run ended before the model was called again
    calls = guard.calls()
    assert len(calls) == len(llm.inputs)
    assert all(c.tool == "search" and dict(c.args) == {"query": "weather in Paris"} for c in calls)
    assert calls[0].thought == "I should search."
    assert guard.actions() == ["ok", "ok", "nudge", "ok", "block", "block", "block", "stop"]
    assert {s for s, _, _ in guard.seen} == {"repeat-1"}

    # the nudge reached the model on its next call, and stayed in the conversation
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and "3 times" in nudge
    assert [n for n, text in enumerate(llm.inputs) if nudge in text] == list(range(3, len(llm.inputs)))

    # a refused call: the tool did not run, and the model read loopwatch's reason on its next call
    block = guard.verdicts("block")[0].message
    assert block and block in llm.inputs[5] and block not in llm.inputs[4]
    if AFTER_HOOK_ON_REFUSAL:  # the reason replaced CrewAI's fixed text as the call's observation
        assert f"Observation: {block}" in llm.inputs[5] and BLOCKED not in llm.inputs[5]
    else:  # CrewAI's fixed text is the observation, the reason follows it as a message
        assert f"Observation: {BLOCKED} search" in llm.inputs[5] and BLOCKED not in llm.inputs[4]
    assert [runs for _, runs in runs_per_call(log)] == [1, 0, 0, 0, 0, 0, 0, 0]  # CrewAI refused 2-4, we 5-8

    # CrewAI's own refusal of the repeated call is not a result: only the one real result was observed
    assert [r.output for r in guard.results()] == ["no results"]
    assert global_hooks() == hooks_before  # nothing left installed


# -- (2) an A-B cycle -------------------------------------------------------------------------------------


def test_ab_cycle_is_caught_and_refused_calls_never_run() -> None:
    def script(n: int) -> str:
        return action("search", query="paris") if n % 2 == 0 else action("fetch", url="https://example.com")

    llm = Scripted(script)
    log: list[Any] = []
    guard = LoggingGuard(log=log)
    crew = make_crew(llm, make_tools(log), cache=False)

    with pytest.raises(LoopStopped) as caught:
        LoopwatchCrewAI(guard).kickoff(crew)

    assert caught.value.verdict.action == "stop" and caught.value.verdict.pattern == "cycle"
    assert {v.pattern for v in guard.verdicts("nudge") + guard.verdicts("block")} == {"cycle"}
    per_call = runs_per_call(log)
    assert len(per_call) == len(guard.calls()) == len(llm.inputs)
    assert all(runs == (1 if verdict in ("ok", "nudge") else 0) for verdict, runs in per_call)
    assert any(verdict == "block" for verdict, _ in per_call)


# -- (3) polling with changing results is progress; the same loop with a constant result is not --------------
#
# CrewAI refuses a call that repeats the previous one ("I tried reusing the same input"), so an agent polls by
# alternating the look-up with a wait. The tool names are neutral (not "status", "wait"...: loopwatch treats those
# as polling whatever they return), so only the results tell progress from a loop; they change in words (the
# default outcome fingerprint ignores digits: a bare percentage would look the same each time).

PHASES = ["queued", "compiling sources", "linking", "running unit tests", "running integration tests", "packaging"]


def polling(polls: int) -> Callable[[int], str]:
    def script(n: int) -> str:
        if n >= polls:
            return final("build 42 passed")
        return action("build_info", build="42") if n % 2 == 0 else action("pause", seconds=30)

    return script


def test_polling_with_changing_results_completes() -> None:
    phases = iter(PHASES)
    llm = Scripted(polling(12), tokens=(10, 5))
    log: list[Any] = []
    guard = LoggingGuard(log=log)
    crew = make_crew(llm, make_tools(log, info=lambda: f"build 42: {next(phases)}"), cache=False)

    output = LoopwatchCrewAI(guard).kickoff(crew)

    assert "build 42 passed" in output.raw
    assert len(guard.calls()) == 12 and log.count("ran") == 12
    assert guard.verdicts("stop") == [] and guard.verdicts("block") == []
    outputs = [r.output for r in guard.results() if r.tool == "build_info"]
    assert outputs == [f"build 42: {phase}" for phase in PHASES]  # CrewAI's format reminder cut off
    assert all(r.is_error is False for r in guard.results())
    usage = [e for _, e, _ in guard.seen if isinstance(e, Usage)]
    assert len(usage) == 13 and {(u.input_tokens, u.output_tokens) for u in usage} == {(10, 5)}


def test_the_same_polling_loop_with_a_constant_result_is_stopped() -> None:
    llm = Scripted(polling(40))
    log: list[Any] = []
    guard = LoggingGuard(log=log)
    crew = make_crew(llm, make_tools(log), cache=False)  # build_info: always "running: 40% done"

    with pytest.raises(LoopStopped) as caught:
        LoopwatchCrewAI(guard).kickoff(crew)
    assert caught.value.verdict.pattern == "cycle" and len(guard.calls()) < 20
    assert log.count("ran") < len(guard.calls())


# -- CrewAI's own defences do not mask loopwatch's ------------------------------------------------------------


def test_crewai_defences_alone_do_not_end_the_loop_and_do_not_hide_it_from_the_guard() -> None:
    looping = lambda n: action("search", query="weather in Paris")  # noqa: E731

    # without loopwatch: CrewAI refuses the repeated call from the 2nd time on; then either the run goes on to
    # max_iter (and CrewAI makes up a final answer), or (newer CrewAI) it fails on the 5th identical refusal
    alone = Scripted(looping)
    ran: list[Any] = []
    crew = make_crew(alone, make_tools(ran))
    if REPEAT_CHECK:
        with pytest.raises(Exception, match="same arguments 5 times"):
            crew.kickoff()
        assert 5 < len(alone.inputs) < 25  # its refusals differ every 3rd time (a format reminder is added)
    else:
        crew.kickoff()
        assert len(alone.inputs) >= 25
    assert REPEATED in alone.inputs[2] and REPEATED not in alone.inputs[1] and ran.count("ran") == 1

    # with loopwatch: CrewAI's refusal still comes first, yet loopwatch sees every call, nudges the model before
    # CrewAI would end anything, and ends the run itself with its documented stop
    llm = Scripted(looping)
    guard = LoggingGuard()
    with pytest.raises(LoopStopped):
        LoopwatchCrewAI(guard).kickoff(make_crew(llm, make_tools([])))
    nudge = guard.verdicts("nudge")[0].message
    assert nudge and REPEATED in llm.inputs[2]
    assert next(n for n, text in enumerate(llm.inputs) if nudge in text) == 3
    assert len(guard.calls()) == len(llm.inputs) == 8


# -- failing tools ------------------------------------------------------------------------------------------


def test_a_failing_call_retried_is_seen_as_an_error_and_refused() -> None:
    llm = Scripted(lambda n: action("search", query="x"))
    log: list[Any] = []
    guard = LoggingGuard(log=log)

    with pytest.raises(LoopStopped) as caught:
        LoopwatchCrewAI(guard).kickoff(make_crew(llm, make_tools(log, fail=True)))

    errors = guard.results()
    assert errors and all(r.is_error and "disk full" in r.output and r.tool == "search" for r in errors)
    assert guard.verdicts("nudge")[0].pattern == "error_retry"
    assert caught.value.verdict.pattern in ("error_retry", "repeat")
    per_call = runs_per_call(log)
    assert all((runs > 0) == (verdict in ("ok", "nudge")) for verdict, runs in per_call)
    assert any(verdict == "block" for verdict, _ in per_call)


# -- a stop on the run's last response, a limit's status ------------------------------------------------------


def test_a_stop_on_the_last_response_is_raised_with_the_output() -> None:
    guard = Guard(Guard().policy.replace(limits=max_tokens(10)))
    llm = Scripted(lambda n: final("42"), tokens=(12, 3))

    with pytest.raises(LoopStopped) as caught:
        LoopwatchCrewAI(guard).kickoff(make_crew(llm, make_tools([])))

    assert caught.value.status == "MAX_TOKENS" and caught.value.output is not None
    assert "42" in caught.value.output.raw and len(llm.inputs) == 1


# -- sessions: one per run; crews and guards do not see each other ------------------------------------------------


def test_two_runs_do_not_share_state() -> None:
    llm = Scripted(lambda n: action("search", query="x") if n % 3 < 2 else final("ok"))
    guard = LoggingGuard()
    crew = make_crew(llm, make_tools([]))
    lw = LoopwatchCrewAI(guard)

    assert "ok" in lw.kickoff(crew).raw
    assert "ok" in lw.kickoff(crew).raw

    sessions = [s for s, e, _ in guard.seen if isinstance(e, ToolCall)]
    assert len(sessions) == 4 and sessions[0] == sessions[1] and sessions[2] == sessions[3]
    assert sessions[0] != sessions[2] and sessions[0].startswith("crewai-")
    assert guard.actions() == ["ok", "ok", "ok", "ok"]  # two calls per run: the second run starts afresh
    assert guard.sessions() == []  # fresh sessions are forgotten when their run ends


def test_a_crew_started_inside_a_tool_is_not_watched_by_the_outer_guard() -> None:
    inner_llm = Scripted(lambda n: action("fetch", url="https://example.com") if n < 3 else final("inner done"))
    inner = make_crew(inner_llm, make_tools([]))
    inner_outputs: list[str] = []

    @tool("delegate")
    def delegate(question: str) -> str:
        """Ask another crew."""
        inner_outputs.append(inner.kickoff().raw)
        return inner_outputs[-1]

    outer_llm = Scripted(lambda n: action("delegate", question="why?") if n == 0 else final("outer done"))
    guard = LoggingGuard()
    output = LoopwatchCrewAI(guard).kickoff(make_crew(outer_llm, [delegate]))

    assert "outer done" in output.raw and inner_outputs and "inner done" in inner_outputs[0]
    assert [c.tool for c in guard.calls()] == ["delegate"]  # not the inner crew's fetch calls
    assert len(inner_llm.inputs) == 4


def test_two_crews_with_two_guards_at_the_same_time() -> None:
    barrier = threading.Barrier(2, timeout=120)
    met: list[str] = []

    def crew_of(tool_name: str, args: dict[str, Any]) -> Crew:
        def meet(n: int) -> str:
            return action(tool_name, **args) if n < 4 else final(f"{tool_name} done")

        tools = make_tools([])
        first = next(t for t in tools if t.name == tool_name)
        original = first.func

        def waiting(**kwargs: Any) -> Any:  # both runs are inside a tool at once: both sets of hooks installed
            if tool_name not in met:
                met.append(tool_name)
                barrier.wait()
            return original(**kwargs)

        first.func = waiting
        return make_crew(Scripted(meet), tools, cache=False)

    guards = {"search": LoggingGuard(), "fetch": LoggingGuard()}
    crews = {"search": crew_of("search", {"query": "a"}), "fetch": crew_of("fetch", {"url": "b"})}
    outputs: dict[str, Any] = {}

    def run(name: str) -> None:
        outputs[name] = LoopwatchCrewAI(guards[name]).kickoff(crews[name])

    threads = [threading.Thread(target=run, args=(name,)) for name in guards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(met) == ["fetch", "search"] and not barrier.broken
    for name, guard in guards.items():
        assert f"{name} done" in outputs[name].raw
        assert [c.tool for c in guard.calls()] == [name] * 4
        assert len({s for s, _, _ in guard.seen}) == 1


def test_run_session_by_hand_and_configuration() -> None:
    llm = Scripted(lambda n: action("search", query="x"))
    guard = LoggingGuard()
    lw = LoopwatchCrewAI(guard, session="fixed")
    crew = make_crew(llm, make_tools([]))
    with lw.run_session(crew) as run, pytest.raises(Exception):  # noqa: B017 - CrewAI's own error or LoopStopped
        crew.kickoff()
    stop = run.stopped()
    assert stop is not None and stop.session == "fixed" and stop.verdict.pattern == "repeat"
    assert "fixed" in guard.sessions()  # a named session is kept

    with pytest.raises(ConfigError):
        LoopwatchCrewAI(Guard(), preset="default")
    with pytest.raises(ConfigError):
        LoopwatchCrewAI(session=3)  # type: ignore[arg-type]
    assert "LoopwatchCrewAI(" in repr(LoopwatchCrewAI())


def test_loopwatch_imports_without_crewai_and_the_adapter_names_the_extra() -> None:
    check_missing_framework("crewai", "crewai", "crewai")
