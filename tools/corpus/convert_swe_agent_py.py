#!/usr/bin/env python3
"""Convert the SWE-agent 0.x + GPT-4 runs on SWE-bench Lite kept in nus-apr/auto-code-rover to trajectories.

The AutoCodeRover authors committed SWE-agent's own results as a baseline under
``results/swe-agent-results/cost_2_{1,2,3}/`` (three runs, $2 cost limit, ``gpt4-0125`` = gpt-4-0125-preview);
they were deleted from the repository later and are read from commit da4c0433 (2024-06-10). Each
``<instance>.traj`` is a SWE-agent 0.x trajectory: ``trajectory[i] = {action, observation, response, thought,
state}``, ``info.exit_status``; ``final_report.json`` lists the resolved instances, ``all_preds.json`` the
submitted patches.

Mapping: each trajectory entry -> an ``assistant`` call step (``tool`` = the first word of the action,
``args.command`` = the whole action, ``text`` = the thought) followed by a ``tool`` step with the observation.
SWE-agent records no exit codes, so ``is_error`` is true when the observation carries an explicit error
(``ERROR_PATTERNS``: the edit linter's rejection, a bash error line, a Python traceback, a tool's ``Usage:`` or
``Error:`` line) and null otherwise, never false. The synthetic ``exit_cost`` entry SWE-agent appends when the
cost limit ends a run is not a step; it is kept as ``labels.outcome.exit_action``. The histories hold no
format-error turns for these runs (every assistant turn is a trajectory entry), so there are no ``user`` steps.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_common import (
    Converted,
    GitSource,
    Record,
    SourceError,
    Step,
    Tally,
    call_step,
    common_arguments,
    finish,
    limited,
    load_json,
    result_step,
    shorten,
)

SOURCE = "swe_agent_py"
REPOSITORY = "nus-apr/auto-code-rover"
COMMIT = "da4c04338dc7d4130da8383157f0aec5abe0f146"
BASE = "results/swe-agent-results"
RUNS = ("cost_2_1", "cost_2_2", "cost_2_3")
SYNTHETIC_EXITS = ("exit_cost", "exit_context", "exit_format", "exit_api", "exit_error")

ERROR_PATTERNS = re.compile(
    r"\AYour proposed edit has introduced new syntax error"
    r"|^/bin/bash: line \d+: .*(?:command not found|No such file or directory|syntax error)"
    r"|^Traceback \(most recent call last\):"
    r"|\AUsage: "
    r"|^Error: ",
    re.MULTILINE,
)
ISSUE = re.compile(r"ISSUE:\n(.*?)\n\nINSTRUCTIONS:", re.DOTALL)


def observation_error(observation: str) -> bool | None:
    return True if ERROR_PATTERNS.search(observation.strip()) else None


def convert_traj(path: str, traj: Any) -> tuple[list[Step], dict[str, Any], str]:
    if not isinstance(traj, dict) or not isinstance(traj.get("trajectory"), list):
        raise SourceError(path, "expected a SWE-agent .traj object with a 'trajectory' list")
    entries = traj["trajectory"]
    exit_action = None
    if entries and str(entries[-1].get("action", "")).strip() in SYNTHETIC_EXITS:
        exit_action = str(entries[-1]["action"]).strip()
        entries = entries[:-1]
    steps: list[Step] = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
            raise SourceError(path, f"trajectory entry {n} has no action string")
        action = entry["action"].strip()
        observation = str(entry.get("observation") or "")
        tool = action.split(None, 1)[0] if action else "<empty>"
        steps.append(call_step(tool, {"command": action}, str(entry.get("thought") or "")))
        steps.append(result_step(tool, observation, observation_error(observation)))
    if not steps:
        raise SourceError(path, "the trajectory has no actions")
    history = traj.get("history") or []
    prompt = next((str(h.get("content")) for h in history if isinstance(h, dict) and h.get("role") == "user"), "")
    issue = ISSUE.search(prompt)
    info = traj.get("info") or {}
    return (
        steps,
        {"info": info, "exit_action": exit_action, "environment": traj.get("environment")},
        (issue.group(1) if issue else prompt),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, default_sample=200, default_out="corpus/swe_agent_py.jsonl.gz")
    args = parser.parse_args(argv)
    git = GitSource(args.mirror, args.commit or COMMIT)

    trajs = []
    resolved: dict[str, set[str]] = {}
    patches: dict[str, dict[str, str]] = {}
    model_names: dict[str, str] = {}
    for run in RUNS:
        for blob in git.tree(f"{BASE}/{run}/"):
            name = blob.path.rsplit("/", 1)[1]
            if name.endswith(".traj"):
                trajs.append((run, name.removesuffix(".traj"), blob))
            elif name == "final_report.json":
                resolved[run] = set(load_json(blob.path, git.read(blob)).get("resolved", []))
            elif name == "all_preds.json":
                preds = load_json(blob.path, git.read(blob))
                patches[run] = {p["instance_id"]: p.get("model_patch") or "" for p in preds}
                model_names[run] = next((p.get("model_name_or_path") for p in preds), "")
        if run not in resolved:
            raise SystemExit(f"error: {BASE}/{run}/final_report.json not found at {git.commit}")

    tally = Tally()
    candidates = limited(trajs, args.limit)
    converted: list[Converted] = []
    for (run, instance, blob), (_blob, data) in zip(
        candidates, git.read_many([b for _r, _i, b in candidates]), strict=True
    ):
        run_id = f"{SOURCE}/{run}/{instance}"
        try:
            steps, extra, issue = convert_traj(blob.path, load_json(blob.path, data))
        except SourceError as exc:
            tally.skip(exc)
            continue
        info = extra["info"]
        exit_status = info.get("exit_status")
        patch = patches.get(run, {}).get(instance)
        record: Record = {
            "id": run_id,
            "source": SOURCE,
            "task": shorten(issue) if issue else instance,
            "steps": steps,
            "labels": {
                "outcome": {
                    "exit_status": exit_status,
                    "exit_action": extra["exit_action"],
                    "hit_cost_limit": "exit_cost" in str(exit_status) or extra["exit_action"] == "exit_cost",
                    "resolved": instance in resolved[run],
                    "empty_patch": None if patch is None else not patch.strip(),
                },
                "human": None,
                "derived": None,
                "meta": {
                    "agent": "SWE-agent 0.x",
                    "model": "gpt-4-0125-preview",
                    "model_name_or_path": model_names.get(run),
                    "run": run,
                    "instance_id": instance,
                    "environment": extra["environment"],
                    "model_stats": info.get("model_stats"),
                    "source_file": f"{REPOSITORY}@{git.commit[:12]}:{blob.path}",
                    "is_error_method": "regex on explicit error messages in the observation (true or null)",
                },
            },
        }
        converted.append(Converted.of(run_id, record, steps))

    finish(converted, tally, args, source=SOURCE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
