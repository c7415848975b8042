"""A configuration's ``[detectors.NAME]`` tables: parameters of the preset's rules, checked against each rule's
constructor (names, types, ranges) before the rule is rebuilt with them; ``enabled = false`` drops a rule, and
``enabled = true`` brings back one the preset retired."""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

from ._config_values import as_bool, as_table, check_keys, did_you_mean, expected, join, listing
from .core._configured import constructor_hints, constructor_signature
from .core._policy import Policy
from .core.detectors._base import Detector
from .errors import ConfigError

ENABLED: Final = "enabled"
"""The key that turns a rule off."""

Overrides = Mapping[str, Mapping[str, Any]]
"""Validated parameter overrides by rule name."""


def detector_overrides(value: Any, path: str, base: Policy) -> dict[str, dict[str, Any]]:
    """Validated parameter overrides by detector name: names of ``base``'s detectors, and of the rules it retired
    (:attr:`~loopwatch.core.Policy.retired`), which only ``enabled = true`` brings back."""
    table = as_table(value, path)
    by_name = {det.name: det for det in base.detectors}
    retired = {gone.detector.name: gone.detector for gone in base.retired if gone.detector.name not in by_name}
    out: dict[str, dict[str, Any]] = {}
    for name, spec in table.items():
        where = join(path, name)
        if name in retired:
            params = _detector_params(retired[name], spec, where)
            if params.get(ENABLED) is not True:
                raise ConfigError(
                    f"preset {base.name!r} no longer holds {name!r}: `enabled = true` brings it back", field=where
                )
            out[name] = params
            continue
        if name not in by_name:
            hint = did_you_mean(name, {**by_name, **retired})
            also = f"; retired, brought back by `enabled = true`: {listing(retired)}" if retired else ""
            message = f"preset {base.name!r} has no detector {name!r}{hint} (its detectors: {listing(by_name)}{also})"
            raise ConfigError(message, field=where)
        out[name] = _detector_params(by_name[name], spec, where)
    return out


def _detector_params(detector: Detector[Any], value: Any, path: str) -> dict[str, Any]:
    table = as_table(value, path)
    params = parameters_of(type(detector))
    check_keys(table, (ENABLED, *params), path, f"{type(detector).__name__} parameter")
    hints = _type_hints(type(detector))
    out: dict[str, Any] = {}
    for key, raw in table.items():
        where = join(path, key)
        if key == ENABLED:
            out[key] = as_bool(raw, where)
        else:
            out[key] = _param(raw, hints.get(key), params[key].default, where)
    try:
        rebuilt(detector, _without_enabled(out))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid parameters {_without_enabled(out)}: {exc}", field=path) from exc
    return out


def apply_overrides(
    detectors: Iterable[Detector[Any]], overrides: Overrides, retired: Iterable[Detector[Any]] = ()
) -> tuple[Detector[Any], ...]:
    """``detectors`` with their overrides applied (``enabled = false`` drops one), then the ``retired`` rules that
    ``enabled = true`` brings back, with theirs."""
    kept = [d for d in detectors if overrides.get(d.name, {}).get(ENABLED, True) is not False]
    held = {detector.name for detector in kept}
    kept += [d for d in retired if overrides.get(d.name, {}).get(ENABLED) is True and d.name not in held]
    applied: list[Detector[Any]] = []
    for detector in kept:
        changes = _without_enabled(overrides.get(detector.name, {}))
        applied.append(rebuilt(detector, changes) if changes else detector)
    return tuple(applied)


def rebuilt(detector: Detector[Any], changes: Mapping[str, Any]) -> Detector[Any]:
    """A detector of the same class with its current parameters updated by ``changes``."""
    names = parameters_of(type(detector))
    current = {k: v for k, v in detector._params().items() if k in names}  # with what repr shows (an embedder)
    factory: Callable[..., Detector[Any]] = type(detector)
    return factory(**{**current, **changes})


def _without_enabled(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != ENABLED}


def parameters_of(cls: type[Detector[Any]]) -> dict[str, inspect.Parameter]:
    """The parameters a rule's constructor takes by name (what a configuration or a sweep may set)."""
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {name: p for name, p in constructor_signature(cls).parameters.items() if p.kind in kinds}


def _type_hints(cls: type[Detector[Any]]) -> dict[str, Any]:
    try:
        return constructor_hints(cls)
    except (NameError, TypeError):  # unresolvable annotations: check values against defaults only
        return {}


def _param(value: Any, hint: Any, default: Any, path: str) -> Any:
    if hint is not None and not _matches(value, hint):
        raise expected(_describe(hint), value, path)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_param_number(value, default, path)
    if type(value) is int and _wants_float(hint):
        return float(value)  # `similarity = 1` is 1.0, as a compiled rule keeps it (and shows it in its repr)
    return value


def _wants_float(hint: Any) -> bool:
    """Is ``hint`` ``float`` (or ``float | None``), not a type an int is also meant for?"""
    if hint is float:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arms = typing.get_args(hint)
        return float in arms and int not in arms
    return False


def _check_param_number(value: float, default: Any, path: str) -> None:
    """Finite, and positive (or >= 0 for parameters whose default is 0)."""
    if not math.isfinite(value):
        raise expected("a finite number", value, path)
    zero_ok = not isinstance(default, bool) and default == 0
    if value < 0 or (value == 0 and not zero_ok):
        raise expected("a number >= 0" if zero_ok else "a positive number", value, path)


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return any(value == arg and type(value) is type(arg) for arg in typing.get_args(hint))
    if origin is typing.Union or origin is types.UnionType:
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return f"one of {listing(typing.get_args(hint))}"
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_describe(arg) for arg in typing.get_args(hint) if arg is not type(None))
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))
