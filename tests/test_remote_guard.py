"""ServiceGuard (loopwatch.remote) against a real ``loopwatch serve`` process: the in-process guard's verdicts,
the one setting that moves the framework adapters onto the service, and a service that is down."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from loopwatch import Guard, ToolCall
from loopwatch.adapters._shared import guard_of
from loopwatch.errors import StateError
from loopwatch.remote import SERVICE_TOKEN_ENV, SERVICE_URL_ENV, ServiceError, ServiceGuard
from redis_server import free_port
from service_process import ServiceProcess, session_events

pytest.importorskip("starlette")

TOKEN = "agents-token-0123456789abcdef"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    with ServiceProcess("--store", "memory://", tokens={"agents": TOKEN}) as running:
        yield running


def test_the_service_guard_gives_the_in_process_verdicts(service: ServiceProcess) -> None:
    remote = ServiceGuard(service.url, token=TOKEN, agent="py-agent")
    local = Guard("default", clock=None)
    for n in (0, 1):
        for event in session_events(n, 10):
            assert remote.observe(f"remote-{n}", event) == local.observe(f"remote-{n}", event)
    assert remote.observe("remote-2", ToolCall("ls")).index == 0
    snapshot = remote.snapshot("remote-0")
    assert snapshot["state"] == local.snapshot("remote-0")["state"]
    remote.restore(snapshot, "remote-copy")
    assert "remote-copy" in remote.sessions()
    remote.reset("remote-0")
    assert service.call("GET", "/v1/sessions/remote-0")[1]["stopped"] is False
    remote.forget("remote-copy")
    assert "remote-copy" not in remote.sessions()
    with pytest.raises(StateError):
        remote.restore({"session": "x", "state": {"index": "?"}})
    assert remote.observe("remote-3", {"type": "nope"}).index == -1 and remote.stats["skipped"] == 1


def test_one_setting_moves_the_adapters_onto_the_service(
    service: ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SERVICE_URL_ENV, service.url)
    monkeypatch.setenv(SERVICE_TOKEN_ENV, TOKEN)
    guard = guard_of(None, None)
    assert isinstance(guard, ServiceGuard)
    from loopwatch.adapters.smolagents import LoopwatchCallback

    callback = LoopwatchCallback(session="smol-1")
    assert isinstance(callback.guard, ServiceGuard)
    for _ in range(3):
        callback.guard.observe("smol-1", ToolCall("search", {"q": "same"}))
    assert service.call("GET", "/v1/sessions/smol-1")[1]["last"]["action"] == "nudge"
    from loopwatch.adapters.openai_agents import LoopwatchGuard

    assert isinstance(LoopwatchGuard().guard, ServiceGuard)
    from loopwatch.adapters.claude_agent_sdk import loopwatch_hooks

    hooks = loopwatch_hooks()
    callback = next(iter(hooks.values()))[0].hooks[0]
    payload = {"session_id": "sdk-1", "hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/w"}
    asyncio.run(callback({**payload, "tool_input": {"command": "ls"}, "tool_use_id": "t1"}, "t1", {}))
    assert service.call("GET", "/v1/sessions/sdk-1")[1]["events"] == 1  # judged by the service
    monkeypatch.delenv(SERVICE_URL_ENV)
    assert not isinstance(guard_of(None, None), ServiceGuard)


def test_a_service_that_is_down_fails_open_or_closed() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    opened = ServiceGuard(url, timeout=2)
    verdict = opened.observe("s", ToolCall("ls"))
    assert verdict.action == "ok" and verdict.index == -1 and opened.stats["store_errors"] == 1
    closed = ServiceGuard(url, timeout=2, on_store_error="block")
    assert closed.observe("s", ToolCall("ls")).action == "block"
    assert closed.observe("s", {"type": "message", "role": "user", "text": "hi"}).action == "ok"
    with pytest.raises(ServiceError):
        ServiceGuard(url, timeout=2, on_store_error="raise").observe("s", ToolCall("ls"))


def test_a_wrong_token_is_reported(service: ServiceProcess) -> None:
    guard = ServiceGuard(service.url, token="not-the-token-0123456789", on_store_error="raise")
    with pytest.raises(ServiceError) as raised:
        guard.observe("s", ToolCall("ls"))
    assert raised.value.status == 401 and raised.value.code == "unauthorized"


def test_evict_idle_is_unsupported_as_with_a_store() -> None:
    from loopwatch.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="ttl"):
        ServiceGuard("http://127.0.0.1:9", timeout=2).evict_idle(0)  # nothing is asked of the service
