"""The Claude Code hook: wall time and CPU time of one hook run (a new Python process per event), against a bare
``python -c pass`` in the same run, and its decision alone.

    python benchmarks/bench_hook.py                    # 60 runs of each hook command (the installed one first)
    python benchmarks/bench_hook.py --runs 200 --json
    python benchmarks/bench_hook.py --cli              # also `loopwatch hook claude-code` (the console script)
    python benchmarks/bench_hook.py --before DIR       # also another version's source tree (its src/), side by side
    python benchmarks/bench_hook.py --no-bytecode-cache   # as the environment says (e.g. PYTHONDONTWRITEBYTECODE)
    python benchmarks/bench_hook.py --check            # exit 1 when a target is missed

Claude Code starts the hook once per event, in the project's directory, and waits for it, so what counts is the
wall time from spawning the process to its exit: interpreter start-up, imports, opening the SQLite store, judging,
writing the answer.
The script builds a warm store first (a temporary SQLite file holding 200 sessions), then replays a realistic
session through the hook, one process per event, cycling through the events Claude Code sends: a Bash call
(~200 characters) and its result (~4 KB of stdout), a Read and its result (~8 KB of file), a failing command
(``PostToolUseFailure`` with ``Exit code 1``), a prompt, a Stop with the final message. Each run's stdin is the
exact JSON Claude Code sends; the processes run one after the other, as Claude Code runs them for one session, in
an empty temporary directory (a project without a loopwatch configuration file).

The commands: the hook ``--install`` writes (``python -c '... claude_code_hook ...'``), which hands each event to
the local hook server it starts itself; the hook judging in its own process (``python -m
loopwatch.adapters.claude_code``, ``--install --in-process``); the relay to a ``--serve`` service. The installed
hook's first warm-up run finds no server, judges in its own process and starts one in the background
(``XDG_RUNTIME_DIR`` points at a temporary directory); the timed runs are served. Its CPU per run is the hook
process's plus the server's CPU per event (the server's own accounting of its process, ``time.process_time()``,
read before and after the timed runs, divided by the events it served): the figure the target is for. Apart,
``--first-runs`` runs that find no server (the first event after an idle exit): the run's CPU, the server's
start-up CPU, and its CPU once it has judged its first event (building the guard), once per idle period.

Reported: median, p95 and max wall milliseconds per hook run, and its CPU time (user + system, from the
operating system's accounting of the finished process); the same for ``python -c pass`` (the interpreter's own
start-up), ``python -c "import typing, dataclasses, json, re, sqlite3, threading"`` (the standard library's modules
a hook run loads, whatever loopwatch does with them), ``python -c "import json, sqlite3"`` (the least a hook that
reads JSON and judges in its own process against a SQLite store loads) and ``python -c "import loopwatch"`` (the
package's own import), to show where the time goes, with each command's CPU time as a multiple of ``python -c
pass``'s. CPU time is what a busy machine does not inflate (wall time includes waiting for a core). The commands
take turns event by event, so a change in the machine's load affects them alike. Also: the in-process cost of one
decision (building the guard on an open store and judging, the part this module controls beyond imports); and the
heaviest imports under ``python -X importtime``.

``--before DIR`` adds the same two commands run from another version's source tree (``DIR`` is its ``src``
directory, put first on ``PYTHONPATH``), each hook with a copy of the same warm store, for before/after figures
from one run::

    git archive 7567d9b src | tar -x -C /tmp/before && python benchmarks/bench_hook.py --before /tmp/before/src

Bytecode: an installed wheel has its ``.pyc`` files compiled; a source checkout run with
``PYTHONDONTWRITEBYTECODE=1`` compiles every module on every start. By default the runs use a bytecode cache in
a temporary directory (``PYTHONPYCACHEPREFIX``) so they measure the installed case; ``--no-bytecode-cache``
measures the environment as it is. Targets, for the installed hook: median under 100 ms per hook run, and CPU per
hook run (its server's share included) at most 2.5x a bare ``python -c pass``'s.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loopwatch.adapters.claude_code import hook_command

TARGET_MS = 100.0
TARGET_CPU_RATIO = 2.5
HOOK = "python -m loopwatch.adapters.claude_code"
LOCAL = "the installed hook (claude_code_hook, python -c)"
LOCAL_TOTAL = "  + its server's CPU per event"
RELAY = "python -m loopwatch.adapters.claude_code_relay URL"
BARE = "python -c pass"
IMPORT = "python -c 'import loopwatch'"
STDLIB_MODULES = "typing, dataclasses, json, re, sqlite3, threading"
STDLIB = "python -c 'import <stdlib modules a hook needs>'"
FLOOR = "python -c 'import json, sqlite3'"
SESSION = "bench-9f1c2e7a"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "import",
    "return",
    "value",
    "error",
    "module",
    "config",
    "parser",
    "session",
    "store",
    "cache",
    "token",
    "result",
    "request",
    "client",
    "server",
    "handler",
    "test",
    "fixture",
    "assert",
    "expected",
    "actual",
    "line",
    "file",
    "path",
]


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def _common(event: str) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "transcript_path": f"/home/user/.claude/projects/-home-user-proj/{SESSION}.jsonl",
        "cwd": "/home/user/proj",
        "permission_mode": "default",
        "hook_event_name": event,
    }


def traffic(runs: int, seed: int = 7) -> list[dict[str, Any]]:
    """``runs`` hook inputs of one session, in the order Claude Code sends them (no loop in them)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    step = 0
    while len(events) < runs:
        step += 1
        kind = step % 6
        call = f"toolu_01{step:06d}{rng.getrandbits(32):08x}"
        if kind == 0:
            events.append({**_common("UserPromptSubmit"), "prompt": _prose(rng, 300)})
        elif kind in (1, 4):
            command = f"cd /home/user/proj && python -m pytest tests/test_{rng.choice(WORDS)}.py -k {step} -x -q"
            tool_input = {"command": command, "description": "Run the tests", "timeout": 120000}
            events.append({**_common("PreToolUse"), "tool_name": "Bash", "tool_input": tool_input, "tool_use_id": call})
            if kind == 1:
                response = {"stdout": _prose(rng, 4000), "stderr": "", "interrupted": False, "isImage": False}
                events.append(
                    {
                        **_common("PostToolUse"),
                        "tool_name": "Bash",
                        "tool_input": tool_input,
                        "tool_response": response,
                        "tool_use_id": call,
                        "duration_ms": rng.randint(200, 9000),
                    }
                )
            else:
                events.append(
                    {
                        **_common("PostToolUseFailure"),
                        "tool_name": "Bash",
                        "tool_input": tool_input,
                        "tool_use_id": call,
                        "error": "Exit code 1\n" + _prose(rng, 1500),
                        "is_interrupt": False,
                        "duration_ms": rng.randint(200, 9000),
                    }
                )
        elif kind == 2:
            path = f"/home/user/proj/src/{rng.choice(WORDS)}_{step}.py"
            events.append(
                {**_common("PreToolUse"), "tool_name": "Read", "tool_input": {"file_path": path}, "tool_use_id": call}
            )
            content = _prose(rng, 8000)
            file = {"filePath": path, "content": content, "numLines": content.count("\n") + 1, "startLine": 1}
            events.append(
                {
                    **_common("PostToolUse"),
                    "tool_name": "Read",
                    "tool_input": {"file_path": path},
                    "tool_response": {"type": "text", "file": file},
                    "tool_use_id": call,
                    "duration_ms": rng.randint(1, 40),
                }
            )
        else:
            events.append(
                {
                    **_common("Stop"),
                    "stop_hook_active": False,
                    "last_assistant_message": _prose(rng, 600),
                    "background_tasks": [],
                    "session_crons": [],
                }
            )
    return events[:runs]


def _env(bytecode_cache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if bytecode_cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode_cache
    return env


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(cmd: list[str], payload: bytes, env: dict[str, str], cwd: Path) -> tuple[float, float, bytes]:
    """Wall and CPU milliseconds of one process running ``cmd`` with ``payload`` on stdin, and its stdout."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(cmd, input=payload, capture_output=True, env=env, cwd=cwd, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    used = (_children_cpu() - cpu) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{cmd} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return elapsed, used, done.stdout


def _has_hook_command(script: str, env: dict[str, str]) -> bool:
    done = subprocess.run([script, "hook", "claude-code", "--help"], capture_output=True, env=env, check=False)
    return done.returncode == 0


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"median": statistics.median(ordered), "p95": p95, "max": ordered[-1], "n": len(ordered)}


def warm_store(url: str, sessions: int = 200) -> None:
    """A store holding ``sessions`` other sessions of 12 events each (the file a user has after a while)."""
    from loopwatch.adapters.claude_code import _guard, handle

    guard = _guard(url, None, None, False)
    for n, payload in enumerate(traffic(12 * sessions, seed=99)):
        handle(guard, {**payload, "session_id": f"old-{n // 12:04d}"})
    assert guard.store is not None
    guard.store.close()


def decision_times(url: str, events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """In-process: a new guard on the store per event (what each hook process does after its imports), and the
    decision alone on a warm guard."""
    from loopwatch.adapters.claude_code import _guard, handle

    fresh: list[float] = []
    for payload in events:
        started = time.perf_counter()
        guard = _guard(url, None, None, False)
        response = handle(guard, {**payload, "session_id": "inproc-fresh"})
        json.dumps(response)
        fresh.append((time.perf_counter() - started) * 1000)
        assert guard.store is not None
        guard.store.close()
    guard = _guard(url, None, None, False)
    warm: list[float] = []
    for payload in events:
        started = time.perf_counter()
        json.dumps(handle(guard, {**payload, "session_id": "inproc-warm"}))
        warm.append((time.perf_counter() - started) * 1000)
    return {"fresh_guard_and_decision": _stats(fresh), "decision_only": _stats(warm)}


def import_profile(
    cmd: list[str], payload: bytes, env: dict[str, str], cwd: Path, floor_ms: float = 4.0
) -> list[dict[str, Any]]:
    """The import tree of one hook run under ``-X importtime``: modules taking ``floor_ms`` or more (cumulative),
    parents before their children, five levels deep at most."""
    done = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], input=payload, capture_output=True, env=env, cwd=cwd, check=False
    )
    rows: list[dict[str, Any]] = []
    for line in done.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:"):
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        if not cumulative_us.strip().isdigit():
            continue  # the header line
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append(
            {"module": name.strip(), "depth": depth, "self_ms": int(self_us) / 1000, "ms": int(cumulative_us) / 1000}
        )
    rows.reverse()  # importtime prints a module after its imports
    return [row for row in rows if row["ms"] >= floor_ms and row["depth"] <= 5]


def _start_service(url: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``loopwatch hook claude-code --serve`` on a free port, over the store at ``url``: the process and its URL."""
    cmd = [sys.executable, "-m", "loopwatch.adapters.claude_code", "--serve", "--port", "0", "--store", url]
    service = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert service.stderr is not None
    return service, "http://" + service.stderr.readline().split(" on http://", 1)[1].split()[0]


def service_times(url: str, events: list[dict[str, Any]], env: dict[str, str], warmup: int) -> dict[str, float]:
    """Wall time of one POST to ``loopwatch hook claude-code --serve`` (a new connection each, as a hook makes),
    from this process to the service in another, over the same store."""
    import http.client

    service, service_url = _start_service(url, env)
    try:
        address = service_url.removeprefix("http://")
        hostport, _, path = address.partition("/")
        host, _, port = hostport.partition(":")
        times = []
        for n, payload in enumerate(events):
            body = json.dumps(payload).encode()
            start = time.perf_counter()
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            connection.request("POST", "/" + path, body, {"Content-Type": "application/json"})
            connection.getresponse().read()
            connection.close()
            if n >= warmup:
                times.append((time.perf_counter() - start) * 1000)
        return _stats(times)
    finally:
        service.terminate()
        service.wait(timeout=30)


def local_server(run_dir: Path) -> dict[str, Any] | None:
    """The status of the local hook server in ``run_dir`` (the one the installed hook started), None when none."""
    from loopwatch.adapters.claude_code_daemon import server_status

    servers = server_status(str(run_dir))
    return servers[0] if servers else None


def first_runs(
    cmd: list[str], events: list[dict[str, Any]], env: dict[str, str], cwd: Path, work: Path
) -> dict[str, Any]:
    """The installed hook's runs that find no server (the first event after an idle exit): each judges its event
    in its own process and starts the server. Their CPU; the server's CPU when it first answers (its start-up);
    and after the next event, the first it judges (building the guard, once per idle period)."""
    from loopwatch.adapters.claude_code_daemon import stop_servers

    runs: list[float] = []
    startups: list[float] = []
    first_events: list[float] = []
    for n, payload in enumerate(events):
        run_dir = work / f"first-{n}"
        run_dir.mkdir(mode=0o700)
        run_env = {**env, "XDG_RUNTIME_DIR": str(run_dir)}
        _, used, _ = _time(cmd, json.dumps(payload).encode(), run_env, cwd)
        runs.append(used)
        status = None
        for _ in range(600):  # the server starts in the background: wait until it answers
            status = local_server(run_dir / "loopwatch")
            if status is not None:
                break
            time.sleep(0.05)
        if status is not None:
            startups.append(float(status["cpu_seconds"]) * 1000)
            _time(cmd, json.dumps({**payload, "session_id": f"{payload['session_id']}-next"}).encode(), run_env, cwd)
            served = local_server(run_dir / "loopwatch")
            if served is not None and served["handled"] == 1:
                first_events.append(float(served["cpu_seconds"]) * 1000)
        stop_servers(str(run_dir / "loopwatch"))
    return {
        "hook_run_cpu_ms": _stats(runs),
        "server_start_cpu_ms": _stats(startups) if startups else None,
        "server_start_and_first_event_cpu_ms": _stats(first_events) if first_events else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="hook runs timed (default: 60)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default: 5)")
    parser.add_argument(
        "--first-runs", type=int, default=5, help="installed-hook runs that find no server, timed apart (default: 5)"
    )
    parser.add_argument("--cli", action="store_true", help="also time the console script `loopwatch hook claude-code`")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="do not use a temporary bytecode cache")
    parser.add_argument(
        "--before", metavar="DIR", help="also time another version's source tree (its src/ directory), side by side"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 when the median hook run is over {TARGET_MS:.0f} ms or its CPU over {TARGET_CPU_RATIO}x a bare "
        "python's",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lw-bench-hook-"))
    services: list[subprocess.Popen[str]] = []
    try:
        cache = None if args.no_bytecode_cache else str(work / "pycache")
        env = _env(cache)
        url = f"sqlite:///{work / 'hook.db'}?ttl=604800"
        warm_store(url)
        events = traffic(args.runs + args.warmup)
        project = work / "project"  # the hooks' working directory: a project without a loopwatch configuration
        project.mkdir()
        python = sys.executable
        # name -> (command, environment); every hook gets its own copy of the warm store
        commands: dict[str, tuple[list[str], dict[str, str]]] = {}

        def hook(name: str, cmd: list[str], hook_env: dict[str, str]) -> None:
            copy = work / f"hook-{len(commands)}.db"
            shutil.copyfile(work / "hook.db", copy)
            commands[name] = ([*cmd, "--store", f"sqlite:///{copy}?ttl=604800"], hook_env)

        hook(HOOK, [python, "-m", "loopwatch.adapters.claude_code"], env)
        # what --install writes: the client, handing each event to the local hook server it starts itself (its
        # first run judges in its own process and starts the server in the background; the warm-up covers it)
        run_dir = work / "run"
        run_dir.mkdir(mode=0o700)
        local_env = {**env, "XDG_RUNTIME_DIR": str(run_dir)}
        hook(LOCAL, shlex.split(hook_command()), local_env)
        # the relay command hook, handing each event to a --serve service on its own copy of the store
        shutil.copyfile(work / "hook.db", work / "service.db")
        service, service_url = _start_service(f"sqlite:///{work / 'service.db'}?ttl=604800", env)
        services.append(service)
        hook(RELAY, [python, "-m", "loopwatch.adapters.claude_code_relay", service_url], env)
        script = shutil.which("loopwatch", path=os.path.dirname(python))
        if args.cli and script and _has_hook_command(script, env):
            hook("loopwatch hook claude-code", [script, "hook", "claude-code"], env)
        elif args.cli:
            print("(no `loopwatch hook` command in this install: the console script is not timed)", file=sys.stderr)
        baselines = {
            BARE: ([python, "-c", "pass"], env),
            STDLIB: ([python, "-c", f"import {STDLIB_MODULES}"], env),
            FLOOR: ([python, "-c", "import json, sqlite3"], env),
            IMPORT: ([python, "-c", "import loopwatch"], env),
        }
        if args.before:
            before = str(Path(args.before).resolve())
            before_env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (before, env.get("PYTHONPATH")) if p)}
            hook(f"{HOOK} (before)", [python, "-m", "loopwatch.adapters.claude_code"], before_env)
            baselines[f"{IMPORT} (before)"] = ([python, "-c", "import loopwatch"], before_env)
        everything = {**commands, **baselines}

        results: dict[str, Any] = {
            "target_ms": TARGET_MS,
            "target_cpu_ratio": TARGET_CPU_RATIO,
            "bytecode_cache": cache is not None,
            "runs": args.runs,
            "before": args.before,
        }
        wall: dict[str, list[float]] = {name: [] for name in everything}
        cpu: dict[str, list[float]] = {name: [] for name in everything}
        answered = 0
        server_before: dict[str, Any] | None = None
        for n, payload in enumerate(events):  # the commands take turns: the machine's load affects them alike
            data = json.dumps(payload).encode()
            if n == args.warmup:
                server_before = local_server(run_dir / "loopwatch")
                if server_before is None:
                    raise SystemExit("the installed hook started no local server during the warm-up")
            for name, (cmd, cmd_env) in everything.items():
                elapsed, used, out = _time(cmd, data, cmd_env, project)
                if n >= args.warmup:
                    wall[name].append(elapsed)
                    cpu[name].append(used)
                    answered += bool(out.strip()) and name == HOOK
        server_after = local_server(run_dir / "loopwatch")
        if server_before is None or server_after is None or server_after["pid"] != server_before["pid"]:
            raise SystemExit("the local hook server did not serve the whole run")
        served = int(server_after["handled"]) - int(server_before["handled"])
        server_cpu = (float(server_after["cpu_seconds"]) - float(server_before["cpu_seconds"])) * 1000
        results["local_server"] = {
            "events_served": served,
            "events_run": args.runs,
            "cpu_ms_per_event": server_cpu / max(served, 1),
        }
        if served != args.runs:
            print(f"(the local server served {served} of {args.runs} timed runs)", file=sys.stderr)
        results["wall_ms"] = {name: _stats(times) for name, times in wall.items()}
        results["cpu_ms"] = {name: _stats(times) for name, times in cpu.items()}
        share = results["local_server"]["cpu_ms_per_event"]
        results["cpu_ms"][LOCAL_TOTAL] = {
            key: (value + share if key != "n" else value) for key, value in results["cpu_ms"][LOCAL].items()
        }
        bare = results["cpu_ms"][BARE]["median"]
        results["cpu_ratio"] = {name: row["median"] / bare for name, row in results["cpu_ms"].items()}
        results["hook_outputs"] = answered
        results["in_process_ms"] = decision_times(url, events[: args.runs])
        results["service_ms"] = service_times(url, events, env, args.warmup)
        first = [{**payload, "session_id": f"first-{n}"} for n, payload in enumerate(events[: args.first_runs])]
        results["first_runs"] = first_runs(commands[LOCAL][0], first, env, project, work)
        first = json.dumps(events[1]).encode()
        results["imports"] = import_profile(commands[HOOK][0], first, env, project)
    finally:
        for service in services:
            service.terminate()
            service.wait(timeout=30)
        from loopwatch.adapters.claude_code_daemon import stop_servers

        stop_servers(str(work / "run" / "loopwatch"))
        shutil.rmtree(work, ignore_errors=True)

    wall_ok = results["wall_ms"][LOCAL]["median"] <= TARGET_MS
    cpu_ok = results["cpu_ratio"][LOCAL_TOTAL] <= TARGET_CPU_RATIO
    relay_ok = results["cpu_ratio"][RELAY] <= TARGET_CPU_RATIO
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        _table(results)
        print(f"\ntarget: median <= {TARGET_MS:.0f} ms per hook run: {'met' if wall_ok else 'MISSED'}")
        print(
            f"target: CPU per hook run <= {TARGET_CPU_RATIO}x a bare python's: the installed hook, its server's share "
            f"included: {results['cpu_ratio'][LOCAL_TOTAL]:.2f}x, {'met' if cpu_ok else 'MISSED'}; judging in the "
            f"hook's process: {results['cpu_ratio'][HOOK]:.2f}x; relaying to --serve (its CPU not counted): "
            f"{results['cpu_ratio'][RELAY]:.2f}x, {'met' if relay_ok else 'MISSED'}"
        )
    return 1 if args.check and not (wall_ok and cpu_ok) else 0


def _table(results: dict[str, Any]) -> None:
    out = io.StringIO()
    cache = "with a bytecode cache" if results["bytecode_cache"] else "bytecode as the environment says"
    print(f"hook runs: {results['runs']} per command, one process each, {cache}", file=out)
    header = f"{'per process (ms)':<54} {'wall':>7} {'p95':>7} {'max':>7}  {'CPU':>6} {'p95':>6}  {'CPU/bare':>8}"
    print(f"\n{header}", file=out)
    for name, row in results["wall_ms"].items():
        used = results["cpu_ms"][name]
        print(
            f"{name:<54} {row['median']:>7.1f} {row['p95']:>7.1f} {row['max']:>7.1f}  {used['median']:>6.1f} "
            f"{used['p95']:>6.1f}  {results['cpu_ratio'][name]:>7.2f}x",
            file=out,
        )
        if name == LOCAL:
            total = results["cpu_ms"][LOCAL_TOTAL]
            print(
                f"{LOCAL_TOTAL:<54} {'':>7} {'':>7} {'':>7}  {total['median']:>6.1f} {total['p95']:>6.1f}  "
                f"{results['cpu_ratio'][LOCAL_TOTAL]:>7.2f}x",
                file=out,
            )
    server = results["local_server"]
    print(
        f"\nthe local hook server: {server['cpu_ms_per_event']:.2f} ms CPU per event (its process's CPU over the "
        f"{server['events_served']} events it served of {server['events_run']})",
        file=out,
    )
    first = results["first_runs"]
    startup, warm = first["server_start_cpu_ms"], first["server_start_and_first_event_cpu_ms"]
    print(
        f"the installed hook finding no server (judged in its own process, the server started): "
        f"{first['hook_run_cpu_ms']['median']:.1f} ms CPU (median of {first['hook_run_cpu_ms']['n']}); the server's "
        + (f"start-up {startup['median']:.1f} ms CPU" if startup else "start-up: not measured (no server answered)")
        + (f", with its first event (the guard built) {warm['median']:.1f} ms" if warm else "")
        + ": once per idle period",
        file=out,
    )
    wall = results["wall_ms"]
    own = wall[HOOK]["median"] - wall[IMPORT]["median"]
    print(f"{'the in-process hook beyond importing loopwatch (wall)':<54} {own:>7.1f}", file=out)
    row = results["service_ms"]
    name = "http hook: one POST to --serve"
    print(f"{name:<54} {row['median']:>7.1f} {row['p95']:>7.1f} {row['max']:>7.1f}", file=out)
    print(f"\n{'in the process (ms)':<44} {'median':>8} {'p95':>8} {'max':>8}", file=out)
    for name, row in results["in_process_ms"].items():
        print(f"{name.replace('_', ' '):<44} {row['median']:>8.2f} {row['p95']:>8.2f} {row['max']:>8.2f}", file=out)
    print("\nimports of one hook run taking 4 ms or more (python -X importtime, cumulative ms):", file=out)
    for row in results["imports"]:
        print(f"  {'  ' * row['depth']}{row['module']:<40} {row['ms']:>7.1f}", file=out)
    print(out.getvalue(), end="")


if __name__ == "__main__":
    sys.exit(main())
