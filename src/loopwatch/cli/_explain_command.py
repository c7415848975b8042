"""``loopwatch explain``: one run's verdicts, step by step, with what each rule saw."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Iterator

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..readers import Run, expand_paths, read_file, read_meter
from ._common import InputErrors
from ._explain import explain_run, explanation_json
from ._progress import progress_bar


def explain(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: InputErrors) -> int:
    files = expand_paths(args.paths, errors)
    total = None if "-" in files else sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    with (
        progress_bar("reading", "bytes", enabled=not args.no_progress, total=total) as bar,
        read_meter(bar.advance),
    ):
        runs = (run for path in files for run in read_file(path, format=args.format, on_error=errors))
        run = _the_run(args.run_id, runs)
    if run is None:
        return 2
    if args.json:
        print(json.dumps(explanation_json(policy, run, index=args.index), indent=1, ensure_ascii=False, default=str))
    else:
        print(explain_run(policy, run, index=args.index))
    return 0


def _the_run(run_id: str | None, runs: Iterator[Run]) -> Run | None:
    """The run ``explain`` is about: the one with that id (or a unique end of it), or the input's only run; None
    (said on stderr) when there is no such run or several."""
    if run_id is None:
        first = list(itertools.islice(runs, 6))
        if len(first) == 1:
            return first[0]
        what = "no run" if not first else f"{'more than 5' if len(first) > 5 else len(first)} runs"
        shown = f" ({', '.join(repr(r.id) for r in first[:5])})" if first else ""
        print(f"loopwatch: the input holds {what}{shown}: name one with --id RUN", file=sys.stderr)
        return None
    matches: list[Run] = []
    for candidate in runs:
        if candidate.id == run_id:
            return candidate
        if candidate.id.endswith(run_id):
            matches.append(candidate)
    if len(matches) == 1:
        return matches[0]
    found = "no run" if not matches else f"{len(matches)} runs ({', '.join(r.id for r in matches[:5])})"
    print(f"loopwatch: {found} with id {run_id!r}", file=sys.stderr)
    return None
