"""Per-event latency and per-session memory of ``Guard(preset="default-lexical", clock=None)`` on realistic traffic.

``default-lexical`` is the default preset's rules without the ``semantic`` extra's model (``--preset`` picks
another); with the model, each assistant message also pays one embedding: ``bench_embed.py`` measures it.

    python benchmarks/bench_guard.py                  # 10,000 sessions x 50 events
    python benchmarks/bench_guard.py --quick          # 1,000 sessions
    python benchmarks/bench_guard.py --sessions 5000 --events 80 --json
    python benchmarks/bench_guard.py --no-gc          # garbage collector off during the timed loop
    python benchmarks/bench_guard.py --floor-sessions 0   # skip the floor pass (the preset without rules)
    python benchmarks/bench_guard.py --quick --each-rule  # and what each rule costs alone over that floor
    python benchmarks/bench_guard.py --quick --passes 3   # and the p99 of each event's fastest of 3 passes

Traffic: each session is an agent at work. It opens with a ~1 KB assistant message, then goes round
"call, result, call, result, call, result, message": tool calls carry ~1 KB of JSON arguments (a bash
heredoc that writes a file and runs the tests, an edit with old/new code blocks, a python script), half
of them with a one-sentence thought; tool results are ~4 KB of realistic output (file listings, pytest
runs with a failure, tracebacks, grep hits, numbered source); messages are ~1 KB of prose. Content is
drawn at random per session, so fingerprints differ between sessions and steps. Every 5th session gets
stuck repeating one call (same arguments, same output) 6 times; every 10th (another one) gets stuck retrying a
failing test command 6 times, tweaking its flags each time (other arguments, the same error): a retry loop, which
the ``error_retry`` rule catches and the ``repeat`` rule does not. The report shows, per kind of session, in how
many sessions each rule fired.

Sessions run in waves (default 500 active sessions at a time); inside a wave their events are
interleaved at random (each session's own order kept). A wave's events are all built before the wave
is timed; only ``Guard.observe`` sits between the two ``time.perf_counter_ns()`` calls. The guard
keeps every session for the whole run (its memory is measured at the end). A throw-away guard is
warmed up first.

The floor: the same traffic (at most ``--floor-sessions`` sessions, default 1,000) through the same guard and
preset with every rule and limit removed: what parsing, fingerprinting and keeping sessions cost before any
rule runs. With ``--each-rule``, the same sessions once more per rule, through the preset with that rule alone:
what each rule costs over the floor, compiled or not, as it runs in a guard (``bench_rules.py`` times the rules
inside one engine, from their source).

The tail: before and after the timed run, half a second (``--pause-seconds``; 0: not counted) in a loop that only
reads the clock counts how often the machine pauses the program for over 20 us (a virtual machine's host, the kernel's
timer): about that share of the events holds a pause, and near 1% a p99 is an event that waited. ``--passes N`` times
the same traffic N times, a new guard each time, and adds the figures of each event's fastest pass: the code's own
spread.

Memory: a second, untimed pass over ``--memory-sessions`` sessions (default: all, at most 1,000, as
tracemalloc slows the guard down about 5x) with tracemalloc on: the memory still held after the run (snapshot
difference, events freed) divided by the number of sessions. And the size of ``json.dumps(guard.snapshot(
session))`` (compact, UTF-8 bytes) for every session of the timed run.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from loopwatch import Event, Guard, Limits, Message, Policy, ToolCall, ToolResult, preset

KINDS = ("tool_call", "tool_result", "message")
TARGET_MEDIAN_US = {"tool_call": 10.0, "tool_result": None, "message": 40.0}
TARGET_P99_RATIO = 5.0
PAUSE_NS = 20_000
"""A gap this long in a loop that only reads the clock is the machine pausing the program (see machine_pauses)."""
TARGET_MEMORY_BYTES = 6 * 1024
"""Memory retained per session (the core redesign's target)."""
TARGET_SNAPSHOT_BYTES = 6_668
"""Mean snapshot JSON: no larger than before the core redesign (6,668 B on this traffic)."""
CALL_BYTES = 1024
OUTPUT_BYTES = 4096
MESSAGE_BYTES = 1024
LOOP_PAIRS = 6
RETRY_COMMAND = (
    "cd /repo && PYTHONPATH=src TZ=UTC python -m pytest tests/test_config.py -x -q -p no:cacheprovider --tb=short "
    "--maxfail=1 -o addopts= -W ignore::DeprecationWarning{flag} 2>&1 | tail -n 40"
)
RETRY_FLAGS = ("", " -k timeout", " --no-header", " -rA", " --lf", " -vv")
"""A stuck agent's attempts at the same failing test run: one flag changed each time, the same error back."""
RETRY_LINES = [17, 120, 311, 42, 9, 77]
SESSION_KINDS = ("repeat", "retry", "working")

# -- content -------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


_NOUNS = _words(
    "parser config loader client server session cache buffer record field header token request response "
    "handler router schema model index query cursor batch queue worker task event stream reader writer "
    "encoder decoder mapper filter result error retry timeout limit policy state store table column "
    "metric report user account order invoice payment ledger entry node graph edge path file module"
)
_VERBS = _words(
    "load parse read write build make check validate apply update fetch send split merge resolve compute "
    "render format encode decode flush open close reset retry collect normalize convert register lookup"
)
_ADJ = _words("raw default current pending stale local remote quoted nested empty cached partial strict")
_MONTHS = _words("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec")
_ERRORS = (
    "ValueError: invalid literal for int() with base 10: '{w}'",
    "KeyError: '{w}'",
    "AttributeError: 'NoneType' object has no attribute '{w}'",
    "TypeError: {w}() missing 1 required positional argument: '{v}'",
    "AssertionError: assert ['a', '\"b', 'c\"'] == ['a', 'b,c']",
    "FileNotFoundError: [Errno 2] No such file or directory: 'src/{w}/{v}.py'",
    "ImportError: cannot import name '{w}' from '{v}'",
)


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _path(rng: random.Random, root: str = "src") -> str:
    return f"{root}/{rng.choice(_NOUNS)}/{rng.choice(_NOUNS)}_{rng.choice(_ADJ)}.py"


def _code_line(rng: random.Random) -> str:
    a, b, fn = rng.choice(_NOUNS), rng.choice(_NOUNS), _ident(rng)
    indent = " " * rng.choice((0, 4, 4, 8, 8, 12))
    forms = (
        f"def {fn}({a}, {b}={rng.randint(0, 99)}):",
        f'"""{rng.choice(_VERBS).capitalize()} the {rng.choice(_ADJ)} {a} from its {b}."""',
        f"if {a} is None or not {b}:",
        f'raise ValueError(f"{a} must not be empty: {{{b}!r}}")',
        f"result = [{fn}(item) for item in {a}.{rng.choice(_NOUNS)}s if item]",
        f"return {fn}({a}, {b}=self.{rng.choice(_NOUNS)})",
        f"for index, {a} in enumerate(self.{b}s):",
        f"{a}_{b} = {b}.get({a!r}, {rng.randint(0, 1000)})",
        f"self.{a} = {fn}({b}, strict={rng.choice(('True', 'False'))})",
        f"# {rng.choice(_VERBS)} the {rng.choice(_ADJ)} {a} before the {b} is {rng.choice(_VERBS)}ed",
        f"except {rng.choice(('KeyError', 'ValueError', 'OSError'))} as exc:",
        f"logger.debug('{fn}: %s %s', {a}, {b})",
    )
    return indent + rng.choice(forms)


def _sentence(rng: random.Random) -> str:
    a, b = rng.choice(_NOUNS), rng.choice(_NOUNS)
    forms = (
        f"The {a} is {rng.choice(_VERBS)}ed before the {b}, so the {rng.choice(_ADJ)} value never reaches it.",
        f"I will {rng.choice(_VERBS)} the {a} first and then check whether the {b} still fails.",
        f"Looking at `{_ident(rng)}`, the {a} comes from the {rng.choice(_ADJ)} {b} and is not validated.",
        f"The test expects the {a} to be {rng.choice(_ADJ)}, but the current code returns the {b} unchanged.",
        f"This suggests the bug is in `{_path(rng)}`, where the {a} is {rng.choice(_VERBS)}ed twice.",
        f"Next I need to {rng.choice(_VERBS)} the {b} and rerun the {a} tests to confirm the fix.",
        f"The traceback points at line {rng.randint(10, 900)} of the {a} module, inside `{_ident(rng)}`.",
        f"Since the {a} is {rng.choice(_ADJ)}, the {b} falls back to its default and the check passes silently.",
    )
    return rng.choice(forms)


class Content:
    """Pools of lines built once, and realistic payloads drawn from them (cheap enough for 500k events)."""

    def __init__(self, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.code_lines = [_code_line(rng) for _ in range(3000)]
        self.sentences = [_sentence(rng) for _ in range(2000)]
        self.listing = [
            f"-rw-r--r--  1 dev  staff  {rng.randint(120, 99999):>6} {rng.choice(_MONTHS)} {rng.randint(1, 28):>2} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {_path(rng)}"
            for _ in range(2000)
        ]
        self.grep = [f"{_path(rng)}:{rng.randint(1, 900)}:{_code_line(rng)}" for _ in range(2000)]
        self.tests = [
            f"tests/test_{rng.choice(_NOUNS)}.py::test_{_ident(rng)}[{rng.choice(_ADJ)}] "
            f"{rng.choice(('PASSED', 'PASSED', 'PASSED', 'SKIPPED', 'FAILED'))}"
            for _ in range(2000)
        ]
        self.frames = [
            f'  File "/repo/{_path(rng)}", line @LINE@, in {_ident(rng)}\n    {_code_line(rng).strip()}'
            for _ in range(1000)
        ]

    @staticmethod
    def _fill(rng: random.Random, pool: list[str], size: int, sep: str = "\n") -> str:
        avg = sum(len(x) for x in pool[:50]) / 50 + len(sep)
        text = sep.join(rng.choices(pool, k=int(size / avg) + 2))
        cut = text.rfind(sep, 0, size)
        return text[: cut if cut > 0 else size]

    def prose(self, rng: random.Random, size: int = MESSAGE_BYTES) -> str:
        return self._fill(rng, self.sentences, size, " ")

    def code(self, rng: random.Random, size: int) -> str:
        return self._fill(rng, self.code_lines, size)

    def traceback(self, rng: random.Random, error: str, lines: list[int] | None = None) -> str:
        frames = rng.sample(self.frames, 6)
        lines = lines or [rng.randint(5, 900) for _ in frames]
        body = "\n".join(f.replace("@LINE@", str(n)) for f, n in zip(frames, lines, strict=True))
        return f"Traceback (most recent call last):\n{body}\n{error}"

    def error(self, rng: random.Random) -> str:
        return rng.choice(_ERRORS).format(w=rng.choice(_NOUNS), v=rng.choice(_NOUNS))

    def call(self, rng: random.Random, session: str) -> ToolCall:
        """A tool call with ~1 KB of JSON arguments."""
        kind = rng.randrange(3)
        path = _path(rng)
        if kind == 0:
            code = self.code(rng, CALL_BYTES - 130)
            test = f"tests/test_{rng.choice(_NOUNS)}.py"
            args: dict[str, Any] = {"command": f"cat > {path} <<'EOF'\n{code}\nEOF\npython -m pytest {test} -x -q"}
            tool = "bash"
        elif kind == 1:
            half = (CALL_BYTES - 80) // 2
            args = {"path": path, "old_str": self.code(rng, half), "new_str": self.code(rng, half)}
            tool = "edit_file"
        else:
            code = self.code(rng, CALL_BYTES - 60)
            args = {"command": f"cd /repo && python - <<'EOF'\n{code}\nEOF"}
            tool = "bash"
        thought = self.sentences[rng.randrange(len(self.sentences))] if rng.random() < 0.5 else None
        return ToolCall(tool, args, id=f"{session}-{rng.getrandbits(32):08x}", thought=thought)

    def output(self, rng: random.Random) -> tuple[str, bool | None]:
        """~4 KB of tool output, and whether it is an error."""
        kind = rng.randrange(5)
        if kind == 0:
            return f"total {rng.randint(40, 400)}\n" + self._fill(rng, self.listing, OUTPUT_BYTES - 12), False
        if kind == 1:
            head = (
                "============================= test session starts ==============================\n"
                f"platform linux -- Python 3.11.{rng.randint(1, 9)}, pytest-8.{rng.randint(0, 3)}.1\n"
                f"rootdir: /repo/{rng.choice(_NOUNS)}-{rng.getrandbits(24):06x}\ncollected "
                f"{rng.randint(20, 300)} items\n\n"
            )
            error = self.error(rng)
            tail = (
                "\n=================================== FAILURES ===================================\n"
                f"{self.traceback(rng, error)}\n=========================== short test summary info "
                f"============================\nFAILED tests/test_{rng.choice(_NOUNS)}.py - {error}\n"
                f"========================= 1 failed, {rng.randint(5, 200)} passed in {rng.random() * 9:.2f}s"
                " ========================="
            )
            middle = self._fill(rng, self.tests, max(200, OUTPUT_BYTES - len(head) - len(tail)))
            return head + middle + tail, True
        if kind == 2:
            frames = "\n".join(f.replace("@LINE@", str(rng.randint(5, 900))) for f in rng.sample(self.frames, 30))
            text = f"Traceback (most recent call last):\n{frames}"[: OUTPUT_BYTES - 120]
            return text[: text.rfind("\n")] + "\n" + self.error(rng), True
        if kind == 3:
            return self._fill(rng, self.grep, OUTPUT_BYTES), False
        numbered = (f"{i:>4}  {line}" for i, line in enumerate(rng.choices(self.code_lines, k=90), rng.randint(1, 400)))
        text = "\n".join(numbered)
        return text[: text.rfind("\n", 0, OUTPUT_BYTES)], False


# -- sessions ------------------------------------------------------------------------------------------


def session_kind(number: int) -> str:
    """``repeat`` (every 5th session), ``retry`` (every 10th, another one) or ``working`` (no loop)."""
    if number % 5 == 2:
        return "repeat"
    if number % 10 == 4:
        return "retry"
    return "working"


def session_name(number: int) -> str:
    return f"session-{number:06d}"


def session_number(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def session_events(content: Content, number: int, events: int, seed: int) -> list[tuple[str, Event]]:
    """The events of session ``number`` in its own order, as (kind, event)."""
    rng = random.Random(seed * 1_000_003 + number)
    name = session_name(number)
    stuck = session_kind(number)
    loop_at = rng.randint(1, 8)  # the (call, result) pair where the loop starts
    stuck_call = content.call(rng, name)
    stuck_output = content.output(rng)
    out: list[tuple[str, Event]] = [("message", Message("assistant", content.prose(rng)))]
    pair = 0
    while len(out) < events:
        if len(out) % 7 == 0:  # call, result, call, result, call, result, message
            out.append(("message", Message("assistant", content.prose(rng))))
            continue
        looping = stuck != "working" and loop_at <= pair < loop_at + LOOP_PAIRS
        output: str
        is_error: bool | None
        if looping and stuck == "repeat":  # the same call, the same output
            call = ToolCall(stuck_call.tool, dict(stuck_call.args), id=f"{name}-{pair}", thought=stuck_call.thought)
            output, is_error = stuck_output
        elif looping:  # the same failing test run, a flag changed each time, the same error back
            flag = RETRY_FLAGS[(pair - loop_at) % len(RETRY_FLAGS)]
            thought = content.sentences[rng.randrange(len(content.sentences))] if rng.random() < 0.5 else None
            call = ToolCall("bash", {"command": RETRY_COMMAND.format(flag=flag)}, id=f"{name}-{pair}", thought=thought)
            output = content.traceback(random.Random(number), "KeyError: 'timeout'", RETRY_LINES)
            is_error = None
        else:
            call = content.call(rng, name)
            output, is_error = content.output(rng)
        out.append(("tool_call", call))
        out.append(("tool_result", ToolResult(output, tool=call.tool, is_error=is_error, id=call.id)))
        pair += 1
    return out[:events]


def wave(content: Content, first: int, count: int, events: int, seed: int) -> list[tuple[str, str, Event]]:
    """Sessions ``first .. first+count-1`` interleaved at random: (session, kind, event) in arrival order."""
    rng = random.Random(seed + first)
    pending = {session_name(n): iter(session_events(content, n, events, seed)) for n in range(first, first + count)}
    slots = [name for name in pending for _ in range(events)]
    rng.shuffle(slots)
    order = []
    for name in slots:
        kind, event = next(pending[name])
        order.append((name, kind, event))
    return order


def waves(content: Content, sessions: int, events: int, size: int, seed: int) -> Iterator[list[tuple[str, str, Event]]]:
    for first in range(0, sessions, size):
        yield wave(content, first, min(size, sessions - first), events, seed)


# -- which rules fire ----------------------------------------------------------------------------------


def rule_names(policy: Policy) -> dict[str, str]:
    """A verdict's ``detector`` (the rule's repr) -> the rule's name, for the rules of ``policy``."""
    return {repr(rule): rule.name for rule in policy.detectors}


def rules_by_kind(fired: Iterable[tuple[str, str]], sessions: int) -> dict[str, dict[str, Any]]:
    """Per kind of session: how many sessions there were, and in how many each rule fired (a non-ok verdict).

    ``fired``: (session name, rule name) pairs, one per session and rule (a set)."""
    out: dict[str, dict[str, Any]] = {}
    for number in range(sessions):
        kind = session_kind(number)
        out.setdefault(kind, {"sessions": 0, "rules": Counter()})["sessions"] += 1
    for name, rule in fired:
        out[session_kind(session_number(name))]["rules"][rule] += 1
    return {
        kind: {"sessions": out[kind]["sessions"], "rules": dict(out[kind]["rules"].most_common())}
        for kind in SESSION_KINDS
        if kind in out
    }


def loops_caught(by_kind: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Does each rule fire where its loop is, and only there? Every repeat session is caught by the repeat rule;
    every retry session by error_retry, and never by repeat (its calls differ)."""
    repeat, retry = by_kind.get("repeat"), by_kind.get("retry")
    checks = {}
    if repeat:
        checks["repeat rule in every repeat session"] = repeat["rules"].get("repeat", 0) == repeat["sessions"]
    if retry:
        checks["error_retry in every retry session"] = retry["rules"].get("error_retry", 0) == retry["sessions"]
        checks["repeat rule in no retry session"] = retry["rules"].get("repeat", 0) == 0
    return checks


# -- measuring -----------------------------------------------------------------------------------------


def _policy(args: argparse.Namespace, only: tuple[int, ...] | None = None) -> Policy:
    """The benchmarked preset; with ``only``, the same preset with only the rules at those positions and no limits
    (``()``: no rules at all, the floor)."""
    policy = preset(args.preset)
    if only is None:
        return policy
    kept = tuple(policy.detectors[at] for at in only)
    label = " and ".join(rule.name for rule in kept) + " alone" if kept else "without rules"
    return policy.replace(name=f"{policy.name} {label}", detectors=kept, limits=Limits())


def timed_run(args: argparse.Namespace, content: Content, *, only: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Every session's events through the guard, each ``observe`` timed; ``only``: the rules kept (see
    :func:`_policy`; ``()``: the floor). With ``args.passes`` > 1, the same traffic again through a new guard each
    time, and the figures of each event's fastest pass (``best_of_passes``)."""
    # warm-up: a throw-away guard (imports, regex caches, code paths of every detector)
    warm = Guard(_policy(args, only), clock=None)
    for name, _kind, event in wave(content, 10**6, min(50, args.sessions), args.events, args.seed + 1):
        warm.observe(name, event)
    del warm

    policy = _policy(args, only)
    first = _timed_pass(args, content, policy, rule_names(policy))
    guard, latencies = first.guard, first.latencies
    overhead = min(_timer_gap(time.perf_counter_ns) for _ in range(1000))
    snapshot_sizes = [
        len(json.dumps(guard.snapshot(name), separators=(",", ":"), ensure_ascii=False).encode())
        for name in guard.sessions()
    ]
    observed = sum(sum(values) for values in latencies.values()) / 1e9
    result: dict[str, Any] = {
        "per_type": _per_type(latencies, first.sizes),
        "actions": dict(first.actions),
        "wall_s": round(first.elapsed, 2),
        "observe_s": round(observed, 2),
        "cpu_share": round(first.loop_cpu / first.loop_wall, 3) if first.loop_wall else None,
    }
    result["timer_overhead_ns"] = overhead
    result["snapshot_json_bytes"] = {
        "sessions": len(snapshot_sizes),
        "mean": round(statistics.fmean(snapshot_sizes)),
        "max": max(snapshot_sizes),
    }
    result["guard_stats"] = dict(guard.stats)
    result["rules_by_session_kind"] = rules_by_kind(first.fired, args.sessions)
    del guard, first
    if args.passes > 1:
        best = {kind: array("q", values) for kind, values in latencies.items()}
        for _ in range(args.passes - 1):
            again = _timed_pass(args, content, policy, {}).latencies
            for kind, values in again.items():
                best[kind] = array("q", map(min, best[kind], values))  # the same events in the same order
        result["best_of_passes"] = {"passes": args.passes, "per_type": _per_type(best, None)}
    return result


class _Pass:
    """What one pass of the traffic through a new guard measured: each event's latency by type, in arrival order."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.latencies = {kind: array("q") for kind in KINDS}
        self.sizes: dict[str, list[int]] = {kind: [] for kind in KINDS}
        self.actions: Counter[str] = Counter()
        self.fired: set[tuple[str, str]] = set()
        self.loop_wall = self.loop_cpu = self.elapsed = 0.0


def _timed_pass(args: argparse.Namespace, content: Content, policy: Policy, names: dict[str, str]) -> _Pass:
    measured = _Pass(Guard(policy, clock=None))
    latencies, sizes, actions, fired = measured.latencies, measured.sizes, measured.actions, measured.fired
    clock = time.perf_counter_ns
    observe = measured.guard.observe
    started = time.perf_counter()
    for batch in waves(content, args.sessions, args.events, args.wave, args.seed):
        for _name, kind, event in batch[:: max(1, len(batch) // 200)]:
            sizes[kind].append(_payload_size(event))
        gc.collect()
        if args.no_gc:
            gc.disable()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            for name, kind, event in batch:
                t0 = clock()
                verdict = observe(name, event)
                t1 = clock()
                latencies[kind].append(t1 - t0)
                if verdict.action != "ok":
                    actions[verdict.action] += 1
                    fired.add((name, names.get(verdict.detector or "", verdict.detector or "-")))
        finally:
            gc.enable()
        measured.loop_wall += time.perf_counter() - wall0
        measured.loop_cpu += time.process_time() - cpu0
        del batch
    measured.elapsed = time.perf_counter() - started
    return measured


def _per_type(latencies: dict[str, array[int]], sizes: dict[str, list[int]] | None) -> dict[str, Any]:
    """Each event type's latency figures (and all types', pooled), with its mean payload when ``sizes`` is given."""
    per_type: dict[str, Any] = {}
    every = array("q")
    for kind in KINDS:
        values = sorted(latencies[kind])
        every.extend(values)
        payload = {"payload_bytes": round(statistics.fmean(sizes[kind]))} if sizes is not None else {}
        per_type[kind] = _stats(values) | payload
    per_type["all"] = _stats(sorted(every)) | ({"payload_bytes": None} if sizes is not None else {})
    return per_type


def machine_pauses(seconds: float = 0.5, over_ns: int = PAUSE_NS) -> dict[str, float]:
    """How often this machine stops a running program for longer than ``over_ns`` (a virtual machine's host, the
    kernel's timer, another process): a loop that only reads the clock, for ``seconds``, counting the gaps. Each
    pause lands in whatever event is being timed, so when the events that contain one are more than 1% of them,
    every type's p99 is an event that waited, whatever the code does."""
    clock = time.perf_counter_ns
    start = previous = clock()
    end = start + int(seconds * 1e9)
    count = lost = 0
    while previous < end:
        now = clock()
        if now - previous > over_ns:
            count += 1
            lost += now - previous
        previous = now
    span = previous - start
    return {"per_second": round(count * 1e9 / span, 1), "time_share": round(lost / span, 4)}


def _timer_gap(clock: Any) -> int:
    t0 = clock()
    return int(clock() - t0)


def _payload_size(event: Event) -> int:
    if isinstance(event, ToolCall):
        return len(json.dumps(event.args).encode())
    if isinstance(event, ToolResult):
        return len(event.output.encode())
    if isinstance(event, Message):
        return len(event.text.encode())
    return 0


def _stats(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"count": 0, "median_us": None, "p99_us": None}
    n = len(values)
    median = values[n // 2] / 1000 if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2000
    p99 = values[min(n - 1, int(n * 0.99))] / 1000
    return {
        "count": n,
        "median_us": round(median, 2),
        "p99_us": round(p99, 2),
        "mean_us": round(sum(values) / n / 1000, 2),
        "max_us": round(values[-1] / 1000, 1),
    }


def memory_run(args: argparse.Namespace, content: Content) -> dict[str, Any]:
    sessions = args.memory_sessions
    # allocations of first use (imports, caches) must not count: warm up before tracing
    warm = Guard(preset=args.preset, clock=None)
    for name, _kind, event in wave(content, 2 * 10**6, 50, args.events, args.seed + 2):
        warm.observe(name, event)
    del warm
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    guard = Guard(preset=args.preset, clock=None)
    for batch in waves(content, sessions, args.events, args.wave, args.seed):
        for name, _kind, event in batch:
            guard.observe(name, event)
        del batch
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    diff = after.compare_to(before, "lineno")
    retained = sum(stat.size_diff for stat in diff)
    top = sorted(diff, key=lambda s: s.size_diff, reverse=True)[:5]
    assert len(guard.sessions()) == sessions
    return {
        "sessions": sessions,
        "retained_bytes": retained,
        "per_session_bytes": round(retained / sessions),
        "top": [
            {"where": f"{s.traceback[0].filename.split('/src/')[-1]}:{s.traceback[0].lineno}", "bytes": s.size_diff}
            for s in top
        ],
    }


# -- report --------------------------------------------------------------------------------------------


def _tail_lines(result: dict[str, Any]) -> list[str]:
    """What the p99 holds: the machine's pauses, and the p99 of each event's fastest pass (``--passes``)."""
    lines = []
    pauses = result.get("machine_pauses")
    if pauses:
        lines.append(
            f"the machine paused this program {pauses['per_second']:,.0f} times a second for over "
            f"{PAUSE_NS // 1000} us ({pauses['time_share']:.1%} of its time; a loop reading the clock, before and "
            "after the timed run): "
            f"~{pauses['events_share']:.1%} of the timed events hold one"
            + (", so each type's p99 is an event that waited" if pauses["events_share"] > 0.01 else "")
        )
    best = result.get("best_of_passes")
    if best:
        cells = []
        for kind in KINDS:
            stats = best["per_type"][kind]
            median, p99 = stats["median_us"], stats["p99_us"]
            if median:
                cells.append(f"{kind} {p99 / median:.1f}x ({median:.1f} / {p99:.1f} us)")
        lines.append(f"each event's fastest of {best['passes']} passes, p99/median (median / p99): " + ", ".join(cells))
    return lines


def _floor_median(stats: dict[str, Any] | None) -> str:
    return "" if not stats or stats["median_us"] is None else f"{stats['median_us']:.1f}"


def _verdict(ok: bool | None) -> str:
    return "" if ok is None else ("ok" if ok else "MISSED")


def report(result: dict[str, Any], args: argparse.Namespace) -> tuple[str, bool]:
    lines = [
        f"loopwatch Guard(preset={args.preset!r}, clock=None): {args.sessions:,} sessions x {args.events} events, "
        f"waves of {min(args.wave, args.sessions)} interleaved sessions",
        f"garbage collector {'DISABLED' if args.no_gc else 'enabled'} during the timed loop; "
        f"timer overhead ~{result['timer_overhead_ns']} ns per event (not subtracted); "
        f"time in observe {result['observe_s']} s (wall, with building the events: {result['wall_s']} s)",
        f"CPU share of the timed loop: {result['cpu_share']:.0%}"
        + (
            "  (below 95%: other processes took the CPU; p99 and max are inflated by preemption)"
            if result["cpu_share"] is not None and result["cpu_share"] < 0.95
            else ""
        ),
        "",
        f"{'event type':<12} {'payload':>9} {'count':>9} {'median us':>10} {'target':>8} {'p99 us':>9} "
        f"{'p99/med':>8} {'target':>7}  {'max us':>9}  {'no rules':>8}  result",
    ]
    floor = result.get("floor", {})
    all_ok = True
    for kind, stats in result["per_type"].items():
        median, p99 = stats["median_us"], stats["p99_us"]
        target = TARGET_MEDIAN_US.get(kind)
        ratio = p99 / median if median else None
        checks = []
        if target is not None and median is not None:
            checks.append(median <= target)
        if ratio is not None and kind != "all":
            checks.append(ratio <= TARGET_P99_RATIO)
        ok = all(checks) if checks else None
        all_ok = all_ok and ok is not False
        payload = f"{stats['payload_bytes']:,} B" if stats["payload_bytes"] else ""
        lines.append(
            f"{kind:<12} {payload:>9} {stats['count']:>9,} {median:>10.1f} "
            f"{('<= ' + format(target, 'g')) if target else '-':>8} {p99:>9.1f} {ratio or 0:>8.1f} "
            f"{'<= 5' if kind != 'all' else '-':>7}  {stats['max_us']:>9.1f}  "
            f"{_floor_median(floor.get(kind)):>8}  {_verdict(ok)}"
        )
    if floor:
        lines.append(
            "no rules: the median of the same traffic through the same guard with no rules at all (events parsed, "
            "fingerprinted, sessions kept): the floor under any rule"
        )
    lines.extend(_tail_lines(result))
    alone = result.get("alone")
    if alone and floor:
        lines.append("")
        lines.append(
            "each rule alone (the no-rules pass's sessions): its median minus the no-rules median, us (with the "
            "features it asks for, which the preset's rules share: the rows add up to more than the preset costs)"
        )
        lines.append(f"    {'rule':<18}" + "".join(f"{kind:>13}" for kind in KINDS))
        for name, per_type in alone.items():
            cells = []
            for kind in KINDS:
                median, base = per_type[kind]["median_us"], floor[kind]["median_us"]
                cells.append("" if median is None or base is None else f"{median - base:+.1f}")
            lines.append(f"    {name:<18}" + "".join(f"{cell:>13}" for cell in cells))
    memory = result.get("memory")
    snap = result["snapshot_json_bytes"]
    lines.append("")
    if memory:
        ok = memory["per_session_bytes"] <= TARGET_MEMORY_BYTES
        all_ok = all_ok and ok
        lines.append(
            f"retained memory per session (tracemalloc, {memory['sessions']:,} sessions): "
            f"{memory['per_session_bytes']:,} B   target <= {TARGET_MEMORY_BYTES:,} B   {_verdict(ok)}"
        )
        for top in memory["top"]:
            lines.append(f"    {top['bytes'] / memory['sessions']:>8,.0f} B/session  {top['where']}")
    ok = snap["mean"] <= TARGET_SNAPSHOT_BYTES
    all_ok = all_ok and ok
    lines.append(
        f"snapshot JSON per session ({snap['sessions']:,} sessions): mean {snap['mean']:,} B, max {snap['max']:,} B"
        f"   target (mean) <= {TARGET_SNAPSHOT_BYTES:,} B   {_verdict(ok)}"
    )
    lines.append("")
    lines.append("rules that fired, per kind of session (in how many of its sessions):")
    by_kind = result["rules_by_session_kind"]
    for kind, row in by_kind.items():
        rules = ", ".join(f"{rule} {n:,}" for rule, n in row["rules"].items()) or "none"
        lines.append(f"    {kind:<8} {row['sessions']:>7,} sessions: {rules}")
    for check, ok in loops_caught(by_kind).items():
        all_ok = all_ok and ok
        lines.append(f"    {check}: {_verdict(ok)}")
    acts = result["actions"]
    lines.append(
        "non-ok verdicts: "
        + (", ".join(f"{k} {v:,}" for k, v in sorted(acts.items())) or "none")
        + f"   guard stats: {result['guard_stats']}"
    )
    return "\n".join(lines), all_ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=None, help="sessions (default 10,000; --quick: 1,000)")
    parser.add_argument("--events", type=int, default=50, help="events per session (default 50)")
    parser.add_argument("--quick", action="store_true", help="1,000 sessions")
    parser.add_argument(
        "--preset",
        default="default-lexical",
        help="the policy (default: default-lexical, the default preset's rules without the semantic extra's model; "
        "with it, each message also pays an embedding: see bench_embed.py)",
    )
    parser.add_argument("--wave", type=int, default=500, help="sessions active (interleaved) at a time")
    parser.add_argument("--memory-sessions", type=int, default=None, help="sessions of the memory pass (0: skip)")
    parser.add_argument(
        "--floor-sessions",
        type=int,
        default=1_000,
        help="sessions of the floor pass: the same traffic through the preset without rules (0: skip)",
    )
    parser.add_argument(
        "--each-rule",
        action="store_true",
        help="one more pass per rule, over the floor pass's sessions: the preset with that rule alone, and what it "
        "costs over the floor",
    )
    parser.add_argument("--no-gc", action="store_true", help="disable the garbage collector in the timed loop")
    parser.add_argument(
        "--passes",
        type=int,
        default=1,
        help="time the same traffic this many times (a new guard each time) and report, besides the first pass, "
        "the p99 of each event's fastest pass: the code's own spread, without the pauses of a busy or virtual "
        "machine (which seldom fall on the same event twice)",
    )
    parser.add_argument(
        "--pause-seconds",
        type=float,
        default=0.5,
        help="how long the machine's pauses are counted before and after the timed run (0: not counted)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.sessions is None:
        args.sessions = 1_000 if args.quick else 10_000
    if args.memory_sessions is None:
        args.memory_sessions = min(args.sessions, 1_000)
    if args.sessions < 1 or args.events < 3 or args.wave < 1 or args.passes < 1 or args.pause_seconds < 0:
        parser.error("--sessions, --wave and --passes must be >= 1, --events >= 3, --pause-seconds >= 0")
    if args.each_rule and args.floor_sessions < 1:
        parser.error("--each-rule times each rule over the floor: it needs the floor pass (--floor-sessions >= 1)")

    content = Content(args.seed)
    before = machine_pauses(args.pause_seconds) if args.pause_seconds else None
    result = timed_run(args, content)
    if before is not None:
        after = machine_pauses(args.pause_seconds)
        events = sum(stats["count"] for kind, stats in result["per_type"].items() if kind != "all")
        rate = (before["per_second"] + after["per_second"]) / 2
        result["machine_pauses"] = {
            "per_second": rate,
            "time_share": round((before["time_share"] + after["time_share"]) / 2, 4),
            "events_share": round(rate * result["observe_s"] / events, 4),
            "before_and_after": [before, after],
        }
    if args.floor_sessions > 0:
        floor_args = argparse.Namespace(
            **{**vars(args), "sessions": min(args.sessions, args.floor_sessions), "passes": 1}  # one pass each
        )
        result["floor"] = timed_run(floor_args, content, only=())["per_type"]
        if args.each_rule:
            names = [detector.name for detector in preset(args.preset).detectors]
            result["alone"] = {}
            for at, name in enumerate(names):
                label = name if names.count(name) == 1 else f"{name} #{at + 1}"  # a rule twice in a preset
                result["alone"][label] = timed_run(floor_args, content, only=(at,))["per_type"]
    if args.memory_sessions > 0:
        result["memory"] = memory_run(args, content)
    text, all_ok = report(result, args)
    result["targets_met"] = all_ok
    result["config"] = {
        "sessions": args.sessions,
        "events": args.events,
        "wave": args.wave,
        "gc_during_timed_loop": not args.no_gc,
        "python": sys.version.split()[0],
    }
    print(json.dumps(result, indent=2) if args.json else text)
    return 1 if args.check and not all_ok else 0


if __name__ == "__main__":
    sys.exit(main())
