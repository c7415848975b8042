"""Where a scan's time goes, rule by rule: each rule's time per step of each kind, on recorded runs.

    python benchmarks/bench_rules.py                               # ../shared/corpus/*.jsonl.gz, default-lexical
    python benchmarks/bench_rules.py runs/*.jsonl --preset default-lexical --top 12
    python benchmarks/bench_rules.py examples/ --json

The runs of the files given (any format ``loopwatch scan`` reads) are read first, then judged one after another by
the preset's engine, as ``loopwatch scan`` judges them (a run ends at its first stop). Timed with
``time.perf_counter_ns`` around each rule's ``observe`` (a feature a rule is the first to ask for is counted in that
rule's time), around making each event's step (``step_of``: the call's fingerprint, the result's outcome, masking),
and around the whole ``Engine.observe``. The timers cost ~0.1 us each, so the shares, not the absolute times, are
what to read; ``bench_scan.py`` measures a scan as a user runs it.

The rules run from their source here, as :func:`loopwatch._native.use_source` makes them (timers cannot be put
inside compiled ones), with the compiled text kernels when they are built: the shares are those of the source's
Python code, which mypyc compiles for ``Guard`` and ``loopwatch scan`` (``bench_guard.py`` times those).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import loopwatch._native

loopwatch._native.use_source()  # before the engine and the rules are imported

from loopwatch import preset  # noqa: E402
from loopwatch.core import _engine  # noqa: E402
from loopwatch.core._engine import Engine  # noqa: E402
from loopwatch.errors import InputError  # noqa: E402
from loopwatch.formats._dispatch import read_runs  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
STEP = "(the step's features)"


@contextlib.contextmanager
def timed(engine: Engine, clock: Callable[[], int]) -> Iterator[tuple[Counter[tuple[str, str]], Counter[str]]]:
    """While open, ``engine``'s rules and ``step_of`` run with timers: (ns by (step kind, rule), steps by kind)."""
    spent: Counter[tuple[str, str]] = Counter()
    steps: Counter[str] = Counter()
    for detector in engine.policy.detectors:
        observe, name = detector.observe, detector.name

        def timed_observe(state: Any, step: Any, observe: Any = observe, name: str = name) -> Any:
            started = clock()
            try:
                return observe(state, step)
            finally:
                spent[(step.kind, name)] += clock() - started

        object.__setattr__(detector, "observe", timed_observe)  # on the instance: this engine's rules only
    make_step = _engine.step_of

    def timed_step_of(*args: Any) -> Any:
        started = clock()
        step = make_step(*args)
        spent[(step.kind, STEP)] += clock() - started
        steps[step.kind] += 1
        return step

    _engine.step_of = timed_step_of  # type: ignore[assignment]
    try:
        yield spent, steps
    finally:
        _engine.step_of = make_step  # type: ignore[assignment]
        for detector in engine.policy.detectors:
            object.__delattr__(detector, "observe")


def measure(paths: list[str], preset_name: str) -> dict[str, Any]:
    errors: list[str] = []

    def on_error(error: InputError) -> None:
        errors.append(str(error))

    runs = list(read_runs(paths, on_error=on_error))
    engine = Engine(preset(preset_name), replay=True)  # as loopwatch scan judges recorded runs
    clock = time.perf_counter_ns
    total = 0
    with timed(engine, clock) as (spent, steps):
        for run in runs:
            session = engine.new_session()
            for event in run.events:
                started = clock()
                verdict = engine.observe(session, event)
                total += clock() - started
                if verdict.action == "stop":
                    break
    rows = [
        {"kind": kind, "rule": rule, "seconds": ns / 1e9, "us_per_step": ns / steps[kind] / 1e3 if steps[kind] else 0.0}
        for (kind, rule), ns in spent.most_common()
    ]
    return {
        "preset": preset_name,
        "runs": len(runs),
        "steps": dict(steps),
        "engine_seconds": total / 1e9,
        "rules": rows,
        "input_errors": errors,
    }


def table(result: dict[str, Any], top: int) -> str:
    steps = sum(result["steps"].values())
    engine = result["engine_seconds"]
    lines = [
        f"{result['runs']:,} runs, {steps:,} steps ({', '.join(f'{k} {n:,}' for k, n in result['steps'].items())}); "
        f"preset {result['preset']}; Engine.observe {engine:.2f} s ({engine / steps * 1e6:.1f} us a step)"
        if steps
        else f"{result['runs']:,} runs, no steps",
        "",
        f"{'step kind':<10} {'rule':<26} {'seconds':>8} {'share':>6} {'us per step of its kind':>24}",
    ]
    for row in result["rules"][:top]:
        share = row["seconds"] / engine if engine else 0.0
        lines.append(
            f"{row['kind']:<10} {row['rule']:<26} {row['seconds']:>8.3f} {share:>6.1%} {row['us_per_step']:>24.1f}"
        )
    if result["input_errors"]:
        lines.append(f"\n{len(result['input_errors'])} input errors, the first: {result['input_errors'][0]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help=f"trace files or folders (default: {DEFAULT_CORPUS}/*.jsonl.gz)")
    parser.add_argument("--preset", default="default-lexical", help="the policy (default: default-lexical)")
    parser.add_argument("--top", type=int, default=25, help="rows shown (default 25)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    paths = args.paths or [str(p) for p in sorted(DEFAULT_CORPUS.glob("*.jsonl.gz"))]
    if not paths:
        print(f"bench_rules: no trace files given and none in {DEFAULT_CORPUS}", file=sys.stderr)
        return 0
    result = measure(paths, args.preset)
    print(json.dumps(result, indent=2) if args.json else table(result, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
