"""``benchmarks/bench_rules.py`` times every rule of a preset inside a scan of real runs, and leaves the engine as
it found it. It runs the rules from their source (timers cannot go inside compiled ones), so each test runs in a
process of its own, where the compiled modules were never imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopwatch import preset
from loopwatch.core._engine import Engine

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "benchmarks", timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_rule_is_timed_on_the_steps_it_reads() -> None:
    code = (
        "import json, bench_rules as b, loopwatch._native as n\n"
        f"r = b.measure([{str(ROOT / 'examples')!r}], 'default-lexical')\n"
        "print(json.dumps({'result': r, 'table': b.table(r, 5), 'step': b.STEP, 'compiled': n.compiled()}))"
    )
    out = json.loads(_run(code))
    result, step = out["result"], out["step"]
    assert out["compiled"] is False  # the rules ran from their source
    assert result["runs"] == 7 and result["input_errors"] == []
    assert result["steps"]["call"] > 50 and result["steps"]["result"] > 50
    timed = {(row["kind"], row["rule"]) for row in result["rules"]}
    names = {rule.name for rule in Engine(preset("default-lexical")).policy.detectors}
    # a rule whose state stays fresh may skip a step unread (never timed then); these read every step of a kind
    for kind, rule in [("call", "repeat"), ("call", "cycle"), ("call", "error_retry"), ("result", "rephrase"),
                       ("message", "similar_text"), ("call", "no_progress")]:  # fmt: skip
        assert (kind, rule) in timed, (kind, rule)
    assert {rule for _, rule in timed} - {step} <= names
    assert ("call", step) in timed and ("result", step) in timed
    # the rules' and the steps' time is part of the engine's, and most of it
    within = sum(row["seconds"] for row in result["rules"])
    assert 0.5 * result["engine_seconds"] < within <= result["engine_seconds"]
    assert "us per step of its kind" in out["table"] and len(out["table"].splitlines()) == 3 + 5


def test_the_engine_is_left_as_it_was() -> None:
    code = """
import bench_rules as bench
from loopwatch import preset
from loopwatch.core import _engine
from loopwatch.core._engine import Engine

engine = Engine(preset("default-lexical"))
make_step = _engine.step_of
with bench.timed(engine, lambda: 0):
    assert _engine.step_of is not make_step
    assert all("observe" in vars(rule) for rule in engine.policy.detectors)
assert _engine.step_of is make_step
assert not any("observe" in vars(rule) for rule in engine.policy.detectors)
print("ok")
"""
    assert _run(code) == "ok\n"


def test_it_refuses_to_run_once_the_compiled_rules_are_imported() -> None:
    code = """
import loopwatch._native as native
from loopwatch.core import _steps  # compiled, when it is built
try:
    native.use_source()
except RuntimeError as error:
    print("refused" if native.compiled() else "?", error)
else:
    print("source" if not native.compiled() else "?")
"""
    out = _run(code)
    from loopwatch import _native

    assert out.startswith("refused the compiled loopwatch." if _native.compiled() else "source"), out
