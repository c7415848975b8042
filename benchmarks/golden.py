"""Golden verdicts: what a preset decides on the whole corpus and on the benchmark's traffic, recorded once and
checked after every change to the rules, the engine or the guard.

    python benchmarks/golden.py check                          # default-lexical and default, against the goldens
    python benchmarks/golden.py check --preset default-lexical # one preset (what `make golden` runs)
    python benchmarks/golden.py record --preset default        # write benchmarks/results/golden-default.json.gz
    python benchmarks/golden.py check -j 2 ../shared/corpus/*.jsonl.gz corpus/*.jsonl.gz

What is scanned:

- every run of the trace files given (default: ``../shared/corpus/*.jsonl.gz`` and ``corpus/*.jsonl.gz``,
  relative to the repository), read and judged as ``loopwatch scan`` does (the same readers, the same engine, a
  run ends at its first stop);
- the traffic of ``bench_guard.py`` (``--sessions``, default 1,000 sessions of 50 events, its interleaved waves)
  through a live ``Guard``, as the benchmark runs it.

What is kept, per run: its number of events and its non-ok verdicts in order, each as
``[event index, action, pattern, rule name, level, count, loop start]``, in
``benchmarks/results/golden-<preset>.json.gz`` with a SHA-256 digest of them all. ``check`` scans again with the
files' and the traffic's recorded settings and lists the runs whose verdicts differ, with the first difference of
each; it exits 1 when a run differs, 2 when it cannot compare (no golden, a missing corpus, another embedding
model than the golden's), 0 when every verdict is the same. Reading the traces is part of what is checked: a run
that appears, disappears or changes its number of events differs too.

The ``default`` preset uses the ``semantic`` extra's model when it is installed (its golden says which embedder it
was recorded with), and embeds every assistant message: a scan takes ~17 minutes of CPU time (50 minutes of
wall time on a busy 2-core machine); ``default-lexical`` takes ~40 s of CPU time.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwatch import Guard, Policy, Verdict, preset
from loopwatch._policy_spec import PolicySpec
from loopwatch.cli._batch import scan_files
from loopwatch.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PRESETS = ("default-lexical", "default")
FORMAT = 1
BENCH_PREFIX = "bench_guard/"

Row = list[Any]
"""A non-ok verdict as kept: [event index, action, pattern, rule name, level, count, loop start]."""
Runs = dict[str, list[Any]]
"""Run key -> [number of events, [row, ...]]."""


def default_paths() -> list[str]:
    return [str(ROOT.parent / "shared" / "corpus" / "*.jsonl.gz"), str(ROOT / "corpus" / "*.jsonl.gz")]


def golden_path(results: Path, preset_name: str) -> Path:
    return results / f"golden-{preset_name}.json.gz"


# -- scanning ------------------------------------------------------------------------------------------


def rule_names(policy: Policy) -> dict[str, str]:
    """A verdict's ``detector`` (its rule's repr) -> the rule's name: a rule keeps its name when its repr's form
    changes, so the goldens hold names."""
    return {repr(rule): rule.name for rule in policy.detectors}


def row(verdict: Verdict, names: dict[str, str]) -> Row:
    detector = verdict.detector or "-"
    rule = names.get(detector, detector.split("(", 1)[0])
    return [verdict.index, verdict.action, verdict.pattern, rule, verdict.level, verdict.count, verdict.loop_start]


def embedder(policy: Policy) -> str:
    """Which embedding model the policy's rules use (``none`` without one): verdicts depend on it."""
    for rule in policy.detectors:
        model = rule._params().get("embedder")
        if model is not None:
            return repr(model)
    return "none"


def scan_corpus(
    preset_name: str,
    paths: Sequence[str],
    jobs: int,
    errors: list[str],
    tell: Callable[[str], None],
) -> tuple[Runs, list[str]]:
    """Every run of ``paths`` scanned as ``loopwatch scan`` does: run key (file name / run id) -> its verdicts;
    and the names of the files read. Bad input is added to ``errors``."""
    policy = preset(preset_name)
    names = rule_names(policy)
    runs: Runs = {}
    files: list[str] = []
    pending: list[tuple[str, list[Any]]] = []
    started = time.perf_counter()

    def on_error(error: InputError) -> None:
        where = os.path.basename(error.path) if error.path else "-"
        errors.append(f"{where}:{error.line or '-'}: {error.reason}")

    def on_file(path: str) -> None:
        name = os.path.basename(path)
        files.append(name)
        for run_id, value in pending:
            key = f"{name}/{run_id}"
            number = 2
            while key in runs:  # a run id seen twice in one file
                key, number = f"{name}/{run_id}#{number}", number + 1
            runs[key] = value
        tell(f"  {name}: {len(pending):,} runs ({time.perf_counter() - started:.0f} s)")
        pending.clear()

    spec = PolicySpec(preset=preset_name)
    for scanned in scan_files(paths, spec, jobs=jobs, on_error=on_error, on_file=on_file):
        report = scanned.report
        pending.append((report.id, [report.events, [row(v, names) for v in report.verdicts]]))
    return runs, files


def scan_bench(preset_name: str, traffic: dict[str, int]) -> Runs:
    """``bench_guard.py``'s sessions through a live guard, interleaved as the benchmark sends them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_guard
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    guard = Guard(preset=preset_name, clock=None)
    names = rule_names(guard.policy)
    runs: Runs = {}
    content = bench_guard.Content(traffic["seed"])
    waves = bench_guard.waves(content, traffic["sessions"], traffic["events"], traffic["wave"], traffic["seed"])
    for batch in waves:
        for name, _kind, event in batch:
            verdict = guard.observe(name, event)
            run = runs.setdefault(BENCH_PREFIX + name, [0, []])
            run[0] += 1
            if verdict.action != "ok":
                run[1].append(row(verdict, names))
    return runs


def digest(runs: Runs, errors: Sequence[str]) -> str:
    text = json.dumps([runs, list(errors)], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Scan:
    """What one preset decided on the corpus and the traffic."""

    runs: Runs
    errors: list[str]
    files: list[str]

    @property
    def digest(self) -> str:
        return digest(self.runs, self.errors)


def scan(
    preset_name: str, paths: Sequence[str], traffic: dict[str, int], jobs: int, tell: Callable[[str], None]
) -> Scan:
    errors: list[str] = []
    runs: Runs = {}
    files: list[str] = []
    if paths:
        tell(f"{preset_name}: scanning the corpus")
        runs, files = scan_corpus(preset_name, paths, jobs, errors, tell)
    if traffic["sessions"] > 0:
        tell(f"{preset_name}: {traffic['sessions']:,} bench_guard sessions of {traffic['events']} events")
        runs.update(scan_bench(preset_name, traffic))
    return Scan(runs, errors, files)


# -- comparing -----------------------------------------------------------------------------------------


def show(row: Row | None) -> str:
    if row is None:
        return "nothing"
    index, action, pattern, rule, level, count, loop_start = row
    return f"event {index}: {action} {pattern} by {rule} (level {level}, count {count}, loop from {loop_start})"


def first_difference(recorded: list[Any] | None, found: list[Any] | None) -> str | None:
    """How one run's verdicts differ (the first difference), or ``None`` when they are the same."""
    if recorded == found:
        return None
    if recorded is None:
        return "a run the golden does not have"
    if found is None:
        return "missing: the golden has this run"
    if recorded[0] != found[0]:
        return f"{found[0]} events, the golden has {recorded[0]}"
    before, after = recorded[1], found[1]
    for n in range(max(len(before), len(after))):
        old = before[n] if n < len(before) else None
        new = after[n] if n < len(after) else None
        if old != new:
            return f"verdict {n + 1}: expected {show(old)}; got {show(new)}"
    return None  # pragma: no cover - equal lists were handled above


def compare(recorded: Runs, found: Runs) -> list[tuple[str, str]]:
    """(run key, first difference) for every run whose verdicts differ, in the golden's order then new runs."""
    out = []
    for key in [*recorded, *(k for k in found if k not in recorded)]:
        difference = first_difference(recorded.get(key), found.get(key))
        if difference is not None:
            out.append((key, difference))
    return out


def compare_errors(recorded: Sequence[str], found: Sequence[str]) -> list[str]:
    return [f"bad input no longer reported: {e}" for e in recorded if e not in found] + [
        f"bad input not in the golden: {e}" for e in found if e not in recorded
    ]


# -- files ---------------------------------------------------------------------------------------------


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False, timeout=10
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def write_golden(path: Path, preset_name: str, result: Scan, traffic: dict[str, int], embedding: str) -> None:
    document = {
        "format": FORMAT,
        "preset": preset_name,
        "embedder": embedding,
        "recorded_at_commit": _commit(),
        "row": ["index", "action", "pattern", "rule", "level", "count", "loop_start"],
        "files": result.files,
        "bench_guard": traffic,
        "digest": result.digest,
        "verdicts": sum(len(run[1]) for run in result.runs.values()),
        "input_errors": result.errors,
        "runs": result.runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.write(data)  # mtime 0: the same verdicts make the same bytes


class GoldenError(Exception):
    """A golden that cannot be compared with: missing, unreadable, or damaged."""


def read_golden(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rb") as stream:
            document = json.loads(stream.read())
    except FileNotFoundError:
        raise GoldenError(f"{path}: no golden (record one with `golden.py record`)") from None
    except (OSError, ValueError) as exc:
        raise GoldenError(f"{path}: unreadable ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise GoldenError(f"{path}: not a golden of format {FORMAT}")
    if digest(document["runs"], document["input_errors"]) != document["digest"]:
        raise GoldenError(f"{path}: damaged (its runs do not match its digest)")
    return document


# -- commands ------------------------------------------------------------------------------------------


def _tell(quiet: bool) -> Callable[[str], None]:
    def tell(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    return tell


def _trace_paths(args: argparse.Namespace) -> list[str] | None:
    """The trace files to scan (``args.paths``, else the default corpus); ``None``, said on stderr, when a pattern
    or path names no file."""
    import glob

    paths: list[str] = args.paths or default_paths()
    missing = [p for p in paths if not (glob.glob(p) if any(c in p for c in "*?[") else os.path.exists(p))]
    if missing:
        print(f"golden: no trace file at {', '.join(missing)}", file=sys.stderr)
        return None
    return paths


def record(args: argparse.Namespace) -> int:
    tell = _tell(args.quiet)
    paths = _trace_paths(args)
    if paths is None:
        return 2
    traffic = {"sessions": args.sessions, "events": args.events, "wave": 500, "seed": 1}
    for name in args.preset or PRESETS:
        started = time.perf_counter()
        result = scan(name, paths, traffic, args.jobs, tell)
        path = golden_path(args.results, name)
        write_golden(path, name, result, traffic, embedder(preset(name)))
        verdicts = sum(len(run[1]) for run in result.runs.values())
        print(
            f"{name}: recorded {len(result.runs):,} runs, {verdicts:,} non-ok verdicts, "
            f"{len(result.errors)} bad input(s) in {time.perf_counter() - started:.0f} s -> {path} "
            f"({path.stat().st_size:,} B, digest {result.digest[:16]})"
        )
    return 0


def check(args: argparse.Namespace) -> int:
    tell = _tell(args.quiet)
    paths = _trace_paths(args)
    if paths is None:
        return 2
    status = 0
    for name in args.preset or PRESETS:
        path = golden_path(args.results, name)
        try:
            golden = read_golden(path)
        except GoldenError as exc:
            print(f"golden: {exc}", file=sys.stderr)
            status = max(status, 2)
            continue
        model = embedder(preset(name))
        if model != golden["embedder"]:
            print(
                f"golden: {name} was recorded with the embedder {golden['embedder']!r}, this install has {model!r}: "
                "its verdicts cannot be compared (install or remove the `semantic` extra)",
                file=sys.stderr,
            )
            status = max(status, 2)
            continue
        started = time.perf_counter()
        result = scan(name, paths, golden["bench_guard"], args.jobs, tell)
        took = time.perf_counter() - started
        if result.digest == golden["digest"]:
            print(f"{name}: the same verdicts on all {len(result.runs):,} runs ({took:.0f} s)")
            continue
        status = max(status, 1)
        differences = compare(golden["runs"], result.runs)
        problems = compare_errors(golden["input_errors"], result.errors)
        print(f"{name}: {len(differences):,} of {len(golden['runs']):,} runs differ from {path.name} ({took:.0f} s)")
        if result.files != golden["files"]:
            print(f"  files read: {', '.join(result.files) or 'none'}; the golden's: {', '.join(golden['files'])}")
        for line in problems:
            print(f"  {line}")
        for key, difference in differences[: args.show]:
            print(f"  {key}: {difference}")
        if len(differences) > args.show:
            print(f"  ... and {len(differences) - args.show:,} more (--show N to list more)")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for command, about in (
        ("record", "scan and write the goldens"),
        ("check", "scan and compare with the goldens; exit 1 when a run's verdicts differ"),
    ):
        sub = commands.add_parser(command, help=about, description=about)
        sub.add_argument("paths", nargs="*", help="trace files or globs (default: the corpus)")
        sub.add_argument(
            "--preset",
            action="append",
            choices=PRESETS,
            help=f"a preset to {command} (repeatable; default: {' and '.join(PRESETS)})",
        )
        sub.add_argument("-j", "--jobs", type=int, default=1, help="processes scanning the corpus (default 1)")
        sub.add_argument("--results", type=Path, default=RESULTS, help="where the goldens are (benchmarks/results)")
        sub.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
        if command == "record":
            sub.add_argument("--sessions", type=int, default=1_000, help="bench_guard sessions (1,000; 0: none)")
            sub.add_argument("--events", type=int, default=50, help="events per bench_guard session (default 50)")
        else:
            sub.add_argument("--show", type=int, default=20, help="runs listed with their first difference (20)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("-j must be at least 1")
    return record(args) if args.command == "record" else check(args)


if __name__ == "__main__":
    sys.exit(main())
