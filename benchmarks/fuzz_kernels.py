"""Fuzzes the compiled text kernels under AddressSanitizer and UBSan: they read untrusted text (tool outputs, model
replies, arguments), so an out-of-bounds read, an overflow or undefined behaviour must not hide in them.

    python benchmarks/fuzz_kernels.py                          # 60 s, the repository's corpus as seeds
    python benchmarks/fuzz_kernels.py --seconds 600 ../shared/corpus/*.jsonl.gz corpus/*.jsonl.gz

The kernels are compiled with ``-fsanitize=address,undefined`` (``hatch_build.py --sanitize``) into a temporary
folder and loaded into a Python that runs with the ASan runtime preloaded and ``PYTHONMALLOC=malloc`` (every Python
object, each input's buffer included, gets ASan's guard zones). Inputs: random bytes and text, texts from the corpus
mutated (bytes flipped, cut at any point (inside a UTF-8 sequence too), spliced, NULs, error words, times,
durations, ids, temporary paths, lone surrogates and multi-byte characters inserted), and a few huge ones. Each
input goes through every kernel, and each result is compared with the pure-Python twin's (a difference is a failure
too), the sketches and folds with sizes drawn from the rules' and others (odd bits, a k beyond the words or below
0), and now and then with an argument of the wrong type (the same error expected from both); every other input runs
with the processor's vector instructions turned off, through the portable code. A sanitizer report aborts the run
(exit status not 0) with the report on stderr; otherwise the counts are printed.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.machinery
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_INSERTS = [
    b"\x00", b"\n", b"error", b"ERROR", b"0 ", b"no ", b"fail", b"can't", b"not allowed", b"\xc3", b"\xe2\x82",
    b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xff", b" ", b"\t", b"\r", b"_", b"\xc4\xb0", b"\xce\xa3",
    b"10:20:30", b"2024-01-02T", b".5", b"+02:00", b"Z", b"3s", b"7 ms", b"\xc2\xb5s", b"deadbeef0", b"0x", b"-",
    b"123e4567-e89b-12d3-a456-426614174000", b"pid=", b"Process ", b"bash: line 3:", b"sh: 4:", b"/tmp/",
    b"/var/folders/", b"/private/var/", b"tmpab12cd34", b"tmp.", b"1700000000123", b"9",
    b"Dload  Upload   Total   Spent    Left  Speed", b"Dload", b"--:--:--", b"14k",
    b"Traceback (most recent call last)", b"command not found", b"Segmentation fault (core dumped)",
    b"EXECUTION TIMED OUT", b"(execution failed)", b"timed out and has been killed", b"Traceback (most recent",
    b"Permission denie", b"\\ud83d", b"\\uDFFF", b"\\u00e9", b"\\ud", b"\\",
]  # fmt: skip
VECTORS: Any = (True, ("ssse3", "popcnt", "avx2"), False)
"""The vector instructions the compiled kernels are told to use in turn: all the processor has; all but AVX-512
(the SSSE3 code that runs where it is missing); none (the portable code)."""


def seeds(files: list[Path], limit: int) -> list[bytes]:
    """Up to ``limit`` texts (step texts, outputs and argument strings) from trace files."""
    found: list[bytes] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and value:
            found.append(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    walk(json.loads(line).get("steps"))
                if len(found) >= limit * (files.index(path) + 1) // len(files):
                    break
    return found or [b"Traceback (most recent call last):\n  Error: x\n"]


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        choice = rng.randrange(6)
        at = rng.randint(0, len(out))
        if choice == 0 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif choice == 1:
            out[at:at] = rng.choice(_INSERTS)
        elif choice == 2:
            del out[at:]
        elif choice == 3:
            other = rng.choice(corpus)
            start = rng.randint(0, len(other))
            out[at:at] = other[start : start + rng.randint(0, 2_000)]
        elif choice == 4:
            del out[: min(at, len(out))]
        else:
            out[at:at] = rng.randbytes(rng.randint(1, 64))
    return bytes(out)


def as_text(data: bytes) -> str:
    """Any bytes as a str the way guards get them: valid UTF-8 decoded, the rest with lone surrogates."""
    return data.decode("utf-8", "surrogateescape")


def run_child(module_path: Path, seconds: float, files: list[Path], seed: int) -> int:
    spec = importlib.util.spec_from_file_location(
        "loopwatch.core._kernels_c",
        module_path,
        loader=importlib.machinery.ExtensionFileLoader("loopwatch.core._kernels_c", str(module_path)),
    )
    assert spec is not None and spec.loader is not None
    compiled: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compiled)
    from loopwatch.core import _kernels_py as pure
    from loopwatch.core._masking import _masked_bytes_py

    rng = random.Random(seed)
    corpus = seeds(files, 3_000)
    calls = inputs = differences = 0
    huge = [rng.choice(corpus) * 50 for _ in range(3)] + [rng.randbytes(1 << 20), b"\n" * 300_000, b"e" * 500_000]
    graph: list[Any] = []
    graph.append(graph)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or huge:
        if huge:
            data = huge.pop()
        else:
            kind = rng.randrange(4)
            if kind == 0:
                data = rng.randbytes(rng.randint(0, 300))
            elif kind == 1:
                data = b"".join(rng.choice(_INSERTS) for _ in range(rng.randint(0, 60)))
            else:
                data = mutate(rng, rng.choice(corpus), corpus)
        inputs += 1
        compiled._vector_instructions(VECTORS[inputs % 3])  # a third of the inputs through each
        text = as_text(data)
        calls += 1
        if compiled.masked_bytes(data) != _masked_bytes_py(data):
            differences += 1
            print(f"DIFFERENCE in masked_bytes: {data[:200]!r}", file=sys.stderr)
        for name in pure.BYTE_KERNELS:
            calls += 1
            if getattr(compiled, name)(data) != getattr(pure, name)(data):
                differences += 1
                print(f"DIFFERENCE in {name}: {data[:200]!r}", file=sys.stderr)
        limit = rng.choice((0, 1, 64, 1 << 30))
        calls += 1
        if compiled.alnum_word_pair(text, limit) != pure.alnum_word_pair(text, limit):
            differences += 1
            print(f"DIFFERENCE in alnum_word_pair: {text[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.collapsed(text, limit % 1_000) != pure.collapsed(text, limit % 1_000):
            differences += 1
            print(f"DIFFERENCE in collapsed: {text[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.poll_word(text[:400]) != pure.poll_word(text[:400]):
            differences += 1
            print(f"DIFFERENCE in poll_word: {text[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.change_word(text[:700]) != pure.change_word(text[:700]):
            differences += 1
            print(f"DIFFERENCE in change_word: {text[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.failure_marked(text) != pure.failure_marked(text):
            differences += 1
            print(f"DIFFERENCE in failure_marked: {text[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.surrogate_escape(text) != pure.surrogate_escape(text):
            differences += 1
            print(f"DIFFERENCE in surrogate_escape: {text[:200]!r}", file=sys.stderr)
        # the sketches with the rules' sizes and others (a k beyond the words, bits that are no power of two), and
        # given what they do not take (a str, a size that is no int): the same answer or the same error in both
        sizes = rng.choice(((32, 1024), (48, 512), (48, 1024), (0, 64), (1, 8), (1 << 20, 100), (3, 3), (-1, 64)))
        odd = rng.random() < 0.05
        for name in ("word_sketch", "long_word_sketch"):
            sketch_args: tuple[Any, ...] = (text, *sizes) if odd else (data, *sizes)
            if odd and rng.random() < 0.5:
                sketch_args = (data, float(sizes[0]), sizes[1])
            calls += 1
            got, want = _outcome(getattr(compiled, name), sketch_args), _outcome(getattr(pure, name), sketch_args)
            if got != want:
                differences += 1
                print(f"DIFFERENCE in {name}{sizes}: {got!r} != {want!r}: {data[:200]!r}", file=sys.stderr)
        packed, other = data[: len(data) // 4 * 4], data[len(data) // 2 :][: len(data) // 8 * 4]
        calls += 1
        if compiled.shared_words(packed, other) != pure.shared_words(packed, other):
            differences += 1
            print(f"DIFFERENCE in shared_words: {data[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.rest_hash(data, packed) != pure.rest_hash(data, packed):
            differences += 1
            print(f"DIFFERENCE in rest_hash: {data[:200]!r}", file=sys.stderr)
        bits = rng.choice((64, 1024, 4096, 3))
        calls += 1
        if compiled.line_bits(data, bits) != pure.line_bits(data, bits):
            differences += 1
            print(f"DIFFERENCE in line_bits: {data[:200]!r}", file=sys.stderr)
        calls += 1
        if compiled.unquoted_line_bits(data, bits) != pure.unquoted_line_bits(data, bits):
            differences += 1
            print(f"DIFFERENCE in unquoted_line_bits: {data[:200]!r}", file=sys.stderr)
        size = rng.choice((1, 8, 16, 128))
        sketches, sketch = data[: len(data) // size * size], data[:size].ljust(size, b"\x00")
        calls += 1
        if compiled.best_similarity(sketches, sketch) != pure.best_similarity(sketches, sketch):
            differences += 1
            print(f"DIFFERENCE in best_similarity: {data[:200]!r}", file=sys.stderr)
        hashes: list[int] = pure.word_hashes(data)
        if rng.random() < 0.2:
            hashes += [rng.randint(-(2**70), 2**70) for _ in range(rng.randint(0, 5))]
        k, bits = rng.choice((0, 1, 8, 32, 48, 1 << 20)), rng.choice((8, 64, 100, 512, 1024, 4096))
        words = data[: len(data) // 4 * 4]  # as packed word hashes
        for name, args in (
            ("fold", (hashes, bits)),
            ("bottom_k", (hashes, k, bits)),
            ("sketch_of", (hashes, k, bits)),
            ("fold_words", (words, k, bits)),
        ):
            calls += 1
            got, want = _outcome(getattr(compiled, name), args), _outcome(getattr(pure, name), args)
            if got != want:
                differences += 1
                print(f"DIFFERENCE in {name}{(len(hashes), k, bits)}: {got!r} != {want!r}", file=sys.stderr)
        # warm_up has no result to compare: it must only read, whatever graph it is handed (a growing one here, its
        # own cycles included)
        graph.append((data, text, hashes, {text[:20]: [words, (k, bits)]}, graph[-3:]))
        del graph[: max(0, len(graph) - 600)]
        calls += 1
        compiled.warm_up(graph, rng.choice((0, 1, 3, 8, 1 << 20)))
    print(f"{inputs:,} inputs, {calls:,} kernel calls under AddressSanitizer + UBSan: 0 sanitizer reports, "
          f"{differences} differences from the pure-Python kernels")  # fmt: skip
    return 1 if differences else 0


def _outcome(func: Any, args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", func(*args)
    except Exception as error:
        return "error", type(error).__name__


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="trace files whose texts seed the mutations")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "corpus").glob("*.jsonl.gz"))
    if args.child is not None:
        return run_child(args.child, args.seconds, files, args.seed)
    sys.path.insert(0, str(ROOT))
    import hatch_build

    compiler = hatch_build.compiler()
    if compiler is None:
        sys.exit("no C compiler: nothing to fuzz")
    runtime = subprocess.run([*compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True)
    with tempfile.TemporaryDirectory() as folder:
        module = hatch_build.build(Path(folder), sanitize=True)
        env = {
            **os.environ,
            "LD_PRELOAD": runtime.stdout.strip(),
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "PYTHONMALLOC": "malloc",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        }
        child = [sys.executable, __file__, "--child", str(module), "--seconds", str(args.seconds)]
        done = subprocess.run([*child, "--seed", str(args.seed), *map(str, files)], env=env, check=False)
    if done.returncode != 0:
        print(f"fuzzing failed (exit status {done.returncode}): see the report above", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
