"""Agreement of two independent (blind) labellings of the same runs: Cohen's kappa and where they differ.

    python3 tools/corpus/agreement.py corpus/labels/first-pass.jsonl corpus/labels/second-pass.jsonl

Only the runs both files label are compared (the second pass covers a sample). Reported: Cohen's kappa and raw
agreement for "loop or clean" (does the run have an episode) and for the three verdicts (stuck, recovered,
clean), overall and per source; how many episodes of each labelling overlap an episode of the other; and the ids
whose loop/clean or verdict labels differ (the runs that were adjudicated). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

Label = dict[str, Any]


def read_labels(path: str) -> dict[str, Label]:
    """One label per line (the label format), keyed by run id; a malformed line is an error naming file and line."""
    labels: dict[str, Label] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                label = json.loads(line)
                run_id = label["id"]
                if "verdict" not in label or "episodes" not in label:
                    raise KeyError("verdict" if "verdict" not in label else "episodes")
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"agreement: {path}:{number}: not a label ({exc})") from None
            labels[run_id] = label
    return labels


def kappa(a: Sequence[str], b: Sequence[str]) -> tuple[float, float]:
    """(Cohen's kappa, raw agreement) of two labellings of the same items."""
    n = len(a)
    if n == 0:
        return float("nan"), float("nan")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    expected = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    return ((observed - expected) / (1 - expected) if expected < 1 else 1.0), observed


def loop_or_clean(label: Label) -> str:
    return "loop" if label["episodes"] else "clean"


def verdict(label: Label) -> str:
    return str(label["verdict"])


def overlapping(episode: dict[str, Any], others: Sequence[dict[str, Any]]) -> bool:
    return any(not (episode["end"] < other["start"] or other["end"] < episode["start"]) for other in others)


def report(first: dict[str, Label], second: dict[str, Label]) -> str:
    ids = [run_id for run_id in first if run_id in second]
    lines = [f"runs labelled twice: {len(ids)}", ""]
    measures: list[tuple[str, Callable[[Label], str]]] = [("loop or clean", loop_or_clean), ("verdict", verdict)]
    sources = sorted({run_id.split("/", 1)[0] for run_id in ids})
    lines.append("| runs | n | " + " | ".join(f"{name}: kappa (agreement)" for name, _ in measures) + " |")
    lines.append("|---|---|" + "---|" * len(measures))
    for source in ["all", *sources]:
        chosen = [i for i in ids if source == "all" or i.split("/", 1)[0] == source]
        cells = []
        for _, measure in measures:
            k, observed = kappa([measure(first[i]) for i in chosen], [measure(second[i]) for i in chosen])
            cells.append(f"{k:.3f} ({observed:.1%})")
        lines.append(f"| {source} | {len(chosen)} | " + " | ".join(cells) + " |")
    for name, a, b in (("first", first, second), ("second", second, first)):
        episodes = [(i, e) for i in ids for e in a[i]["episodes"]]
        matched = sum(overlapping(e, b[i]["episodes"]) for i, e in episodes)
        lines.append("")
        lines.append(f"episodes of the {name} labelling: {len(episodes)}, {matched} overlap an episode of the other")
    differing = [
        i for i in ids if verdict(first[i]) != verdict(second[i]) or loop_or_clean(first[i]) != loop_or_clean(second[i])
    ]
    lines += ["", f"runs whose loop/clean or verdict labels differ: {len(differing)}", *(f"  {i}" for i in differing)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("first", help="the first labelling (JSONL)")
    parser.add_argument("second", help="the second, blind labelling of a sample of the same runs (JSONL)")
    args = parser.parse_args(argv)
    print(report(read_labels(args.first), read_labels(args.second)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
