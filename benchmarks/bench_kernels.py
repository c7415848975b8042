"""The compiled text kernels against their pure-Python twins and a previous release, side by side in one run.

    git worktree add /tmp/loopwatch-base v0.1.0        # or: git archive REV src | tar -x -C /tmp/loopwatch-base
    python benchmarks/bench_kernels.py --base /tmp/loopwatch-base/src
    python benchmarks/bench_kernels.py --base /tmp/loopwatch-base/src --rounds 5 --preset default

Runs ``bench_guard.py --quick`` (1,000 sessions x 50 events, the same traffic each time) in turn for: the
``--base`` source tree (the release to compare with), this checkout with its compiled parts (the text kernels and the
step features mypyc compiles), and this checkout with ``LOOPWATCH_PURE_PYTHON=1`` (the kernels' pure-Python twins and
the step features' source); ``--rounds`` times, alternating, so that a slower spell of a shared machine falls on all
three. Prints the median over the rounds of each event type's median latency, and each one's ratio to the base's.
The compiled parts must be built (``make kernels``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src"
KINDS = ("tool_call", "tool_result", "message")


def run(preset: str, source: Path, pure: bool, sessions: int | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
    env["PYTHONPATH"] = str(source)
    if pure:
        env["LOOPWATCH_PURE_PYTHON"] = "1"
    size = ["--sessions", str(sessions)] if sessions else ["--quick"]
    command = [sys.executable, str(HERE / "bench_guard.py"), *size, "--preset", preset, "--json"]
    command += ["--floor-sessions", "0", "--memory-sessions", "0", "--pause-seconds", "0"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the src folder of the release to compare with")
    parser.add_argument("--preset", action="append", help="presets to run (default: default and default-lexical)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=None, help="sessions per run (default: --quick's 1,000)")
    args = parser.parse_args()
    check = "from loopwatch.core import _kernels; raise SystemExit(0 if _kernels.COMPILED else 1)"
    if subprocess.run([sys.executable, "-c", check], env={**os.environ, "PYTHONPATH": str(SOURCE)}).returncode:
        sys.exit("the compiled kernels are not built: run `python hatch_build.py` first")
    variants = {"base": (args.base, False), "compiled": (SOURCE, False), "pure Python": (SOURCE, True)}
    for preset in args.preset or ["default", "default-lexical"]:
        medians: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind in KINDS} for name in variants}
        shares: list[float] = []
        for _ in range(args.rounds):
            for name, (source, pure) in variants.items():
                result = run(preset, source, pure, args.sessions)
                shares.append(result.get("cpu_share") or 1.0)
                for kind in KINDS:
                    medians[name][kind].append(result["per_type"][kind]["median_us"])
        print(f"\npreset {preset}: median of {args.rounds} rounds of each event type's median (us), ratio to base")
        print(f"CPU share of the timed loops: {min(shares):.0%}-{max(shares):.0%}")
        print(f"{'':14}" + "".join(f"{kind:>22}" for kind in (*KINDS, "call + result")))
        base = {kind: statistics.median(medians["base"][kind]) for kind in KINDS}
        for name in variants:
            row = {kind: statistics.median(medians[name][kind]) for kind in KINDS}
            cells = [f"{row[k]:8.1f} ({row[k] / base[k]:.2f}x)" for k in KINDS]
            pair, base_pair = row["tool_call"] + row["tool_result"], base["tool_call"] + base["tool_result"]
            cells.append(f"{pair:8.1f} ({pair / base_pair:.2f}x)")
            print(f"{name:14}" + "".join(f"{cell:>22}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
