"""Latency and memory of the built-in embedder (all-MiniLM-L6-v2, int8 ONNX, onnxruntime on the CPU).

    python benchmarks/bench_embed.py                  # 300 messages of ~1 KB, one at a time, cache cold
    python benchmarks/bench_embed.py --messages 1000 --threads 2 --max-length 128 --json

Needs ``pip install 'loopwatch[semantic]'``. Traffic: ~1 KB assistant messages of prose (the same generator as
``bench_guard.py``), each distinct, embedded one at a time through ``builtin_embedder()`` with the cache cold
(every message a miss: tokenizer + one model run + pooling), after a few warm-up texts. Also timed: the same
messages again (cache hits), and the tokenizer alone.

Memory: the process's resident set (``VmRSS`` in ``/proc/self/status``, Linux) before onnxruntime and numpy are
imported, after they are, after the model is loaded, and after the warm-up (onnxruntime's buffers); the model's
share is the last minus the first. Run it in a fresh process (as here): the figures are for this process only.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_guard
from loopwatch.semantic import WordPieceTokenizer, builtin_embedder, shared_minilm


def rss_kib() -> int | None:
    """The resident set size of this process in KiB (None where /proc is not there)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _stats_ms(values_ns: list[int]) -> dict[str, float]:
    ordered = sorted(values_ns)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "median_ms": statistics.median(ordered) / 1e6,
        "p99_ms": p99 / 1e6,
        "mean_ms": statistics.fmean(ordered) / 1e6,
        "max_ms": ordered[-1] / 1e6,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    content = bench_guard.Content(args.seed)
    messages = list(dict.fromkeys(content.prose(rng, args.size) for _ in range(args.messages)))
    warmup = [content.prose(rng, args.size) + " (warm-up)" for _ in range(5)]

    memory: dict[str, int | None] = {"start": rss_kib()}
    started = time.perf_counter()
    import numpy  # noqa: F401  (imported here to measure it; the model imports it too)
    import onnxruntime  # noqa: F401

    imported = time.perf_counter()
    memory["imported"] = rss_kib()
    model = shared_minilm(threads=args.threads, max_length=args.max_length)
    loaded = time.perf_counter()
    memory["loaded"] = rss_kib()
    embedder = builtin_embedder(
        cache_size=len(messages) + len(warmup), threads=args.threads, max_length=args.max_length
    )
    embedder.embed(warmup)
    memory["warm"] = rss_kib()

    tokenizer = WordPieceTokenizer(max_length=args.max_length)
    tokens = [len(tokenizer.encode(text)) for text in messages]
    tokenize_ns = []
    fresh = WordPieceTokenizer(max_length=args.max_length)  # its word cache cold at first, as for a new text
    for text in messages:
        t0 = time.perf_counter_ns()
        fresh.encode(text)
        tokenize_ns.append(time.perf_counter_ns() - t0)

    cold_ns = []
    for text in messages:
        t0 = time.perf_counter_ns()
        embedder.embed([text])
        cold_ns.append(time.perf_counter_ns() - t0)
    memory["after"] = rss_kib()
    hot_ns = []
    for text in messages:
        t0 = time.perf_counter_ns()
        embedder.embed([text])
        hot_ns.append(time.perf_counter_ns() - t0)
    info = embedder.cache_info()
    assert info.misses == len(messages) + len(warmup), info

    return {
        "model": repr(model),
        "threads": args.threads,
        "max_length": args.max_length,
        "messages": len(messages),
        "message_chars_mean": statistics.fmean(len(text) for text in messages),
        "tokens_mean": statistics.fmean(tokens),
        "tokens_max": max(tokens),
        "import_s": imported - started,
        "load_s": loaded - imported,
        "cold": _stats_ms(cold_ns),
        "hit": _stats_ms(hot_ns),
        "tokenize": _stats_ms(tokenize_ns),
        "rss_kib": memory,
    }


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def _delta(memory: dict[str, int | None], a: str, b: str) -> str:
    first, second = memory[a], memory[b]
    return "n/a" if first is None or second is None else f"+{(second - first) / 1024:.1f} MiB"


def report(result: dict[str, Any]) -> str:
    rows = [
        ("embed 1 message, cache cold", result["cold"]),
        ("embed 1 message, cache hit", result["hit"]),
        ("tokenize 1 message (pure Python)", result["tokenize"]),
    ]
    lines = [
        f"{result['model']}: {result['messages']} messages of {result['message_chars_mean']:.0f} characters, "
        f"{result['tokens_mean']:.0f} tokens read on average (at most {result['max_length']})",
        "",
        f"{'latency':<34} {'median':>9} {'p99':>9} {'mean':>9} {'max':>9}",
    ]
    for name, stats in rows:
        lines.append(
            f"{name:<34} {stats['median_ms']:>7.2f}ms {stats['p99_ms']:>7.2f}ms "
            f"{stats['mean_ms']:>7.2f}ms {stats['max_ms']:>7.2f}ms"
        )
    memory = result["rss_kib"]
    lines += [
        "",
        f"{'memory (resident set, VmRSS)':<34} {'total':>12} {'delta':>12}",
        f"{'before onnxruntime/numpy':<34} {_mib(memory['start']):>12}",
        f"{'after importing them':<34} {_mib(memory['imported']):>12} {_delta(memory, 'start', 'imported'):>12}",
        f"{'after loading the model':<34} {_mib(memory['loaded']):>12} {_delta(memory, 'imported', 'loaded'):>12}",
        f"{'after the warm-up (5 texts)':<34} {_mib(memory['warm']):>12} {_delta(memory, 'loaded', 'warm'):>12}",
        f"{'after the cold run':<34} {_mib(memory['after']):>12} {_delta(memory, 'warm', 'after'):>12}",
        f"{'model in all (warm - start)':<34} {'':>12} {_delta(memory, 'start', 'warm'):>12}",
        "",
        f"import onnxruntime + numpy {result['import_s']:.2f} s, load the model {result['load_s']:.2f} s",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=300, help="distinct messages to embed (default 300)")
    parser.add_argument("--size", type=int, default=1024, help="characters per message (default 1024)")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads per text (default 1)")
    parser.add_argument("--max-length", type=int, default=256, help="tokens read per text (default 256)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
