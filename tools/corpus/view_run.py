#!/usr/bin/env python3
"""Show a converted run one step per line, for labelling.

    view_run.py FILE ID [--from N] [--to M] [--width W]    one line per step:
        index, role, tool, is_error (err / ok / -), then the first W characters of the call's args and
        reasoning (for a call) or of the text (for any other step); newlines are shown as ⏎
    view_run.py FILE --list                                 every run: id, steps, stratum, outcome
    view_run.py FILE ID --step N                            step N in full (text, args, extra fields)

FILE is a trajectory file (.jsonl or .jsonl.gz, FORMAT.md section 2). Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from typing import IO, Any


def open_text(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def records(path: str) -> Iterator[dict[str, Any]]:
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"error: {path}:{lineno}: not JSON ({exc.msg})") from None


def flat(text: str) -> str:
    return text.replace("\r", "").replace("\n", "⏎")


def args_summary(args: Any) -> str:
    if isinstance(args, dict) and set(args) == {"command"} and isinstance(args["command"], str):
        return args["command"]
    return json.dumps(args, ensure_ascii=False)


def step_line(index: int, step: dict[str, Any], width: int) -> str:
    role = str(step.get("role"))
    tool = step.get("tool") or ""
    is_error = step.get("is_error")
    err = "err" if is_error is True else "ok" if is_error is False else "-"
    text = step.get("text") or ""
    if role == "assistant" and tool:
        snippet = args_summary(step.get("args"))
        if text:
            snippet += "  ‖ " + text
    else:
        snippet = text
    snippet = flat(snippet)
    if width and len(snippet) > width:
        snippet = snippet[: width - 1] + "…"
    return f"{index:>4}  {role:<9} {tool[:22]:<22} {err:<3}  {snippet}"


def outcome_summary(labels: dict[str, Any]) -> str:
    outcome = labels.get("outcome") or {}
    keys = ("resolved", "exit_status", "completed", "organize_completed", "category")
    return " ".join(f"{k}={outcome[k]}" for k in keys if k in outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Show a converted run one step per line.")
    parser.add_argument("file", help="trajectory file (.jsonl or .jsonl.gz)")
    parser.add_argument("id", nargs="?", help="run id (as in --list)")
    parser.add_argument("--list", action="store_true", help="list the runs of the file")
    parser.add_argument("--from", dest="start", type=int, default=0, help="first step index to show")
    parser.add_argument("--to", dest="end", type=int, default=None, help="last step index to show (inclusive)")
    parser.add_argument("--width", type=int, default=160, help="characters of args/text per line (0 = all)")
    parser.add_argument("--step", type=int, default=None, help="show this one step in full")
    args = parser.parse_args(argv)

    if args.list:
        for rec in records(args.file):
            labels = rec.get("labels") or {}
            stratum = (labels.get("meta") or {}).get("stratum", "-")
            print(f"{rec.get('id')}\t{len(rec.get('steps') or [])} steps\t{stratum}\t{outcome_summary(labels)}")
        return 0
    if not args.id:
        parser.error("give a run ID, or --list")
    found = next((rec for rec in records(args.file) if rec.get("id") == args.id), None)
    if found is None:
        close = [rec.get("id") for rec in records(args.file) if args.id in str(rec.get("id"))]
        hint = f"; ids containing it: {', '.join(map(str, close[:10]))}" if close else ""
        print(f"error: no run {args.id!r} in {args.file}{hint}", file=sys.stderr)
        return 1
    steps = found.get("steps") or []
    if args.step is not None:
        if not 0 <= args.step < len(steps):
            print(f"error: the run has steps 0..{len(steps) - 1}", file=sys.stderr)
            return 1
        print(json.dumps(steps[args.step], ensure_ascii=False, indent=2))
        return 0
    labels = found.get("labels") or {}
    meta = labels.get("meta") or {}
    print(f"# {found.get('id')}  ({len(steps)} steps, stratum {meta.get('stratum', '-')})")
    print(f"# task: {flat(str(found.get('task', '')))[:300]}")
    print(f"# outcome: {json.dumps(labels.get('outcome'), ensure_ascii=False)}")
    end = len(steps) - 1 if args.end is None else min(args.end, len(steps) - 1)
    for index in range(max(args.start, 0), end + 1):
        print(step_line(index, steps[index], args.width))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
