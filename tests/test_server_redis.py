"""Replicas of the service sharing a real Valkey server: shared sessions, the dashboard's relay, two uvicorn
workers, a Redis outage under traffic (fail open and fail closed, never a 500, no acknowledged event lost) and a
replica killed mid-run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from loopwatch import Guard
from redis_server import RedisServer, server_binary_or_fail
from service_process import ServiceProcess, session_events

pytest.importorskip("starlette")
pytest.importorskip("redis")

TOKEN = "ops-token-0123456789abcdef"


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer(binary=server_binary_or_fail(), persistent=True) as server:
        yield server


def _observe(service: ServiceProcess, session: str, event: dict[str, object]) -> tuple[int, dict[str, object]]:
    status, body = service.call("POST", f"/v1/sessions/{session}/events", {"event": event, "agent": "tester"})
    return status, body


def test_two_replicas_share_sessions_and_the_dashboard(redis: RedisServer) -> None:
    store = f"{redis.url}?prefix=t1"
    with (
        ServiceProcess("--store", store, tokens={"ops": TOKEN}) as first,
        ServiceProcess("--store", store, tokens={"ops": TOKEN}) as second,
    ):
        local = Guard("default", clock=None)
        for n in range(4):
            for i, event in enumerate(session_events(n, 10)):
                replica = (first, second)[i % 2]  # every other event goes to the other replica
                status, body = _observe(replica, f"shared-{n}", event)
                assert status == 200
                expected = local.observe(f"shared-{n}", event).to_json()
                verdict = body["verdict"]
                assert isinstance(verdict, dict)
                assert {k: verdict.get(k) for k in expected} == expected
        assert sorted(first.call("GET", "/v1/sessions")[1]["sessions"]) == [f"shared-{n}" for n in range(4)]
        # the dashboard of either replica shows the traffic of both (relayed through Redis)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rows = {r["session"]: r for r in second.call("GET", "/v1/board")[1]["rows"]}
            if all(rows.get(f"shared-{n}", {}).get("events") == 21 for n in range(4)):
                break
            time.sleep(0.1)
        assert {s: r["events"] for s, r in rows.items()} == {f"shared-{n}": 21 for n in range(4)}
        assert rows["shared-0"]["stopped"] is True


def test_two_workers_add_up_their_metrics(redis: RedisServer) -> None:
    with ServiceProcess("--store", f"{redis.url}?prefix=t2", "--workers", "2", tokens={"ops": TOKEN}) as service:
        for i in range(40):
            assert _observe(service, f"w-{i % 5}", {"type": "tool_call", "tool": "ls", "args": {"i": i}})[0] == 200
        text = service.call("GET", "/metrics")[1]
        line = next(x for x in text.splitlines() if x.startswith('loopwatch_events_total{type="tool_call"}'))
        assert float(line.split()[-1]) == 40.0  # both workers' counts, whichever answered the scrape
        assert sum(service.call("GET", f"/v1/sessions/w-{k}")[1]["events"] for k in range(5)) == 40


def _drive(
    service: ServiceProcess, sessions: int, seconds: float, results: list[tuple[str, int, dict[str, object]]]
) -> None:
    """Send tool calls round robin until ``seconds`` have passed (bounded), keeping every answer."""
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline and i < 20_000:
        session = f"load-{i % sessions}"
        event = {"type": "tool_call", "tool": "read", "args": {"path": f"f{i}"}}
        try:
            status, body = _observe(service, session, event)
        except OSError as exc:
            results.append((session, -1, {"error": repr(exc)}))
        else:
            results.append((session, status, body))
        i += 1


@pytest.mark.parametrize("fail_closed", [False, True])
def test_redis_killed_and_restarted_under_traffic(redis: RedisServer, fail_closed: bool) -> None:
    args = ["--store", f"{redis.url}?prefix=t3", *(["--fail-closed"] if fail_closed else [])]
    with ServiceProcess(*args, tokens={"ops": TOKEN}) as service:
        results: list[tuple[str, int, dict[str, object]]] = []
        driver = threading.Thread(target=_drive, args=(service, 4, 6.0, results))
        driver.start()
        time.sleep(1.5)
        redis.stop()  # SIGKILL in the middle of the traffic
        time.sleep(1.5)
        redis.start()  # the append-only file brings back every acknowledged write
        driver.join()
        statuses = {status for _, status, _ in results}
        assert statuses == {200}, statuses  # never a 500, never a dropped connection
        recorded: dict[str, int] = {}
        unrecorded = []
        for session, _, body in results:
            verdict = body["verdict"]
            assert isinstance(verdict, dict)
            if verdict["recorded"]:
                recorded[session] = recorded.get(session, 0) + 1
            else:
                unrecorded.append(verdict)
        assert unrecorded, "the outage was not seen"
        expected_action = "block" if fail_closed else "ok"
        assert {v["action"] for v in unrecorded} == {expected_action}
        # no acknowledged event lost: each session's state counts at least every recorded event (an event whose
        # write reached Redis just before it died may be counted without having been acknowledged)
        for session, count in recorded.items():
            events = service.call("GET", f"/v1/sessions/{session}")[1]["events"]
            assert count <= events <= count + len(unrecorded), (session, count, events)
        status, health = service.call("GET", "/v1/health", token=None)
        assert status == 200 and health["store"] is True
        metrics = service.call("GET", "/metrics")[1]
        errors = next(x for x in metrics.splitlines() if x.startswith("loopwatch_store_errors_total"))
        assert float(errors.split()[-1]) >= len(unrecorded)


def test_a_replica_killed_mid_run_loses_nothing(redis: RedisServer) -> None:
    store = f"{redis.url}?prefix=t4"
    with (
        ServiceProcess("--store", store, tokens={"ops": TOKEN}) as first,
        ServiceProcess("--store", store, tokens={"ops": TOKEN}) as second,
    ):
        acknowledged: dict[str, int] = {}
        failed_over = 0
        replicas = [first, second]
        for i in range(400):
            session = f"kill-{i % 8}"
            if i == 150:
                first.kill()  # SIGKILL, no goodbye
            event = {"type": "tool_call", "tool": "read", "args": {"path": f"f{i}"}}
            for replica in replicas:
                try:
                    status, body = _observe(replica, session, event)
                except OSError:
                    replicas = [second]
                    failed_over += 1
                    continue
                assert status == 200
                verdict = body["verdict"]
                assert isinstance(verdict, dict) and verdict["recorded"] is True
                acknowledged[session] = acknowledged.get(session, 0) + 1
                break
        assert failed_over == 1 and sum(acknowledged.values()) == 400
        stored = {s: second.call("GET", f"/v1/sessions/{s}")[1]["events"] for s in acknowledged}
        assert stored == acknowledged
        assert json.dumps(second.call("GET", "/v1/health", token=None)[1])
