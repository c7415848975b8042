"""Configuration files (loopwatch.config): loading, merging into a policy, and validation errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from loopwatch._presets import PRESETS, preset
from loopwatch.config import Config, config_from_mapping, find_config, load_config
from loopwatch.core._engine import Engine
from loopwatch.core._events import ToolCall
from loopwatch.core._policy import Ladder, Policy, Rung
from loopwatch.core.detectors import CycleDetector, DoomLoopDetector
from loopwatch.errors import ConfigError, MissingExtraError, UnknownPresetError

FULL_TOML = """
preset = "default"
ignore_keys = ["task_progress", "step"]
reset_on_user = false

[ladders.repeat]
nudge = [2, 4]
block = 6
stop = 9
renotify = true

[ladders.polling]
nudge = 20

[limits]
max_iterations = 100
max_runtime = 14400
max_cost = 10.0
cost_warn_at = 0.5
max_tokens = 1000000
max_consecutive_failures = 5

[messages]
repeat = "You called {tool} {count} times, stop."

[messages.error_retry]
1 = "{tool} keeps failing: {error}"
block = "Refused: fix {error} first."

[detectors.cycle]
max_period = 8

[detectors.error_retry]
threshold = 4

[detectors.similar_text]
enabled = false

[tools.gdb]
exempt = true

[tools.read_output]
ladders.polling = { nudge = 40 }

[tools.write_file]
ignore_keys = ["timestamp"]
keep_keys = ["path"]
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _detector(policy: Policy, name: str) -> Any:
    matches = [d for d in policy.detectors if d.name == name]
    assert len(matches) == 1, [d.name for d in policy.detectors]
    return matches[0]


def _actions(policy: Policy, call: ToolCall, times: int) -> list[str]:
    engine = Engine(policy)
    session = engine.new_session()
    return [engine.observe(session, call).action for _ in range(times)]


# -- a full file ---------------------------------------------------------------------------------------


@pytest.fixture
def full_policy(tmp_path: Path) -> Policy:
    config = load_config(_write(tmp_path / "loopwatch.toml", FULL_TOML))
    assert config.source == str(tmp_path / "loopwatch.toml")
    return config.policy()


def test_full_file_ladders(full_policy: Policy) -> None:
    repeat = full_policy.ladders["repeat"]
    assert repeat.rungs == (Rung(2, "nudge"), Rung(4, "nudge"), Rung(6, "block"), Rung(9, "stop"))
    assert repeat.renotify is True
    assert full_policy.ladders["polling"] == Ladder.of(nudge=20)
    # patterns the file does not mention keep the preset's ladder
    assert full_policy.ladders["cycle"] == preset("default").ladders["cycle"]


def test_full_file_limits(full_policy: Policy) -> None:
    assert repr(full_policy.limits) == (
        "max_iterations(100) | max_runtime(14400) | max_cost(10.0, warn_at=0.5) | max_tokens(1000000)"
        " | max_consecutive_failures(5)"
    )


def test_full_file_detectors(full_policy: Policy) -> None:
    cycle = _detector(full_policy, "cycle")
    assert isinstance(cycle, CycleDetector)
    assert (cycle.max_period, cycle.min_period, cycle.result_aware) == (8, 2, True)
    assert _detector(full_policy, "error_retry").threshold == 4
    names = [d.name for d in full_policy.detectors]
    assert "similar_text" not in names
    default_names = [d.name for d in preset("default").detectors]
    assert names == [n for n in default_names if n != "similar_text"]
    # untouched detectors are the preset's
    assert _detector(full_policy, "repeat") == _detector(preset("default"), "repeat")


def test_full_file_tools(full_policy: Policy) -> None:
    assert full_policy.tools["gdb"].exempt is True
    assert full_policy.tools["read_output"].ladders == {"polling": Ladder.of(nudge=40)}
    assert full_policy.ladder("polling", "read_output") == Ladder.of(nudge=40)
    write_file = full_policy.tools["write_file"]
    assert (write_file.ignore_keys, write_file.keep_keys, write_file.exempt) == (
        ("timestamp",),
        ("path",),
        False,
    )


def test_full_file_messages_and_flags(full_policy: Policy) -> None:
    messages = full_policy.messages
    assert messages.template("repeat", 1, "nudge") == "You called {tool} {count} times, stop."
    assert messages.template("repeat", 3, "block") == "You called {tool} {count} times, stop."
    assert messages.template("error_retry", 1, "nudge") == "{tool} keeps failing: {error}"
    assert messages.template("error_retry", 2, "block") == "Refused: fix {error} first."
    # patterns not overridden keep the default templates
    assert messages.template("cycle", 1, "nudge") == preset("default").messages.template("cycle", 1, "nudge")
    assert full_policy.ignore_keys == ("task_progress", "step")
    assert full_policy.reset_on_user is False


# -- pyproject.toml ------------------------------------------------------------------------------------


def test_pyproject_with_loopwatch_table(tmp_path: Path) -> None:
    text = """
[project]
name = "demo"

[tool.loopwatch]
preset = "doom-loop"

[tool.loopwatch.ladders.repeat]
nudge = 2

[tool.loopwatch.detectors.doom_loop]
window = 12
"""
    config = load_config(_write(tmp_path / "pyproject.toml", text))
    policy = config.policy()
    assert config.preset == "doom-loop"
    assert policy.name == "doom-loop"
    assert policy.ladders["repeat"] == Ladder.of(nudge=2)
    doom = _detector(policy, "doom_loop")
    assert isinstance(doom, DoomLoopDetector)
    assert (doom.window, doom.threshold, doom.fuzzy_threshold) == (12, 3, 4)


def test_pyproject_without_loopwatch_table_is_the_default(tmp_path: Path) -> None:
    path = _write(tmp_path / "pyproject.toml", '[project]\nname = "demo"\n[tool.ruff]\nline-length = 100\n')
    config = load_config(path)
    assert config == Config(source=str(path))
    policy = config.policy()
    assert policy.name == "default"
    assert policy.detectors == preset("default").detectors
    assert policy.ladders == preset("default").ladders


def test_pyproject_with_non_table_loopwatch(tmp_path: Path) -> None:
    path = _write(tmp_path / "pyproject.toml", '[tool]\nloopwatch = "yes"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field is None
    assert "expected a table" in str(info.value)


# -- find_config ---------------------------------------------------------------------------------------


def test_find_config_in_a_parent(tmp_path: Path) -> None:
    config = _write(tmp_path / "project" / "loopwatch.toml", 'preset = "ralph"\n')
    nested = tmp_path / "project" / "src" / "pkg"
    nested.mkdir(parents=True)
    assert find_config(nested) == config
    assert find_config(str(nested)) == config
    assert load_config(config).preset == "ralph"


def test_find_config_from_a_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "loopwatch.toml", "")
    source = _write(tmp_path / "agent" / "run.py", "")
    assert find_config(source) == config


def test_find_config_skips_pyproject_without_table(tmp_path: Path) -> None:
    outer = _write(tmp_path / "pyproject.toml", '[tool.loopwatch]\npreset = "behavioral"\n')
    inner = tmp_path / "sub"
    _write(inner / "pyproject.toml", '[project]\nname = "loopwatch-plugin"\n')
    assert find_config(inner) == outer
    assert load_config(outer).preset == "behavioral"


def test_find_config_prefers_loopwatch_toml(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.loopwatch]\n")
    own = _write(tmp_path / "loopwatch.toml", "")
    assert find_config(tmp_path) == own


def test_find_config_reports_a_broken_pyproject_meant_for_loopwatch(tmp_path: Path) -> None:
    broken = _write(tmp_path / "pyproject.toml", "[tool.loopwatch\npreset = 1\n")
    assert find_config(tmp_path) == broken
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(broken)


def test_find_config_none(tmp_path: Path) -> None:
    names = ("loopwatch.toml", "pyproject.toml")
    if any((parent / name).exists() for parent in tmp_path.parents for name in names):
        pytest.skip("a parent of the temporary directory has a config file")
    _write(tmp_path / "pyproject.toml", '[project]\nname = "other"\n')
    assert find_config(tmp_path) is None


# -- validation ----------------------------------------------------------------------------------------

INVALID: list[tuple[dict[str, Any], str | None, str]] = [
    # top level
    ({"presets": "default"}, "presets", "did you mean 'preset'?"),
    ({"preset": 3}, "preset", "expected a string, got 3 (integer)"),
    ({"ignore_keys": "task_progress"}, "ignore_keys", "expected a list of strings"),
    ({"ignore_keys": ["a", 1]}, "ignore_keys", "expected a list of strings"),
    ({"reset_on_user": 1}, "reset_on_user", "expected a boolean (true or false), got 1 (integer)"),
    ({"hard_evidence": "yes"}, "hard_evidence", "expected a boolean"),
    ({"stop_after_refusals": 0}, "stop_after_refusals", "expected a positive integer or false, got 0"),
    ({"stop_after_refusals": True}, "stop_after_refusals", "positive integer or false, got true"),
    ({"ladders": 3}, "ladders", "expected a table"),
    # ladders
    ({"ladders": {"repeat": {"nudge": True}}}, "ladders.repeat.nudge", "got true (boolean)"),
    ({"ladders": {"repeat": {"nudge": 0}}}, "ladders.repeat.nudge", "expected a positive integer, got 0"),
    ({"ladders": {"repeat": {"nudge": -2}}}, "ladders.repeat.nudge", "got -2"),
    ({"ladders": {"repeat": {"nudge": 2.5}}}, "ladders.repeat.nudge", "got 2.5 (float)"),
    ({"ladders": {"repeat": {"nudge": [3, "x"]}}}, "ladders.repeat.nudge", "got 'x' (string)"),
    ({"ladders": {"repeat": {"block": False}}}, "ladders.repeat.block", "got false (boolean)"),
    ({"ladders": {"repeat": {"stop": 0}}}, "ladders.repeat.stop", "positive integer"),
    ({"ladders": {"repeat": {"nudge": 5, "block": 3}}}, "ladders.repeat", "strictly increase, got [5, 3]"),
    ({"ladders": {"repeat": {"nudge": [3, 3]}}}, "ladders.repeat", "strictly increase"),
    ({"ladders": {"repeat": {"renotify": "yes"}}}, "ladders.repeat.renotify", "expected a boolean"),
    ({"ladders": {"repeat": {"metric": "calls"}}}, "ladders.repeat.metric", "one of 'count', 'detections'"),
    ({"ladders": {"repeat": {"nuge": 3}}}, "ladders.repeat.nuge", "did you mean 'nudge'?"),
    ({"ladders": {"repaet": {"nudge": 3}}}, "ladders.repaet", "did you mean 'repeat'?"),
    ({"ladders": {"repeat": 3}}, "ladders.repeat", "expected a table, got 3"),
    # limits
    ({"limits": {"max_iteration": 10}}, "limits.max_iteration", "did you mean 'max_iterations'?"),
    ({"limits": {"max_iterations": True}}, "limits.max_iterations", "got true (boolean)"),
    ({"limits": {"max_iterations": 1.5}}, "limits.max_iterations", "positive integer, got 1.5"),
    ({"limits": {"max_tokens": 0}}, "limits.max_tokens", "positive integer, got 0"),
    ({"limits": {"max_consecutive_failures": -1}}, "limits.max_consecutive_failures", "got -1"),
    ({"limits": {"max_cost": -1.0}}, "limits.max_cost", "positive finite number, got -1.0"),
    ({"limits": {"max_cost": 0}}, "limits.max_cost", "got 0"),
    ({"limits": {"max_cost": float("nan")}}, "limits.max_cost", "got nan"),
    ({"limits": {"max_runtime": float("inf")}}, "limits.max_runtime", "got inf"),
    ({"limits": {"max_runtime": "4h"}}, "limits.max_runtime", "expected a positive number, got '4h'"),
    ({"limits": {"cost_warn_at": 0.5}}, "limits.cost_warn_at", "needs max_cost"),
    ({"limits": {"max_cost": 5, "cost_warn_at": 1.5}}, "limits.cost_warn_at", "between 0 and 1"),
    ({"limits": {"max_cost": 5, "cost_warn_at": True}}, "limits.cost_warn_at", "got true"),
    # messages
    ({"messages": {"repet": "x"}}, "messages.repet", "did you mean 'repeat'?"),
    ({"messages": {"repeat": 3}}, "messages.repeat", "a template string or a table"),
    ({"messages": {"repeat": {"0": "x"}}}, "messages.repeat.0", "a level number"),
    ({"messages": {"repeat": {"blok": "x"}}}, "messages.repeat.blok", "did you mean 'block'?"),
    ({"messages": {"repeat": {"block": 1}}}, "messages.repeat.block", "expected a string, got 1"),
    # tools
    ({"tools": {"gdb": 3}}, "tools.gdb", "expected a table"),
    (
        {"tools": {"gdb": {"exempt": "yes"}}},
        "tools.gdb.exempt",
        "expected a boolean (true or false), got 'yes'",
    ),
    ({"tools": {"gdb": {"exmpt": True}}}, "tools.gdb.exmpt", "did you mean 'exempt'?"),
    ({"tools": {"gdb": {"ignore_keys": "x"}}}, "tools.gdb.ignore_keys", "list of strings"),
    ({"tools": {"gdb": {"keep_keys": [1]}}}, "tools.gdb.keep_keys", "list of strings"),
    ({"tools": {"gdb": {"ladders": {"polling": {"nudge": 0}}}}}, "tools.gdb.ladders.polling.nudge", "got 0"),
    ({"tools": {"gdb": {"ladders": {"poling": {}}}}}, "tools.gdb.ladders.poling", "did you mean 'polling'?"),
    # detectors
    ({"detectors": {"cycel": {}}}, "detectors.cycel", "did you mean 'cycle'?"),
    ({"detectors": {"doom_loop": {"window": 5}}}, "detectors.doom_loop", "preset 'default' has no detector"),
    (
        {"detectors": {"chantng": {"threshold": 3}}},
        "detectors.chantng",
        "did you mean 'chanting'? (its detectors: 'repeat', ",  # and the rules it retired, which the hint names
    ),
    ({"detectors": {"chantng": {}}}, "detectors.chantng", "retired, brought back by `enabled = true`: 'chanting')"),
    ({"detectors": {"cycle": 8}}, "detectors.cycle", "expected a table"),
    ({"detectors": {"cycle": {"max_perod": 8}}}, "detectors.cycle.max_perod", "did you mean 'max_period'?"),
    ({"detectors": {"cycle": {"max_period": 0}}}, "detectors.cycle.max_period", "positive number, got 0"),
    ({"detectors": {"cycle": {"max_period": True}}}, "detectors.cycle.max_period", "an integer, got true"),
    ({"detectors": {"cycle": {"max_period": 2.5}}}, "detectors.cycle.max_period", "an integer, got 2.5"),
    ({"detectors": {"cycle": {"max_period": 1}}}, "detectors.cycle", "min_period <= max_period"),
    ({"detectors": {"cycle": {"result_aware": "no"}}}, "detectors.cycle.result_aware", "a boolean, got 'no'"),
    ({"detectors": {"error_retry": {"threshold": -3}}}, "detectors.error_retry.threshold", "got -3"),
    (
        {"detectors": {"similar_text": {"metric": "cosine"}}},
        "detectors.similar_text.metric",
        "'jaccard', 'fuzz'",
    ),
    (
        {"detectors": {"similar_text": {"threshold": float("nan")}}},
        "detectors.similar_text.threshold",
        "finite",
    ),
    ({"detectors": {"similar_text": {"min_chars": -1}}}, "detectors.similar_text.min_chars", "number >= 0"),
    ({"detectors": {"similar_text": {"max_chars": "all"}}}, "detectors.similar_text.max_chars", "an integer"),
    ({"detectors": {"similar_text": {"enabled": "no"}}}, "detectors.similar_text.enabled", "a boolean"),
    (
        {"detectors": {"monologue": {"threshold": 3}}},
        "detectors.monologue.threshold",
        "unknown MonologueDetector",
    ),
]


@pytest.mark.parametrize(("data", "field", "fragment"), INVALID)
def test_invalid_settings(data: dict[str, Any], field: str | None, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_typo_suggestion_message() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"limits": {"max_iteration": 10}})
    assert info.value.field == "limits.max_iteration"
    assert "unknown limit 'max_iteration'; did you mean 'max_iterations'?" in str(info.value)


def test_unknown_key_without_close_match_lists_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"limits": {"zzz": 1}})
    assert "did you mean" not in str(info.value)
    assert "expected one of 'max_iterations'" in str(info.value)


def test_unknown_preset() -> None:
    with pytest.raises(UnknownPresetError) as info:
        config_from_mapping({"preset": "doom_loop"})
    assert info.value.field == "preset"
    assert "did you mean 'doom-loop'?" in str(info.value)
    with pytest.raises(UnknownPresetError) as typed:  # the same help in Python and on the command line's --preset
        preset("defualt")
    assert str(typed.value).startswith("preset: unknown preset 'defualt'; did you mean 'default'? (expected one of")


def test_detectors_are_validated_against_the_selected_preset() -> None:
    # doom_loop exists in the doom-loop preset, cycle does not
    config = config_from_mapping({"preset": "doom-loop", "detectors": {"doom_loop": {"threshold": 5}}})
    assert _detector(config.policy(), "doom_loop").threshold == 5
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"preset": "doom-loop", "detectors": {"cycle": {"max_period": 4}}})
    assert info.value.field == "detectors.cycle"


def test_directly_built_config_is_checked_by_policy() -> None:
    with pytest.raises(ConfigError) as info:
        Config(detectors={"cycle": {"bogus": 1}}).policy()
    assert info.value.field == "detectors.cycle.bogus"
    with pytest.raises(UnknownPresetError):
        Config(preset="nope").policy()


# -- files: errors -------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "loopwatch.toml"
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(missing) in str(info.value)
    assert "not found" in str(info.value)


def test_invalid_toml(tmp_path: Path) -> None:
    path = _write(tmp_path / "loopwatch.toml", 'preset = "default"\n[limits\nmax_cost = 1\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "invalid TOML" in message
    assert "line 2" in message


def test_errors_in_a_file_keep_the_field_and_name_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "loopwatch.toml", "[ladders.repeat]\nnudge = 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "ladders.repeat.nudge"
    assert str(info.value) == f"{path}:2: ladders.repeat.nudge: expected a positive integer, got 0 (integer)"
    assert (info.value.path, info.value.line) == (str(path), 2)


def test_nan_and_inf_from_toml(tmp_path: Path) -> None:
    path = _write(tmp_path / "loopwatch.toml", "[limits]\nmax_cost = nan\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "limits.max_cost"
    path = _write(tmp_path / "loopwatch.toml", "[detectors.similar_text]\nthreshold = inf\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "detectors.similar_text.threshold"


def test_unknown_preset_in_a_file_stays_an_unknown_preset_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "loopwatch.toml", 'preset = "fast"\n')
    with pytest.raises(UnknownPresetError) as info:
        load_config(path)
    assert info.value.field == "preset"
    assert str(path) in str(info.value)


def test_tomli_missing_on_python_310(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "loopwatch.toml", "")
    monkeypatch.setattr(sys, "version_info", (3, 10, 0, "final", 0))
    monkeypatch.setitem(sys.modules, "tomli", None)  # import tomli -> ImportError
    with pytest.raises(MissingExtraError) as info:
        load_config(path)
    assert (info.value.module, info.value.extra) == ("tomli", "toml")


# -- other values --------------------------------------------------------------------------------------


def test_cost_warning_can_be_disabled() -> None:
    config = config_from_mapping({"limits": {"max_cost": 2, "cost_warn_at": False}})
    assert repr(config.policy().limits) == "max_cost(2, warn_at=None)"


def test_empty_limits_table_removes_the_preset_limits() -> None:
    assert preset("ralph").limits  # the preset has limits ...
    assert not config_from_mapping({"preset": "ralph", "limits": {}}).policy().limits  # ... the config removes them
    assert config_from_mapping({"preset": "ralph"}).policy().limits == preset("ralph").limits


def test_ladder_metric_and_python_int_message_levels() -> None:
    data = {
        "ladders": {"cycle": {"nudge": [1, 2], "stop": 3, "metric": "detections"}},
        "messages": {"cycle": {1: "first", 2: "second", "stop": "done"}},
    }
    policy = config_from_mapping(data).policy()
    assert policy.ladders["cycle"] == Ladder.of(nudge=[1, 2], stop=3, metric="detections")
    templates = [policy.messages.template("cycle", level, action) for level, action in [(1, "nudge"), (2, "nudge")]]
    assert templates == ["first", "second"]
    assert policy.messages.template("cycle", 3, "stop") == "done"


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds(name: str) -> None:
    policy = config_from_mapping({"preset": name}).policy()
    expected = preset(name)
    assert policy.name == name
    assert policy.detectors == expected.detectors
    assert policy.ladders == expected.ladders
    assert policy.limits == expected.limits
    assert policy.reset_on_user == expected.reset_on_user


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_detector_can_be_disabled(name: str) -> None:
    first = preset(name).detectors[0].name
    policy = config_from_mapping({"preset": name, "detectors": {first: {"enabled": False}}}).policy()
    assert first not in [d.name for d in policy.detectors]
    assert len(policy.detectors) == len(preset(name).detectors) - 1


# -- the policy changes detection ----------------------------------------------------------------------


def test_repeat_ladder_changes_when_the_engine_nudges() -> None:
    call = ToolCall("bash", {"command": "ls"})
    default = _actions(Config().policy(), call, 3)
    tuned = _actions(config_from_mapping({"ladders": {"repeat": {"nudge": 2}}}).policy(), call, 3)
    assert default[:2] == ["ok", "ok"]
    assert default[2] == "nudge"
    assert tuned[:2] == ["ok", "nudge"]


def test_exempt_tool_is_never_flagged() -> None:
    call = ToolCall("fetch_page", {})
    assert set(_actions(Config().policy(), call, 5)) != {"ok"}  # the default flags it ...
    policy = config_from_mapping({"tools": {"fetch_page": {"exempt": True}}}).policy()
    assert _actions(policy, call, 5) == ["ok"] * 5  # ... exempt, it is left alone
    assert _actions(policy, ToolCall("bash", {"command": "ls"}), 5)[2] == "nudge"  # other tools are not


def test_disabled_detector_stops_detecting() -> None:
    call = ToolCall("bash", {"command": "ls"})
    policy = config_from_mapping({"detectors": {"repeat": {"enabled": False}}}).policy()
    assert "nudge" in _actions(Config().policy(), call, 4)
    assert "nudge" not in _actions(policy, call, 4)


def test_tool_ladder_overrides_the_pattern_ladder() -> None:
    call = ToolCall("fetch_page", {})
    policy = config_from_mapping({"tools": {"fetch_page": {"ladders": {"repeat": {"nudge": 6}}}}}).policy()
    actions = _actions(policy, call, 6)
    assert actions[:5] == ["ok"] * 5
    assert actions[5] == "nudge"


def test_a_detector_override_keeps_the_rephrase_rule_s_embedder() -> None:
    """Changing one threshold of the default's rephrase rule keeps the built-in embedder (not word overlap)."""
    from loopwatch.core.detectors import RephraseDetector

    policy = config_from_mapping({"preset": "default", "detectors": {"rephrase": {"count": 4}}}).policy()
    (rule,) = [d for d in policy.detectors if isinstance(d, RephraseDetector)]
    assert rule.count == 4 and rule.similarity == "embedding"  # the test extra installs `semantic`
    assert repr(rule).endswith("embedder=all-MiniLM-L6-v2)")
    assert rule.threshold == 0.95 and rule.message_threshold == 0.8 and rule.reply_threshold == 0.75


def test_hard_evidence_and_refusals_are_configurable() -> None:
    assert config_from_mapping({}).policy().stop_after_refusals == 3
    policy = config_from_mapping({"hard_evidence": False, "stop_after_refusals": False}).policy()
    assert policy.hard_evidence is False and policy.stop_after_refusals is None
    assert config_from_mapping({"stop_after_refusals": 5}).policy().stop_after_refusals == 5
