"""A million fuzzed events through ``Guard.observe``, for every preset: nothing may escape, and no event may
take long, whatever it holds.

    python benchmarks/fuzz_guard.py                    # 1,000,000 events in all, shared between the presets
    python benchmarks/fuzz_guard.py --events 100000 --presets default-lexical behavioral
    python benchmarks/fuzz_guard.py --quick            # 70,000 events

Events of every kind are drawn from a pool built once: well-formed calls, results, messages, streamed chunks,
spend and resets with realistic and adversarial content (texts of blank lines, short repeated lines, code
fences, long words without a slash, hundreds of long hex strings, huge, deep, cyclic and binary arguments,
unencodable text); their JSON forms, well-formed or not (wrong types, missing fields, numbers out of range,
NaN); and in-process objects that misbehave (``str`` and mapping subclasses whose methods raise, objects
whose ``repr`` raises, ``datetime`` time stamps, ``uuid.UUID`` and int sessions, things that are no events).
Draws repeat, so loops happen and the rules escalate. Each event goes to one of 400 sessions (odd names
included) of a guard per preset.

Printed per preset: events, events/s, exceptions out of ``observe`` (must be 0), skipped malformed events,
internal errors counted by the guard, the 99th percentile (clock time) and the slowest event: the CPU time
its call took in this thread (the work itself; the clock also counts the moments this 2-core machine gives
to other processes), what it was, and the slowest on the clock.
Only ``observe`` is timed, after a warm-up (what loads once per process, such as ``default``'s embedding
model, is loaded first); the garbage collector runs between batches of 10,000 events, not inside the timed
calls. ``default`` is fuzzed with its built-in embedding model when the ``semantic`` extra is installed (then
each new assistant message or user reply also costs an embedding, ~50 ms, bounded by the model's input
length; ``bench_embed.py`` measures it): its share of events is a tenth of the others'.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import logging
import random
import sys
import time
import uuid
from array import array
from collections.abc import Iterator, Mapping
from typing import Any

from loopwatch import PRESETS, Guard, Message, Reset, TextDelta, ToolCall, ToolResult, Usage
from loopwatch.errors import EventError

# -- hostile in-process objects ---------------------------------------------------------------------------------


class HostileStr(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode")

    def lower(self) -> str:
        raise RuntimeError("lower")


class HostileMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        return 3


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __str__(self) -> str:
        raise RuntimeError("str")


class FlakyMapping(dict):  # type: ignore[type-arg]
    """A dict whose overridden methods raise (its real entries can still be read)."""

    def items(self) -> Any:
        raise RuntimeError("items")

    def get(self, *args: Any) -> Any:
        raise RuntimeError("get")


# -- texts ------------------------------------------------------------------------------------------------------------

WORDS = [
    "the",
    "a",
    "of",
    "agent",
    "loop",
    "file",
    "read",
    "write",
    "error",
    "found",
    "test",
    "pass",
    "fail",
    "build",
    "module",
    "config",
    "retry",
]


def texts(rng: random.Random) -> list[str]:
    prose = " ".join(rng.choice(WORDS) for _ in range(200))
    shapes = [
        "",
        "ok",
        "No matches found",
        "bash: line 13008: cd: srcc: No such file or directory",
        'Traceback (most recent call last):\n  File "a.py", line 3\nValueError: bad value\n' * 3,
        "FAILED tests/test_app.py::test_main - AssertionError",
        prose,
        prose[:1000],
        "I will read the configuration file again to be sure. " * 40,
        "\n" * 3_000_000,  # cut at the edge; before, seconds of chanting
        " \n" * 500_000,
        "ab\n" * 300_000,
        "```\n" * 200_000,
        "|\n" * 300_000,
        ">\n" * 300_000,
        "1.\n" * 300_000,
        "a. " * 300_000,
        "é. " * 100_000,
        "-!\n" * 200_000,
        "- item " + "\n- item ".join(str(i) for i in range(20_000)),
        "x" * 1_000_000,
        "".join(rng.choice("0123456789abcdef") for _ in range(200_000)),
        "\udcff\ud800 unencodable \udfff" * 10,
        "\u2028\u0000\ufeff\u200b" * 1000,
        '{"is_in_loop": true, "is_progress_being_made": false}',
        "Checking the file again." * 2000,
        "word\n" * 50_000,
    ]
    return shapes


def argument_sets(rng: random.Random) -> list[Any]:
    hexes = ["".join(rng.choice("0123456789abcdef") for _ in range(4096)) for _ in range(8)]
    deep: Any = "leaf"
    for _ in range(5_000):
        deep = {"n": deep}
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic
    return [
        {},
        {"command": "ls -la"},
        {"command": "cd srcc && pytest -x"},
        {"path": "src/app.py"},
        {"path": "/a/b/c/file.ts", "offset": 10, "limit": 200},
        {"query": "login bug", "k": 5},
        {"h": hexes * 32},  # 256 long hex strings: seed 004's normalisation used to backtrack for seconds
        {f"k{i}": hexes[i % 8] for i in range(256)},
        {"content": "x" * 2_000_000},
        {"nested": deep},
        {"cyclic": cyclic},
        {"bytes": b"\x00\xff" * 1000, "set": {1, 2, 3}, "tuple": (1, 2), "uuid": uuid.UUID(int=5)},
        {"big": 10**5000, "float": float("inf"), "nan": float("nan")},
        {"weird key": {7: "int key", None: "none key", (1, 2): "tuple key"}},
        {"surrogate": "\udcff", "path": "report-\udcff.txt"},
        {"wide": list(range(100_000))},
        {"object": BadRepr(), "mapping": HostileMapping(), "flaky": FlakyMapping(a=1)},
        {"odd": HostileStr("value")},
        HostileMapping(),
        FlakyMapping(command="ls"),
        {"instruction": "Please scan through the video and find the moment the bird appears. " * 3},
    ]


# -- the pool ---------------------------------------------------------------------------------------------------------


def build_pool(rng: random.Random, size: int) -> tuple[list[Any], list[str]]:
    """(events, descriptions): event objects, JSON forms and hostile things, each with a short description."""
    body = texts(rng)
    args = argument_sets(rng)
    tools = ["bash", "read_file", "grep", "edit_file", "check_status", "search", "x" * 3_000, "\udcff", ""]
    events: list[Any] = []
    names: list[str] = []

    def add(event: Any, name: str) -> None:
        events.append(event)
        names.append(name)

    def safely(name: str, kind: Any, *fields: Any, **options: Any) -> None:
        with contextlib.suppress(EventError):  # refused at the edge: a typed error where the event is made
            add(kind(*fields, **options), name)

    when = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    for i in range(size):
        kind = rng.random()
        text = rng.choice(body)
        label = f"{len(text)} chars" if len(text) > 60 else repr(text)
        if kind < 0.28:
            a = rng.randrange(len(args))
            ts = rng.choice([None, None, float(i), when, 10**30, -1.0])
            call_id = rng.choice([None, "c1", uuid.uuid4()])
            safely(f"call args#{a}", ToolCall, rng.choice(tools), args[a], id=call_id, ts=ts)
        elif kind < 0.52:
            safely(
                f"result {label}",
                ToolResult,
                text,
                tool=rng.choice(tools),
                is_error=rng.choice([None, True, False]),
                exit_code=rng.choice([None, 0, 1, -9, 2**62]),
                id=rng.choice([None, "c1"]),
            )
        elif kind < 0.68:
            safely(f"message {label}", Message, rng.choice(["assistant", "user", "system"]), text)
        elif kind < 0.73:
            safely(f"delta {label}", TextDelta, text)
        elif kind < 0.76:
            safely("usage", Usage, cost=rng.choice([0.01, 1e300, None]), input_tokens=rng.choice([1, 10**18]))
        elif kind < 0.77:
            add(Reset(), "reset")
        elif kind < 0.9:
            form: dict[str, Any] = {
                "type": rng.choice(["tool_call", "tool_result", "message", "text_delta", "usage", "reset", "bogus", 5]),
                "tool": rng.choice(["bash", 5, None, [], HostileStr("t")]),
                "args": rng.choice(
                    [{"command": "ls"}, "ls", [1], None, HostileMapping(), args[rng.randrange(len(args))]]
                ),
                "output": rng.choice([text, 12, None, ["a"]]),
                "role": rng.choice(["assistant", "user", "wizard", None]),
                "text": rng.choice([text, {}, None]),
                "ts": rng.choice([None, 1.5, float("nan"), 10**400, "yesterday", when]),
                "cost": rng.choice([None, 0.5, -1, float("inf")]),
                "exit_code": rng.choice([None, 1, True, 2**80]),
            }
            for key in rng.sample(sorted(form), rng.randrange(0, 4)):
                del form[key]
            add(form, f"JSON {form.get('type')!s:.12}")
        else:
            add(
                rng.choice([HostileMapping(), BadRepr(), None, 42, ["tool_call"], FlakyMapping(type="reset"), "text"]),
                "not an event",
            )
    return events, names


def sessions(rng: random.Random) -> list[Any]:
    names: list[Any] = [f"run-{i}" for i in range(380)]
    names += ["", "\udcff", "s" * 10_000, uuid.uuid4(), 12345, "x\x00y", HostileStr("h"), None, BadRepr()]
    names += [uuid.UUID(int=i) for i in range(11)]
    return names


# -- the run ----------------------------------------------------------------------------------------------------------


def fuzz(preset: str, count: int, seed: int, pool: list[Any], names: list[str]) -> dict[str, Any]:
    rng = random.Random(seed)
    session_pool = sessions(rng)
    guard = Guard(preset=preset, clock=time.time)
    picks = [rng.randrange(len(pool)) for _ in range(count)]
    who = [rng.choice(session_pool) for _ in range(count)]
    swarm = [rng.choice([None, None, None, "crew", "crew-2", HostileStr("s")]) for _ in range(count)]
    warm_up = (
        Message("assistant", "I will read the configuration file again and then run the whole test suite."),
        Message("user", "Please go on with the plan, the configuration file has not changed since then."),
        ToolCall("bash", {"command": "ls"}),
    )
    for warm in warm_up:  # loads what loads once per process (the embedding model of `default`)
        guard.observe("warm-up", warm)
    times = array("d")
    exceptions: list[str] = []
    slowest = (0.0, "")  # by the thread's CPU time: the work itself, not the machine's other tenants
    slowest_wall = 0.0
    gc.collect()
    gc.disable()
    started = time.perf_counter()
    try:
        for n in range(count):
            if n % 10_000 == 0:
                gc.collect()
            event = pool[picks[n]]
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                guard.observe(who[n], event, swarm=swarm[n])
            except BaseException as exc:  # counted: nothing may escape
                exceptions.append(f"{names[picks[n]]}: {type(exc).__name__}: {exc!s:.100}")
            took, work = time.perf_counter() - began, time.thread_time() - cpu
            times.append(took)
            if work > slowest[0]:
                slowest = (work, names[picks[n]])
            slowest_wall = max(slowest_wall, took)
    finally:
        gc.enable()
    elapsed = time.perf_counter() - started
    ordered = sorted(times)
    return {
        "preset": preset,
        "events": count,
        "seconds": elapsed,
        "exceptions": exceptions,
        "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))],
        "slowest_ms": 1000 * slowest[0],
        "slowest": slowest[1],
        "slowest_wall_ms": 1000 * slowest_wall,
        "stats": dict(guard.stats),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in all, shared between the presets")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pool", type=int, default=20_000, help="distinct events drawn from")
    parser.add_argument("--quick", action="store_true", help="70,000 events")
    args = parser.parse_args(argv)
    total = 70_000 if args.quick else args.events
    logging.disable(logging.CRITICAL)  # the guard logs every skipped event: millions of lines
    built = time.perf_counter()
    pool, names = build_pool(random.Random(args.seed), args.pool)
    print(f"pool: {len(pool)} events built in {time.perf_counter() - built:.1f} s")
    shares = {name: 0.1 if name == "default" else 1.0 for name in args.presets}
    results = []
    for offset, name in enumerate(args.presets):
        count = max(1, round(total * shares[name] / sum(shares.values())))
        result = fuzz(name, count, args.seed + offset, pool, names)
        results.append(result)
        stats = result["stats"]
        print(
            f"{name:16} {count:9,d} events  {count / result['seconds']:8,.0f} events/s  "
            f"exceptions {len(result['exceptions'])}  skipped {stats['skipped']:,d}  "
            f"internal errors {stats['errors']}  "
            f"p99 {result['p99_ms']:.2f} ms  slowest {result['slowest_ms']:.1f} ms of CPU ({result['slowest']}; "
            f"{result['slowest_wall_ms']:.1f} ms the slowest on the clock)",
            flush=True,
        )
        for line in result["exceptions"][:5]:
            print(f"    {line}")
    events = sum(r["events"] for r in results)
    escaped = sum(len(r["exceptions"]) for r in results)
    worst = max(results, key=lambda r: r["slowest_ms"])
    print(
        f"all: {events:,d} events, {escaped} exceptions out of observe, "
        f"{sum(r['stats']['errors'] for r in results)} internal errors counted, "
        f"slowest event {worst['slowest_ms']:.1f} ms of CPU ({worst['preset']}: {worst['slowest']})"
    )
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
