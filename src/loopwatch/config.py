"""Configuration files: a ``loopwatch.toml`` or the ``[tool.loopwatch]`` table of a ``pyproject.toml``.

A configuration starts from a preset and changes parts of it::

    config = load_config("loopwatch.toml")        # or find_config() to look in "." and its parents
    guard_policy = config.policy()

The schema (every key is optional; in a ``pyproject.toml`` the same keys live under ``[tool.loopwatch]``,
so ``[ladders.repeat]`` becomes ``[tool.loopwatch.ladders.repeat]``)::

    preset = "default"                # default, jaccard-turns, call-cycles, ralph, doom-loop, behavioral
    ignore_keys = ["task_progress"]   # argument keys left out of every call fingerprint
    reset_on_user = true              # a user message resets the loop counters
    hard_evidence = true              # block/stop only on the same unit repeated (default preset: true)
    stop_after_refusals = 3           # stop when a refused call is made again this often (false: never)

    [ladders.repeat]                  # a pattern a rule declares: repeat, polling, cycle, error_retry,
    nudge = 3                         #   failure_streak, no_progress, no_effect, revisit, test_fix, similar_text,
    block = 5                         #   chanting, monologue, repeat_message, swarm_repeat, rephrase, stalled
    stop = 8                          # nudge: an int or a list of ints (several nudge levels)
    renotify = false                  # nudge again at every count, not once per level
    metric = "count"                  # "count" (the finding's count) or "detections"
    restrike = 15                     # a new streak within 15 events of the last verdict stops the run

    [ladders.cycle]                   # or the rungs one by one (instead of nudge/block/stop), each with
    rungs = [                         #   its own message, reason, status or partial flag if wanted
      { at = 1, action = "nudge", message = "You are repeating: {calls}" },
      { at = 3, action = "stop", status = "LOOP_DETECTED" },
    ]

    [limits]                          # replaces the preset's limits (an empty table: no limits)
    max_iterations = 100
    max_runtime = 14400               # seconds
    max_cost = 10.0
    cost_warn_at = 0.8                # share of max_cost that nudges once (false: no warning)
    max_tokens = 1000000
    max_consecutive_failures = 5

    [messages]
    repeat = "You called {tool} {count} times..."     # one template for every level of the pattern
    [messages.error_retry]                           # or per level: 1, 2, ... and/or nudge, block, stop
    1 = "{tool} failed {count} times: {error}"
    block = "Refused: fix the error first."

    [detectors.cycle]                 # parameters of the preset's detectors, by detector name
    max_period = 8
    [detectors.similar_text]
    enabled = false                   # drop the detector
    [detectors.chanting]
    enabled = true                    # bring back a rule the preset retired (default: chanting)

    [tools.gdb]                       # per-tool settings, by tool name
    exempt = true                     # no loop detection for this tool (limits still count it)
    [tools.read_output]
    ladders.polling = { nudge = 40 }  # this tool's own ladder for a pattern
    [tools.write_file]
    ignore_keys = ["timestamp"]       # argument keys left out of this tool's fingerprint
    keep_keys = ["path"]              # or: only these keys count

Merging: a ``[ladders.X]`` table replaces the whole ladder of pattern ``X`` (list every rung you want; an
empty table silences the pattern) and leaves the other patterns' ladders alone; a ``[tools.X]`` table
replaces the settings of tool ``X``; ``[detectors.X]`` changes only the parameters it names.

Every invalid setting raises :class:`~loopwatch.errors.ConfigError` whose ``field`` is the setting's
dotted path (``ladders.repeat.nudge``, ``limits.max_cost``, ``detectors.cycle.max_period``...) and whose
message says what was expected and what was found; unknown keys suggest the closest valid one.
"""

from __future__ import annotations

import os
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from ._config_file import CONFIG_FILE, PYPROJECT_FILE, find_config_file
from ._config_lines import setting_line
from ._config_rules import apply_overrides, detector_overrides
from ._config_values import (
    as_bool,
    as_choice,
    as_positive_int,
    as_positive_number,
    as_refusals,
    as_string,
    as_strings,
    as_table,
    check_keys,
    did_you_mean,
    expected,
    join,
    listing,
    unknown,
)
from ._presets import PRESETS, declared_ladders
from .core._limits import (
    Limit,
    Limits,
    max_consecutive_failures,
    max_cost,
    max_iterations,
    max_runtime,
    max_tokens,
)
from .core._messages import Messages
from .core._patterns import REGISTRY
from .core._policy import Ladder, Metric, Policy, Rung, ToolSettings, check_restrike
from .core._verdict import Action
from .errors import ConfigError, MissingExtraError, UnknownPresetError

__all__ = ["CONFIG_FILE", "PATTERNS", "Config", "config_from_mapping", "find_config", "load_config"]

PATTERNS: Final[tuple[str, ...]] = REGISTRY.names()
"""The pattern names ladders and messages are keyed by: those loopwatch's rules declare, the limits' and the
loop judge's, as declared when this module was imported. :data:`loopwatch.core.REGISTRY` holds them as they are now
(``REGISTRY.names()``), with the patterns of rules of your own declared since, and is what configurations are
checked against."""

_TOP_KEYS: Final = (
    "preset",
    "ignore_keys",
    "reset_on_user",
    "hard_evidence",
    "stop_after_refusals",
    "ladders",
    "limits",
    "messages",
    "detectors",
    "tools",
)
_LADDER_KEYS: Final = ("nudge", "block", "stop", "rungs", "renotify", "metric", "restrike")
_THRESHOLD_KEYS: Final = ("nudge", "block", "stop")
_RUNG_KEYS: Final = ("at", "action", "message", "reason", "status", "partial")
_RUNG_ACTIONS: Final = ("nudge", "block", "stop")
_METRICS: Final = ("count", "detections")
_LIMIT_KEYS: Final = (
    "max_iterations",
    "max_runtime",
    "max_cost",
    "cost_warn_at",
    "max_tokens",
    "max_consecutive_failures",
)
_INT_LIMITS: Final[dict[str, Callable[[int], Limit]]] = {
    "max_iterations": max_iterations,
    "max_tokens": max_tokens,
    "max_consecutive_failures": max_consecutive_failures,
}
_DEFAULT_WARN_AT: Final = 0.8
_TOOL_KEYS: Final = ("exempt", "ignore_keys", "keep_keys", "ladders")
_MESSAGE_ACTIONS: Final = ("nudge", "block", "stop")

MessageOverrides = Mapping[str, "str | Mapping[int | str, str]"]


@dataclass(frozen=True)
class Config:
    """A preset plus overrides; :meth:`policy` builds the resulting :class:`~loopwatch.core.Policy`.

    ``None`` (and empty mappings) keep the preset's value. ``detectors`` maps a detector's ``name`` to
    constructor parameters (``{"cycle": {"max_period": 8}}``); ``{"enabled": False}`` drops it.
    """

    preset: str = "default"
    ladders: Mapping[str, Ladder] = field(default_factory=dict)
    limits: Limits | None = None
    messages: MessageOverrides = field(default_factory=dict)
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    ignore_keys: tuple[str, ...] | None = None
    reset_on_user: bool | None = None
    hard_evidence: bool | None = None
    stop_after_refusals: int | Literal[False] | None = None
    """A positive int, or ``False`` for never (``None`` keeps the preset's)."""
    detectors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str | None = None

    def policy(self) -> Policy:
        """The preset's policy with this configuration applied (raises ConfigError if it does not fit)."""
        base = _preset_policy(self.preset)
        overrides = detector_overrides(self.detectors, "detectors", base)
        detectors = apply_overrides(base.detectors, overrides, (gone.detector for gone in base.retired))
        # a retired rule brought back escalates by the ladders it declares, unless this configuration sets them
        held = {p.name for d in base.detectors for p in d.patterns}
        declared = {name: ladder for name, ladder in declared_ladders(detectors).items() if name not in held}
        changes: dict[str, Any] = {
            "detectors": detectors,
            "ladders": {**declared, **self.ladders},
            "tools": dict(self.tools),
        }
        if self.limits is not None:
            changes["limits"] = self.limits
        if self.messages:
            changes["messages"] = Messages(self.messages, base=base.messages.table)
        if self.ignore_keys is not None:
            changes["ignore_keys"] = tuple(self.ignore_keys)
        if self.reset_on_user is not None:
            changes["reset_on_user"] = self.reset_on_user
        if self.hard_evidence is not None:
            changes["hard_evidence"] = self.hard_evidence
        if self.stop_after_refusals is not None:
            changes["stop_after_refusals"] = self.stop_after_refusals or None
        return base.replace(**changes)


# -- files ---------------------------------------------------------------------------------------------


def load_config(path: str | os.PathLike[str]) -> Config:
    """The configuration in ``path``: a loopwatch TOML file, or a ``pyproject.toml``'s ``[tool.loopwatch]``.

    A ``pyproject.toml`` without that table gives the default configuration.
    """
    file = Path(path)
    data: Any = _read_toml(file)
    pyproject = file.name == PYPROJECT_FILE
    if pyproject:
        data = _pyproject_table(data)
        if data is None:
            return Config(source=str(file))
    try:
        return config_from_mapping(data, source=str(file))
    except ConfigError as exc:
        raise _located(exc, file, pyproject) from exc


def find_config(start: str | os.PathLike[str] = ".") -> Path | None:
    """The nearest ``loopwatch.toml``, or ``pyproject.toml`` with ``[tool.loopwatch]``, in ``start`` or above.

    In one directory ``loopwatch.toml`` wins; ``None`` when no directory up to the root has either.
    """
    found = find_config_file(start)
    return None if found is None else Path(found)


def _pyproject_declares(text: str, pyproject: str | os.PathLike[str]) -> bool:
    """Does this ``pyproject.toml`` text have a ``[tool.loopwatch]`` table? (A file that does not parse but mentions
    loopwatch is taken as meant for it: :func:`load_config` reports where it is broken.)"""
    if "loopwatch" not in text:
        return False
    try:
        data = _parse_toml(text, Path(pyproject))
    except ConfigError:
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "loopwatch" in tool


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {file}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {file}: {exc}") from exc
    return _parse_toml(text, file)


def _parse_toml(text: str, file: Path) -> dict[str, Any]:
    toml = _toml_module()
    try:
        data: dict[str, Any] = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from exc
    return data


def _toml_module() -> types.ModuleType:
    """``tomllib`` (Python 3.11+) or ``tomli``, imported only when a file is read."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise MissingExtraError("tomli", "toml") from exc
    module: types.ModuleType = tomli
    return module


def _pyproject_table(data: Mapping[str, Any]) -> Any:
    tool = data.get("tool")
    if not isinstance(tool, Mapping) or "loopwatch" not in tool:
        return None
    return tool["loopwatch"]


def _located(exc: ConfigError, file: Path, pyproject: bool) -> ConfigError:
    """The same error (same class and field) with the file and the setting's line named in its message."""
    message = str(exc)
    if exc.field is not None:
        message = message.removeprefix(f"{exc.field}: ")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    line = setting_line(text, exc.field, prefix=("tool", "loopwatch") if pyproject else ()) if exc.field else None
    return type(exc)(message, field=exc.field, path=str(file), line=line)


# -- the top-level table -------------------------------------------------------------------------------


def config_from_mapping(data: Mapping[str, Any], *, source: str | None = None) -> Config:
    """A validated :class:`Config` from parsed TOML (the keys of the module docstring's schema)."""
    table = as_table(data, "")
    check_keys(table, _TOP_KEYS, "", "setting")
    name = as_string(table.get("preset", "default"), "preset")
    base = _preset_policy(name)
    config = Config(
        preset=name,
        ladders=_ladders(table.get("ladders", {}), "ladders"),
        limits=_optional(table, "limits", _limits),
        messages=_messages(table.get("messages", {}), "messages"),
        tools=_tools(table.get("tools", {}), "tools"),
        ignore_keys=_optional(table, "ignore_keys", as_strings),
        reset_on_user=_optional(table, "reset_on_user", as_bool),
        hard_evidence=_optional(table, "hard_evidence", as_bool),
        stop_after_refusals=_optional(table, "stop_after_refusals", as_refusals),
        detectors=detector_overrides(table.get("detectors", {}), "detectors", base),
        source=source,
    )
    hard = base.hard_evidence if config.hard_evidence is None else config.hard_evidence
    check_restrike(config.ladders, config.tools, hard_evidence=hard)
    return config


def _optional(table: Mapping[str, Any], key: str, parse: Callable[[Any, str], Any]) -> Any:
    return parse(table[key], key) if key in table else None


def _preset_policy(name: str) -> Policy:
    factory = PRESETS.get(name)
    if factory is None:
        raise UnknownPresetError(unknown(name, PRESETS, "preset"), field="preset")
    return factory()


# -- ladders -------------------------------------------------------------------------------------------


def _ladders(value: Any, path: str) -> dict[str, Ladder]:
    table = as_table(value, path)
    for pattern in table:
        REGISTRY.get(pattern, field=join(path, pattern), escalated=True)
    return {pattern: _ladder(spec, join(path, pattern)) for pattern, spec in table.items()}


def _ladder(value: Any, path: str) -> Ladder:
    table = as_table(value, path)
    check_keys(table, _LADDER_KEYS, path, "ladder setting")
    renotify = as_bool(table.get("renotify", False), join(path, "renotify"))
    metric = typing.cast(Metric, as_choice(table.get("metric", "count"), _METRICS, join(path, "metric")))
    restrike = as_positive_int(table["restrike"], join(path, "restrike")) if "restrike" in table else None
    if "rungs" in table:
        both = [key for key in _THRESHOLD_KEYS if key in table]
        if both:
            message = f"rungs lists every rung: leave out {listing(both)} (or write the ladder without rungs)"
            raise ConfigError(message, field=join(path, both[0]))
        rungs = _rungs(table["rungs"], join(path, "rungs"))
        try:
            return Ladder(rungs, renotify=renotify, metric=metric, restrike=restrike)
        except ValueError as exc:
            reason = exc.reason if isinstance(exc, ConfigError) else exc
            raise ConfigError(f"{reason}", field=join(path, "rungs")) from exc
    nudge = _nudges(table["nudge"], join(path, "nudge")) if "nudge" in table else None
    block = as_positive_int(table["block"], join(path, "block")) if "block" in table else None
    stop = as_positive_int(table["stop"], join(path, "stop")) if "stop" in table else None
    try:
        return Ladder.of(nudge=nudge, block=block, stop=stop, renotify=renotify, metric=metric, restrike=restrike)
    except ValueError as exc:
        reason = exc.reason if isinstance(exc, ConfigError) else exc
        raise ConfigError(f"{reason} (nudge={nudge}, block={block}, stop={stop})", field=path) from exc


def _rungs(value: Any, path: str) -> tuple[Rung, ...]:
    if not isinstance(value, list):
        raise expected("an array of rung tables", value, path)
    return tuple(_rung(item, join(path, str(number))) for number, item in enumerate(value))


def _rung(value: Any, path: str) -> Rung:
    """One rung: ``at`` and ``action`` (required), ``message``, ``reason``, ``status``, ``partial``."""
    table = as_table(value, path)
    check_keys(table, _RUNG_KEYS, path, "rung setting")
    for key in ("at", "action"):
        if key not in table:
            required = listing(("at", "action"))
            raise ConfigError(f"a rung needs {key!r} ({required} are required)", field=join(path, key))
    action = typing.cast(Action, as_choice(table["action"], _RUNG_ACTIONS, join(path, "action")))
    texts = {key: as_string(table[key], join(path, key)) for key in ("message", "reason", "status") if key in table}
    return Rung(
        as_positive_int(table["at"], join(path, "at")),
        action,
        message=texts.get("message"),
        reason=texts.get("reason"),
        status=texts.get("status"),
        partial=as_bool(table.get("partial", False), join(path, "partial")),
    )


def _nudges(value: Any, path: str) -> int | list[int]:
    if isinstance(value, list):
        return [as_positive_int(item, path) for item in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return as_positive_int(value, path)
    raise expected("a positive integer or a list of them", value, path)


# -- limits --------------------------------------------------------------------------------------------


def _limits(value: Any, path: str) -> Limits:
    table = as_table(value, path)
    check_keys(table, _LIMIT_KEYS, path, "limit")
    if "cost_warn_at" in table and "max_cost" not in table:
        raise ConfigError("cost_warn_at needs max_cost in the same table", field=join(path, "cost_warn_at"))
    limits = Limits()
    for key in _LIMIT_KEYS:
        if key in table and key != "cost_warn_at":
            limits = limits | _limit(table, key, path)
    return limits


def _limit(table: Mapping[str, Any], key: str, path: str) -> Limit:
    where = join(path, key)
    if key == "max_runtime":
        return max_runtime(as_positive_number(table[key], where))
    if key == "max_cost":
        return max_cost(as_positive_number(table[key], where), warn_at=_warn_at(table, path))
    return _INT_LIMITS[key](as_positive_int(table[key], where))


def _warn_at(table: Mapping[str, Any], path: str) -> float | None:
    value = table.get("cost_warn_at", _DEFAULT_WARN_AT)
    if value is False:
        return None
    where = join(path, "cost_warn_at")
    share = as_positive_number(value, where)
    if share >= 1:
        raise expected("a share of max_cost between 0 and 1 (or false)", value, where)
    return share


# -- messages ------------------------------------------------------------------------------------------


def _messages(value: Any, path: str) -> dict[str, str | Mapping[int | str, str]]:
    table = as_table(value, path)
    for pattern in table:
        REGISTRY.get(pattern, field=join(path, pattern))
    out: dict[str, str | Mapping[int | str, str]] = {}
    for pattern, entry in table.items():
        where = join(path, pattern)
        out[pattern] = entry if isinstance(entry, str) else _message_levels(entry, where)
    return out


def _message_levels(value: Any, path: str) -> dict[int | str, str]:
    if not isinstance(value, Mapping):
        raise expected("a template string or a table of templates by level", value, path)
    levels: dict[int | str, str] = {}
    for key, text in value.items():
        where = join(path, str(key))
        levels[_message_level(key, where)] = as_string(text, where)
    return levels


def _message_level(key: Any, path: str) -> int | str:
    if isinstance(key, int) and not isinstance(key, bool) and key >= 1:
        return key
    if isinstance(key, str) and key.isdigit() and int(key) >= 1:
        return int(key)
    if isinstance(key, str) and key in _MESSAGE_ACTIONS:
        return key
    levels = f"a level number (1, 2, ...) or one of {listing(_MESSAGE_ACTIONS)}"
    raise ConfigError(f"expected {levels}, got {key!r}{did_you_mean(str(key), _MESSAGE_ACTIONS)}", field=path)


# -- tools ---------------------------------------------------------------------------------------------


def _tools(value: Any, path: str) -> dict[str, ToolSettings]:
    table = as_table(value, path)
    return {name: _tool(spec, join(path, name)) for name, spec in table.items()}


def _tool(value: Any, path: str) -> ToolSettings:
    table = as_table(value, path)
    check_keys(table, _TOOL_KEYS, path, "tool setting")
    return ToolSettings(
        exempt=as_bool(table.get("exempt", False), join(path, "exempt")),
        ignore_keys=as_strings(table.get("ignore_keys", []), join(path, "ignore_keys")),
        keep_keys=as_strings(table["keep_keys"], join(path, "keep_keys")) if "keep_keys" in table else None,
        ladders=_ladders(table.get("ladders", {}), join(path, "ladders")),
    )
