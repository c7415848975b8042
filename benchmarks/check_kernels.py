"""The compiled text kernels against their pure-Python twins on real traces: every text of every step (messages, tool
outputs, argument strings) of every run goes through each kernel both ways, and any difference is printed.

    python benchmarks/check_kernels.py ../shared/corpus/*.jsonl.gz corpus/*.jsonl.gz
    python benchmarks/check_kernels.py --runs 20 corpus/*.jsonl.gz       # the first 20 runs of each file
    python benchmarks/check_kernels.py --regex corpus/*.jsonl.gz         # also the error lines' regular expression

Each text is masked both ways (its volatile parts removed), then fed as the rules feed it: masked for the byte
kernels, whole for the argument words, and the word and line hashes through the sketches (several ``k`` and sizes).
Every other text runs with the processor's vector instructions turned off, through the portable code that a
processor without them runs. ``--regex`` also checks the pure error lines against the regular expression that
defines them (slow: ~1 ms per KB).
Exit status 1 on any difference; the compiled kernels must be built (``python hatch_build.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwatch.core import _kernels_py as pure
from loopwatch.core._masking import _masked_bytes_py, masked

try:
    from loopwatch.core import _kernels_c as compiled
except ImportError:
    sys.exit("the compiled kernels are not built: run `python hatch_build.py` first")


VECTORS: Any = (True, ("ssse3", "popcnt", "avx2"), False)
"""The vector instructions the compiled kernels are told to use in turn: all the processor has; all but AVX-512
(the SSSE3 code that runs where it is missing); none (the portable code)."""


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (keys aside)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def runs(path: Path, limit: int | None) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if limit is not None and number >= limit:
                return
            if line.strip():
                yield json.loads(line)


def check(text: str, differences: Counter[str], regex: bool) -> int:
    """Compares every kernel on one text; returns the number of kernel calls made."""
    raw = text.encode("utf-8", "surrogatepass")
    calls = 1
    if compiled.masked_bytes(raw) != _masked_bytes_py(raw):
        differences["masked_bytes"] += 1
    data = masked(text)
    for name in pure.BYTE_KERNELS:
        calls += 1
        if getattr(compiled, name)(data) != getattr(pure, name)(data):
            differences[name] += 1
    calls += 1
    lines = compiled.error_lines(raw[-2_000:])
    if pure.last_error_line(raw[-2_000:]) != (lines[-1] if lines else None):
        differences["last_error_line"] += 1
    if regex and pure.error_lines(data[:65_536]) != pure.ERROR_LINE.findall(data[:65_536]):
        differences["error_lines (regex)"] += 1
    for limit in (64, 1_000_000):
        calls += 1
        if compiled.alnum_word_pair(text, limit) != pure.alnum_word_pair(text, limit):
            differences["alnum_word_pair"] += 1
    for limit in (400, 1_000_000):
        calls += 1
        if compiled.collapsed(text, limit) != pure.collapsed(text, limit):
            differences["collapsed"] += 1
    calls += 1
    if compiled.poll_word(text[:400]) != pure.poll_word(text[:400]):
        differences["poll_word"] += 1
    calls += 1
    if compiled.change_word(text[:700]) != pure.change_word(text[:700]):
        differences["change_word"] += 1
    ends = text if len(text) <= 800 else text[:400] + "\n" + text[-400:]  # what infer_failure reads
    calls += 1
    if compiled.failure_marked(ends) != pure.failure_marked(ends):
        differences["failure_marked"] += 1
    calls += 1
    line = json.dumps(text, ensure_ascii=bool(len(text) % 2))  # as a JSON line holds it (escaped, or not)
    if compiled.surrogate_escape(line) != pure.surrogate_escape(line):
        differences["surrogate_escape"] += 1
    calls += 1
    if compiled.word_sketch(data, 48, 1024) != pure.word_sketch(data, 48, 1024):
        differences["word_sketch"] += 1
    calls += 1
    if compiled.long_word_sketch(data, 48, 512) != pure.long_word_sketch(data, 48, 512):
        differences["long_word_sketch"] += 1
    packed, other = pure.alnum_word_pair(text, 64)[0], pure.alnum_word_pair(text[len(text) // 2 :], 64)[0]
    calls += 1
    if compiled.shared_words(packed, other) != pure.shared_words(packed, other):
        differences["shared_words"] += 1
    calls += 1
    if compiled.rest_hash(data, other) != pure.rest_hash(data, other):
        differences["rest_hash"] += 1
    for k in (48, 1_000):
        calls += 1
        if compiled.fold_words(packed, k, 1024) != pure.fold_words(packed, k, 1024):
            differences["fold_words"] += 1
    calls += 1
    if compiled.line_bits(data, 4096) != pure.line_bits(data, 4096):
        differences["line_bits"] += 1
    calls += 1
    if compiled.unquoted_line_bits(data[:600], 256) != pure.unquoted_line_bits(data[:600], 256):
        differences["unquoted_line_bits"] += 1
    sketches = b"".join(pure.word_sketch(part, 48, 1024).to_bytes(128, "big") for part in data.split(b"\n")[:6])
    calls += 1
    if compiled.best_similarity(sketches, sketches[-128:] or bytes(128)) != pure.best_similarity(
        sketches, sketches[-128:] or bytes(128)
    ):
        differences["best_similarity"] += 1
    words, lines = pure.word_hashes(data), pure.line_hashes(data)
    for hashes in (words, lines):
        for k, bits in ((8, 1024), (32, 1024), (48, 512), (1_000_000, 4096)):
            calls += 3
            if compiled.sketch_of(hashes, k, bits) != pure.sketch_of(hashes, k, bits):
                differences["sketch_of"] += 1
            if compiled.bottom_k(hashes, k, bits) != pure.bottom_k(hashes, k, bits):
                differences["bottom_k"] += 1
            if compiled.fold(hashes, bits) != pure.fold(hashes, bits):
                differences["fold"] += 1
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="trace files (JSON lines, optionally gzipped)")
    parser.add_argument("--runs", type=int, default=None, help="read only the first RUNS runs of each file")
    parser.add_argument("--regex", action="store_true", help="also check the error lines against their regex")
    args = parser.parse_args()
    differences: Counter[str] = Counter()
    texts = calls = size = 0
    started = time.perf_counter()
    for path in args.files:
        for run in runs(path, args.runs):
            for text in strings(run.get("steps", run)):
                texts += 1
                size += len(text)
                compiled._vector_instructions(VECTORS[texts % 3])  # a third of the texts through each
                calls += check(text, differences, args.regex)
    seconds = time.perf_counter() - started
    print(
        f"{len(args.files)} files, {texts:,} texts ({size / 1e6:,.1f} M characters), {calls:,} kernel calls each way "
        f"in {seconds:.1f} s: {sum(differences.values())} differences"
    )
    for name, count in sorted(differences.items()):
        print(f"  {name}: {count} texts differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
