"""One error tree: every public exception class loopwatch defines is a ``LoopwatchError``, drawn in ``errors.py``'s
docstring, and every framework adapter's ``LoopStopped`` is a ``loopwatch.LoopStopped``, so one ``except`` catches a
stop from any framework."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import loopwatch
from loopwatch import errors
from loopwatch.adapters.claude_code import install_hooks, settings_path
from loopwatch.cli._report import HtmlReport
from loopwatch.core._chanting import ChantTracker
from loopwatch.core._limits import Limits, max_cost, max_iterations, max_runtime
from loopwatch.core._messages import Messages
from loopwatch.core._policy import Ladder, Rung
from loopwatch.core._verdict import Verdict
from loopwatch.core.detectors import (
    BehavioralDetector,
    DoomLoopDetector,
    ErrorRetryDetector,
    FailureStreakDetector,
    NoProgressDetector,
    RepeatDetector,
    SwarmDetector,
)
from loopwatch.core.detectors._cycle import CycleDetector
from loopwatch.core.detectors._failures import FeedbackRepeatDetector
from loopwatch.core.detectors._ledger import SelfReportDetector
from loopwatch.core.detectors._rerun import RerunDetector
from loopwatch.core.detectors._revisit import RevisitDetector
from loopwatch.core.detectors._text import SimilarTextDetector
from loopwatch.errors import LoopwatchError, MissingExtraError
from loopwatch.remote import ServiceGuard
from loopwatch.semantic import WordPieceTokenizer
from loopwatch.stores import MemoryStore
from loopwatch.stores.sqlite import SqliteStore

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
    assert {
        "loopwatch.errors",
        "loopwatch._session_backend",
        "loopwatch.adapters.claude_code",
        "loopwatch.cli._metrics",
    } <= (names)
    assert len(imported) > 80 and skipped == []  # the test environment has every extra
    found = _public_exceptions()
    assert {
        "loopwatch.errors.ConfigError",
        "loopwatch.errors.StoreError",
        "loopwatch._session_backend.JudgingError",
    } <= set(found)


def test_every_public_exception_class_is_a_loopwatch_error() -> None:
    outside = sorted(name for name, cls in _public_exceptions().items() if not issubclass(cls, LoopwatchError))
    assert outside == []


def test_the_tree_in_errors_docstring_names_every_public_error() -> None:
    doc = errors.__doc__ or ""
    missing = sorted({cls.__name__ for cls in _public_exceptions().values()} - set(doc.replace(".", " ").split()))
    assert missing == []


def _drawn_tree() -> dict[str, tuple[str | None, list[str]]]:
    """Each class drawn in ``loopwatch.errors``' docstring: (its parent in the drawing, the other bases marked)."""
    import re

    drawn: dict[str, tuple[str | None, list[str]]] = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^    ([│ ]*)(?:[├└]── )?(\w+)(?: \(([\w, ]+)\))?(?:\s|$)", line)
        if not found or not (found.group(2).endswith("Error") or found.group(2) == "LoopStopped"):
            continue
        depth = 0 if found.group(2) == "LoopwatchError" else len(found.group(1)) // 4 + 1
        parents[depth:] = [found.group(2)]
        parent = parents[depth - 1] if depth else None
        drawn[found.group(2)] = (parent, [b.strip() for b in (found.group(3) or "").split(",") if b.strip()])
    return drawn


def test_every_error_drawn_is_importable_from_loopwatch_errors_with_the_bases_drawn() -> None:
    # the tree is what users catch: each class in it can be named from loopwatch.errors (or, for the adapters' own,
    # their modules), and has the bases the drawing gives it
    import builtins

    drawn = _drawn_tree()
    assert len(drawn) == 23 and drawn["ConfigError"] == ("LoopwatchError", ["ValueError"])
    public = {cls.__name__: cls for cls in _public_exceptions().values()}
    for name, (parent, others) in drawn.items():
        cls = getattr(errors, name, None) or public.get(name)
        assert cls is not None, f"{name} is drawn but no public module has it"
        if parent is not None:
            assert public.get(parent, getattr(errors, parent, None)) in cls.__bases__, (name, parent)
        for other in others:
            assert getattr(builtins, other) in cls.__mro__, (name, other)
    for name in ("DamagedStateError", "JudgeAnswerError", "JudgingError"):  # raised to users, defined elsewhere
        assert name in errors.__all__ and issubclass(getattr(errors, name), LoopwatchError)


def test_errors_that_were_value_errors_still_are() -> None:
    from loopwatch._session_backend import JudgingError
    from loopwatch.adapters.claude_code import HookInputError, SettingsError
    from loopwatch.server.errors import ApiError

    assert issubclass(HookInputError, ValueError) and issubclass(HookInputError, LoopwatchError)
    for cls in (SettingsError, ApiError, JudgingError):
        assert issubclass(cls, LoopwatchError)
    for value_error in (errors.ConfigError, errors.EventError, errors.StateError, errors.UnknownPresetError):
        assert issubclass(value_error, ValueError)


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


BAD_CONSTRUCTORS: list[tuple[str, Callable[[], object], str]] = [
    ("Rung at", lambda: Rung(0, "nudge"), "at"),
    ("Rung action", lambda: Rung(1, "explode"), "action"),  # type: ignore[arg-type]
    ("Ladder thresholds", lambda: Ladder.of(nudge=5, block=3), "rungs"),
    ("Ladder de-escalating", lambda: Ladder((Rung(1, "stop"), Rung(2, "nudge"))), "rungs"),
    ("Ladder restrike", lambda: Ladder.of(nudge=2, restrike=0), "restrike"),
    ("max_iterations", lambda: max_iterations(0), "max_iterations"),
    ("max_runtime", lambda: max_runtime(float("inf")), "max_runtime"),
    ("max_cost warn_at", lambda: max_cost(5, warn_at=1.5), "warn_at"),
    ("HtmlReport top", lambda: HtmlReport(top=0), "top"),
    ("ChantTracker threshold", lambda: ChantTracker(threshold=1), "threshold"),
    ("ChantTracker max_period", lambda: ChantTracker(chunk_size=50, max_period=10), "max_period"),
    ("WordPieceTokenizer max_length", lambda: WordPieceTokenizer({"[UNK]": 0}, max_length=1), "max_length"),
    ("WordPieceTokenizer vocab", lambda: WordPieceTokenizer({"a": 1}), "vocab"),
    ("WordPieceTokenizer vocab path", lambda: WordPieceTokenizer("vocab.txt"), "vocab"),  # type: ignore[arg-type]
    ("cycle periods", lambda: CycleDetector(min_period=3, max_period=2), "cycle.min_period"),
    ("cycle longest period", lambda: CycleDetector(max_period=100_000), "cycle.max_period"),
    ("Guard max_sessions 0", lambda: loopwatch.Guard(max_sessions=0), "max_sessions"),  # detection silently off
    ("Guard max_sessions text", lambda: loopwatch.Guard(max_sessions="x"), "max_sessions"),  # type: ignore[arg-type]
    ("Guard max_swarms", lambda: loopwatch.Guard(max_swarms=True), "max_swarms"),
    ("Guard store", lambda: loopwatch.Guard(store=5), "store"),  # type: ignore[arg-type]
    ("Guard policy as a name", lambda: loopwatch.Guard(policy="default"), "policy"),  # type: ignore[arg-type]
    ("Guard preset", lambda: loopwatch.Guard(5), "preset"),  # type: ignore[arg-type]
    ("Guard sinks", lambda: loopwatch.Guard(sinks=5), "sinks"),  # type: ignore[arg-type]
    ("Guard sink", lambda: loopwatch.Guard(sinks=[print]), "sinks"),  # a callable, not a sink
    ("Guard listener", lambda: loopwatch.Guard(listeners=["x"]), "listeners"),  # type: ignore[list-item]
    ("ServiceGuard port", lambda: ServiceGuard("http://x:abc"), "url"),
    ("Rung partial", lambda: Rung(1, "nudge", partial="x"), "partial"),  # type: ignore[arg-type]
    ("Rung at text", lambda: Rung("1", "nudge"), "at"),  # type: ignore[arg-type]
    ("Ladder metric", lambda: Ladder((), metric="x"), "metric"),  # type: ignore[arg-type]
    ("Ladder rungs", lambda: Ladder((1, 2)), "rungs"),  # type: ignore[arg-type]
    ("Policy refusals", lambda: loopwatch.preset("default").replace(stop_after_refusals=-1), "stop_after_refusals"),
    ("Policy limits", lambda: loopwatch.preset("default").replace(limits=5), "limits"),
    ("Policy rules", lambda: loopwatch.preset("default").replace(detectors=(5,)), "detectors"),
    ("Policy nudge_role", lambda: loopwatch.preset("default").replace(nudge_role="bot"), "nudge_role"),
    ("ToolSettings exempt", lambda: loopwatch.ToolSettings(exempt="x"), "exempt"),  # type: ignore[arg-type]
    ("ToolSettings keys", lambda: loopwatch.ToolSettings(ignore_keys="path"), "ignore_keys"),  # type: ignore[arg-type]
    ("MemoryStore ttl", lambda: MemoryStore(ttl=-1), "store"),
    ("ServiceGuard port range", lambda: ServiceGuard("http://x:99999"), "url"),
    ("ServiceGuard timeout", lambda: ServiceGuard("http://x:8080", timeout=-1), "timeout"),
    ("self_report threshold", lambda: SelfReportDetector(threshold=0), "self_report.threshold"),
    ("similar_text metric", lambda: SimilarTextDetector(metric="cosine"), "metric"),  # type: ignore[arg-type]
    ("similar_text mode", lambda: SimilarTextDetector(mode="sometimes"), "mode"),  # type: ignore[arg-type]
    ("feedback_repeat threshold", lambda: FeedbackRepeatDetector(threshold=1), "feedback_repeat.threshold"),
    ("rerun threshold", lambda: RerunDetector(threshold=1), "rerun.threshold"),
    ("revisit threshold", lambda: RevisitDetector(threshold=1), "revisit.threshold"),
    # a rule's counts and shares: a negative count or a similarity above 1 quietly turned a rule off before
    ("error_retry threshold", lambda: ErrorRetryDetector(threshold=-1), "error_retry.threshold"),
    ("error_retry similarity", lambda: ErrorRetryDetector(similarity=7.0), "error_retry.similarity"),
    ("error_retry tools", lambda: ErrorRetryDetector(tools=-1), "error_retry.tools"),
    ("error_retry variants", lambda: ErrorRetryDetector(variant_similarity=0), "error_retry.variant_similarity"),
    ("feedback_repeat similarity", lambda: FeedbackRepeatDetector(similarity=1.5), "feedback_repeat.similarity"),
    ("no_progress near", lambda: NoProgressDetector(near=float("nan")), "no_progress.near"),
    ("no_progress threshold", lambda: NoProgressDetector(seen_threshold=0), "no_progress.seen_threshold"),
    ("repeat loose_min_chars", lambda: RepeatDetector(loose_min_chars=-5), "repeat.loose_min_chars"),
    ("swarm threshold", lambda: SwarmDetector(threshold=0), "swarm.threshold"),
    ("failure_streak similarity", lambda: FailureStreakDetector(similarity=2.0), "failure_streak.similarity"),
    ("similar_text threshold", lambda: SimilarTextDetector(threshold=85.0), "similar_text.threshold"),
    ("similar_text window", lambda: SimilarTextDetector(window=0), "similar_text.window"),
    ("similar_text sketch", lambda: SimilarTextDetector(sketch=0), "similar_text.sketch"),
    ("behavioral threshold", lambda: BehavioralDetector(threshold=75.0), "behavioral.threshold"),
    ("doom_loop window", lambda: DoomLoopDetector(window=0), "doom_loop.window"),
    ("settings scope", lambda: settings_path("global"), "scope"),
    ("install_hooks handler", lambda: install_hooks({}), "command"),
    # wrong types: each a ConfigError naming the argument, where TypeError or AttributeError came from inside
    ("Ladder rungs not a tuple", lambda: Ladder(3), "rungs"),  # type: ignore[arg-type]
    ("Ladder nudge a fraction", lambda: Ladder.of(nudge=3.5), "at"),  # type: ignore[arg-type]
    ("Policy name", lambda: loopwatch.Policy(3, (), {}), "name"),  # type: ignore[arg-type]
    ("Policy rules not a tuple", lambda: loopwatch.Policy("p", 3, {}), "detectors"),  # type: ignore[arg-type]
    ("Policy ladders", lambda: loopwatch.Policy("p", (), 1), "ladders"),  # type: ignore[arg-type]
    ("Policy tools", lambda: loopwatch.Policy("p", (), {}, tools=3), "tools"),  # type: ignore[arg-type]
    ("Policy reset_on_user", lambda: loopwatch.Policy("p", (), {}, reset_on_user=1), "reset_on_user"),  # type: ignore[arg-type]
    ("Policy ignore_keys", lambda: loopwatch.Policy("p", (), {}, ignore_keys="id"), "ignore_keys"),  # type: ignore[arg-type]
    ("Messages", lambda: Messages(3), "messages"),  # type: ignore[arg-type]
    ("Limits", lambda: Limits("max_iterations"), "limits"),  # type: ignore[arg-type]
    ("SqliteStore path", lambda: SqliteStore(3), "store"),  # type: ignore[arg-type]
    ("store URL", lambda: loopwatch.Guard(store="redis://[::1/0"), "store"),
    # more wrong types and values: each raised TypeError, AttributeError or a bare ValueError from inside before
    ("ToolSettings keys not a collection", lambda: loopwatch.ToolSettings(ignore_keys=5), "ignore_keys"),  # type: ignore[arg-type]
    ("ToolSettings ladders", lambda: loopwatch.ToolSettings(ladders=5), "ladders"),  # type: ignore[arg-type]
    ("Policy keys not a collection", lambda: loopwatch.Policy("p", (), {}, ignore_keys=5), "ignore_keys"),  # type: ignore[arg-type]
    ("Engine policy", lambda: loopwatch.Engine(5), "policy"),  # type: ignore[arg-type]
    ("preset name", lambda: loopwatch.preset([]), "preset"),  # type: ignore[arg-type]
    (
        "ServiceSettings workers NaN",
        lambda: _made("loopwatch.server", "ServiceSettings", workers=float("nan")),
        "workers",
    ),
    (
        "ServiceSettings max_body infinite",
        lambda: _made("loopwatch.server", "ServiceSettings", max_body=float("inf")),
        "max_body",
    ),
    ("ServiceSettings rate text", lambda: _made("loopwatch.server", "ServiceSettings", rate="fast"), "rate"),
    ("ServiceSettings port", lambda: _made("loopwatch.server", "ServiceSettings", port=70_000), "port"),
    ("SqliteStore ttl text", lambda: SqliteStore("loops.db", ttl="1h"), "store"),  # type: ignore[arg-type]
    ("SqliteStore synchronous", lambda: SqliteStore("loops.db", synchronous=1), "store"),  # type: ignore[arg-type]
    (
        "RedisStore options",
        lambda: _made("loopwatch.stores.redis", "RedisStore", "redis://localhost:1/0", options="x"),
        "store",
    ),
    ("RedisStore URL", lambda: _made("loopwatch.stores.redis", "RedisStore", 5), "store"),
    (
        "WebhookSink headers",
        lambda: _made("loopwatch.sinks", "WebhookSink", "http://127.0.0.1:1/", headers=5),
        "headers",
    ),
    ("JsonlAuditSink path", lambda: _made("loopwatch.sinks", "JsonlAuditSink", 5), "path"),
    ("MarkdownMemory folder", lambda: _made("loopwatch.memory", "MarkdownMemory", 5), "folder"),
    ("Redactor keys", lambda: _made("loopwatch.redact", "Redactor", 5), "extra_keys"),
    ("MethodEmbedder method", lambda: _made("loopwatch.semantic", "MethodEmbedder", object(), 5), "method"),
    ("MiniLMEmbedder threads", lambda: _made("loopwatch.semantic", "MiniLMEmbedder", threads=10**30), "threads"),
    (
        "VerdictSpans tracer_provider",
        lambda: _made("loopwatch.telemetry", "VerdictSpans", tracer_provider=5),
        "tracer_provider",
    ),
]


def _made(module: str, name: str, *args: object, **kwargs: object) -> object:
    """``module.name(*args, **kwargs)``, the module imported when the case runs (some need an extra's module)."""
    made: object = getattr(importlib.import_module(module), name)(*args, **kwargs)
    return made


def _numeric_settings() -> list[tuple[type, str]]:
    """(rule class, setting) for each setting of a rule (and the chant tracker) that takes a number, read from the
    constructor as its source writes it (also for a compiled class)."""
    import inspect

    from loopwatch.core import detectors
    from loopwatch.core._configured import constructor_signature

    exported = [getattr(detectors, name) for name in detectors.__all__]
    classes = [
        c for c in exported if inspect.isclass(c) and issubclass(c, detectors.Detector) and c is not detectors.Detector
    ]
    found = []
    for cls in [*classes, ChantTracker]:
        for parameter in constructor_signature(cls).parameters.values():
            default = parameter.default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                found.append((cls, parameter.name))
    return found


NUMERIC_SETTINGS = _numeric_settings()


def test_the_rules_numeric_settings_are_found() -> None:
    assert len(NUMERIC_SETTINGS) > 50 and (CycleDetector, "max_period") in NUMERIC_SETTINGS


@pytest.mark.parametrize(("cls", "setting"), NUMERIC_SETTINGS, ids=[f"{c.__name__}.{s}" for c, s in NUMERIC_SETTINGS])
def test_a_rule_s_number_given_a_text_or_nan_is_refused_naming_it(cls: type, setting: str) -> None:
    # a text or a NaN raised TypeError from a comparison inside, or was accepted and turned the rule off. From source
    # each is a ConfigError naming the setting; a compiled constructor refuses a value of the wrong type itself, with
    # mypyc's TypeError ("int object expected; got str"), before the rule's own check runs
    from loopwatch.core._configured import is_compiled

    for bad in ("3", float("nan")):
        try:
            cls(**{setting: bad})
        except errors.ConfigError as exc:
            assert exc.field is not None and exc.field.endswith(setting)
        except TypeError as exc:
            assert is_compiled(cls) and "expected" in str(exc), exc
        else:
            pytest.fail(f"{cls.__name__}({setting}={bad!r}) was accepted")


@pytest.mark.parametrize(
    ("make", "field"), [case[1:] for case in BAD_CONSTRUCTORS], ids=[c[0] for c in BAD_CONSTRUCTORS]
)
def test_a_bad_constructor_argument_is_a_config_error_naming_it(make: Callable[[], object], field: str) -> None:
    with pytest.raises(errors.ConfigError) as caught:
        make()
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert isinstance(caught.value, ValueError)  # code catching ValueError keeps working


def test_a_ladder_s_error_read_from_a_file_names_the_ladder_once(tmp_path: Path) -> None:
    from loopwatch.config import load_config

    config = tmp_path / "loopwatch.toml"
    config.write_text("[ladders.repeat]\nnudge = 5\nblock = 3\n", encoding="utf-8")
    with pytest.raises(errors.ConfigError) as caught:
        load_config(config)
    text = str(caught.value)
    assert "ladders.repeat: ladder thresholds must strictly increase, got [5, 3]" in text
    assert "rungs" not in text


def test_unreadable_judge_answers_and_chant_states_are_typed_errors() -> None:
    from loopwatch.core._judge import JudgeAnswer, JudgeAnswerError

    with pytest.raises(JudgeAnswerError) as answer:
        JudgeAnswer.of({"loop": "yes"})
    assert answer.value.field == "loop" and isinstance(answer.value, ValueError)
    with pytest.raises(JudgeAnswerError, match="confidence: must be a number from 0 to 1"):
        JudgeAnswer.of((True, 2))
    with pytest.raises(JudgeAnswerError, match="cannot read"):
        JudgeAnswer.of("perhaps")
    state = ChantTracker().to_json()
    with pytest.raises(errors.StateError, match="invalid ChantTracker state"):
        ChantTracker.from_json({**state, "v": 999})
    with pytest.raises(errors.StateError, match="invalid ChantTracker state"):
        ChantTracker.from_json({**state, "offset": "seven"})
    assert ChantTracker.from_json(state).to_json() == state


def test_the_errors_page_draws_the_same_tree() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text(encoding="utf-8")
    drawn = set(page.replace("(", " ").split())
    assert {cls.__name__ for cls in _public_exceptions().values()} <= drawn
    assert "except loopwatch.LoopStopped as stop:" in page
