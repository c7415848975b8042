"""``benchmarks/bench_rules.py`` times every rule of a preset inside a scan of real runs, and leaves the engine as
it found it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from loopwatch import preset
from loopwatch.core import _engine
from loopwatch.core._engine import Engine

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_every_rule_is_timed_on_the_steps_it_reads() -> None:
    bench = _load("bench_rules")
    result = bench.measure([str(ROOT / "examples")], "default-lexical")
    assert result["runs"] == 7 and result["input_errors"] == []
    assert result["steps"]["call"] > 50 and result["steps"]["result"] > 50
    timed = {(row["kind"], row["rule"]) for row in result["rules"]}
    names = {rule.name for rule in Engine(preset("default-lexical")).policy.detectors}
    # a rule whose state stays fresh may skip a step unread (never timed then); these read every step of a kind
    for kind, rule in [("call", "repeat"), ("call", "cycle"), ("call", "error_retry"), ("result", "rephrase"),
                       ("message", "similar_text"), ("call", "no_progress")]:  # fmt: skip
        assert (kind, rule) in timed, (kind, rule)
    assert {rule for _, rule in timed} - {bench.STEP} <= names
    assert ("call", bench.STEP) in timed and ("result", bench.STEP) in timed
    # the rules' and the steps' time is part of the engine's, and most of it
    within = sum(row["seconds"] for row in result["rules"])
    assert 0.5 * result["engine_seconds"] < within <= result["engine_seconds"]
    table = bench.table(result, 5)
    assert "us per step of its kind" in table and len(table.splitlines()) == 3 + 5


def test_the_engine_is_left_as_it_was() -> None:
    bench = _load("bench_rules")
    engine = Engine(preset("default-lexical"))
    make_step = _engine.step_of
    with bench.timed(engine, lambda: 0):
        assert _engine.step_of is not make_step
        assert all("observe" in vars(rule) for rule in engine.policy.detectors)
    assert _engine.step_of is make_step
    assert not any("observe" in vars(rule) for rule in engine.policy.detectors)
