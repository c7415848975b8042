"""``loopwatch scan`` over corrupted trace files: every file must end in exit status 0 or 2, never a traceback.

    python benchmarks/fuzz_scan.py [--files 10000] [--seed 1] [--subprocess 200] [--keep DIR]

Corrupted copies of the real samples of every format (tests/data/formats and the corpus samples), made by
``tests/trace_corruption.py``, are scanned one by one with the command line (``loopwatch scan FILE --json``)
run in this process with its real output streams' encoding (UTF-8, strict on standard output), so anything
that would escape as a traceback is caught and counted; ``--subprocess N`` also runs the first N files as
real ``loopwatch`` processes. Prints the exit statuses, the tracebacks (must be 0), the reasons given for
unusable input, and the time per file.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from loopwatch.cli import main
from trace_corruption import corrupted_files


def scan_in_process(path: Path) -> tuple[int | None, str, str | None]:
    """(exit status, stderr, traceback): ``None`` status when something escaped ``main``."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")  # what a pipe does
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["scan", str(path), "--json", "--no-progress"])
            out.flush()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        return None, "", traceback.format_exc()
    err.flush()
    return code, err.buffer.getvalue().decode("utf-8", "replace"), None  # type: ignore[attr-defined]


def _site(failure: str) -> str:
    """Where a traceback came from: its exception and the last loopwatch frame."""
    lines = failure.strip().splitlines()
    frames = [line.strip() for line in lines if line.strip().startswith("File ") and "/loopwatch/" in line]
    where = frames[-1].split("/loopwatch/", 1)[-1] if frames else "?"
    return f"{lines[-1].split(':', 1)[0]} at {where}"


def _reason(stderr: str) -> str:
    """The kind of complaint, without the file and line: ``loopwatch: PATH:LINE: REASON``."""
    line = stderr.strip().splitlines()[0] if stderr.strip() else ""
    reason = line.split(": ", 2)[-1] if line.count(": ") >= 2 else line
    return reason.split(" (")[0][:70]


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--subprocess", type=int, default=200, help="also run the first N files as processes")
    parser.add_argument("--keep", metavar="DIR", help="write the files here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loopwatch-fuzz-scan-") as scratch:
        folder = Path(args.keep or scratch)
        started = time.perf_counter()
        paths = list(corrupted_files(folder, args.files, args.seed))
        made = time.perf_counter() - started
        codes: collections.Counter[int | None] = collections.Counter()
        reasons: collections.Counter[str] = collections.Counter()
        tracebacks: list[tuple[Path, str]] = []
        slowest = (0.0, Path())
        started = time.perf_counter()
        for path in paths:
            began = time.perf_counter()
            code, stderr, failure = scan_in_process(path)
            took = time.perf_counter() - began
            slowest = max(slowest, (took, path))
            codes[code] += 1
            if failure is not None:
                tracebacks.append((path, failure))
            elif code == 2:
                reasons[_reason(stderr)] += 1
        scanned = time.perf_counter() - started
        bad_processes = []
        for path in paths[: args.subprocess]:
            done = subprocess.run(
                [sys.executable, "-m", "loopwatch.cli", "scan", str(path), "--json", "--no-progress"],
                capture_output=True,
                timeout=120,
            )
            if done.returncode not in (0, 2) or b"Traceback" in done.stderr:
                bad_processes.append((path, done.returncode, done.stderr.decode("utf-8", "replace")[-2000:]))
        print(f"corrupted files: {len(paths)} (made in {made:.1f} s, seed {args.seed})")
        print(f"exit status 0: {codes[0]}, 2: {codes[2]}, other: {sum(n for c, n in codes.items() if c not in (0, 2))}")
        print(f"tracebacks (in process): {len(tracebacks)}")
        ran = min(args.subprocess, len(paths))
        print(f"as processes: {ran} files, {len(bad_processes)} with another status or a traceback")
        per_file = 1000 * scanned / max(1, len(paths))
        print(f"time: {scanned:.1f} s, {per_file:.1f} ms per file; slowest {1000 * slowest[0]:.0f} ms")
        print("reasons given for unusable input (most frequent):")
        for reason, n in reasons.most_common(12):
            print(f"  {n:6d}  {reason}")
        sites = collections.Counter(_site(failure) for _, failure in tracebacks)
        for site, n in sites.most_common():
            print(f"  traceback x{n}: {site}")
        for path, failure in tracebacks[:3]:
            print(f"\n--- {path}\n{failure}")
        for path, code, stderr in bad_processes[:5]:
            print(f"\n--- {path} (exit {code})\n{stderr}")
        ok = not tracebacks and not bad_processes and set(codes) <= {0, 2}
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main_())
