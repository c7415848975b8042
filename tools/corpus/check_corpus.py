#!/usr/bin/env python3
"""Check converted trajectory files against the corpus schema (FORMAT.md section 2 plus this folder's rules).

    check_corpus.py [FILE ...]      (default: corpus/*.jsonl.gz)

Every line must be a JSON object with a non-empty string ``id`` (unique across all the files), ``source`` and
``task`` strings, a non-empty ``steps`` list and ``labels`` with ``outcome`` and ``meta`` objects
(``meta.stratum`` one of the sampling strata). Every step has ``role`` (assistant, tool, user, system), a string
``text``, ``tool`` (string or null), ``args`` (object for a call, otherwise null) and ``is_error`` (true, false or
null). A ``tool`` step must come right after the call it answers and name the same tool. A call whose result the
source did not record (a terminal action) may be followed by a system step, another reply or the end of the run,
never by a user step. Texts must respect ``meta.max_chars_per_step``. Prints a summary per file; exits 1 on any
error. Standard library only.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import sys
from typing import Any

ROLES = ("assistant", "tool", "user", "system")
STRATA = ("repetition_signal", "uniform")
TRUNCATION = re.compile(r"\n\.\.\.\[truncated \d+ chars\]\Z")


def check_step(step: Any, prev: Any, max_chars: int | None) -> list[str]:
    if not isinstance(step, dict):
        return [f"not an object: {type(step).__name__}"]
    errors = []
    role, tool, args = step.get("role"), step.get("tool"), step.get("args")
    if role not in ROLES:
        errors.append(f"role {role!r} is not one of {', '.join(ROLES)}")
    if not isinstance(step.get("text"), str):
        errors.append("text is not a string")
    elif max_chars and len(TRUNCATION.sub("", step["text"])) > max_chars:
        errors.append(f"text longer than max_chars_per_step ({len(step['text'])} > {max_chars})")
    if tool is not None and not (isinstance(tool, str) and tool):
        errors.append("tool is neither null nor a non-empty string")
    if step.get("is_error") not in (True, False, None):
        errors.append(f"is_error {step.get('is_error')!r} is not true, false or null")
    is_call = role == "assistant" and bool(tool)
    if is_call and not isinstance(args, dict):
        errors.append("a call's args is not an object")
    if not is_call and args is not None:
        errors.append("args set on a step that is not a call")
    if role in ("user", "system") and tool is not None:
        errors.append(f"a {role} step names a tool")
    if role == "tool":
        prev_is_call = isinstance(prev, dict) and prev.get("role") == "assistant" and prev.get("tool")
        if not prev_is_call:
            errors.append("tool step does not follow a call")
        elif prev.get("tool") != tool:
            errors.append(f"tool step names {tool!r} but follows a call of {prev.get('tool')!r}")
    if role == "user" and isinstance(prev, dict) and prev.get("role") == "assistant" and prev.get("tool"):
        errors.append(f"a user step answers the call of {prev.get('tool')!r} (should be a tool step)")
    return errors


def check_record(rec: Any) -> tuple[list[str], dict[str, Any]]:
    info: dict[str, Any] = {"roles": collections.Counter(), "unanswered": collections.Counter()}
    if not isinstance(rec, dict):
        return [f"not an object: {type(rec).__name__}"], info
    errors = []
    for key in ("id", "source", "task"):
        if not isinstance(rec.get(key), str) or not rec.get(key):
            errors.append(f"{key} is not a non-empty string")
    labels = rec.get("labels")
    meta: dict[str, Any] = {}
    if not isinstance(labels, dict):
        errors.append("labels is not an object")
    else:
        if not isinstance(labels.get("outcome"), dict):
            errors.append("labels.outcome is not an object")
        if not isinstance(labels.get("meta"), dict):
            errors.append("labels.meta is not an object")
        else:
            meta = labels["meta"]
            if meta.get("stratum") not in STRATA:
                errors.append(f"labels.meta.stratum {meta.get('stratum')!r} is not one of {', '.join(STRATA)}")
    info["stratum"] = meta.get("stratum")
    max_chars = meta.get("max_chars_per_step") if isinstance(meta.get("max_chars_per_step"), int) else None
    steps = rec.get("steps")
    if not isinstance(steps, list) or not steps:
        errors.append("steps is not a non-empty list")
        return errors, info
    prev: Any = None
    for i, step in enumerate(steps):
        errors.extend(f"step {i}: {e}" for e in check_step(step, prev, max_chars))
        if isinstance(step, dict):
            info["roles"][step.get("role")] += 1
            if step.get("role") == "assistant" and step.get("tool"):
                nxt = steps[i + 1] if i + 1 < len(steps) else None
                if not (isinstance(nxt, dict) and nxt.get("role") == "tool"):
                    follow = nxt.get("role") if isinstance(nxt, dict) else "end"
                    info["unanswered"][f"{step['tool']} -> {follow}"] += 1
        prev = step
    info["steps"] = len(steps)
    return errors, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check converted trajectory files against the corpus schema.")
    parser.add_argument("files", nargs="*", help="files to check (default: corpus/*.jsonl.gz)")
    parser.add_argument("--max-errors", type=int, default=20, help="errors to print per file (default 20)")
    args = parser.parse_args(argv)
    files = args.files or sorted(glob.glob("corpus/*.jsonl.gz"))
    if not files:
        print("error: no files to check", file=sys.stderr)
        return 1
    seen: dict[str, str] = {}
    failed = False
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        n_runs = n_steps = n_errors = 0
        roles: collections.Counter[str] = collections.Counter()
        strata: collections.Counter[str] = collections.Counter()
        unanswered: collections.Counter[str] = collections.Counter()
        with opener(path, "rt", encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                info: dict[str, Any]
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    errors, info = [f"not JSON: {exc.msg}"], {}
                    rec = None
                else:
                    errors, info = check_record(rec)
                run_id = rec.get("id") if isinstance(rec, dict) else None
                if isinstance(run_id, str):
                    if run_id in seen:
                        errors.append(f"duplicate id (also in {seen[run_id]})")
                    seen[run_id] = f"{path}:{lineno}"
                n_runs += 1
                n_steps += info.get("steps", 0)
                roles.update(info.get("roles", {}))
                unanswered.update(info.get("unanswered", {}))
                strata[str(info.get("stratum"))] += 1
                for error in errors:
                    n_errors += 1
                    if n_errors <= args.max_errors:
                        print(f"{path}:{lineno}: {run_id}: {error}")
        failed = failed or n_errors > 0
        print(
            f"{path}: {n_runs} runs, {n_steps} steps ({', '.join(f'{k} {v}' for k, v in sorted(roles.items()))}); "
            f"strata: {dict(sorted(strata.items()))}; {n_errors} errors"
        )
        if unanswered:
            print(
                f"{path}: calls without a recorded result: "
                + ", ".join(f"{k} {v}" for k, v in sorted(unanswered.items(), key=lambda kv: -kv[1]))
            )
    print(f"{len(seen)} unique ids in {len(files)} files; {'FAILED' if failed else 'all records pass'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
