"""PolicySpec: the one way every program (the commands, the service, the hook, the MCP proxy) turns a preset name
and a configuration file into a policy, the file found the same way everywhere."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from loopwatch._policy_spec import PolicySpec, config_path
from loopwatch.errors import ConfigError, UnknownPresetError

CONFIG = "[ladders.cycle]\nnudge = 2\nblock = 20\nstop = 30\n"


def test_the_nearest_configuration_is_found_from_the_start_directory_upwards(tmp_path: Path) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text(CONFIG, encoding="utf-8")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert config_path(None, start=str(nested)) == str(config)
    assert config_path(None, no_config=True, start=str(nested)) is None
    assert config_path("given.toml", start=str(nested)) == "given.toml"  # a given file is not looked for
    spec = PolicySpec.found(None, None, start=str(nested))
    assert spec == PolicySpec(None, str(config))
    ladder = spec.build().ladders["cycle"]
    assert [rung.at for rung in ladder.rungs] == [2, 20, 30]


def test_without_a_configuration_the_preset_else_the_default(tmp_path: Path) -> None:
    assert PolicySpec.found(None, None, start=str(tmp_path)).config is None  # no file in tmp_path or above
    assert PolicySpec().build().name == "default"
    assert PolicySpec(default="default-lexical").build().name == "default-lexical"
    assert PolicySpec("call-cycles", default="default-lexical").build().name == "call-cycles"


def test_a_preset_replaces_the_configuration_s_own(tmp_path: Path) -> None:
    config = tmp_path / "loopwatch.toml"
    config.write_text('preset = "ralph"\n' + CONFIG, encoding="utf-8")
    assert PolicySpec(None, str(config)).build().name == "ralph"
    chosen = PolicySpec("call-cycles", str(config)).build()
    assert chosen.name == "call-cycles" and [r.at for r in chosen.ladders["cycle"].rungs] == [2, 20, 30]


def test_bad_names_and_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownPresetError):
        PolicySpec("no-such-preset").build()
    broken = tmp_path / "loopwatch.toml"
    broken.write_text("[ladders.repeat]\nnudgee = 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="nudgee"):
        PolicySpec(None, str(broken)).build()


def test_a_spec_travels_to_worker_processes_and_keys_their_cache() -> None:
    spec = PolicySpec("ralph", "loopwatch.toml", "default-lexical")
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert {spec: 1}[PolicySpec("ralph", "loopwatch.toml", "default-lexical")] == 1
