"""The guard with its sessions in a store: events per second, latency, round trips and state size.

    python benchmarks/bench_store.py                     # memory, sqlite, sqlite-split, redis; 1 and 2 processes
    python benchmarks/bench_store.py --stores sqlite --sessions 200 --events 50 --json
    python benchmarks/bench_store.py --redis redis://127.0.0.1:6379/0   # an existing server

Each process runs one ``Guard("default-lexical", store=URL)`` over its own sessions of realistic mixed traffic (the same
generator as ``bench_guard.py``: tool calls with ~1 KB arguments, results of ~4 KB, messages of ~1 KB),
interleaved. With 2 processes both write to the same store at once (distinct sessions). ``memory`` is the
in-process guard without a store, for reference; ``sqlite-split`` gives each of the 2 processes a database
file of its own, for reference too: what the same work costs when the processes do not share a file.
Redis: a server is started from the test helper (``tests/redis_server.py``) on a free port unless
``--redis`` names one. Targets (issue 4): SQLite >= 5,000 events/s and Redis >= 10,000 events/s from 2
processes; 1 Redis round trip per event; stored state per session a few KB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bench_guard
from loopwatch import Guard

TARGETS = {"sqlite": 5_000.0, "redis": 10_000.0}


def _work(args: tuple[str | None, int, int, int, int]) -> dict[str, Any]:
    """One process: its sessions' events through a guard on ``url``; latencies in ns, round trips."""
    url, first, sessions, events, seed = args
    content = bench_guard.Content(seed)
    traffic = bench_guard.wave(content, first, sessions, events, seed)
    guard = Guard("default-lexical", clock=None, store=url)  # the model would load in every process
    store = guard.store
    trips_before = getattr(store, "round_trips", None)
    latencies = []
    started = time.perf_counter()
    for session, _, event in traffic:
        t0 = time.perf_counter_ns()
        guard.observe(session, event)
        latencies.append(time.perf_counter_ns() - t0)
    elapsed = time.perf_counter() - started
    trips = getattr(store, "round_trips", None)
    sizes = []
    if store is not None:
        for name, stored in store.sessions():
            if name.startswith(f"session-{first:06d}"):
                sizes.append(len(stored.state))
    return {
        "events": len(traffic),
        "seconds": elapsed,
        "latencies": latencies,
        "round_trips": None if trips is None or trips_before is None else trips - trips_before,
        "errors": guard.stats["store_errors"],
        "state_bytes": statistics.mean(sizes) if sizes else None,
    }


def measure(url: str | None, processes: int, sessions: int, events: int) -> dict[str, Any]:
    # "{process}" in a URL: each process its own store (sqlite-split)
    jobs = [(url and url.replace("{process}", str(p)), p * sessions, sessions, events, 7 + p) for p in range(processes)]
    started = time.perf_counter()
    if processes == 1:
        results = [_work(jobs[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            results = pool.map(_work, jobs)
    wall = time.perf_counter() - started
    total = sum(r["events"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies"])
    slowest = max(r["seconds"] for r in results)  # the processes run at once: the slowest one is the span
    trips = [r["round_trips"] for r in results if r["round_trips"] is not None]
    sizes = [r["state_bytes"] for r in results if r["state_bytes"] is not None]
    return {
        "processes": processes,
        "events": total,
        "events_per_s": round(total / slowest),
        "wall_s": round(wall, 2),
        "median_us": round(latencies[len(latencies) // 2] / 1000, 1),
        "p99_us": round(latencies[int(len(latencies) * 0.99)] / 1000, 1),
        "round_trips_per_event": round(sum(trips) / total, 2) if trips else None,
        "store_errors": sum(r["errors"] for r in results),
        "state_bytes": round(statistics.mean(sizes)) if sizes else None,
    }


def _redis_url(given: str | None) -> tuple[str, Any]:
    if given:
        return given, None
    from redis_server import RedisServer  # tests/redis_server.py

    server = RedisServer()
    server.start()
    return server.url, server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=["memory", "sqlite", "sqlite-split", "redis"])
    parser.add_argument("--sessions", type=int, default=100, help="sessions per process (default 100)")
    parser.add_argument("--events", type=int, default=50, help="events per session (default 50)")
    parser.add_argument("--redis", default=None, help="an existing server's URL (default: start one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    server = None
    with tempfile.TemporaryDirectory(prefix="loopwatch-bench-store-") as tmp:
        try:
            for name in args.stores:
                for processes in (1, 2):
                    if name == "memory":
                        if processes > 1:
                            continue  # in-process state cannot be shared
                        url = None
                    elif name == "sqlite":
                        url = f"sqlite:///{tmp}/bench-{processes}.db"
                    elif name == "sqlite-split":
                        if processes == 1:
                            continue  # the same as sqlite
                        url = f"sqlite:///{tmp}/bench-split-{{process}}.db"
                    else:
                        if server is None and not args.redis:
                            url, server = _redis_url(None)
                        base = args.redis or server.url
                        url = f"{base}?prefix=bench{processes}"
                    row = {"store": name, **measure(url, processes, args.sessions, args.events)}
                    target = TARGETS.get(name)
                    row["target"] = f">= {target:,.0f}/s (2 processes)" if target and processes == 2 else ""
                    row["ok"] = None if not row["target"] else row["events_per_s"] >= (target or 0)
                    rows.append(row)
        finally:
            if server is not None:
                server.stop()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    header = f"{'store':<13}{'procs':>6}{'events/s':>10}{'median us':>11}{'p99 us':>9}{'trips/ev':>9}{'state B':>9}"
    print(f"{args.sessions} sessions x {args.events} events per process (bench_guard traffic)")
    print(header + "  target")
    for r in rows:
        trips = "-" if r["round_trips_per_event"] is None else f"{r['round_trips_per_event']:.2f}"
        size = "-" if r["state_bytes"] is None else f"{r['state_bytes']:,}"
        verdict = "" if r["ok"] is None else ("ok" if r["ok"] else "MISSED")
        print(
            f"{r['store']:<13}{r['processes']:>6}{r['events_per_s']:>10,}{r['median_us']:>11.1f}{r['p99_us']:>9.1f}"
            f"{trips:>9}{size:>9}  {r['target']} {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
