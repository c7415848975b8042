"""``loopwatch eval``: score presets against labelled runs (side by side with ``--compare``), sweep a rule's
parameter (``--sweep``, held out by source with ``--loso``), share the catches between rules (``--rules``), and
write the evaluation's HTML report."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..errors import ConfigError
from ..readers import Run, expand_paths, read_file, read_meter
from ._common import InputErrors, run_facts, short
from ._evaluation import (
    Evaluation,
    Sweep,
    compare_json,
    compare_table,
    evaluate_policy,
    held_out_table,
    leave_one_source_out,
    rule_share_table,
    rule_shares,
    sweep_point,
    sweep_table,
)
from ._labelfile import read_labels
from ._metrics import Label, LabelError
from ._progress import Progress, progress_bar


def evaluate(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: InputErrors) -> int:
    began = time.perf_counter()
    labels: dict[str, Label] = {}
    for path in args.labels:
        more = read_labels(path)
        twice = sorted(set(labels) & set(more))
        if twice:
            raise LabelError(f"{path}: run {twice[0]!r} is labelled in another labels file too", run_id=twice[0])
        labels.update(more)
    if args.loso and not args.sweep:
        raise ConfigError("--loso needs --sweep DETECTOR.PARAM=A:B:STEP", field="loso")
    sweep = Sweep.parse(args.sweep) if args.sweep else None
    names = [policy.name, *[p for p in args.compare or () if p != policy.name]]
    others = {name: PolicySpec(name).build() for name in names[1:]}  # an unknown preset fails before reading
    runs, found = _labelled_runs(args, labels, errors)
    if not runs:
        print(f"loopwatch: {_no_match_hint(found, labels)}", file=sys.stderr)
        return 2
    header = f"{len(runs)} of {len(labels)} labelled runs found"
    if len(runs) < len(labels):
        missing = [run_id for run_id in labels if run_id not in found.matched][:3]
        print(
            f"loopwatch: {header}; labels without a run: {', '.join(repr(m) for m in missing)}"
            + (" ..." if len(labels) - len(runs) > len(missing) else ""),
            file=sys.stderr,
        )
    live = not args.untruncated
    passes = _passes(args, sweep, policy, len(names))
    with progress_bar("judging", "runs", enabled=not args.no_progress, total=len(runs) * passes) as bar:
        counted = _Counted(runs, bar)
        if sweep is not None:
            return _sweep(args, sweep, policy, counted, labels, live, header)
        if args.rules:
            evaluation = evaluate_policy(policy, counted, labels, live=live)
            shares = rule_shares(evaluation, counted, labels, live=live)
            if args.json:
                print(json.dumps([share.to_json() for share in shares], indent=1))
            else:
                print(f"{header}, preset {policy.name}")
                print(rule_share_table(shares))
            return 0
        evaluations = [
            evaluate_policy(others.get(name, policy), counted, labels, live=live, exclude_patterns=_EXCLUDED)
            for name in names
        ]
    about = run_facts(policy, spec, time.perf_counter() - began)
    if args.html:
        _eval_html(args.html, evaluations[0], runs, labels, [], about)
    if args.json:
        data = compare_json(evaluations) if len(evaluations) > 1 else evaluations[0].report.to_json()
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    print(f"{header} ({'; '.join(f'{k} {v}' for k, v in about)})")
    if len(evaluations) > 1:
        print(compare_table(evaluations))
        return 0
    report = evaluations[0].report
    print(report.format_table())
    missed = report.missed_episodes()
    if missed:
        print(f"\nmissed episodes ({len(missed)}): run [start-end] pattern xreps: note")
    for outcome in missed:
        ep = outcome.episode
        print(f"  {outcome.run_id} [{ep.start}-{ep.end}] {ep.pattern} x{ep.reps}: {ep.note}")
    alarms = report.false_alarms()
    if alarms:
        print(f"\nfalse alarms ({len(alarms)}): run [index] action pattern: reason")
    for alarm in alarms:
        d = alarm.detection
        print(f"  {alarm.run_id} [{d.index}] {d.action} {d.pattern}: {d.reason}")
    return 0


_EXCLUDED = ("rephrase",)  # semantic loops: also reported without them (no lexical rule can catch them)


class _Found:
    """What reading the input for ``eval`` found: the runs read, and one id of a run without a label."""

    def __init__(self) -> None:
        self.read = 0
        self.matched: set[str] = set()
        self.unmatched: str | None = None


def _labelled_runs(args: argparse.Namespace, labels: dict[str, Label], errors: InputErrors) -> tuple[list[Run], _Found]:
    """The input's runs that have a label, in input order, read with a progress bar over the files' bytes."""
    found = _Found()
    runs: list[Run] = []
    files = expand_paths(args.paths, errors)
    total = None if "-" in files else sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    with (
        progress_bar("reading", "bytes", enabled=not args.no_progress, total=total) as bar,
        read_meter(bar.advance),
    ):
        for path in files:
            bar.describe(short(path))
            for run in read_file(path, format=args.format, on_error=errors):
                found.read += 1
                if run.id in labels and run.id not in found.matched:
                    found.matched.add(run.id)
                    runs.append(run)
                elif found.unmatched is None and run.id not in labels:
                    found.unmatched = run.id
    return runs, found


def _no_match_hint(found: _Found, labels: dict[str, Label]) -> str:
    """Why ``eval`` has nothing to score, with an id from each side to compare."""
    label_id = next(iter(labels), None)
    if not labels:
        return "the labels file holds no label"
    if found.read == 0:
        return f"no run was read from the input, so none of the {len(labels)} labelled runs was found"
    labelled = "the labelled run is not" if len(labels) == 1 else f"none of the {len(labels)} labelled runs is"
    return (
        f"{labelled} in the input ({found.read} runs read): the input's run ids look "
        f"like {found.unmatched!r}, the labels' like {label_id!r}; a label applies to the run whose id is the same "
        "(loopwatch scan PATH --json prints the input's ids)"
    )


def _passes(args: argparse.Namespace, sweep: Sweep | None, policy: Policy, presets: int) -> int:
    """How many times ``eval`` judges every labelled run (the progress bar's total is runs times this)."""
    if sweep is not None:
        return len(sweep.values) + (1 if args.html and not args.loso else 0)
    if args.rules:
        return 1 + len(policy.detectors)
    return presets


class _Counted(Sequence[Run]):
    """The labelled runs, advancing a progress bar by one each time a run is handed out in order (a scan)."""

    def __init__(self, runs: list[Run], bar: Progress) -> None:
        self._runs = runs
        self._bar = bar

    def __len__(self) -> int:
        return len(self._runs)

    def __getitem__(self, index: Any) -> Any:
        return self._runs[index]

    def __iter__(self) -> Iterator[Run]:
        for run in self._runs:
            yield run
            self._bar.advance()


def _sweep(
    args: argparse.Namespace,
    sweep: Sweep,
    policy: Policy,
    runs: _Counted,
    labels: dict[str, Label],
    live: bool,
    header: str,
) -> int:
    evaluations = [
        (value, evaluate_policy(changed, runs, labels, live=live)) for value, changed in sweep.policies(policy)
    ]
    points = [sweep_point(value, evaluation) for value, evaluation in evaluations]
    if args.loso:
        overall, held = leave_one_source_out(evaluations)
        if args.json:
            print(
                json.dumps({"sweep": args.sweep, "chosen": overall, "held_out": [h.to_json() for h in held]}, indent=1)
            )
        else:
            print(sweep_table(sweep, points))
            print()
            print(held_out_table(f"{sweep.detector}.{sweep.param}", overall, held))
        return 0
    if args.html:
        base = evaluate_policy(policy, runs, labels, live=live)
        _eval_html(args.html, base, list(runs), labels, [(sweep, points)], None)
    if args.json:
        print(json.dumps({"sweep": args.sweep, "points": [p.to_json() for p in points]}, indent=1))
    else:
        print(sweep_table(sweep, points))
    return 0


def _eval_html(
    path: str,
    evaluation: Evaluation,
    runs: Sequence[Run],
    labels: dict[str, Label],
    sweeps: list[Any],
    about: list[tuple[str, str]] | None,
) -> None:
    from ._eval_report import write_eval_report

    write_eval_report(path, evaluation, runs, labels, sweeps=sweeps, about=about)
    print(f"loopwatch: wrote {path}", file=sys.stderr)
