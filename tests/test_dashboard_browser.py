"""The live dashboard in headless Chromium (Playwright), against a real ``loopwatch serve`` process: traffic
driven into the service shows up on the page (a stop in the feed, the session's row, its timeline with the
evidence), the filters work, a thousand live sessions are all listed, nothing is fetched from elsewhere and the
console stays clean. The browser is found by tests/browser.py (``LOOPWATCH_CHROMIUM``, the virtualenv's, a
system one); skipped with the reason when there is none, unless ``LOOPWATCH_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM_ARGS, chromium
from service_process import ServiceProcess, session_events

pytest.importorskip("starlette")

TOKEN = "dash-token-0123456789abcdef"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    with ServiceProcess("--store", "memory://", tokens={"ops": TOKEN}) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield launched
        finally:
            launched.close()


def _post(service: ServiceProcess, session: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = service.call("POST", f"/v1/sessions/{session}/events", body)
    assert status == 200, answer
    return dict(answer)


def test_traffic_appears_on_the_page(service: ServiceProcess, browser: Any, tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    console: list[str] = []
    foreign: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.on("request", lambda r: None if r.url.startswith(service.url) else foreign.append(r.url))
    page.goto(f"{service.url}/dashboard/#token={TOKEN}")
    page.wait_for_selector("#status[data-state='live']", timeout=20_000)
    assert "token" not in page.url  # the token leaves the address bar

    _post(service, "calm-1", {"events": session_events(1, 3), "agent": "reader", "model": "m-small"})
    answer = _post(service, "stuck-1", {"events": session_events(0, 12), "agent": "fixer", "model": "m-large"})
    assert answer["verdicts"][-1]["action"] == "stop"
    stop = page.wait_for_selector("#feed li[data-action='stop'][data-session='stuck-1']", timeout=10_000)
    assert "error_retry" in stop.inner_text() or "stop" in stop.inner_text()
    row = page.locator("#sessions tbody tr[data-session='stuck-1']")
    assert row.get_attribute("class") == "stopped"
    assert "fixer" in row.inner_text() and "stop" in row.inner_text()
    assert page.locator("#n-stopped").inner_text() == "1"

    row.click()
    page.wait_for_selector("#d-verdicts li[data-action='stop']", timeout=10_000)
    assert page.locator("#d-name").inner_text() == "stuck-1"
    assert page.locator("#d-timeline rect").count() >= 25
    assert '"indices"' in page.locator("#d-verdicts li[data-action='stop'] pre").inner_text()

    page.fill("#f-text", "calm")
    assert page.locator("#sessions tbody tr:not([hidden])").count() == 1
    page.fill("#f-text", "")
    page.select_option("#f-action", "stop")
    visible = page.locator("#sessions tbody tr:not([hidden])")
    assert visible.count() == 1 and visible.first.get_attribute("data-session") == "stuck-1"
    page.select_option("#f-action", "")
    page.select_option("#f-model", "m-small")
    assert page.locator("#sessions tbody tr:not([hidden])").first.get_attribute("data-session") == "calm-1"
    page.select_option("#f-model", "")
    page.wait_for_selector("#rates-legend li", timeout=15_000)
    assert "fixer" in page.locator("#rates-legend").inner_text()
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    if os.environ.get("LOOPWATCH_SCREENSHOT"):
        page.screenshot(path=os.environ["LOOPWATCH_SCREENSHOT"], full_page=True)
    assert not foreign, foreign
    assert not console, console
    page.close()


def test_a_thousand_live_sessions_are_listed(service: ServiceProcess, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{service.url}/dashboard/#token={TOKEN}")
    page.wait_for_selector("#status[data-state='live']", timeout=20_000)
    for n in range(1000):
        event = {"type": "tool_call", "tool": "fetch", "args": {"page": n}}
        _post(service, f"many-{n:04d}", {"event": event, "agent": f"agent-{n % 7}"})
    many = page.locator("#sessions tbody tr[data-session^='many-']")
    many.nth(999).wait_for(state="attached", timeout=30_000)
    assert many.count() == 1000
    # the page still answers: a filter narrows the 1,000 rows at once
    page.fill("#f-text", "many-0999")
    assert page.locator("#sessions tbody tr:not([hidden])").count() == 1
    assert not errors, errors
    page.close()
