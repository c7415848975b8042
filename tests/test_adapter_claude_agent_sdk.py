"""The Claude Agent SDK adapter: the real ``HookMatcher`` callbacks, called with the SDK's own input ``TypedDict``\\ s.

The SDK's agent loop is not run (it needs the Claude Code CLI and an API login): each test plays the part of
the CLI, sending the hook inputs Claude Code sends around a tool call (``PreToolUse``, then ``PostToolUse``
unless the call was denied) and reading the callbacks' answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, ResultMessage, Transport
from claude_agent_sdk.types import (
    HookContext,
    HookEvent,
    HookInput,
    HookJSONOutput,
    PostToolUseFailureHookInput,
    PostToolUseHookInput,
    PreToolUseHookInput,
    StopHookInput,
    UserPromptSubmitHookInput,
)

from adapter_support import check_missing_framework
from loopwatch import Guard
from loopwatch.adapters.claude_agent_sdk import HOOK_EVENTS, hook_output, loopwatch_hooks

CONTEXT: HookContext = {"signal": None}
BASE: dict[str, str] = {"transcript_path": "/tmp/t.jsonl", "cwd": "/repo"}


class FakeCli:
    """Sends hook inputs to the callbacks of a ``hooks`` dict as the SDK would (every matcher of the event)."""

    def __init__(self, hooks: dict[HookEvent, list[HookMatcher]], session: str = "sess-1") -> None:
        self.hooks = hooks
        self.session = session
        self.calls = 0

    def fire(self, payload: HookInput) -> list[HookJSONOutput]:
        matchers = self.hooks.get(payload["hook_event_name"], [])

        async def run() -> list[HookJSONOutput]:
            return [
                await callback(payload, payload.get("tool_use_id"), CONTEXT)  # type: ignore[arg-type]
                for matcher in matchers
                for callback in matcher.hooks
            ]

        return asyncio.run(run())

    def one(self, payload: HookInput) -> HookJSONOutput:
        outputs = self.fire(payload)
        assert len(outputs) == 1
        return outputs[0]

    def tool(
        self, name: str, tool_input: dict[str, Any], response: Any
    ) -> tuple[HookJSONOutput, HookJSONOutput | None]:
        """One tool call: the PreToolUse answer, and the PostToolUse answer (None when the call was denied)."""
        self.calls += 1
        use_id = f"toolu_{self.calls:04d}"
        pre = self.one(
            PreToolUseHookInput(
                session_id=self.session,
                hook_event_name="PreToolUse",
                tool_name=name,
                tool_input=tool_input,
                tool_use_id=use_id,
                **BASE,  # type: ignore[typeddict-item]
            )
        )
        if denied(pre):
            return pre, None
        post = self.one(
            PostToolUseHookInput(
                session_id=self.session,
                hook_event_name="PostToolUse",
                tool_name=name,
                tool_input=tool_input,
                tool_response=response,
                tool_use_id=use_id,
                duration_ms=12 + self.calls,
                **BASE,  # type: ignore[typeddict-item]
            )
        )
        return pre, post

    def prompt(self, text: str) -> HookJSONOutput:
        return self.one(
            UserPromptSubmitHookInput(
                session_id=self.session,
                hook_event_name="UserPromptSubmit",
                prompt=text,
                **BASE,  # type: ignore[typeddict-item]
            )
        )


def answer(pending: Awaitable[HookJSONOutput]) -> HookJSONOutput:
    async def wait() -> HookJSONOutput:
        return await pending

    return asyncio.run(wait())


def specific(output: HookJSONOutput) -> dict[str, Any]:
    return cast("dict[str, Any]", output.get("hookSpecificOutput") or {})


def denied(output: HookJSONOutput) -> bool:
    return specific(output).get("permissionDecision") == "deny"


def nudge(output: HookJSONOutput | None) -> str | None:
    return None if output is None else specific(output).get("additionalContext")


def stopped(output: HookJSONOutput | None) -> bool:
    return output is not None and output.get("continue_") is False


BASH_FAIL = {"stdout": "FAILED tests/test_x.py::test_a - AssertionError", "stderr": "", "interrupted": False}


# -- wiring ------------------------------------------------------------------------------------------------


def test_hooks_are_real_hook_matchers_for_claude_agent_options() -> None:
    hooks = loopwatch_hooks()
    assert list(hooks) == list(HOOK_EVENTS)
    for event, matchers in hooks.items():
        assert len(matchers) == 1 and isinstance(matchers[0], HookMatcher), event
        assert matchers[0].matcher is None and len(matchers[0].hooks) == 1
        assert asyncio.iscoroutinefunction(matchers[0].hooks[0])
    callbacks = {m.hooks[0] for ms in hooks.values() for m in ms}
    assert len(callbacks) == 1  # one guard, one callback, shared by the events
    options = ClaudeAgentOptions(hooks=hooks)
    assert options.hooks is hooks


def test_ok_is_an_empty_answer() -> None:
    cli = FakeCli(loopwatch_hooks())
    pre, post = cli.tool("Read", {"file_path": "/repo/a.py"}, {"type": "text", "file": {"content": "x = 1\n"}})
    assert pre == {} and post == {}
    assert cli.prompt("fix the test") == {}
    assert hook_output(None) == {}


# -- scenarios ---------------------------------------------------------------------------------------------


def test_the_same_call_again_and_again_nudges_then_denies_then_stops() -> None:
    cli = FakeCli(loopwatch_hooks(preset="default"))
    answers = [cli.tool("Bash", {"command": "pytest -x"}, BASH_FAIL) for _ in range(10)]

    first_nudge = next(i for i, (pre, post) in enumerate(answers) if nudge(pre) or nudge(post))
    first_deny = next(i for i, (pre, _) in enumerate(answers) if denied(pre))
    first_stop = next(i for i, (pre, post) in enumerate(answers) if stopped(pre) or stopped(post))
    assert first_nudge < first_deny < first_stop
    assert all(not denied(pre) and not stopped(pre) for pre, _ in answers[:first_nudge])

    pre, _ = answers[first_nudge]
    assert specific(pre)["hookEventName"] == "PreToolUse" and "Bash" in specific(pre)["additionalContext"]
    assert "permissionDecision" not in specific(pre)

    pre, post = answers[first_deny]
    assert post is None  # a denied call does not run: no PostToolUse
    assert specific(pre) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": specific(pre)["permissionDecisionReason"],
    }
    assert "Bash" in specific(pre)["permissionDecisionReason"]
    assert "continue_" not in pre

    pre, post = answers[first_stop]
    assert post is None and denied(pre)
    assert pre["continue_"] is False and "continue" not in pre  # type: ignore[typeddict-item]
    reason = pre["stopReason"]  # type: ignore[typeddict-item]
    assert reason.startswith("loopwatch: LOOP_DETECTED (repeat): ") and "Bash" in reason
    assert set(pre) == {"continue_", "stopReason", "hookSpecificOutput"}


def test_the_stop_answer_reaches_the_cli_as_continue_false() -> None:
    internal = pytest.importorskip("claude_agent_sdk._internal.query")
    convert = getattr(internal, "_convert_hook_output_for_cli", None)
    if convert is None:
        pytest.skip("the SDK no longer has _convert_hook_output_for_cli")
    cli = FakeCli(loopwatch_hooks())
    answers = [cli.tool("Bash", {"command": "make"}, BASH_FAIL)[0] for _ in range(10)]
    wire = json.loads(json.dumps(convert(dict(answers[-1]))))
    assert wire["continue"] is False and "continue_" not in wire
    assert wire["stopReason"].startswith("loopwatch: ")


def test_an_a_b_cycle_is_caught() -> None:
    cli = FakeCli(loopwatch_hooks())
    outputs: list[HookJSONOutput | None] = []
    for _ in range(10):
        outputs.extend(cli.tool("Read", {"file_path": "/repo/a.py"}, {"file": {"content": "a = 1\n"}}))
        outputs.extend(cli.tool("Edit", {"file_path": "/repo/a.py", "old_string": "1", "new_string": "2"}, "ok"))
    assert any(nudge(o) for o in outputs)
    assert any(o is not None and (denied(o) or stopped(o)) for o in outputs)
    assert any(stopped(o) for o in outputs)


def test_polling_with_changing_results_is_never_denied() -> None:
    cli = FakeCli(loopwatch_hooks())
    for i in range(40):
        pre, post = cli.tool("Bash", {"command": "gh run view 42 --json status"}, {"stdout": f"in_progress {i}%"})
        assert not denied(pre) and not stopped(pre), (i, pre)
        assert post is not None and not stopped(post), (i, post)


def test_sessions_are_isolated() -> None:
    hooks = loopwatch_hooks()
    looping, other = FakeCli(hooks, "sess-a"), FakeCli(hooks, "sess-b")
    answers = [looping.tool("Bash", {"command": "pytest"}, BASH_FAIL)[0] for _ in range(10)]
    assert stopped(answers[-1])
    pre, post = other.tool("Bash", {"command": "pytest"}, BASH_FAIL)
    assert pre == {} and post == {}


def test_a_prompt_after_a_stop_starts_the_session_afresh() -> None:
    cli = FakeCli(loopwatch_hooks())
    answers = [cli.tool("Bash", {"command": "pytest"}, BASH_FAIL)[0] for _ in range(10)]
    assert stopped(answers[-1])
    assert cli.prompt("try something else") == {}
    pre, post = cli.tool("Bash", {"command": "pytest"}, BASH_FAIL)
    assert pre == {} and post == {}


def test_repeated_failures_nudge_on_post_tool_use_failure() -> None:
    cli = FakeCli(loopwatch_hooks())
    answers = []
    for i in range(8):  # different commands, the same failure each time
        pre = cli.one(
            PreToolUseHookInput(
                session_id="sess-1",
                hook_event_name="PreToolUse",
                tool_name="Bash",
                tool_input={"command": f"make v{i}"},
                tool_use_id=f"toolu_{i}",
                **BASE,  # type: ignore[typeddict-item]
            )
        )
        assert pre == {}
        failure = PostToolUseFailureHookInput(
            session_id="sess-1",
            hook_event_name="PostToolUseFailure",
            tool_name="Bash",
            tool_input={"command": f"make v{i}"},
            tool_use_id=f"toolu_{i}",
            error="Exit code 2\nmake: *** No rule to make target",
            **BASE,  # type: ignore[typeddict-item]
        )
        answers.append(cli.one(failure))
    nudged = [a for a in answers if nudge(a)]
    assert nudged and specific(nudged[0])["hookEventName"] == "PostToolUseFailure"
    assert "No rule" in specific(nudged[0])["additionalContext"]


def test_a_repeated_final_message_is_shown_to_the_user_then_stopped() -> None:
    cli = FakeCli(loopwatch_hooks())
    stop = StopHookInput(
        session_id="sess-1",
        hook_event_name="Stop",
        stop_hook_active=False,
        last_assistant_message="I will now run the tests again to check the fix.",
        **BASE,  # type: ignore[typeddict-item]
    )
    answers = [cli.one(stop) for _ in range(8)]
    shown = [a for a in answers if "systemMessage" in a]
    assert shown and shown[0]["systemMessage"].startswith("loopwatch: ")  # type: ignore[typeddict-item]
    assert all("hookSpecificOutput" not in a and "decision" not in a for a in answers)  # never keeps Claude going
    assert any(stopped(a) for a in answers)


def test_a_given_guard_is_used() -> None:
    guard = Guard()
    cli = FakeCli(loopwatch_hooks(guard))
    cli.tool("Grep", {"pattern": "foo"}, "no matches")
    assert guard.snapshot("sess-1")["state"]


def test_subagents_get_sessions_of_their_own() -> None:
    guard = Guard()
    hooks = loopwatch_hooks(guard)
    payload = PreToolUseHookInput(
        session_id="sess-1",
        hook_event_name="PreToolUse",
        tool_name="Grep",
        tool_input={"pattern": "foo"},
        tool_use_id="toolu_sub",
        agent_id="agent-7",
        agent_type="Explore",
        **BASE,  # type: ignore[typeddict-item]
    )
    assert FakeCli(hooks).one(payload) == {}
    assert "sess-1/agent-agent-7" in guard.sessions()


def test_bad_input_and_errors_fail_open(caplog: pytest.LogCaptureFixture) -> None:
    hooks = loopwatch_hooks()
    callback = hooks["PreToolUse"][0].hooks[0]
    with caplog.at_level(logging.WARNING, logger="loopwatch.adapters.claude_agent_sdk"):
        no_session: Any = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}
        assert answer(callback(no_session, None, CONTEXT)) == {}
        no_tool: Any = {"hook_event_name": "PreToolUse", "session_id": "s", "tool_input": {}}
        assert answer(callback(no_tool, None, CONTEXT)) == {}
        other: Any = {"hook_event_name": "PreCompact", "session_id": "s", "trigger": "auto"}
        assert answer(callback(other, None, CONTEXT)) == {}
    assert "session_id" in caplog.text and "tool_name" in caplog.text

    class Broken(Guard):
        def observe(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("store down")

    broken = loopwatch_hooks(Broken())["PreToolUse"][0].hooks[0]
    payload: Any = {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {}}
    with caplog.at_level(logging.ERROR, logger="loopwatch.adapters.claude_agent_sdk"):
        assert answer(broken(payload, "toolu_1", CONTEXT)) == {}
    assert "store down" in caplog.text


# -- through the SDK's client, with a scripted CLI -------------------------------------------------------------


class ScriptedCli(Transport):
    """A ``Transport`` (the SDK's interface for custom transports) playing the Claude Code CLI: it answers
    ``initialize``, and on the user's prompt calls the registered hook callbacks over the SDK's control protocol
    for ``calls`` runs of the same failing Bash command (no ``PostToolUse`` after a deny; the turn ends on a
    ``continue: false``), then sends the ``result`` message."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.callback_ids: dict[str, list[str]] = {}
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.answers: list[tuple[str, dict[str, Any]]] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        pass

    async def close(self) -> None:
        await self.queue.put(None)

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.queue.get()) is not None:
            yield message

    async def write(self, data: str) -> None:
        message = json.loads(data)
        if message["type"] == "control_request" and message["request"]["subtype"] == "initialize":
            for event, matchers in (message["request"].get("hooks") or {}).items():
                self.callback_ids[event] = [cid for matcher in matchers for cid in matcher["hookCallbackIds"]]
            response = {"subtype": "success", "request_id": message["request_id"], "response": {}}
            await self.queue.put({"type": "control_response", "response": response})
        elif message["type"] == "control_response":
            answer = message["response"]
            assert answer["subtype"] == "success", answer
            self.waiting.pop(answer["request_id"]).set_result(answer["response"])
        elif message["type"] == "user":
            self.tasks.append(asyncio.create_task(self.turn()))

    async def hook(self, payload: dict[str, Any]) -> dict[str, Any]:
        request_id = f"cli_{len(self.answers)}"
        self.waiting[request_id] = asyncio.get_running_loop().create_future()
        (callback_id,) = self.callback_ids[payload["hook_event_name"]]
        request = {
            "subtype": "hook_callback",
            "callback_id": callback_id,
            "input": payload,
            "tool_use_id": payload.get("tool_use_id"),
        }
        await self.queue.put({"type": "control_request", "request_id": request_id, "request": request})
        answer = await self.waiting[request_id]
        self.answers.append((payload["hook_event_name"], answer))
        return answer

    async def turn(self) -> None:
        stopped = False
        for i in range(self.calls):
            call = {"session_id": "sdk-1", "tool_name": "Bash", "tool_input": {"command": "pytest"}, **BASE}
            pre = await self.hook({**call, "hook_event_name": "PreToolUse", "tool_use_id": f"toolu_{i}"})
            if pre.get("continue") is False:
                stopped = True
                break
            if pre.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
                continue
            result = {"hook_event_name": "PostToolUse", "tool_use_id": f"toolu_{i}", "tool_response": BASH_FAIL}
            if (await self.hook({**call, **result})).get("continue") is False:
                stopped = True
                break
        result_message = {"type": "result", "subtype": "success", "duration_ms": 1, "duration_api_ms": 1}
        result_message.update(is_error=False, num_turns=1, session_id="sdk-1", result="stopped" if stopped else "done")
        await self.queue.put(result_message)


def test_through_the_sdk_client_and_its_control_protocol() -> None:
    cli = ScriptedCli(calls=12)

    async def run() -> list[Any]:
        received: list[Any] = []
        async with ClaudeSDKClient(ClaudeAgentOptions(hooks=loopwatch_hooks()), transport=cli) as client:
            await client.query("make the tests pass")
            received.extend([message async for message in client.receive_response()])
        return received

    messages = asyncio.run(run())
    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "stopped"
    assert set(cli.callback_ids) == set(HOOK_EVENTS)
    kinds = []
    for event, answer in cli.answers:
        hook = answer.get("hookSpecificOutput", {})
        assert "continue_" not in answer  # the SDK renamed it for the CLI
        if answer.get("continue") is False:
            kinds.append("stop")
            assert answer["stopReason"].startswith("loopwatch: LOOP_DETECTED (repeat): ")
        elif hook.get("permissionDecision") == "deny":
            kinds.append("deny")
        elif hook.get("additionalContext"):
            kinds.append("nudge")
            assert hook["hookEventName"] == event
        else:
            assert answer == {}, answer
            kinds.append("ok")
    assert kinds[-1] == "stop" and cli.answers[-1][0] == "PreToolUse"
    assert kinds.index("nudge") < kinds.index("deny") < kinds.index("stop")
    assert kinds.count("stop") == 1


def test_the_example_runs_offline() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "claude_agent_sdk_agent.py"
    done = subprocess.run(
        [sys.executable, str(example), "--offline"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("NUDGE" in line for line in lines) and any("DENY" in line for line in lines)
    assert "STOP the run: loopwatch: LOOP_DETECTED (repeat)" in lines[-1]


# -- without the SDK ---------------------------------------------------------------------------------------


def test_loopwatch_imports_without_the_sdk_and_the_adapter_names_the_extra() -> None:
    check_missing_framework(
        "claude_agent_sdk", "claude_agent_sdk", "claude-agent-sdk", also_import="loopwatch.adapters.claude_code"
    )
