"""loopwatch against the loop guards on PyPI, side by side in one run, on the same realistic traffic.

    pip install -e ".[semantic,fuzzy]" -r benchmarks/requirements-peers.txt
    python benchmarks/bench_peers.py                       # 300 sessions x 50 events, 3 rounds
    python benchmarks/bench_peers.py --rounds 5 --json
    python benchmarks/bench_peers.py --json-out benchmarks/results/peers.json > benchmarks/results/peers.txt
    python benchmarks/bench_peers.py --only loopwatch-lexical --only aura-guard --sessions 1000
    python benchmarks/bench_peers.py --sessions 5 --rounds 1 --json      # the smallest run (a smoke test)

The peers are optional: one that is not installed is skipped, and the report says so. The versions measured
(``benchmarks/requirements-peers.txt``): ``pip install aura-guard==0.7.1 runbound==0.11.2 agent-watchdog==0.1.5
trajectory-fuse==0.3.0``. None of them is a dependency of loopwatch.

Traffic: ``bench_guard.py``'s sessions (the same generator and seed): agents at work, each event a tool call
with ~1 KB of JSON arguments, its ~4 KB result, or a ~1 KB assistant message; every 5th session repeats one
call 6 times, every 10th retries a failing test command 6 times with other flags. Sessions are interleaved in
waves (``--wave``). Every contender gets the same events in the same order through the hooks its own
documentation asks for:

- loopwatch: ``Guard(preset=..., clock=None).observe(session, event)`` for every event. ``default-lexical``
  (the default rules without the ``semantic`` extra's model) and ``default`` (with it, when the extra is
  installed; each new message is embedded), each with the compiled text kernels and, in its own process, with
  ``LOOPWATCH_PURE_PYTHON=1``.
- aura-guard: one ``AgentGuard`` per session; ``check_tool(name, args)`` for a call, ``record_result(ok,
  payload, error_code)`` for its result, ``check_output(text)`` for a message.
- runbound: ``runbound.init(on_anomaly="raise", on_spike="limit", auto_wrap=False)`` (its escalation ladder),
  each session's events inside its own ``runbound.session(key)`` block (entered once, in the session's own
  context), the call and its result as one call of an ``@runbound.tool`` wrapper whose body returns the output
  (or raises, for a failure), at the result event; ``record_call(model, tokens_in, tokens_out)`` for a message.
- agent-watchdog: one ``AgentWatchdog(timeout_seconds=None)`` per session, inside its ``watch()`` block;
  ``record_tool_call(name, args, output)`` at the result event. It reads no messages.
- trajectory-fuse: one ``AgentFuse()`` per session; ``check(name, args)`` for a call, and when it allows the
  call, ``observe(Action(name, args, output, success))`` for its result. It reads no messages.

A peer is told whether a result failed (an error flag, or a traceback in the output): loopwatch works it out
from the text itself. Per-session objects are created, and blocks entered, before a wave is timed; each hook
call sits alone between two ``time.perf_counter_ns()`` readings. Each contender runs in a process of its own
(the same interpreter), one after the other, and the rounds repeat the sequence, so that a slower spell of a
shared machine falls on all of them.

Reported per contender: each event type's median and p99 (the median over the rounds of each round's
figure), "call + result" (a call's time plus its result's, per pair), the ratio of each to aura-guard's, the
non-ok decisions it gave and in how many sessions of each kind, the hook calls that raised something other
than its own stop signal, and the results it did not look at. The target: loopwatch with the compiled kernels
at most 0.6x aura-guard's call + result.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_guard import Content, session_kind, session_number, wave, waves  # noqa: E402
from loopwatch import Event, Message, ToolCall, ToolResult  # noqa: E402

KINDS = ("tool_call", "tool_result", "message")
TARGET_RATIO = 0.6
BASELINE = "aura-guard"
MESSAGE_TOKENS_IN = 2_000

# name -> (what it is, the distribution to import (None: loopwatch), the module, the loopwatch preset, pure Python)
CONTENDERS: dict[str, tuple[str, str | None, str, str | None, bool]] = {
    "loopwatch-lexical": ("loopwatch default-lexical, compiled kernels", None, "loopwatch", "default-lexical", False),
    "loopwatch-lexical-pure": ("loopwatch default-lexical, pure Python", None, "loopwatch", "default-lexical", True),
    "loopwatch-default": ("loopwatch default (semantic model), compiled kernels", None, "loopwatch", "default", False),
    "loopwatch-default-pure": ("loopwatch default (semantic model), pure Python", None, "loopwatch", "default", True),
    "aura-guard": ("aura-guard AgentGuard", "aura-guard", "aura_guard", None, False),
    "runbound": ("runbound @tool + session", "runbound", "runbound", None, False),
    "agent-watchdog": ("agent-watchdog AgentWatchdog", "agent-watchdog", "agent_watchdog", None, False),
    "trajectory-fuse": ("trajectory-fuse AgentFuse", "trajectory-fuse", "trajectory_fuse", None, False),
}

# -- the contenders' hooks -------------------------------------------------------------------------------------
#
# Each adapter has ``hooks`` (the event types it is fed), ``open(session)`` (untimed: per-session objects) and,
# for each hooked type, a method called between the two clock readings that returns what the contender decided
# when that was something other than "go on" (None otherwise); ``label`` names it, after the second reading.
# ``skipped`` counts results it was not asked to look at because it had refused their call; ``notes`` say what
# the report should.


class _Adapter:
    hooks: tuple[str, ...] = KINDS
    notes: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.skipped = 0
        self.errors: Counter[str] = Counter()

    def open(self, session: str) -> None:
        pass

    def close(self) -> None:
        pass

    def _error(self, exc: Exception) -> None:
        self.errors[type(exc).__name__] += 1

    def label(self, decision: Any) -> str:
        return str(decision)

    def call(self, session: str, event: ToolCall) -> Any:
        raise NotImplementedError

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        raise NotImplementedError

    def message(self, session: str, event: Message) -> Any:
        raise NotImplementedError


class LoopwatchAdapter(_Adapter):
    def __init__(self, preset: str) -> None:
        super().__init__()
        from loopwatch import Guard

        self.observe = Guard(preset=preset, clock=None).observe

    def _verdict(self, session: str, event: Event) -> Any:
        try:
            action = self.observe(session, event).action
        except Exception as exc:
            return self._error(exc)
        return None if action == "ok" else action

    def call(self, session: str, event: ToolCall) -> Any:
        return self._verdict(session, event)

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        return self._verdict(session, event)

    def message(self, session: str, event: Message) -> Any:
        return self._verdict(session, event)


class AuraAdapter(_Adapter):
    notes = ("a result whose call it did not allow (cache, rewrite, block) is not recorded: record_result returns",)

    def __init__(self) -> None:
        super().__init__()
        from aura_guard import AgentGuard
        from aura_guard.types import PolicyAction

        self.make = AgentGuard
        self.allow = PolicyAction.ALLOW
        self.guards: dict[str, Any] = {}

    def open(self, session: str) -> None:
        self.guards[session] = self.make(secret_key=b"bench-peers-secret-key")

    def label(self, decision: Any) -> str:
        return f"{decision.action.value} ({str(decision.reason).split(':', 1)[0]})"

    def call(self, session: str, event: ToolCall) -> Any:
        try:
            decision = self.guards[session].check_tool(event.tool, event.args)
        except Exception as exc:
            return self._error(exc)
        if decision.action is self.allow:
            return None
        self.skipped += 1
        return decision

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        try:
            code = _error_code(event.output) if failed else None
            self.guards[session].record_result(ok=not failed, payload=event.output, error_code=code)
        except Exception as exc:
            return self._error(exc)
        return None

    def message(self, session: str, event: Message) -> Any:
        try:
            decision = self.guards[session].check_output(event.text)
        except Exception as exc:
            return self._error(exc)
        return decision


class _ToolFailed(Exception):
    """What a benchmarked tool body raises for a failed result."""


class RunboundAdapter(_Adapter):
    hooks = ("tool_result", "message")
    notes = (
        "one hook per call and its result (the @runbound.tool wrapper runs both), timed at the result event",
        "messages: record_call(model, tokens_in, tokens_out), token counts only (it reads no text)",
        "each session's runbound.session(key) block is entered before its wave is timed",
        "a call it refuses (ExecutionRefused, SafeModeViolation: its ladder's contain and close) stops at its door",
        "it names a loop from tool names alone (sequence) and from failures of one tool (retry, error_storm)",
    )

    def __init__(self) -> None:
        super().__init__()
        import contextvars

        import runbound

        self.runbound = runbound
        self.new_context = contextvars.Context
        self.anomaly: dict[str, Any] | None = None
        # the settings of runbound's escalation ladder (log, alert, contain, close); events counted as they come
        runbound.init(on_anomaly="raise", on_spike="limit", on_event=self._event, auto_wrap=False)
        self.expected = (_ToolFailed, runbound.GuardrailTripped, runbound.PolicyViolation, runbound.SafeModeViolation)
        self.tools: dict[str, Any] = {}
        self.contexts: dict[str, Any] = {}
        self.blocks: list[tuple[Any, Any]] = []
        self.output = ""
        self.failed = False

    def _event(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "anomaly":
            self.anomaly = event

    def label(self, decision: Any) -> str:
        if isinstance(decision, Exception):
            return f"refused ({type(decision).__name__})"
        shape = (decision.get("details") or {}).get("shape")
        return f"{decision.get('detector')}" + (f" ({shape})" if shape else "")

    def _body(self, **_args: Any) -> str:
        if self.failed:
            raise _ToolFailed(self.output[-80:])
        return self.output

    def open(self, session: str) -> None:
        context = self.new_context()
        block = self.runbound.session(session)
        context.run(block.__enter__)
        self.contexts[session] = context
        self.blocks.append((context, block))

    def close(self) -> None:
        for context, block in self.blocks:
            context.run(block.__exit__, None, None, None)

    def _tool(self, name: str) -> Any:
        tool = self.tools.get(name)
        if tool is None:
            tool = self.tools[name] = self.runbound.tool(name=name)(self._body)
        return tool

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        self.anomaly = None
        self.output, self.failed = event.output, failed
        try:
            self.contexts[session].run(self._tool(call.tool), **call.args)
        except self.expected as exc:
            if not isinstance(exc, _ToolFailed):
                return exc
        except Exception as exc:
            return self._error(exc)
        return self.anomaly

    def message(self, session: str, event: Message) -> Any:
        self.anomaly = None
        try:
            self.contexts[session].run(
                self.runbound.record_call, "gpt-4o", MESSAGE_TOKENS_IN, len(event.text) // 4, provider="bench"
            )
        except self.expected as exc:
            return exc
        except Exception as exc:
            return self._error(exc)
        return self.anomaly


class WatchdogAdapter(_Adapter):
    hooks = ("tool_result",)
    notes = (
        "one hook per call and its result (record_tool_call takes both), timed at the result event",
        "messages: not fed (it reads none); timeout_seconds=None (no timer thread per session)",
        "after a halt it goes on counting (the halt is raised once per session)",
    )

    def __init__(self) -> None:
        super().__init__()
        from agent_watchdog import AgentWatchdog, WatchdogHalt

        self.make = AgentWatchdog
        self.halt = WatchdogHalt
        self.dogs: dict[str, Any] = {}
        self.blocks: list[Any] = []

    def open(self, session: str) -> None:
        dog = self.make(timeout_seconds=None)
        block = dog.watch(run_id=session)
        block.__enter__()
        self.dogs[session] = dog
        self.blocks.append(block)

    def close(self) -> None:
        for block in self.blocks:
            with contextlib.suppress(self.halt):
                block.__exit__(None, None, None)

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        try:
            self.dogs[session].record_tool_call(call.tool, call.args, event.output)
        except self.halt as exc:
            return f"halt ({exc.report.reason.value})"
        except Exception as exc:
            return self._error(exc)
        return None


class FuseAdapter(_Adapter):
    hooks = ("tool_call", "tool_result")
    notes = (
        "a result whose call check() refused is not observed",
        "messages: not fed (it reads none)",
    )

    def __init__(self) -> None:
        super().__init__()
        from trajectory_fuse import Action, AgentFuse, BudgetExceeded, DeadlockDetected

        self.make, self.action = AgentFuse, Action
        self.expected = (DeadlockDetected, BudgetExceeded)
        self.fuses: dict[str, Any] = {}
        self.refused: set[str] = set()

    def open(self, session: str) -> None:
        self.fuses[session] = self.make()

    def label(self, decision: Any) -> str:
        if isinstance(decision, self.expected):
            kind = getattr(getattr(decision, "detection", None), "kind", None)
            return f"{type(decision).__name__}" + (f" ({kind.value})" if kind is not None else "")
        return f"refused ({decision.kind.value})"

    def call(self, session: str, event: ToolCall) -> Any:
        try:
            detection = self.fuses[session].check(event.tool, event.args)
        except Exception as exc:
            return self._error(exc)
        if detection is None:
            return None
        self.refused.add(session)
        return detection

    def result(self, session: str, event: ToolResult, call: ToolCall, failed: bool) -> Any:
        if session in self.refused:
            self.refused.discard(session)
            self.skipped += 1
            return None
        try:
            self.fuses[session].observe(
                self.action(tool=call.tool, args=call.args, result=event.output, success=not failed)
            )
        except self.expected as exc:
            return exc
        except Exception as exc:
            return self._error(exc)
        return None


def adapter(name: str) -> _Adapter:
    preset = CONTENDERS[name][3]
    if preset is not None:
        return LoopwatchAdapter(preset)
    return {"aura-guard": AuraAdapter, "runbound": RunboundAdapter, "agent-watchdog": WatchdogAdapter}.get(
        name, FuseAdapter
    )()


def _failed(event: ToolResult) -> bool:
    """What a peer is told: the result is an error (flagged, or a Python traceback in the output)."""
    return bool(event.is_error) or (event.is_error is None and "Traceback (most recent call last)" in event.output)


def _error_code(output: str) -> str:
    """A coarse error class for aura-guard (the exception's name on the last line)."""
    last = output.rstrip().rsplit("\n", 1)[-1]
    return last.split(":", 1)[0][:40] or "error"


# -- one contender, in its own process -------------------------------------------------------------------------


def _stats(values: array[int] | list[int]) -> dict[str, Any] | None:
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {
        "count": n,
        "median_us": round(median / 1000, 2),
        "p99_us": round(ordered[min(n - 1, int(n * 0.99))] / 1000, 2),
        "mean_us": round(sum(ordered) / n / 1000, 2),
    }


def _feed(contender: _Adapter, batch: list[tuple[str, str, Event]], timed: dict[str, array[int]] | None) -> Any:
    """One wave through the contender: returns (flags as (session, label), pair times, seconds of wall, of CPU)."""
    hooks = contender.hooks
    pending: dict[str, tuple[ToolCall, int]] = {}
    failed = {id(event): _failed(event) for _, kind, event in batch if kind == "tool_result"}
    flags: list[tuple[str, str]] = []
    pairs = array("q")
    clock = time.perf_counter_ns
    call_hook, result_hook, message_hook = contender.call, contender.result, contender.message
    name_it = contender.label
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for session, kind, event in batch:
        if kind not in hooks:
            if kind == "tool_call":
                pending[session] = (event, 0)  # type: ignore[assignment]
            continue
        if kind == "tool_call":
            t0 = clock()
            label = call_hook(session, event)  # type: ignore[arg-type]
            t1 = clock()
            pending[session] = (event, t1 - t0)  # type: ignore[assignment]
        elif kind == "tool_result":
            call, call_ns = pending.pop(session)
            is_failed = failed[id(event)]
            t0 = clock()
            label = result_hook(session, event, call, is_failed)  # type: ignore[arg-type]
            t1 = clock()
            pairs.append(call_ns + t1 - t0)
        else:
            t0 = clock()
            label = message_hook(session, event)  # type: ignore[arg-type]
            t1 = clock()
        if timed is not None:
            timed[kind].append(t1 - t0)
        if label is not None:
            flags.append((session, name_it(label)))
    return flags, pairs, time.perf_counter() - wall0, time.process_time() - cpu0


def worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    content = Content(args.seed)
    warm = adapter(name)  # imports, caches, first-use paths (and the embedding model) on other sessions
    warm_batch = wave(content, 10**6, min(50, args.sessions), args.events, args.seed + 1)
    for session in dict.fromkeys(s for s, _, _ in warm_batch):
        warm.open(session)
    with contextlib.redirect_stdout(sys.stderr):
        _feed(warm, warm_batch, None)
        warm.close()
    del warm, warm_batch

    contender = adapter(name)
    timed: dict[str, array[int]] = {kind: array("q") for kind in KINDS}
    pairs = array("q")
    flags: set[tuple[str, str]] = set()
    labels: Counter[str] = Counter()
    wall = cpu = 0.0
    with contextlib.redirect_stdout(sys.stderr):  # some peers print when they halt a run
        for batch in waves(content, args.sessions, args.events, args.wave, args.seed):
            for session in dict.fromkeys(s for s, _, _ in batch):
                contender.open(session)
            found, times, w, c = _feed(contender, batch, timed)
            pairs.extend(times)
            flags.update(found)
            labels.update(label for _, label in found)
            wall, cpu = wall + w, cpu + c
        contender.close()
    by_kind: dict[str, dict[str, int]] = {}
    for number in range(args.sessions):
        by_kind.setdefault(session_kind(number), {"sessions": 0, "flagged": 0})["sessions"] += 1
    for session in {s for s, _ in flags}:
        by_kind[session_kind(session_number(session))]["flagged"] += 1
    return {
        "name": name,
        "per_type": {kind: _stats(timed[kind]) if kind in contender.hooks else None for kind in KINDS},
        "call_result": _stats(pairs),
        "decisions": dict(labels.most_common()),
        "sessions_flagged": by_kind,
        "errors": dict(contender.errors),
        "results_not_looked_at": contender.skipped,
        "cpu_share": round(cpu / wall, 3) if wall else None,
        "notes": list(contender.notes),
    }


# -- the run: every contender in turn, round after round -------------------------------------------------------


def versions(name: str) -> str:
    _, dist, _, _, pure = CONTENDERS[name]
    if dist is None:
        import loopwatch

        return f"{loopwatch.__version__} ({'pure Python' if pure else 'compiled'})"
    return importlib.metadata.version(dist)


def unavailable(name: str) -> str | None:
    """Why this contender cannot run here (None: it can)."""
    _, dist, module, preset, pure = CONTENDERS[name]
    if dist is not None:
        if importlib.util.find_spec(module) is None:
            return f"not installed (pip install {dist})"
        return None
    if preset == "default":
        from loopwatch._presets import semantic_installed

        if not semantic_installed():
            return 'the semantic extra is not installed (pip install "loopwatch[semantic]")'
    if not pure:
        env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
        check = "from loopwatch.core import _kernels; raise SystemExit(0 if _kernels.COMPILED else 1)"
        if subprocess.run([sys.executable, "-c", check], env=env).returncode:
            return "the compiled kernels are not built (python hatch_build.py)"
    return None


def run_worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
    if CONTENDERS[name][4]:
        env["LOOPWATCH_PURE_PYTHON"] = "1"
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
    command += ["--sessions", str(args.sessions), "--events", str(args.events)]
    command += ["--wave", str(args.wave), "--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one contender: the median of each figure, decisions and the rest from the first round."""
    out = dict(rounds[0])
    out["rounds"] = len(rounds)
    for key in (*KINDS, "call_result"):
        first = rounds[0]["per_type"][key] if key in KINDS else rounds[0]["call_result"]
        if first is None:
            continue
        source = [r["per_type"][key] if key in KINDS else r["call_result"] for r in rounds]
        merged = {
            "count": first["count"],
            "median_us": _median([s["median_us"] for s in source]),
            "p99_us": _median([s["p99_us"] for s in source]),
            "rounds_median_us": [s["median_us"] for s in source],
        }
        if key in KINDS:
            out["per_type"] = {**out["per_type"], key: merged}
        else:
            out["call_result"] = merged
    out["cpu_share"] = [r["cpu_share"] for r in rounds]
    return out


def ratios(results: dict[str, dict[str, Any]]) -> None:
    """Each figure's ratio to aura-guard's, in place."""
    base = results.get(BASELINE)
    for result in results.values():
        result["to_aura_guard"] = {}
        for key in (*KINDS, "call_result"):
            mine = result["per_type"][key] if key in KINDS else result["call_result"]
            theirs = None if base is None else (base["per_type"][key] if key in KINDS else base["call_result"])
            if mine and theirs and theirs["median_us"]:
                result["to_aura_guard"][key] = round(mine["median_us"] / theirs["median_us"], 2)


def targets(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    base = results.get(BASELINE)
    out = []
    for name in ("loopwatch-lexical", "loopwatch-default"):
        if name not in results:
            continue
        ratio = results[name]["to_aura_guard"].get("call_result")
        out.append(
            {
                "contender": name,
                "target": f"call + result <= {TARGET_RATIO}x aura-guard's",
                "call_result_us": results[name]["call_result"]["median_us"],
                "aura_guard_us": None if base is None else base["call_result"]["median_us"],
                "ratio": ratio,
                "met": None if ratio is None else ratio <= TARGET_RATIO,
            }
        )
    return out


def _cell(stats: dict[str, Any] | None, ratio: float | None) -> str:
    if stats is None:
        return "-"
    text = f"{stats['median_us']:.1f} / {stats['p99_us']:.0f}"
    return text + (f" ({ratio:.2f}x)" if ratio is not None else "")


def report(out: dict[str, Any]) -> str:
    config = out["config"]
    lines = [
        f"loopwatch and its peers on bench_guard.py's traffic: {config['sessions']:,} sessions x {config['events']} "
        f"events, waves of {min(config['wave'], config['sessions'])} interleaved sessions, {config['rounds']} "
        f"round(s), each contender in its own process, in turn; Python {config['python']}",
        "median / p99 in microseconds (the median over the rounds of each round's figure); (Nx): the median's "
        "ratio to aura-guard's; '-': the contender has no hook for that event type",
        "",
        f"{'contender':<24} {'version':<22} {'tool_call':>24} {'tool_result':>24} {'message':>26} "
        f"{'call + result':>26}",
    ]
    for name, result in out["results"].items():
        ratio = result["to_aura_guard"]
        cells = [_cell(result["per_type"][kind], ratio.get(kind)) for kind in KINDS]
        cells.append(_cell(result["call_result"], ratio.get("call_result")))
        lines.append(f"{name:<24} {result['version']:<22} {cells[0]:>24} {cells[1]:>24} {cells[2]:>26} {cells[3]:>26}")
    for name, why in out["skipped"].items():
        lines.append(f"{name:<24} skipped: {why}")
    lines.append("")
    for target in out["targets"]:
        if target["met"] is None:
            lines.append(f"target, {target['contender']}: {target['target']}: not measured (no aura-guard)")
            continue
        lines.append(
            f"target, {target['contender']}: {target['target']}: {target['call_result_us']:.1f} us against "
            f"{target['aura_guard_us']:.1f} us = {target['ratio']:.2f}x: {'met' if target['met'] else 'MISSED'}"
        )
    lines += ["", "what each decided (non-ok decisions; sessions with one, per kind of session):"]
    for name, result in out["results"].items():
        decisions = ", ".join(f"{k} {v:,}" for k, v in result["decisions"].items()) or "none"
        kinds = ", ".join(f"{k} {v['flagged']}/{v['sessions']}" for k, v in result["sessions_flagged"].items())
        lines.append(f"  {name:<24} {decisions}; sessions: {kinds}")
        extra = []
        if result["errors"]:
            extra.append("ERRORS (a hook raised): " + ", ".join(f"{k} {v}" for k, v in result["errors"].items()))
        if result["results_not_looked_at"]:
            extra.append(f"{result['results_not_looked_at']:,} results not looked at")
        extra += result["notes"]
        lines += [f"  {'':<26}{line}" for line in extra]
    shares = [s for r in out["results"].values() for s in r["cpu_share"] if s]
    if shares:
        lines.append("")
        lines.append(
            f"CPU share of the timed loops: {min(shares):.0%}-{max(shares):.0%}"
            + ("  (below 95%: other processes took the CPU; p99 is inflated)" if min(shares) < 0.95 else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=300, help="sessions (default 300)")
    parser.add_argument("--events", type=int, default=50, help="events per session (default 50)")
    parser.add_argument("--wave", type=int, default=500, help="sessions active (interleaved) at a time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each running every contender in turn")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", action="append", choices=sorted(CONTENDERS), help="run only these (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--worker", choices=sorted(CONTENDERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.events < 3 or args.wave < 1 or args.rounds < 1:
        parser.error("--sessions, --wave and --rounds must be >= 1, --events >= 3")
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return 0

    chosen = [name for name in CONTENDERS if not args.only or name in args.only]
    skipped = {name: why for name in chosen if (why := unavailable(name))}
    running = [name for name in chosen if name not in skipped]
    per_round: dict[str, list[dict[str, Any]]] = {name: [] for name in running}
    for _ in range(args.rounds):
        for name in running:
            per_round[name].append(run_worker(name, args))
    results = {name: combine(per_round[name]) | {"version": versions(name)} for name in running}
    ratios(results)
    out = {
        "results": results,
        "skipped": skipped,
        "targets": targets(results),
        "config": {
            "sessions": args.sessions,
            "events": args.events,
            "wave": args.wave,
            "rounds": args.rounds,
            "seed": args.seed,
            "python": sys.version.split()[0],
        },
    }
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2) if args.json else report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
