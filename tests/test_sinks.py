"""Audit sinks (loopwatch.sinks) against real files and a real local HTTP server."""

from __future__ import annotations

import errno
import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopwatch.errors import ConfigError, LoopwatchError
from loopwatch.redact import REDACTED, Redactor
from loopwatch.sinks import (
    AuditWriteError,
    CallbackSink,
    JsonlAuditSink,
    MemorySink,
    Sink,
    WebhookSink,
    action_of,
    summarize,
)

SECRET = "sk-" + "abcdefghijklmnopqrstuvwxyz012345"
WAIT = 10.0  # generous upper bound for waits that normally end at once; never asserted on


def make_record(event: str = "loop.stop", action: str | None = "stop", **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "event": event,
        "ts": 1732240000.0,
        "session": "s1",
        "worker": None,
        "swarm": None,
        "index": 16,
        "action": action,
        "level": 3,
        "pattern": "repeat",
        "count": 3,
        "loop_start": 12,
        "status": None,
        "detector": "RepeatDetector(threshold=3)",
        "reason": "the same bash call failed 3 times",
        "message": "Stop retrying and change approach.",
        "evidence": {"tool": "bash", "args": {"api_key": SECRET, "path": "x"}, "indices": [12, 14, 16]},
    }
    record.update(extra)
    return record


# ------------------------------------------------------------------------------------------ server


@dataclass
class Server:
    """A real HTTP server on 127.0.0.1; what it does is set by the test."""

    url: str = ""
    status: int = 200
    block: bool = False  # hold each request until ``release`` is set
    bodies: list[Any] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", "0")))
        with self.lock:
            self.bodies.append(json.loads(body))
            self.headers.append(dict(handler.headers))
        if self.block:
            self.arrived.set()
            self.release.wait(WAIT)
        try:
            handler.send_response(self.status)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        except OSError:  # the client gave up (timeout test)
            pass
        finally:
            self.done.set()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            state.handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/hook/secret-part"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(WAIT)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# ------------------------------------------------------------------------------------------- JSONL


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_writes_one_redacted_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "nested" / "audit.jsonl"  # parent directories are created
    with JsonlAuditSink(path) as sink:
        sink.emit(make_record())
        sink.emit(make_record("loop.nudge", "nudge"))
        assert sink.records_written == 2
    lines = read_lines(path)
    assert [line["event"] for line in lines] == ["loop.stop", "loop.nudge"]
    assert lines[0]["evidence"]["args"] == {"api_key": REDACTED, "path": "x"}
    assert SECRET not in path.read_text()


def test_jsonl_record_is_on_disk_when_emit_returns(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path)
    sink.emit(make_record())
    assert read_lines(path)[0]["session"] == "s1"  # read back before close
    sink.close()


def test_jsonl_without_redaction_keeps_secrets(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditSink(path, redact=False, fsync=False) as sink:
        sink.emit(make_record())
    assert read_lines(path)[0]["evidence"]["args"]["api_key"] == SECRET


def test_jsonl_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for index in range(2):
        with JsonlAuditSink(path) as sink:
            sink.emit(make_record(index=index))
    assert [line["index"] for line in read_lines(path)] == [0, 1]


def test_jsonl_non_json_values_still_give_valid_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditSink(path) as sink:
        sink.emit(make_record(extra={object(), 2}, nan=float("inf")))
    line = read_lines(path)[0]
    assert line["nan"] == "inf"
    assert len(line["extra"]) == 2


def test_jsonl_disk_full_raises_audit_write_error() -> None:
    sink = JsonlAuditSink("/dev/full")
    with pytest.raises(AuditWriteError) as info:
        sink.emit(make_record())
    assert isinstance(info.value, LoopwatchError)
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOSPC
    assert info.value.path == "/dev/full"
    assert sink.records_written == 0
    sink.close()


def test_jsonl_unwritable_location_raises_audit_write_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file")
    with pytest.raises(AuditWriteError):
        JsonlAuditSink(blocker / "audit.jsonl")


def test_jsonl_character_device_without_fsync_support_works() -> None:
    with JsonlAuditSink("/dev/null", fsync=True) as sink:  # fsync would fail with EINVAL on /dev/null
        sink.emit(make_record())
        assert sink.records_written == 1


def test_jsonl_emit_after_close_raises(tmp_path: Path) -> None:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    sink.close()
    sink.close()  # idempotent
    with pytest.raises(AuditWriteError, match="closed"):
        sink.emit(make_record())


def test_jsonl_concurrent_emits_give_exactly_n_valid_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    threads, per_thread = 8, 60
    start = threading.Barrier(threads)
    sink = JsonlAuditSink(path, fsync=False)

    def work(worker: int) -> None:
        start.wait()
        for index in range(per_thread):
            sink.emit(make_record(worker=f"w{worker}", index=index, reason="r" * 500))

    pool = [threading.Thread(target=work, args=(worker,)) for worker in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    sink.close()
    lines = read_lines(path)
    assert len(lines) == threads * per_thread == sink.records_written
    assert {(line["worker"], line["index"]) for line in lines} == {
        (f"w{worker}", index) for worker in range(threads) for index in range(per_thread)
    }


def test_jsonl_repr(tmp_path: Path) -> None:
    with JsonlAuditSink(tmp_path / "a.jsonl", fsync=False) as sink:
        assert repr(sink) == (
            f"JsonlAuditSink(path={str(tmp_path / 'a.jsonl')!r}, fsync=False, redact=True, records_written=0)"
        )


# ------------------------------------------------------------------------------------ callback, memory


def test_callback_receives_a_redacted_copy() -> None:
    seen: list[dict[str, Any]] = []
    record = make_record()
    CallbackSink(seen.append).emit(record)
    assert seen[0]["evidence"]["args"]["api_key"] == REDACTED
    assert record["evidence"]["args"]["api_key"] == SECRET  # the caller's record is untouched


def test_callback_without_redaction() -> None:
    seen: list[dict[str, Any]] = []
    CallbackSink(seen.append, redact=False).emit(make_record())
    assert seen[0]["evidence"]["args"]["api_key"] == SECRET


def test_callback_errors_are_counted_and_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def explode(record: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    sink = CallbackSink(explode)
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        sink.emit(make_record())
        sink.emit(make_record())
    assert sink.errors == 2
    assert any("explode" in message and rec.exc_info for rec in caplog.records for message in [rec.getMessage()])
    assert repr(sink).startswith("CallbackSink(callback=")


def test_callback_must_be_callable() -> None:
    with pytest.raises(ConfigError) as info:
        CallbackSink("nope")  # type: ignore[arg-type]
    assert info.value.field == "callback"


def test_memory_sink_keeps_copies() -> None:
    sink = MemorySink()
    record = make_record()
    sink.emit(record)
    record["session"] = "changed"
    assert sink.records[0]["session"] == "s1"
    assert sink.records[0]["evidence"]["args"]["api_key"] == SECRET  # in-process: not redacted by default
    assert sink.events() == ["loop.stop"]
    assert len(sink) == 1
    assert repr(sink) == "MemorySink(records=1)"
    sink.clear()
    sink.close()
    assert len(sink) == 0
    assert sink.closed


def test_memory_sink_can_redact() -> None:
    sink = MemorySink(redact=Redactor(extra_keys=["path"]))
    sink.emit(make_record())
    assert sink.records[0]["evidence"]["args"] == {"api_key": REDACTED, "path": REDACTED}


def test_every_sink_satisfies_the_protocol(tmp_path: Path) -> None:
    webhook = WebhookSink(closed_port_url())
    jsonl = JsonlAuditSink(tmp_path / "a.jsonl")
    sinks: list[object] = [jsonl, CallbackSink(print), MemorySink(), webhook]
    assert all(isinstance(sink, Sink) for sink in sinks)
    webhook.close()
    jsonl.close()


# -------------------------------------------------------------------------------------------- webhook


def test_webhook_json_posts_the_redacted_record(server: Server) -> None:
    with WebhookSink(server.url) as sink:
        sink.emit(make_record())
        assert sink.flush(WAIT)
        assert sink.sent == 1
    body = server.bodies[0]
    assert body["event"] == "loop.stop"
    assert body["evidence"]["args"] == {"api_key": REDACTED, "path": "x"}
    assert server.headers[0]["Content-Type"] == "application/json"


def test_webhook_slack_payload(server: Server) -> None:
    with WebhookSink(server.url, format="slack") as sink:
        sink.emit(make_record(reason="loop <!channel> & co"))
        assert sink.flush(WAIT)
    body = server.bodies[0]
    assert set(body) == {"text", "blocks"}
    assert "\n" not in body["text"]
    assert "session s1" in body["text"]
    block = body["blocks"][0]
    assert block["type"] == "section"
    assert block["text"]["type"] == "mrkdwn"
    section = block["text"]["text"]
    for line in ("*Session:* s1", "*Pattern:* repeat", "*Action:* stop", "*Count:* 3"):
        assert line in section
    assert "*Reason:* loop &lt;!channel&gt; &amp; co" in section  # no mention, valid mrkdwn


def test_webhook_slack_respects_length_limits(server: Server) -> None:
    with WebhookSink(server.url, format="slack") as sink:
        sink.emit(make_record(reason="word " * 2000, session="s" * 5000))
        assert sink.flush(WAIT)
    body = server.bodies[0]
    assert len(body["text"]) <= 3000
    assert len(body["blocks"][0]["text"]["text"]) <= 3000


@pytest.mark.parametrize(
    ("event", "action", "color"),
    [
        ("loop.nudge", "nudge", 0xF1C40F),
        ("loop.block", "block", 0xE67E22),
        ("loop.stop", "stop", 0xE74C3C),
        ("session.terminated", None, 0xE74C3C),
    ],
)
def test_webhook_discord_payload(server: Server, event: str, action: str | None, color: int) -> None:
    with WebhookSink(server.url, format="discord") as sink:
        sink.emit(make_record(event, action))
        assert sink.flush(WAIT)
    body = server.bodies[0]
    assert "session s1" in body["content"]
    assert body["allowed_mentions"] == {"parse": []}
    embed = body["embeds"][0]
    assert embed["color"] == color
    assert embed["description"] == "the same bash call failed 3 times"
    assert embed["title"] == f"loopwatch {action or event}"
    fields = {item["name"]: item for item in embed["fields"]}
    assert fields["session"] == {"name": "session", "value": "s1", "inline": True}
    assert fields["pattern"]["value"] == "repeat"
    assert fields["count"]["value"] == "3"
    assert embed["timestamp"].startswith("2024-11-22T")


def test_webhook_discord_respects_length_limits(server: Server) -> None:
    with WebhookSink(server.url, format="discord") as sink:
        sink.emit(make_record(reason="x" * 9000, pattern="p" * 3000))
        assert sink.flush(WAIT)
    body = server.bodies[0]
    embed = body["embeds"][0]
    assert len(body["content"]) <= 2000
    assert len(embed["title"]) <= 256
    assert len(embed["description"]) <= 4096
    assert all(len(item["value"]) <= 1024 for item in embed["fields"])
    total = len(embed["title"]) + len(embed["description"])
    total += sum(len(item["name"]) + len(item["value"]) for item in embed["fields"])
    assert total <= 6000


def test_webhook_min_action_filters(server: Server) -> None:
    with WebhookSink(server.url, min_action="stop") as sink:
        for event, action in [
            ("loop.nudge", "nudge"),
            ("loop.block", "block"),
            ("limit.warning", None),
            ("loop.stop", "stop"),
            ("session.terminated", None),
        ]:
            sink.emit(make_record(event, action))
        assert sink.flush(WAIT)
        assert sink.skipped == 3
        assert sink.sent == 2
    assert sorted(body["event"] for body in server.bodies) == ["loop.stop", "session.terminated"]


def test_webhook_http_500_is_retried_then_counted_failed(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.status = 500
    with caplog.at_level(logging.WARNING, logger="loopwatch"), WebhookSink(server.url, retries=1) as sink:
        sink.emit(make_record())
        assert sink.flush(WAIT)
        assert (sink.sent, sink.failed) == (0, 1)
    assert len(server.bodies) == 2  # the first try and one retry
    assert any("HTTP 500" in record.getMessage() for record in caplog.records)
    assert all("secret-part" not in record.getMessage() for record in caplog.records)


def test_webhook_http_4xx_is_not_retried(server: Server) -> None:
    server.status = 404
    with WebhookSink(server.url, retries=3) as sink:
        sink.emit(make_record())
        assert sink.flush(WAIT)
        assert sink.failed == 1
    assert len(server.bodies) == 1


def test_webhook_timeout_is_counted_and_emit_does_not_wait(server: Server) -> None:
    server.block = True
    sink = WebhookSink(server.url, timeout=0.2, retries=0)
    sink.emit(make_record())
    # emit has returned; the server is still holding the request (it only answers once released)
    assert server.arrived.wait(WAIT)
    assert not server.done.is_set()
    assert sink.flush(WAIT)  # the client gave up after its 0.2 s timeout
    assert not server.done.is_set()
    assert (sink.sent, sink.failed) == (0, 1)
    server.release.set()
    sink.close()


def test_webhook_full_queue_drops_and_counts(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    server.block = True
    sink = WebhookSink(server.url, max_queue=2, timeout=WAIT)
    sink.emit(make_record(index=0))
    assert server.arrived.wait(WAIT)  # the worker holds record 0 in flight; the queue is empty
    with caplog.at_level(logging.WARNING, logger="loopwatch"):
        for index in range(1, 10):
            sink.emit(make_record(index=index))  # 1 and 2 fit in the queue, 3..9 do not
    assert sink.dropped == 7
    assert sink.pending == 3
    assert sum("dropped" in record.getMessage() for record in caplog.records) == 1  # warned once, not 7 times
    server.release.set()
    assert sink.flush(WAIT)
    assert sink.sent == 3
    assert sorted(body["index"] for body in server.bodies) == [0, 1, 2]
    sink.close()


def test_webhook_connection_refused_is_counted_failed(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="loopwatch"),
        WebhookSink(closed_port_url(), retries=1) as sink,
    ):
        sink.emit(make_record())
        assert sink.flush(WAIT)
        assert (sink.sent, sink.failed) == (0, 1)
    assert any("not delivered" in record.getMessage() for record in caplog.records)


def test_webhook_emit_after_close_is_dropped(server: Server) -> None:
    sink = WebhookSink(server.url)
    sink.close()
    sink.emit(make_record())
    assert sink.dropped == 1
    assert server.bodies == []


def test_webhook_close_delivers_what_is_queued(server: Server) -> None:
    sink = WebhookSink(server.url)
    for index in range(5):
        sink.emit(make_record(index=index))
    sink.close()
    assert sink.sent == 5
    assert sorted(body["index"] for body in server.bodies) == [0, 1, 2, 3, 4]


def test_webhook_snapshot_taken_at_emit(server: Server) -> None:
    server.block = True
    with WebhookSink(server.url, timeout=WAIT) as sink:
        sink.emit(make_record(index=0))
        assert server.arrived.wait(WAIT)  # the worker is busy: the next record waits in the queue
        record = make_record(index=1)
        sink.emit(record)
        record["session"] = "changed after emit"
        server.release.set()
        assert sink.flush(WAIT)
    assert [body["session"] for body in server.bodies] == ["s1", "s1"]


def test_webhook_custom_headers(server: Server) -> None:
    with WebhookSink(server.url, headers={"X-Team": "infra"}) as sink:
        sink.emit(make_record())
        assert sink.flush(WAIT)
    assert server.headers[0]["X-Team"] == "infra"


@pytest.mark.parametrize(
    ("kwargs", "field_name"),
    [
        ({"url": "ftp://example.com/hook"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "https://"}, "url"),
        ({"url": "https://example.com:99999/"}, "url"),
        ({"format": "xml"}, "format"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"retries": -1}, "retries"),
        ({"max_queue": 0}, "max_queue"),
        ({"min_action": "explode"}, "min_action"),
        ({"headers": {"X-Bad": "a\nb"}}, "headers"),
        ({"redact": "yes"}, "redact"),
    ],
)
def test_webhook_validates_arguments(kwargs: dict[str, Any], field_name: str) -> None:
    arguments: dict[str, Any] = {"url": "https://hooks.example.com/x", **kwargs}
    with pytest.raises(ConfigError) as info:
        WebhookSink(**arguments)
    assert info.value.field == field_name


def test_webhook_repr_hides_the_secret_path() -> None:
    sink = WebhookSink("https://hooks.slack.com/services/T000/B000/XXXXSECRET", format="slack")
    try:
        assert repr(sink) == "WebhookSink(url='https://hooks.slack.com/...', format='slack')"
    finally:
        sink.close()
    sink = WebhookSink("https://user:pw@example.com:8443/hook?token=abc", min_action="stop")
    try:
        assert repr(sink) == "WebhookSink(url='https://example.com:8443/...', format='json', min_action='stop')"
    finally:
        sink.close()


# --------------------------------------------------------------------------------------------- helpers


def test_action_of_and_summarize() -> None:
    assert action_of(make_record("loop.nudge", "nudge")) == "nudge"
    assert action_of(make_record("session.terminated", None)) == "terminated"
    assert action_of(make_record("limit.warning", None)) == "warning"
    assert action_of({"event": "something.else"}) is None
    summary = summarize(make_record(reason="line one\nline two"))
    assert summary == "loopwatch stop: session s1, repeat x3 - line one line two"
