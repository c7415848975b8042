"""Detection quality on the corpus dev labels (docs/labels.md, section 5), per source and per pattern.

    python benchmarks/eval_dev.py --preset default            # tables
    python benchmarks/eval_dev.py --preset default --json     # machine-readable
    python benchmarks/eval_dev.py --preset default --missed   # list missed episodes and false alarms

Runs every labelled run of ../shared/corpus (or --corpus DIR) through the preset as if live, the same way
``loopwatch eval ../shared/corpus/*.jsonl.gz --labels ../shared/corpus/labels/dev.jsonl`` does (this
script adds the timing and reads the corpus from its default place).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from loopwatch import PRESETS, preset
from loopwatch.cli._evaluation import evaluate_policy, labelled_runs
from loopwatch.cli._metrics import parse_labels
from loopwatch.readers import read_runs

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="default", choices=sorted(PRESETS))
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("LOOPWATCH_CORPUS", DEFAULT_CORPUS)))
    parser.add_argument("--labels", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--missed", action="store_true", help="list missed episodes and false alarms")
    parser.add_argument("--untruncated", action="store_true", help="keep verdicts after a stop")
    args = parser.parse_args(argv)
    labels_path = args.labels or args.corpus / "labels" / "dev.jsonl"
    labels = parse_labels(labels_path.read_text(encoding="utf-8").splitlines())
    runs = labelled_runs(read_runs(sorted(str(p) for p in args.corpus.glob("*.jsonl.gz"))), labels)
    started = time.perf_counter()
    evaluation = evaluate_policy(
        preset(args.preset), runs, labels, live=not args.untruncated, exclude_patterns=("rephrase",)
    )
    elapsed = time.perf_counter() - started
    result = evaluation.report
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    steps = sum(r.events for r in evaluation.runs)
    print(f"preset {args.preset}: {len(runs)} runs, {steps} steps, {elapsed:.2f} s")
    print(result.format_table())
    if args.missed:
        for ep in result.missed_episodes():
            print("MISSED", json.dumps(ep.to_json()))
        for alarm in result.false_alarms():
            print("FALSE ALARM", json.dumps(alarm.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
