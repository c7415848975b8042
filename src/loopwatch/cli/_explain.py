"""``loopwatch explain``: one run's steps around each detection, with the evidence behind it.

For every non-ok verdict (or only the one at ``--index N``) the steps from the loop's start to the
verdict are listed with a few steps of context, each with its call fingerprint, so a person can see
which calls matched, which rule fired (the detector's ``repr``) and why (its reason and evidence).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..core._engine import Engine
from ..core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage
from ..core._fingerprint import preview
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..readers import Run
from ._scan import scan_runs

_CONTEXT: Final = 2
_MAX_LISTED: Final = 40


@dataclass(frozen=True)
class StepLine:
    """One event of the run as explain prints it."""

    position: int
    index: int
    kind: str
    tool: str
    text: str
    fingerprint: str


def step_lines(run: Run, policy: Policy) -> list[StepLine]:
    """A printable line per event: record index, kind, tool, a short text, the call fingerprint."""
    engine = Engine(policy, replay=True)
    lines = []
    for position, event in enumerate(run.events):
        index = run.indices[position] if run.indices is not None else position
        kind, tool, text, fingerprint = _describe(event, engine)
        lines.append(StepLine(position, index, kind, tool, text, fingerprint))
    return lines


def _describe(event: Event, engine: Engine) -> tuple[str, str, str, str]:
    if isinstance(event, ToolCall):
        return "call", event.tool, preview(event.args, 100), engine.call_fingerprint(event)
    if isinstance(event, ToolResult):
        flag = " [error]" if event.is_error else ""
        return "result", event.tool or "", preview(event.output, 100) + flag, ""
    if isinstance(event, Message):
        return event.role, "", preview(event.text, 100), ""
    if isinstance(event, TextDelta):
        return "delta", "", preview(event.text, 100), ""
    if isinstance(event, Usage):
        return "usage", "", preview({k: v for k, v in vars(event).items() if v is not None}, 100), ""
    if isinstance(event, Reset):
        return "reset", "", "", ""
    return type(event).__name__, "", "", ""


def explain_run(policy: Policy, run: Run, *, index: int | None = None, context: int = _CONTEXT) -> str:
    """The explanation of ``run``'s detections (only the one at record ``index`` when given)."""
    report = next(iter(scan_runs(policy, [run])))
    verdicts = [v for v in report.verdicts if index is None or v.index == index]
    header = f"run {run.id}: {report.events} events, preset {policy.name}, {len(report.verdicts)} detections"
    if not verdicts:
        where = f" at index {index}" if index is not None else ""
        return f"{header}\nno detection{where}."
    lines = step_lines(run, policy)
    blocks = [header]
    for verdict in verdicts:
        blocks.append(_explain_verdict(verdict, lines, context))
    return "\n\n".join(blocks)


def _explain_verdict(verdict: Verdict, lines: Sequence[StepLine], context: int) -> str:
    evidence = dict(verdict.evidence)
    marked = set(evidence.get("indices") or ())
    start = verdict.loop_start if verdict.loop_start is not None else verdict.index
    shown = [s for s in lines if start - context <= s.index <= verdict.index + context]
    if len(shown) > _MAX_LISTED:  # a long loop: its first and last steps
        half = _MAX_LISTED // 2
        shown = [*shown[:half], *shown[-half:]]
    matched = _matched_fingerprints(lines, verdict, marked)
    out = [
        f"[{verdict.index}] {verdict.action.upper()} level {verdict.level}: {verdict.pattern} x{verdict.count}"
        + (f", loop from step {verdict.loop_start}" if verdict.loop_start is not None else ""),
        f"  rule:    {verdict.detector}",
        f"  why:     {verdict.reason}",
    ]
    if verdict.message:
        out.append("  message: " + verdict.message.replace("\n", "\n           "))
    facts = {k: v for k, v in evidence.items() if k not in ("indices", "args")}
    if facts:
        out.append("  evidence: " + json.dumps(facts, ensure_ascii=False, default=str)[:400])
    out.append("  steps (* = in the evidence, = = same call fingerprint as the flagged call):")
    previous = None
    for step in shown:
        if previous is not None and step.position != previous + 1:
            out.append("      ...")
        previous = step.position
        out.append("    " + _step_text(step, marked, matched, verdict.index))
    return "\n".join(out)


def _matched_fingerprints(lines: Sequence[StepLine], verdict: Verdict, marked: set[int]) -> set[str]:
    """Fingerprints of the calls at the verdict's index (or in its evidence): the calls that "repeat"."""
    at = [s.fingerprint for s in lines if s.fingerprint and (s.index == verdict.index or s.index in marked)]
    return set(at[-1:]) if at else set()


def _step_text(step: StepLine, marked: set[int], matched: set[str], flagged: int) -> str:
    mark = "*" if step.index in marked else " "
    same = "=" if step.fingerprint and step.fingerprint in matched else " "
    arrow = ">" if step.index == flagged else " "
    tool = f" {step.tool}" if step.tool else ""
    fingerprint = f"  #{step.fingerprint[:8]}" if step.fingerprint else ""
    return f"{arrow}{mark}{same} {step.index:>5} {step.kind:<9}{tool}: {step.text}{fingerprint}"


def find_run(runs: Sequence[Run] | Any, run_id: str) -> Run | None:
    """The run called ``run_id`` (exact match, else the only run whose id ends with it)."""
    candidates = []
    for run in runs:
        if run.id == run_id:
            return run
        if run.id.endswith(run_id):
            candidates.append(run)
    return candidates[0] if len(candidates) == 1 else None


def explanation_json(policy: Policy, run: Run, *, index: int | None = None) -> Mapping[str, Any]:
    """The same as :func:`explain_run`, as data (``--json``)."""
    report = next(iter(scan_runs(policy, [run])))
    lines = step_lines(run, policy)
    out = []
    for verdict in report.verdicts:
        if index is not None and verdict.index != index:
            continue
        start = verdict.loop_start if verdict.loop_start is not None else verdict.index
        steps = [
            {"index": s.index, "kind": s.kind, "tool": s.tool, "text": s.text, "fingerprint": s.fingerprint}
            for s in lines
            if start - _CONTEXT <= s.index <= verdict.index + _CONTEXT
        ]
        out.append({"verdict": verdict.to_json(), "steps": steps})
    return {"id": run.id, "events": report.events, "preset": policy.name, "detections": out}
