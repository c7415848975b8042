"""Shared pieces of the corpus converters: reading a git mirror, building steps, the repetition heuristic,
stratified sampling and writing the gzipped trajectory file.

Standard library only. The converters read every source file straight from a git directory at a fixed commit
(``git ls-tree`` and one ``git cat-file --batch`` process), so nothing from the mirror is copied anywhere except
the converted output.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_CHARS = 8000

Step = dict[str, Any]
Record = dict[str, Any]


class SourceError(Exception):
    """A source file or record that cannot be converted; the message names the file (and line)."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


# ---------------------------------------------------------------------------------------------------------------
# git mirror access


@dataclass(frozen=True)
class Blob:
    path: str
    sha: str
    size: int | None  # None when the mirror lacks the object (ls-tree prints "BAD" or "-")


class GitSource:
    """Files of one commit of a bare git directory (the mirror has no work tree)."""

    def __init__(self, git_dir: str, commit: str) -> None:
        self.git_dir = git_dir
        self.commit = commit
        probe = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "-t", commit],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode != 0 or probe.stdout.strip() != "commit":
            raise SystemExit(
                f"error: {git_dir} has no commit {commit} ({probe.stderr.strip() or probe.stdout.strip()}); "
                "pass --mirror with the git directory of the fetched snapshot"
            )

    def tree(self, prefix: str = "") -> list[Blob]:
        """Every blob under ``prefix`` at the commit, sorted by path."""
        cmd = ["git", f"--git-dir={self.git_dir}", "ls-tree", "-r", "-l", "-z", self.commit]
        if prefix:
            cmd += ["--", prefix]
        out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
        blobs = []
        for entry in out.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            _mode, kind, sha, size = meta.split()
            if kind != "blob":
                continue
            blobs.append(Blob(path, sha, int(size) if size.isdigit() else None))
        blobs.sort(key=lambda b: b.path)
        return blobs

    def read_many(self, blobs: Sequence[Blob]) -> Iterator[tuple[Blob, bytes | None]]:
        """The content of each blob, in order; ``None`` for an object missing from the mirror."""
        if not blobs:
            return
        proc = subprocess.Popen(
            ["git", f"--git-dir={self.git_dir}", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin = proc.stdin

        def feed() -> None:
            try:
                for blob in blobs:
                    stdin.write(blob.sha.encode() + b"\n")
            except BrokenPipeError:  # the reader stopped early
                pass
            finally:
                stdin.close()

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            for blob in blobs:
                header = proc.stdout.readline().decode().split()
                if len(header) >= 2 and header[1] == "missing":
                    yield blob, None
                    continue
                if len(header) != 3:
                    raise SourceError(blob.path, f"unexpected answer from git cat-file: {' '.join(header)!r}")
                data = proc.stdout.read(int(header[2]))
                proc.stdout.read(1)  # the newline after each object
                yield blob, data
        finally:
            proc.stdout.close()
            writer.join()
            proc.wait()

    def read(self, blob: Blob) -> bytes | None:
        for _blob, data in self.read_many([blob]):
            return data
        return None


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def load_json(path: str, data: bytes | None) -> Any:
    """Parse a JSON blob; a missing or malformed one raises SourceError naming the file and line."""
    if data is None:
        raise SourceError(path, "the blob is missing from the mirror (not part of the fetched snapshot)")
    try:
        return json.loads(decode(data))
    except json.JSONDecodeError as exc:
        raise SourceError(path, f"malformed JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None


# ---------------------------------------------------------------------------------------------------------------
# steps


def call_step(tool: str, args: dict[str, Any], text: str | None) -> Step:
    return {"role": "assistant", "text": text or "", "tool": tool, "args": args, "is_error": None}


def result_step(tool: str, text: str, is_error: bool | None) -> Step:
    return {"role": "tool", "text": text, "tool": tool, "args": None, "is_error": is_error}


def message_step(role: str, text: str, is_error: bool | None = None, *, new_context: bool = False) -> Step:
    """A step that is not a tool call or result; ``new_context``: a ``system`` step where the harness starts a fresh
    conversation (the model no longer sees the steps before it)."""
    step: Step = {"role": role, "text": text, "tool": None, "args": None, "is_error": is_error}
    if new_context:
        step["new_context"] = True
    return step


def clip_text(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters plus a marker saying how much was cut (0 = keep everything)."""
    if max_chars and len(text) > max_chars:
        return text[:max_chars] + f"\n...[truncated {len(text) - max_chars} chars]"
    return text


def clip_value(value: Any, max_chars: int) -> Any:
    if isinstance(value, str):
        return clip_text(value, max_chars)
    if isinstance(value, list):
        return [clip_value(v, max_chars) for v in value]
    if isinstance(value, dict):
        return {k: clip_value(v, max_chars) for k, v in value.items()}
    return value


def clip_steps(steps: list[Step], max_chars: int) -> int:
    """Clip every step's text and string args in place; returns how many steps were clipped."""
    clipped = 0
    for step in steps:
        text = step.get("text") or ""
        new = clip_text(text, max_chars)
        changed = new != text
        step["text"] = new
        if step.get("args"):
            args = clip_value(step["args"], max_chars)
            changed = changed or args != step["args"]
            step["args"] = args
        clipped += changed
    return clipped


def shorten(text: str, limit: int = 300) -> str:
    """A one-paragraph summary for the ``task`` field: whitespace folded, cut at ``limit`` characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


# ---------------------------------------------------------------------------------------------------------------
# the repetition heuristic used for the sampling strata (exact comparisons; not a label, not loopwatch)

HEURISTIC_DESCRIPTION = (
    "Actions are the assistant steps in order (a tool call is keyed by tool + args, a message without a call by "
    "its stripped text); each action's observation is the next step when it is a tool or user step. A run has a "
    "repetition signal when any of these holds: (1) consecutive: the same action >= 3 times in a row; "
    "(2) alternation: A,B,A,B (A != B) for >= 2 full rounds in a row; (3) failing retry: the same action answered "
    "by the same observation text marked is_error=true >= 3 times in the run; (4) same output: the same action "
    "with the same observation text >= 5 times in the run (anywhere, other actions in between)."
)


def _action_key(step: Step) -> str:
    if step.get("tool"):
        return json.dumps([step["tool"], step.get("args")], sort_keys=True, ensure_ascii=False)
    return json.dumps(["<message>", (step.get("text") or "").strip()], ensure_ascii=False)


def repetition_signals(steps: Sequence[Step]) -> dict[str, Any]:
    """Exact-match repetition counts over a run's actions, and which of the four signals fire."""
    actions: list[tuple[str, str | None, bool | None]] = []
    for i, step in enumerate(steps):
        if step.get("role") != "assistant":
            continue
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if nxt is not None and nxt.get("role") in ("tool", "user"):
            obs, err = (nxt.get("text") or ""), nxt.get("is_error")
        else:
            obs, err = None, None
        actions.append((_action_key(step), obs, err))
    keys = [a[0] for a in actions]

    max_consecutive = 0
    run = 0
    for i, key in enumerate(keys):
        run = run + 1 if i and key == keys[i - 1] else 1
        max_consecutive = max(max_consecutive, run)

    # longest stretch where keys[i] == keys[i-2] and keys[i] != keys[i-1], counted in full A,B rounds
    max_rounds = 0
    stretch = 0
    for i in range(2, len(keys)):
        alternates = keys[i] == keys[i - 2] and keys[i] != keys[i - 1]
        stretch = (stretch + 1 if stretch else 3) if alternates else 0
        max_rounds = max(max_rounds, stretch // 2)

    failing = collections.Counter((key, obs) for key, obs, err in actions if err is True)
    same_output = collections.Counter((key, obs) for key, obs, _err in actions if obs is not None)
    metrics: dict[str, Any] = {
        "n_actions": len(keys),
        "n_distinct_actions": len(set(keys)),
        "max_consecutive_same_action": max_consecutive,
        "max_alternation_rounds": max_rounds,
        "max_same_failing_action_same_error": max(failing.values(), default=0),
        "max_same_action_same_output": max(same_output.values(), default=0),
    }
    fired = []
    if max_consecutive >= 3:
        fired.append("consecutive")
    if max_rounds >= 2:
        fired.append("alternation")
    if metrics["max_same_failing_action_same_error"] >= 3:
        fired.append("failing_retry")
    if metrics["max_same_action_same_output"] >= 5:
        fired.append("same_output")
    metrics["signals"] = fired
    return metrics


# ---------------------------------------------------------------------------------------------------------------
# sampling

STRATUM_SIGNAL = "repetition_signal"
STRATUM_UNIFORM = "uniform"


@dataclass
class SampleResult:
    chosen: dict[str, str]  # id -> stratum
    n_candidates: int
    n_with_signal: int
    n_signal_taken: int
    n_uniform_pool: int
    n_uniform_taken: int
    signal_cap: int


def stratified_sample(signalled: dict[str, bool], total: int, seed: int, cap_fraction: float = 1 / 3) -> SampleResult:
    """Stratum (a): every run with a signal, up to ``cap_fraction`` of ``total`` (a seeded random subset when
    there are more); stratum (b): a seeded uniform sample of the other runs filling the rest. ``total`` = 0 takes
    every run."""
    rng = random.Random(seed)
    ids = sorted(signalled)
    with_signal = [i for i in ids if signalled[i]]
    without = [i for i in ids if not signalled[i]]
    if total <= 0:
        chosen = {i: STRATUM_SIGNAL if signalled[i] else STRATUM_UNIFORM for i in ids}
        return SampleResult(chosen, len(ids), len(with_signal), len(with_signal), len(without), len(without), 0)
    cap = round(total * cap_fraction)
    taken_signal = sorted(rng.sample(with_signal, cap)) if len(with_signal) > cap else with_signal
    want_uniform = min(total - len(taken_signal), len(without))
    taken_uniform = sorted(rng.sample(without, want_uniform))
    chosen = {i: STRATUM_SIGNAL for i in taken_signal}
    chosen.update({i: STRATUM_UNIFORM for i in taken_uniform})
    return SampleResult(chosen, len(ids), len(with_signal), len(taken_signal), len(without), len(taken_uniform), cap)


# ---------------------------------------------------------------------------------------------------------------
# running a converter


@dataclass
class Converted:
    """One converted run held compressed until the sample is drawn."""

    id: str
    signals: dict[str, Any]
    packed: bytes

    @staticmethod
    def pack(record: Record) -> bytes:
        return zlib.compress(json.dumps(record, ensure_ascii=False).encode(), 6)

    def record(self) -> Record:
        loaded: Record = json.loads(zlib.decompress(self.packed))
        return loaded

    @classmethod
    def of(cls, run_id: str, record: Record, steps: Sequence[Step]) -> Converted:
        """A converted run, its repetition counts added to ``record``'s derived labels (counts, not a label)."""
        signals = repetition_signals(steps)
        record["labels"]["derived"] = {"repetition_heuristic": signals, "note": "exact-match counts; not a label"}
        return cls(run_id, signals, cls.pack(record))


@dataclass
class Tally:
    """What happened to each candidate run, for the summary line."""

    skipped: list[str] = field(default_factory=list)
    warnings: collections.Counter[str] = field(default_factory=collections.Counter)
    clipped_steps: int = 0

    def skip(self, error: SourceError) -> None:
        self.skipped.append(str(error))
        print(f"skip: {error}", file=sys.stderr)

    def warn(self, kind: str, message: str) -> None:
        self.warnings[kind] += 1
        print(f"warning: {message}", file=sys.stderr)


def common_arguments(parser: argparse.ArgumentParser, *, default_sample: int, default_out: str) -> None:
    parser.add_argument("--mirror", required=True, help="git directory of the fetched snapshot (no work tree)")
    parser.add_argument("--commit", help="commit to read (default: the one named in the provenance file)")
    parser.add_argument("--out", default=default_out, help=f"output .jsonl.gz (default {default_out})")
    parser.add_argument(
        "--max-chars",
        type=int,
        default=DEFAULT_MAX_CHARS,
        help=f"clip each step's text and string args at N characters (default {DEFAULT_MAX_CHARS}; 0 = no clipping)",
    )
    parser.add_argument("--limit", type=int, default=0, help="only look at the first N candidate runs (0 = all)")
    parser.add_argument(
        "--sample", type=int, default=default_sample, help=f"runs to write (default {default_sample}; 0 = all runs)"
    )
    parser.add_argument("--seed", type=int, default=20240601, help="seed of the sampling (default 20240601)")


def finish(
    converted: list[Converted],
    tally: Tally,
    args: argparse.Namespace,
    *,
    source: str,
    extra_meta: Callable[[Record], None] | None = None,
) -> SampleResult:
    """Draw the sample, stamp stratum and clipping into each record, write the file and print the summary."""
    by_id = {c.id: c for c in converted}
    if len(by_id) != len(converted):
        dupes = [k for k, v in collections.Counter(c.id for c in converted).items() if v > 1]
        raise SystemExit(f"error: duplicate run ids: {dupes[:5]}")
    sample = stratified_sample({c.id: bool(c.signals["signals"]) for c in converted}, args.sample, args.seed)
    written = 0
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for run_id in sorted(sample.chosen):
            record = by_id[run_id].record()
            tally.clipped_steps += clip_steps(record["steps"], args.max_chars)
            record["labels"]["meta"]["stratum"] = sample.chosen[run_id]
            record["labels"]["meta"]["max_chars_per_step"] = args.max_chars
            if extra_meta:
                extra_meta(record)
            out.write((json.dumps(record, ensure_ascii=False) + "\n").encode())
            written += 1
    print(
        f"{source}: wrote {written} runs to {args.out} "
        f"(stratum {STRATUM_SIGNAL}: {sample.n_signal_taken} of {sample.n_with_signal} runs with a signal, "
        f"cap {sample.signal_cap or 'none'}; stratum {STRATUM_UNIFORM}: {sample.n_uniform_taken} of "
        f"{sample.n_uniform_pool}); {sample.n_candidates} runs converted, {len(tally.skipped)} skipped, "
        f"{tally.clipped_steps} steps clipped at {args.max_chars or 'no'} chars"
    )
    if tally.warnings:
        print(f"{source}: warnings: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.warnings.items())))
    signal_counts = collections.Counter(s for c in converted for s in c.signals["signals"])
    chosen_counts = collections.Counter(s for c in converted if c.id in sample.chosen for s in c.signals["signals"])
    print(
        f"{source}: heuristic signals over all converted runs: {dict(sorted(signal_counts.items()))}; "
        f"in the sample: {dict(sorted(chosen_counts.items()))}"
    )
    return sample


def limited(items: Iterable[Any], limit: int) -> list[Any]:
    items = list(items)
    return items[:limit] if limit > 0 else items


NUMBERED = re.compile(r"(\d+)")


def natural_key(name: str) -> list[Any]:
    """Sort key that orders ``x_2`` before ``x_10``."""
    return [int(part) if part.isdigit() else part for part in NUMBERED.split(name)]
