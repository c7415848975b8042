"""Detection quality on the corpus dev labels (FORMAT.md section 5), per source and per pattern.

    python benchmarks/eval_dev.py --preset default            # tables
    python benchmarks/eval_dev.py --preset default --json     # machine-readable
    python benchmarks/eval_dev.py --preset default --missed   # list missed episodes and false alarms

Runs every labelled run of ../shared/corpus (or --corpus DIR) through the preset as if live.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

from loopwatch.metrics import Detection, evaluate, parse_labels, run_outcome_from_trajectory
from loopwatch.presets import PRESETS, preset
from loopwatch.readers import trajectory_run
from loopwatch.scan import scan_runs

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"


def load(corpus: Path, ids: set[str]) -> list[dict[str, object]]:
    records = []
    for path in sorted(corpus.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if record["id"] in ids:
                    records.append(record)
    return records


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
    records = load(args.corpus, set(labels))
    started = time.perf_counter()
    runs = [trajectory_run(r) for r in records]
    reports = list(scan_runs(preset(args.preset), runs))
    elapsed = time.perf_counter() - started
    outcomes = []
    for record, report in zip(records, reports, strict=True):
        detections = [Detection.from_json(v.detection_json()) for v in report.verdicts]
        outcomes.append(run_outcome_from_trajectory(record, detections))
    result = evaluate(outcomes, labels, live=not args.untruncated)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    steps = sum(len(r["steps"]) for r in records)  # type: ignore[arg-type]
    print(f"preset {args.preset}: {len(records)} runs, {steps} steps, {elapsed:.2f} s")
    print(result.format_table())
    excluded = evaluate(outcomes, labels, live=not args.untruncated, exclude_patterns=("rephrase",))
    print(f"episode recall excluding rephrase: {excluded.overall.recall_excluding.to_json()}")
    if args.missed:
        for ep in result.missed_episodes():
            print("MISSED", json.dumps(ep.to_json()))
        for alarm in result.false_alarms():
            print("FALSE ALARM", json.dumps(alarm.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
