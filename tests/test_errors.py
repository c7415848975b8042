"""One error tree: every public exception class loopwatch defines is a ``LoopwatchError``, drawn in ``errors.py``'s
docstring, and every framework adapter's ``LoopStopped`` is a ``loopwatch.LoopStopped``, so one ``except`` catches a
stop from any framework."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import loopwatch
from loopwatch import errors
from loopwatch.errors import LoopwatchError, MissingExtraError
from loopwatch.verdict import Verdict

ADAPTERS_WITH_A_STOP = ("langchain", "litellm", "autogen", "pydantic_ai", "crewai", "smolagents", "openai_agents")
FRAMEWORK_STOP = {  # the framework's own exception each adapter's stop also is (module, class)
    "openai_agents": ("agents.exceptions", "AgentsException"),
    "pydantic_ai": ("pydantic_ai.exceptions", "RunCancelled"),
    "smolagents": ("smolagents.utils", "AgentError"),
}


def _modules() -> tuple[list[ModuleType], list[str]]:
    """Every module of the package, imported; and those skipped because an optional extra is missing."""
    imported, skipped = [loopwatch], []
    for info in pkgutil.walk_packages(loopwatch.__path__, "loopwatch."):
        if info.name.endswith(".__main__"):  # runs the command line
            continue
        try:
            imported.append(importlib.import_module(info.name))
        except MissingExtraError:
            skipped.append(info.name)
        except ImportError as exc:  # a third-party module of an extra, not one of loopwatch's own
            if exc.name is None or exc.name.startswith("loopwatch"):
                raise
            skipped.append(info.name)
    return imported, skipped


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in _modules()[0]:
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_the_walk_finds_the_package_s_errors() -> None:
    imported, skipped = _modules()
    names = {module.__name__ for module in imported}
    assert {"loopwatch.errors", "loopwatch.stored", "loopwatch.adapters.claude_code", "loopwatch.metrics"} <= names
    assert len(imported) > 80 and skipped == []  # the test environment has every extra
    found = _public_exceptions()
    assert {"loopwatch.errors.ConfigError", "loopwatch.stores.StoreError", "loopwatch.stored.JudgingError"} <= set(
        found
    )


def test_every_public_exception_class_is_a_loopwatch_error() -> None:
    outside = sorted(name for name, cls in _public_exceptions().items() if not issubclass(cls, LoopwatchError))
    assert outside == []


def test_the_tree_in_errors_docstring_names_every_public_error() -> None:
    doc = errors.__doc__ or ""
    missing = sorted({cls.__name__ for cls in _public_exceptions().values()} - set(doc.replace(".", " ").split()))
    assert missing == []


def test_errors_that_were_value_errors_still_are() -> None:
    from loopwatch.adapters.claude_code import HookInputError, SettingsError
    from loopwatch.server.errors import ApiError
    from loopwatch.stored import JudgingError

    assert issubclass(HookInputError, ValueError) and issubclass(HookInputError, LoopwatchError)
    for cls in (SettingsError, ApiError, JudgingError):
        assert issubclass(cls, LoopwatchError)
    for cls in (errors.ConfigError, errors.EventError, errors.StateError, errors.UnknownPresetError):
        assert issubclass(cls, ValueError)


STOP = Verdict(action="stop", index=7, pattern="repeat", count=5, status="LOOP_DETECTED", reason="search x5")


@pytest.mark.parametrize("adapter", ADAPTERS_WITH_A_STOP)
def test_each_adapter_s_stop_is_a_loopwatch_loop_stopped(adapter: str) -> None:
    module = importlib.import_module(f"loopwatch.adapters.{adapter}")
    stopped = module.LoopStopped
    assert stopped is not errors.LoopStopped and issubclass(stopped, errors.LoopStopped)
    assert loopwatch.LoopStopped is errors.LoopStopped
    with pytest.raises(loopwatch.LoopStopped) as caught:
        raise stopped(STOP, "s-1")
    stop = caught.value
    assert type(stop) is stopped
    assert stop.verdict is STOP and stop.session == "s-1" and stop.status == "LOOP_DETECTED"
    assert str(stop) == "loopwatch: LOOP_DETECTED (repeat): search x5"
    if adapter in FRAMEWORK_STOP:  # and it is still its framework's exception
        where, name = FRAMEWORK_STOP[adapter]
        assert isinstance(stop, getattr(importlib.import_module(where), name))


def test_a_limit_s_stop_carries_the_limit_s_status() -> None:
    from loopwatch.adapters.openai_agents import LoopStopped

    verdict = Verdict(action="stop", status="MAX_ITERATIONS", reason="40 iterations reached the limit of 40")
    stop = LoopStopped(verdict, "s-2")
    assert stop.status == "MAX_ITERATIONS"
    assert str(stop) == "loopwatch: MAX_ITERATIONS: 40 iterations reached the limit of 40"
    bare = errors.LoopStopped(Verdict(action="stop"))
    assert bare.status == "LOOP_DETECTED" and bare.session is None and str(bare) == "loopwatch: LOOP_DETECTED: stopped"
