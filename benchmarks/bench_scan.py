"""Scan throughput over the whole corpus, against the floor of merely reading and hashing it.

    python benchmarks/bench_scan.py                    # ../shared/corpus/*.jsonl.gz
    python benchmarks/bench_scan.py --corpus DIR --repeat 3 --json
    python benchmarks/bench_scan.py --verify           # also check both scans report the same loops

(a) ``loopwatch scan --json -j 1`` (one process) in a subprocess (``python -m loopwatch.cli``, output to /dev/null)
    on every corpus file: wall time (interpreter start and imports included) and events (steps) per second.
    The floor: a bare Python loop over the same files (gzip, ``json.loads`` per line, then
    ``json.dumps(step, sort_keys=True)`` hashed with blake2b for each step). Target: the scan takes at
    most 3x the floor, and less than 20 s for the whole corpus.
(b) The same scan with ``-j 2`` (two processes; target: under 15 s). Without ``-j`` a scan of an input this large uses
    one process per CPU (the report says how many that is here): on a machine with two, this row.
(c) The same corpus as one event-stream file (docs/formats.md, section 1, each run a session, written once to a
    temporary directory): ``loopwatch scan --format events --json -j 1`` on it against the floor on that file
    (``json.loads`` per line, then its canonical JSON hashed).
(d) The same stream with ``-j 2``: the two processes share its sessions (each reads every line, parses and judges
    those of every other session; target: under 15 s).

With ``--repeat N`` every timing is the best of N. Exit status 0 (1 if a scan subprocess fails, or with
``--verify`` if the two scans disagree).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loopwatch.cli._batch import auto_jobs
from loopwatch.core._events import event_to_json
from loopwatch.readers import trajectory_run

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
PRESET = "default-lexical"
"""The default preset's rules without the semantic extra's model (which would spend ~10 minutes embedding the
corpus's ~16,000 intents here)."""
TARGET_RATIO = 3.0
TARGET_SECONDS = 20.0
TARGET_SECONDS_J2 = 15.0


def _hash(obj: Any) -> bytes:
    return hashlib.blake2b(json.dumps(obj, sort_keys=True).encode("utf-8", "surrogatepass")).digest()


def floor_trajectories(files: list[Path]) -> int:
    """Read every run and hash every step's canonical JSON; returns the number of steps."""
    steps = 0
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                for step in json.loads(line).get("steps") or ():
                    _hash(step)
                    steps += 1
    return steps


def floor_events(path: Path) -> int:
    """Read every event of an event stream and hash its canonical JSON; returns the number of events."""
    events = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            _hash(json.loads(line))
            events += 1
    return events


def write_event_stream(files: list[Path], out: Path) -> tuple[int, int]:
    """The corpus as one event-stream file, a session per run, each trajectory's events as the trajectory reader
    reads them (its results linked to their calls by id); returns (sessions, events)."""
    sessions = events = 0
    with open(out, "w", encoding="utf-8") as sink:
        for path in files:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    run = trajectory_run(json.loads(line))
                    sessions += 1
                    for event in run.events:  # as the trajectory reader reads them: a result linked to its call by id
                        sink.write(json.dumps(event_to_json(event, run.id), ensure_ascii=False) + "\n")
                        events += 1
    return sessions, events


def run_scan(paths: list[str], extra: list[str], output: Any = subprocess.DEVNULL) -> float:
    """Wall time of ``loopwatch scan PATHS --json EXTRA`` in a fresh interpreter; raises on failure."""
    command = [sys.executable, "-m", "loopwatch.cli", "scan", *paths, "--json", "--preset", PRESET, *extra]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=output, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:5])} ... exited {done.returncode}: {done.stderr.strip()[:500]}")
    return elapsed


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - started)
    return best, value


def best_scan(repeat: int, paths: list[str], extra: list[str]) -> float:
    return min(run_scan(paths, extra) for _ in range(repeat))


def startup_time(repeat: int) -> float:
    command = [sys.executable, "-c", "import loopwatch.cli"]
    times = []
    for _ in range(max(repeat, 3)):
        started = time.perf_counter()
        subprocess.run(command, check=True)
        times.append(time.perf_counter() - started)
    return min(times)


def _detections(path: Path) -> Iterator[tuple[str, str]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            report = json.loads(line)
            yield report["id"], json.dumps([report["events"], report["detections"]], sort_keys=True)


def verify(files: list[str], stream: Path, tmp: Path) -> str | None:
    """None when the trajectory scan and the event-stream scan report the same thing for every run."""
    a, c = tmp / "trajectories.out", tmp / "events.out"
    with open(a, "w", encoding="utf-8") as out:
        run_scan(files, [], out)
    with open(c, "w", encoding="utf-8") as out:
        run_scan([str(stream)], ["--format", "events"], out)
    left, right = dict(_detections(a)), dict(_detections(c))
    if list(left) != list(right):
        return f"different runs or order: {len(left)} vs {len(right)} reports"
    differ = [run for run in left if left[run] != right[run]]
    return f"{len(differ)} runs differ, e.g. {differ[:3]}" if differ else None


def _row(
    name: str, seconds: float, events: int, floor: float, total_target: bool, target_seconds: float = 0.0
) -> dict[str, Any]:
    """A result row; with ``target_seconds`` (a multi-process scan) only the time is a target, not the ratio
    to the single-process floor."""
    ratio = seconds / floor if floor else float("inf")
    if target_seconds:
        target, ok = f"< {target_seconds:g} s", seconds < target_seconds
    else:
        target = f"<= {TARGET_RATIO:g}x floor" + (f", < {TARGET_SECONDS:g} s" if total_target else "")
        ok = ratio <= TARGET_RATIO and (not total_target or seconds < TARGET_SECONDS)
    return {
        "name": name,
        "scan_s": round(seconds, 2),
        "events": events,
        "events_per_s": round(events / seconds) if seconds else None,
        "floor_s": round(floor, 2),
        "ratio": round(ratio, 2),
        "target": target,
        "ok": ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"default: {DEFAULT_CORPUS}")
    parser.add_argument("--repeat", type=int, default=1, help="best of N for every timing (default 1)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--verify", action="store_true", help="check both scans report the same detections")
    args = parser.parse_args(argv)
    files = sorted(args.corpus.glob("*.jsonl.gz"))
    if not files:
        print(f"bench_scan: no *.jsonl.gz in {args.corpus}; nothing to measure", file=sys.stderr)
        return 0
    paths = [str(f) for f in files]
    repeat = max(1, args.repeat)
    result: dict[str, Any] = {"corpus": str(args.corpus), "files": len(files), "repeat": repeat}
    result["default_jobs"] = auto_jobs(paths)
    try:
        result["startup_s"] = round(startup_time(repeat), 3)
        floor_a, steps = best_of(repeat, lambda: floor_trajectories(files))
        scan_a = best_scan(repeat, paths, ["-j", "1"])
        scan_b = best_scan(repeat, paths, ["-j", "2"])
        result["rows"] = [
            _row("(a) trajectories, -j 1", scan_a, steps, floor_a, True),
            _row("(b) the same, -j 2", scan_b, steps, floor_a, True, target_seconds=TARGET_SECONDS_J2),
        ]
        with tempfile.TemporaryDirectory(prefix="loopwatch-bench-") as tmp:
            stream = Path(tmp) / "corpus-events.jsonl"
            sessions, events = write_event_stream(files, stream)
            result["event_stream"] = {"sessions": sessions, "events": events, "bytes": stream.stat().st_size}
            floor_c, _ = best_of(repeat, lambda: floor_events(stream))
            scan_c = best_scan(repeat, [str(stream)], ["--format", "events", "-j", "1"])
            result["rows"].append(_row("(c) one event stream, -j 1", scan_c, events, floor_c, False))
            scan_d = best_scan(repeat, [str(stream)], ["--format", "events", "-j", "2"])
            result["rows"].append(
                _row("(d) the same stream, -j 2", scan_d, events, floor_c, False, target_seconds=TARGET_SECONDS_J2)
            )
            if args.verify:
                result["verify"] = verify(paths, stream, Path(tmp)) or "same detections"
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"bench_scan: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(_table(result, steps))
    return 1 if args.verify and result["verify"] != "same detections" else 0


def _table(result: dict[str, Any], steps: int) -> str:
    stream = result["event_stream"]
    lines = [
        f"corpus {result['corpus']}: {result['files']} files, {steps:,} steps; event stream: "
        f"{stream['sessions']:,} sessions, {stream['events']:,} events, {stream['bytes'] / 1e6:.1f} MB",
        f"timings are the best of {result['repeat']}; scans run in a subprocess "
        f"(interpreter start + import: {result['startup_s']:.2f} s, included); without -j, scan uses "
        f"{result['default_jobs']} process(es) for this corpus here (one per CPU for an input of 4 MB or more)",
        "",
        f"{'input':<30} {'scan s':>7} {'events/s':>9} {'floor s':>8} {'ratio':>6}  {'target':<24} result",
    ]
    for row in result["rows"]:
        lines.append(
            f"{row['name']:<30} {row['scan_s']:>7.2f} {row['events_per_s']:>9,} {row['floor_s']:>8.2f} "
            f"{row['ratio']:>5.1f}x  {row['target']:<24} {'ok' if row['ok'] else 'MISSED'}"
        )
    if "verify" in result:
        lines.append(f"\ntrajectory scan vs event-stream scan: {result['verify']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
