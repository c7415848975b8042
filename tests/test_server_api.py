"""The service's JSON API through a real ``loopwatch serve`` process: every endpoint, its answers against the
in-process guard's, the security settings, and bad input (a JSON error with a stable code, nothing written)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwatch import Guard
from loopwatch.server._openapi import document
from service_process import HOST, ServiceProcess, session_events

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

REPO = Path(__file__).resolve().parents[1]
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef00"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    audit = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    with ServiceProcess(
        "--store", "memory://", "--max-body", "20000", "--max-batch", "50", "--audit", str(audit),
        tokens={"alice": ALICE, "bob": BOB},
    ) as running:  # fmt: skip
        running.audit = audit  # type: ignore[attr-defined]
        yield running


def _events_of(service: ServiceProcess, session: str) -> int:
    status, body = service.call("GET", f"/v1/sessions/{session}/snapshot")
    assert status == 200
    return int(body["state"]["index"])


# -- the API ------------------------------------------------------------------------------------------------------


def test_one_event_at_a_time_gets_the_in_process_guards_verdicts(service: ServiceProcess) -> None:
    local = Guard("default", clock=None)
    for n in (0, 1, 3):
        for event in session_events(n, 12):
            status, body = service.call("POST", f"/v1/sessions/api-one-{n}/events", {"event": event, "agent": "coder"})
            assert status == 200, body
            expected = local.observe(f"api-one-{n}", event).to_json()
            got = body["verdict"]
            assert got["recorded"] is True
            assert {k: got.get(k) for k in expected} == expected
    status, summary = service.call("GET", "/v1/sessions/api-one-0")
    assert status == 200 and summary["stopped"] is True and summary["events"] == 25
    assert summary["stop"]["action"] == "stop"


def test_a_batch_is_judged_in_order(service: ServiceProcess) -> None:
    events = session_events(6, 12)
    status, body = service.call("POST", "/v1/sessions/api-batch/events", {"events": events, "model": "m-1"})
    assert status == 200
    local = Guard("default", clock=None)
    assert [v["action"] for v in body["verdicts"]] == [local.observe("x", e).action for e in events]
    assert "stop" in [v["action"] for v in body["verdicts"]]
    assert [v["index"] for v in body["verdicts"]] == list(range(len(events)))


def test_reset_snapshot_restore_forget(service: ServiceProcess) -> None:
    events = session_events(9, 4)
    service.call("POST", "/v1/sessions/api-life/events", {"events": events})
    status, snap = service.call("GET", "/v1/sessions/api-life/snapshot")
    assert status == 200 and snap["session"] == "api-life" and snap["state"]["index"] == len(events)
    assert service.call("GET", "/v1/sessions/api-life")[1]["streaks"]  # a nudge on the failing command
    status, body = service.call("POST", "/v1/sessions/api-life/reset", {"limits": False})
    assert status == 200 and body == {"session": "api-life", "reset": True, "limits": False}
    summary = service.call("GET", "/v1/sessions/api-life")[1]
    assert summary["streaks"] == {} and summary["events"] == len(events)
    status, body = service.call("PUT", "/v1/sessions/api-copy/snapshot", snap)
    assert status == 200 and body["restored"] is True
    copied = service.call("GET", "/v1/sessions/api-copy/snapshot")[1]
    assert copied["state"] == snap["state"]
    # the restored copy goes on exactly as the original would have
    local = Guard("default", clock=None)
    for event in events:
        local.observe("orig", event)
    extra = session_events(9, 6)[len(events) :]
    for event in extra:
        got = service.call("POST", "/v1/sessions/api-copy/events", {"event": event})[1]["verdict"]
        assert got["action"] == local.observe("orig", event).action
    assert "api-copy" in service.call("GET", "/v1/sessions")[1]["sessions"]
    status, body = service.call("DELETE", "/v1/sessions/api-copy")
    assert status == 200 and body["forgotten"] is True
    assert "api-copy" not in service.call("GET", "/v1/sessions")[1]["sessions"]
    assert service.call("GET", "/v1/sessions/api-copy")[0] == 404


def test_sessions_and_swarms_are_listed(service: ServiceProcess) -> None:
    call = {"type": "tool_call", "tool": "search", "args": {"q": "the same"}}
    for worker in ("w1", "w2", "w3"):
        status, _ = service.call("POST", f"/v1/sessions/swarm-{worker}/events", {"event": call, "swarm": "team-a"})
        assert status == 200
    status, body = service.call("GET", "/v1/sessions?limit=2&offset=0")
    assert status == 200 and len(body["sessions"]) == 2 and body["total"] >= 3
    status, body = service.call("GET", "/v1/swarms")
    assert {"swarm": "team-a", "sessions": 3} in body["swarms"]
    status, counts = service.call("GET", "/v1/swarms/team-a")
    assert status == 200 and [c[0] for c in counts["counts"].values()] == [3]
    assert service.call("DELETE", "/v1/swarms/team-a")[1]["cleared"] is True
    assert service.call("GET", "/v1/swarms/team-a")[1]["counts"] == {}
    assert service.call("PUT", "/v1/swarms/team-a", counts)[1]["restored"] is True
    assert service.call("GET", "/v1/swarms/team-a")[1]["counts"] == counts["counts"]


def test_board_rates_timeline_and_live_stream(service: ServiceProcess) -> None:
    secret = "sk-ant-api03-" + "x" * 40
    event = {"type": "tool_call", "tool": "bash", "args": {"command": f"curl -H 'x-api-key: {secret}' api"}}
    for _ in range(3):
        service.call("POST", "/v1/sessions/board-1/events", {"event": event, "agent": "fixer", "model": "m-2"})
    status, board = service.call("GET", "/v1/board")
    assert status == 200
    row = next(r for r in board["rows"] if r["session"] == "board-1")
    assert row["agent"] == "fixer" and row["model"] == "m-2" and row["last"]["action"] == "nudge"
    assert any(f["session"] == "board-1" and f["action"] == "nudge" for f in board["feed"])
    status, timeline = service.call("GET", "/v1/board/sessions/board-1")
    assert status == 200 and len(timeline["steps"]) == 3
    assert timeline["steps"][-1]["verdict"]["evidence"]["indices"] == [0, 1, 2]
    assert secret not in json.dumps(timeline) and "[REDACTED]" in json.dumps(timeline)
    assert timeline["colours"]["actions"]["stop"]  # the report's colours
    rates = service.call("GET", "/v1/board/rates?dimension=agent")[1]
    assert sum(p[2] for p in rates["series"]["fixer"]) == 1
    assert service.call("GET", "/v1/board/rates?dimension=colour")[0] == 422
    connection = http.client.HTTPConnection(HOST, service.port, timeout=10)
    connection.request("GET", "/v1/live", headers={"Authorization": f"Bearer {ALICE}"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream")
    first = b""
    while b"\n\n" not in first:
        first += response.read1(65536)
    connection.close()
    assert first.startswith(b"event: board\ndata: ")
    message = json.loads(first.split(b"data: ", 1)[1].split(b"\n\n", 1)[0])
    assert any(r["session"] == "board-1" for r in message["rows"])


def test_metrics_openapi_health_and_dashboard(service: ServiceProcess) -> None:
    service.call("POST", "/v1/sessions/metrics-1/events", {"event": {"type": "message", "role": "user", "text": "hi"}})
    status, text = service.call("GET", "/metrics")
    assert status == 200
    assert 'loopwatch_events_total{type="message"}' in text
    assert re.search(r'loopwatch_verdicts_total\{action="stop",pattern="\w+"\} [1-9]', text)
    assert "loopwatch_request_seconds_bucket" in text and "loopwatch_event_seconds_count" in text
    assert "loopwatch_store_errors_total" in text and "loopwatch_judge_calls" in text
    status, served = service.call("GET", "/v1/openapi.json", token=None)
    assert status == 200 and served == document()
    assert json.loads((REPO / "docs" / "openapi.json").read_text()) == served, (
        "docs/openapi.json is stale: python -m loopwatch.server._openapi > docs/openapi.json"
    )
    for path in served["paths"]:
        if "{" not in path and path not in ("/v1/live",):
            assert service.call("GET", path)[0] in (200, 405), path
    assert service.call("GET", "/v1/health", token=None) == (
        200,
        {"status": "ok", "version": served["info"]["version"], "store": True},
    )
    status, headers, _ = service.call_full("GET", "/", token=None)
    assert status in (302, 307) and headers["location"] == "/dashboard/"
    for page, marker in (("/dashboard/", "<title>loopwatch live</title>"), ("/dashboard/dashboard.js", "follow")):
        status, text = service.call("GET", page, token=None)
        assert status == 200 and marker in text


def test_the_claude_code_hook_route(service: ServiceProcess) -> None:
    common = {"session_id": "cc-1", "cwd": "/w", "hook_event_name": "PreToolUse", "tool_name": "Bash"}
    answers = []
    for n in range(8):
        payload = {**common, "tool_input": {"command": "make"}, "tool_use_id": f"t{n}"}
        answers.append(service.call("POST", "/loopwatch/claude-code", payload)[1])
        failed = {**payload, "hook_event_name": "PostToolUseFailure", "error": "make: *** [all] Error 2"}
        service.call("POST", "/loopwatch/claude-code", failed)
    assert answers[0] == {}
    assert any("hookSpecificOutput" in a for a in answers)
    assert service.call("POST", "/loopwatch/claude-code", raw=b"not json")[1] == {}
    assert service.call("POST", "/loopwatch/claude-code", {}, token=None)[0] == 401


def test_audit_records_name_the_token(service: ServiceProcess) -> None:
    for _ in range(3):
        service.call("POST", "/v1/sessions/audit-1/events", {"event": {"type": "tool_call", "tool": "ls"}}, token=BOB)
    service.call("POST", "/v1/sessions/audit-1/reset", token=ALICE)
    records = [json.loads(line) for line in service.audit.read_text().splitlines()]  # type: ignore[attr-defined]
    nudge = next(r for r in records if r["session"] == "audit-1" and r["event"] == "loop.nudge")
    reset = next(r for r in records if r["session"] == "audit-1" and r["event"] == "api.reset")
    assert nudge["client"] == "bob" and reset["client"] == "alice"
    assert ALICE not in service.audit.read_text() and BOB not in service.audit.read_text()  # type: ignore[attr-defined]


# -- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b"{not json", 400, "malformed_json"),
        (b"\xff\xfe", 400, "malformed_json"),
        (b"[1, 2]", 422, "invalid_request"),
        (b'{"event": {"type": "teleport"}}', 422, "invalid_event"),
        (b'{"event": {"type": "tool_call"}}', 422, "invalid_event"),
        (b'{"event": {"type": "tool_call", "tool": "a"}, "events": []}', 422, "invalid_request"),
        (b'{"events": {"type": "tool_call"}}', 422, "invalid_request"),
        (b'{"event": {"type": "tool_call", "tool": "a"}, "agent": 7}', 422, "invalid_request"),
        (b'{"events": [{"type": "tool_call", "tool": "a"}, {"type": "nope"}]}', 422, "invalid_event"),
        (json.dumps({"events": [{"type": "reset"}] * 51}).encode(), 413, "batch_too_large"),
        (
            json.dumps({"event": {"type": "message", "role": "user", "text": "x" * 30_000}}).encode(),
            413,
            "body_too_large",
        ),
    ],
)
def test_bad_input_is_a_json_error_and_writes_nothing(
    service: ServiceProcess, raw: bytes, status: int, code: str
) -> None:
    service.call("POST", "/v1/sessions/bad-1/events", {"event": {"type": "reset"}})
    before = _events_of(service, "bad-1")
    got_status, body = service.call("POST", "/v1/sessions/bad-1/events", raw=raw)
    assert (got_status, body["error"]["code"]) == (status, code), body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert _events_of(service, "bad-1") == before


def test_a_bad_event_in_a_batch_names_its_position(service: ServiceProcess) -> None:
    raw = b'{"events": [{"type": "reset"}, {"type": "tool_call", "tool": 5}]}'
    status, body = service.call("POST", "/v1/sessions/bad-2/events", raw=raw)
    assert status == 422 and body["error"]["position"] == 1 and body["error"]["field"] == "tool"


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789abc", ALICE[:-1], ALICE + "x", ""])
def test_a_missing_or_wrong_token_is_401(service: ServiceProcess, token: str | None) -> None:
    status, headers, body = service.call_full(
        "POST", "/v1/sessions/auth-1/events", {"event": {"type": "reset"}}, token=token
    )
    assert status == 401 and body["error"]["code"] == "unauthorized"
    assert headers["www-authenticate"].startswith("Bearer")
    assert service.call("GET", "/v1/sessions/auth-1")[0] == 404  # nothing written


def test_unknown_paths_and_methods(service: ServiceProcess) -> None:
    status, body = service.call("GET", "/v1/nothing-here")
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body = service.call("PATCH", "/v1/sessions/x/events", {})
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    status, body = service.call("PUT", "/v1/sessions/bad-3/snapshot", {"session": "x", "state": {"index": "?"}})
    assert (status, body["error"]["code"]) == (422, "invalid_snapshot")
    assert service.call("GET", "/v1/sessions/bad-3")[0] == 404


def test_no_cors_headers_unless_configured(service: ServiceProcess) -> None:
    headers = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    _status, answer, _ = service.call_full("OPTIONS", "/v1/sessions/x/events", headers=headers)
    assert "access-control-allow-origin" not in answer
    with ServiceProcess("--cors", "https://ops.example", tokens={"alice": ALICE}) as cors:
        _, answer, _ = cors.call_full("GET", "/v1/sessions", headers={"Origin": "https://ops.example"})
        assert answer["access-control-allow-origin"] == "https://ops.example"
        _, answer, _ = cors.call_full("GET", "/v1/sessions", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in answer


def test_too_many_requests_is_429_per_token() -> None:
    with ServiceProcess("--rate", "1", "--burst", "3", tokens={"alice": ALICE, "bob": BOB}) as limited:
        statuses = [limited.call("POST", "/v1/sessions/r/events", {"event": {"type": "reset"}})[0] for _ in range(6)]
        assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:]
        status, headers, body = limited.call_full("POST", "/v1/sessions/r/events", {"event": {"type": "reset"}})
        assert status == 429 and body["error"]["code"] == "rate_limited" and int(headers["retry-after"]) >= 1
        assert limited.call("GET", "/v1/sessions/r", token=BOB)[1]["events"] == 3  # bob has his own bucket


def test_listening_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch", "serve", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 2 and "needs a bearer token" in done.stderr
    short = tmp_path / "tokens"
    short.write_text("alice short\n")
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch", "serve", "--token-file", str(short), "--port", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "shorter than 16" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch", "serve", "--workers", "2", "--port", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "store" in done.stderr


@pytest.mark.parametrize("missing", ["starlette", "prometheus_client"])
def test_create_app_without_the_server_extra_names_it(missing: str) -> None:
    code = f"""
import sys
sys.modules[{missing!r}] = None  # as if the server extra were not installed
from loopwatch.errors import MissingExtraError
try:
    from loopwatch.server import create_app
except MissingExtraError as exc:
    assert isinstance(exc, ImportError)
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{missing} is not installed: pip install 'loopwatch[server]'" in proc.stdout
