"""Audit delivery and secrets under faults: a webhook server that trickles its answer, a process that exits
without closing its sinks, listeners, and credentials of the kinds that used to reach audit records."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from loopwatch import Guard, ToolCall, ToolResult
from loopwatch.redact import KEY_FORMATS, REDACTED, Redactor, redact
from loopwatch.sinks import MemorySink, WebhookSink

WAIT = 20.0  # a bound for waits that end much sooner; what is asserted is that they end, not how fast


# -- a server that never finishes its answer -------------------------------------------------------------------


class Trickler:
    """Accepts connections and answers one byte every 0.2 s, for ever: every socket operation of the client
    succeeds well within its time-out, so only a deadline on the whole delivery ends the post."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.connections = 0
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(1.0)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.stop.is_set():
                    conn.sendall(b"X")  # a header line that never ends
                    time.sleep(0.2)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def trickler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Trickler]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server = Trickler()
    yield server
    server.close()


def test_a_trickling_server_fails_each_record_at_its_deadline(trickler: Trickler) -> None:
    """Before, the worker read the never-ending answer for ever (each byte within the time-out): every later
    record waited behind it, uncounted."""
    sink = WebhookSink(trickler.url, timeout=1.0, deadline=0.6, retries=1)
    sink.emit({"event": "loop.stop", "action": "stop", "session": "a"})
    sink.emit({"event": "loop.stop", "action": "stop", "session": "b"})
    assert sink.flush(timeout=WAIT), "the worker is still held by the server"
    assert (sink.sent, sink.failed, sink.pending) == (0, 2, 0)
    sink.close(timeout=1.0)


def test_records_that_do_not_fit_the_queue_while_the_server_stalls_are_counted(trickler: Trickler) -> None:
    sink = WebhookSink(trickler.url, timeout=1.0, deadline=0.5, retries=0, max_queue=3)
    for i in range(20):
        sink.emit({"event": "loop.stop", "action": "stop", "session": str(i)})
    assert sink.flush(timeout=WAIT)
    assert sink.sent + sink.failed + sink.dropped == 20 and sink.dropped >= 16
    sink.close(timeout=1.0)


# -- a process that exits without close() ---------------------------------------------------------------------


class Collector:
    def __init__(self) -> None:
        self.bodies: list[Any] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                collector.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                time.sleep(0.05)  # a little slow: the records are still queued when the script ends
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _script(url: str, **options: Any) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        from loopwatch.sinks import WebhookSink
        sink = WebhookSink({url!r}, **{options!r})
        for i in range(10):
            sink.emit({{"event": "loop.stop", "action": "stop", "session": str(i)}})
        # no close(): the interpreter exits with the records queued
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)


def test_records_queued_when_the_process_exits_are_delivered() -> None:
    collector = Collector()
    done = _script(collector.url, exit_timeout=10.0)
    assert done.returncode == 0, done.stderr
    assert sorted(int(body["session"]) for body in collector.bodies) == list(range(10))
    collector.httpd.shutdown()


def test_records_that_cannot_be_delivered_at_exit_are_counted_and_logged(trickler: Trickler) -> None:
    done = _script(trickler.url, exit_timeout=0.5, deadline=0.3, retries=0)
    assert done.returncode == 0, done.stderr
    assert "audit records undelivered (counted as dropped)" in done.stderr


# -- listeners -------------------------------------------------------------------------------------------------


def _loop_with_a_secret(guard: Guard) -> None:
    for _ in range(3):
        guard.observe("s", ToolCall("http_get", {"url": "https://api.example.com", "api_key": "hf_" + "a" * 34}))
        guard.observe("s", ToolResult("403 Forbidden", tool="http_get", is_error=True))


def test_listeners_receive_redacted_records_unless_told_otherwise() -> None:
    seen: list[dict[str, Any]] = []
    _loop_with_a_secret(Guard(listeners=[seen.append]))
    assert seen and all("hf_" + "a" * 34 not in json.dumps(record) for record in seen)
    assert seen[0]["evidence"]["args"]["api_key"] == REDACTED
    raw: list[dict[str, Any]] = []
    _loop_with_a_secret(Guard(listeners=[raw.append], redact_listeners=False))
    assert raw[0]["evidence"]["args"]["api_key"] == "hf_" + "a" * 34
    custom: list[dict[str, Any]] = []
    _loop_with_a_secret(Guard(listeners=[custom.append], redact_listeners=Redactor(extra_keys=("url",))))
    assert custom[0]["evidence"]["args"]["url"] == REDACTED


def test_each_listener_gets_its_own_copy() -> None:
    def vandal(record: dict[str, Any]) -> None:
        record["evidence"]["args"]["url"] = "changed"

    seen: list[dict[str, Any]] = []
    sink = MemorySink()
    _loop_with_a_secret(Guard(listeners=[vandal, seen.append], sinks=[sink]))
    assert seen[0]["evidence"]["args"]["url"] == "https://api.example.com"
    assert sink.records[0]["evidence"]["args"]["url"] == "https://api.example.com"


# -- secrets -------------------------------------------------------------------------------------------------------

# Fake credentials in each vendor's documented shape, built from pieces so that no scanner takes this file for
# a leak.
SECRETS = {
    "stripe live": "sk_" + "live_" + "51HxYzAbCdEfGhIjKlMnOpQrStUv",
    "stripe test": "sk_" + "test_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe restricted": "rk_" + "live_" + "51HxYzAbCdEfGhIjKlMnOpQr",
    "stripe webhook": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "hugging face": "hf_" + "jhgTlxBcMSwZmDqYkRNVpEoFaWiUdGHkzQ",
    "hugging face org": "api_org_" + "kLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoPq",
    "gitlab pat": "glpat-" + "xR3nQ8vLk2pZ9mW4tY7c",
    "gitlab deploy": "gldt-" + "aB3cD4eF5gH6iJ7kL8mN",
    "gitlab runner": "GR1348941" + "zYxWvUtSrQpOnMlKjIhG",
    "sendgrid": "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    "azure client secret": "abc" + "8Q~" + "Qk9Z.pXw2Yb-L5nR7sT3vU1mC6dE8fGhJ4",
    "azure storage key": "AccountKey=" + "A" * 40 + "b" * 46 + "==",
    "npm": "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "pypi": "pypi-" + "AgEIcHlwaS5vcmc" + "x" * 60,
    "groq": "gsk_" + "Q" * 52,
    "openai project": "sk-proj-" + "Zx9_Yw8-Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
    "anthropic": "sk-ant-" + "api03-" + "q" * 40,
    "github": "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
    "google oauth": "GOCSPX-" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4",
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_key_formats_are_hidden_inside_text(name: str) -> None:
    secret = SECRETS[name]
    hidden = redact(f"deploy --env prod {secret} --verbose")
    assert secret not in hidden and REDACTED in hidden
    assert hidden.startswith("deploy --env prod ") and hidden.endswith(" --verbose")
    body = secret.split("=", 1)[-1]
    assert body[-12:] not in hidden  # nothing of the secret's end is left


@pytest.mark.parametrize(
    ("command", "secret"),
    [
        ("mysql -u root -pS3cr3tPass! -h db.internal shop", "S3cr3tPass!"),
        ("mysqldump -uadmin -p'hunter2xyz' --all-databases", "hunter2xyz"),
        ('mariadb -h db -p"quoted-pw-1" app', "quoted-pw-1"),
        ("sshpass -p 'Tr0ub4dor&3' ssh deploy@10.0.0.5 uptime", "Tr0ub4dor&3"),
        ("sshpass -pHorseBattery9 scp a.txt host:/tmp", "HorseBattery9"),
        ("redis-cli -h cache -a R3disP4ss ping", "R3disP4ss"),
        ("curl -u admin:Adm1nPassw0rd https://api.internal/v1", "Adm1nPassw0rd"),
        ("docker login -u bot -p Dock3rHubTok registry.example.com", "Dock3rHubTok"),
        ("deploy --password s3cret-value --user me", "s3cret-value"),
        (
            "az storage blob list --connection-string 'AccountName=x;AccountKey=abcDEF123==;EndpointSuffix=core'",
            "abcDEF123",
        ),
        ("GET https://acct.blob.core.windows.net/c/f?sv=2022&sig=Zm9vYmFyYmF6cXV4%3D&se=2030", "Zm9vYmFyYmF6cXV4"),
        ("MYSQL_PWD=Wh4tEver42 mysql -u root app", "Wh4tEver42"),
        ("SSHPASS=Sup3rS3cr3t sshpass -e ssh host", "Sup3rS3cr3t"),
        ("curl -H 'Ocp-Apim-Subscription-Key: 0123456789abcdef0123456789abcdef' https://x", "0123456789abcdef"),
    ],
)
def test_passwords_on_command_lines_are_hidden(command: str, secret: str) -> None:
    hidden = redact({"command": command})["command"]
    assert secret not in hidden and REDACTED in hidden
    assert hidden.replace(REDACTED, secret, 1) == command or secret[:4] not in hidden  # only the secret changed


def test_a_mysql_command_without_a_glued_password_is_left_alone() -> None:
    assert redact("mysql -p -u root shop") == "mysql -p -u root shop"  # -p alone asks for it
    assert redact("mysql --port 3306 -h db") == "mysql --port 3306 -h db"


@pytest.mark.parametrize(
    "headers",
    [
        [["Authorization", "Bearer abc"], ["X-Api-Key", "k3y"], ["Accept", "text/plain"]],
        [("Authorization", "Bearer abc"), ("X-Api-Key", "k3y"), ("Accept", "text/plain")],
        [{"name": "Authorization", "value": "Bearer abc"}, {"name": "X-Api-Key", "value": "k3y"},
         {"name": "Accept", "value": "text/plain"}],
        [{"key": "Authorization", "value": "Bearer abc"}, {"key": "X-Api-Key", "value": "k3y"},
         {"key": "Accept", "value": "text/plain"}],
        ["Authorization: Bearer abc", "X-Api-Key: k3y", "Accept: text/plain"],
    ],
)  # fmt: skip
def test_header_lists_with_credentials_are_hidden(headers: list[Any]) -> None:
    text = json.dumps(redact({"request": {"headers": headers}}))
    assert "abc" not in text and "k3y" not in text and "text/plain" in text


def test_the_cut_never_leaves_half_a_secret() -> None:
    """A secret across the 10,000-character cut used to be cut before being looked for: its first half,
    too short to be recognised, stayed in the record."""
    redactor = Redactor()
    for secret in SECRETS.values():
        for offset in range(1, len(secret), 5):
            text = "x " * ((redactor.max_string - offset) // 2) + " " * ((redactor.max_string - offset) % 2) + secret
            text += " and more" * 100
            clipped = redactor(text)
            middle, end = secret[len(secret) // 2 :][:8], secret[-8:]  # a public prefix (sk_live_) may stay
            assert middle not in clipped and end not in clipped, (secret, offset)
            assert clipped.endswith("chars]")


def test_every_key_format_has_a_sample_here() -> None:
    names = {name for name, _, _ in KEY_FORMATS}
    covered = {
        "OpenAI / Anthropic", "GitHub", "GitLab", "GitLab runner registration", "Stripe", "Stripe webhook",
        "Hugging Face", "Hugging Face organisation", "SendGrid", "AWS access key", "Google OAuth client secret",
        "npm", "PyPI", "Groq", "Azure AD client secret", "Azure storage key",
    }  # fmt: skip
    assert covered <= names


def test_secrets_never_reach_a_sink_or_listener_record() -> None:
    sink, heard = MemorySink(redact=True), []
    guard = Guard(sinks=[sink], listeners=[heard.append])
    for name, secret in SECRETS.items():
        for _ in range(4):
            guard.observe(name, ToolCall("bash", {"command": f"curl -H 'X-Key: {secret}' https://x"}))
            guard.observe(name, ToolResult(f"error: key {secret} rejected", tool="bash", is_error=True))
    records = json.dumps([*sink.records, *heard])
    assert len(sink.records) > 10 and len(heard) == len(sink.records)
    for secret in SECRETS.values():
        assert secret.split("=", 1)[-1] not in records
