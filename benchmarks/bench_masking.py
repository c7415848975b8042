"""The compiled text kernels of another version against this checkout's, side by side in one process, on
``bench_guard.py``'s ~4 KB tool outputs: ``masked_bytes`` (a tool output without its volatile parts),
``error_lines`` (its lines that say something went wrong, on the masked output, as the rules call it) and
``numbers_marked`` (its numbers replaced by ``#``).

    python benchmarks/bench_masking.py                       # against the last commit's _kernels_c.c
    python benchmarks/bench_masking.py --base fb647b5 --outputs 2000 --rounds 7
    python benchmarks/bench_masking.py --pure                # the pure-Python twins too

Both versions of ``src/loopwatch/core/_kernels_c.c`` (``--base``: any git revision; this checkout's file as it is now)
are compiled with ``hatch_build.build`` into temporary folders and loaded side by side. The outputs are drawn as
``bench_guard.py`` draws a tool result (file listings, pytest runs with a failure, tracebacks, grep hits, numbered
source, one fifth each). Each round times every output through each version in turn (``--calls`` calls in a row,
the order of the versions alternating from round to round); an output's time is its median over the rounds. Prints,
per kernel and kind of output, the time per 4 KB of input and each version's ratio to the first column's, and the
mean time per call. Exits 1 when the versions (or the pure-Python twins) give different results on any output.

``numbers_marked`` (a new kernel) is timed as the ``error_retry`` rule would call it, on the whole lines of a masked
output's first and last 800 bytes, against the regular expression that defines it (``zlib.crc32`` of either).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import hatch_build  # noqa: E402

from bench_guard import Content  # noqa: E402
from loopwatch.core import _kernels_py  # noqa: E402
from loopwatch.core._masking import _masked_bytes_py  # noqa: E402

OUTPUT_KINDS = ("listing", "pytest", "traceback", "grep", "numbered source")
"""``Content.output``'s kinds of tool output, in the order of its first draw."""


WHAT = {
    "masked_bytes": "",
    "error_lines": " (of the masked outputs)",
    "numbers_marked": " (of the masked outputs' whole lines of their first and last 800 bytes; the CRC of the result)",
}


def numbers_window(masked: bytes) -> bytes:
    """What the ``error_retry`` rule compares with its numbers marked (``detectors/failures.py``'s ``_numberless``):
    a masked output's whole lines of its first and last 800 bytes."""
    if len(masked) <= 1_600:
        return masked
    head, tail = masked[:800], masked[-800:]
    return head[: head.rfind(b"\n") + 1 or None] + b"\n" + tail[tail.find(b"\n") + 1 :]


def load(path: Path) -> ModuleType:
    """The compiled module at ``path`` (its own copy, whatever else is loaded under the same name)."""
    loader = importlib.machinery.ExtensionFileLoader("loopwatch.core._kernels_c", str(path))
    spec = importlib.util.spec_from_file_location("loopwatch.core._kernels_c", path, loader=loader)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled(source_text: str, folder: Path) -> ModuleType:
    folder.mkdir(parents=True)
    source = folder / "_kernels_c.c"
    source.write_text(source_text, encoding="utf-8")
    return load(hatch_build.build(folder, source=source))


def outputs(count: int, seed: int) -> list[tuple[str, bytes]]:
    """``count`` tool outputs as ``bench_guard.py`` draws them, each with its kind."""
    content = Content()
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        probe = random.Random()
        probe.setstate(rng.getstate())
        kind = OUTPUT_KINDS[probe.randrange(len(OUTPUT_KINDS))]  # the draw Content.output makes first
        text, _ = content.output(rng)
        drawn.append((kind, text.encode("utf-8")))
    return drawn


def timed(func: Callable[[bytes], Any], data: bytes, calls: int) -> float:
    """Nanoseconds per call of ``func(data)``, over ``calls`` calls in a row."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        func(data)
    return (time.perf_counter_ns() - start) / calls


def base_source(revision: str) -> str:
    """The C kernels' source at ``revision`` (in ``src/loopwatch/core``, or where releases before the core package
    kept it, ``src/loopwatch``)."""
    for path in ("src/loopwatch/core/_kernels_c.c", "src/loopwatch/_kernels_c.c"):
        shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout
    raise SystemExit(f"no _kernels_c.c at {revision}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="the git revision whose _kernels_c.c is the base (HEAD)")
    parser.add_argument("--outputs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5, help="calls in a row per output, version and round")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pure", action="store_true", help="time the pure-Python twins too")
    args = parser.parse_args()

    base_text = base_source(args.base)
    with tempfile.TemporaryDirectory() as folder:
        versions = {
            f"base ({args.base})": compiled(base_text, Path(folder) / "base"),
            "this checkout": compiled(hatch_build.SOURCE.read_text(encoding="utf-8"), Path(folder) / "new"),
        }
    drawn = outputs(args.outputs, args.seed)
    masked = [_masked_bytes_py(data) for _, data in drawn]
    windows = [numbers_window(data) for data in masked]
    new = versions["this checkout"]
    kernels: dict[str, dict[str, Callable[[bytes], Any]]] = {
        "masked_bytes": {name: module.masked_bytes for name, module in versions.items()},
        "error_lines": {name: module.error_lines for name, module in versions.items()},
        "numbers_marked": {
            "re.sub + crc32": lambda data: zlib.crc32(_kernels_py.NUMBER.sub(b"#", data)),
            "this checkout + crc32": lambda data: zlib.crc32(new.numbers_marked(data)),
        },
    }
    inputs_of = {"masked_bytes": [data for _, data in drawn], "error_lines": masked, "numbers_marked": windows}
    if args.pure:
        kernels["masked_bytes"]["pure Python"] = _masked_bytes_py
        kernels["error_lines"]["pure Python"] = _kernels_py.error_lines
        kernels["numbers_marked"]["pure Python + crc32"] = lambda data: zlib.crc32(_kernels_py.numbers_marked(data))

    differences = 0
    for kernel, funcs in kernels.items():
        for data in inputs_of[kernel]:
            results = {name: func(data) for name, func in funcs.items()}
            if len({repr(r) for r in results.values()}) != 1:
                differences += 1
                print(f"DIFFERENCE in {kernel}: {data[:120]!r}", file=sys.stderr)

    print(
        f"{len(drawn):,} tool outputs (mean {statistics.fmean(len(d) for _, d in drawn):,.0f} bytes), "
        f"{args.rounds} rounds x {args.calls} calls each, versions alternating; {differences} differences"
    )
    for kernel, funcs in kernels.items():
        inputs = inputs_of[kernel]
        names = list(funcs)
        for func in funcs.values():  # warm-up
            for data in inputs[:50]:
                func(data)
        samples: dict[str, list[list[float]]] = {name: [[] for _ in inputs] for name in names}
        for round_number in range(args.rounds):
            order = names if round_number % 2 == 0 else names[::-1]
            for i, data in enumerate(inputs):
                for name in order:
                    samples[name][i].append(timed(funcs[name], data, args.calls))
        per_output = {name: [statistics.median(times) for times in samples[name]] for name in names}
        print(f"\n{kernel}" + WHAT[kernel])
        header = f"  {'kind':<16} {'bytes':>6}" + "".join(f" {name:>24}" for name in names)
        print(header)
        base_name = names[0]
        for kind in (*OUTPUT_KINDS, "all"):
            chosen = [i for i, (k, _) in enumerate(drawn) if kind in ("all", k)]
            size = sum(len(inputs[i]) for i in chosen)
            row = f"  {kind:<16} {size / len(chosen):>6,.0f}"
            base_per_4k = sum(per_output[base_name][i] for i in chosen) / size * 4096 / 1000
            for name in names:
                per_4k = sum(per_output[name][i] for i in chosen) / size * 4096 / 1000
                ratio = "" if name == base_name else f" ({per_4k / base_per_4k:.2f}x)"
                row += f" {f'{per_4k:.2f} us/4KB{ratio}':>24}"
            print(row)
        row = f"  {'all, per call':<16} {'':>6}"
        for name in names:
            row += f" {f'{statistics.fmean(per_output[name]) / 1000:.2f} us':>24}"
        print(row)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
