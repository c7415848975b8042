"""The public surface, pinned (as httpx's ``test_exported_members``): the exact ``loopwatch.__all__``, the exact
``__all__`` of each public subpackage and module users import from (the adapters, the stores, the sinks, the trace
formats, the rules, the embedders, the service, the command line's entry point), and the list of modules whose
dotted path has no private part. Adding or removing a public name, or a public module, is a change to this file:
a deliberate one, seen in review.

Inside each pinned module, every class and function it defines without a leading underscore is exported (nothing
is public by accident), and every exported name can be read from it.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

import loopwatch

PACKAGE = Path(loopwatch.__file__).parent

LOOPWATCH = [
    "LOOP_DETECTED",
    "PRESETS",
    "AsyncGuard",
    "ConfigError",
    "Engine",
    "Event",
    "EventError",
    "Guard",
    "InputError",
    "JudgeAnswer",
    "JudgeRequest",
    "Ladder",
    "Limits",
    "LoopJudge",
    "LoopStopped",
    "LoopwatchError",
    "Message",
    "Messages",
    "MissingExtraError",
    "Policy",
    "Reset",
    "Rung",
    "StateError",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "ToolSettings",
    "UnknownPresetError",
    "Usage",
    "Verdict",
    "__version__",
    "event_to_json",
    "max_consecutive_failures",
    "max_cost",
    "max_iterations",
    "max_runtime",
    "max_tokens",
    "parse_event",
    "preset",
]

FORMATS = (
    "anthropic",
    "autogen",
    "claude_code",
    "langfuse",
    "langsmith",
    "mini_swe_agent",
    "openai",
    "openai_responses",
    "openhands",
    "otel",
    "swe_agent",
    "tau_bench",
    "who_and_when",
)
"""The trace formats' modules (``loopwatch.formats.<name>``)."""

EXPORTS: dict[str, list[str]] = {
    # the command line: one entry point; its scans, evaluation and report are its own (loopwatch.cli._*)
    "loopwatch.cli": ["main"],
    # the framework adapters, one module per framework
    "loopwatch.adapters.autogen": [
        "DEFAULT_SESSION",
        "STOP_SOURCE",
        "LoopStopped",
        "LoopwatchAutoGen",
        "LoopwatchModelContext",
        "LoopwatchTermination",
        "LoopwatchWorkbench",
    ],
    "loopwatch.adapters.claude_agent_sdk": ["HOOK_EVENTS", "hook_callback", "hook_output", "loopwatch_hooks"],
    "loopwatch.adapters.claude_code": [
        "HOOK_EVENTS",
        "HookInputError",
        "SettingsError",
        "answer",
        "decode_input",
        "default_store_path",
        "event_of",
        "handle",
        "hook_command",
        "install_hooks",
        "is_loopwatch_hook",
        "main",
        "response_for",
        "response_text",
        "run_hook",
        "session_of",
        "settings_path",
        "stop_reason",
        "uninstall_hooks",
    ],
    "loopwatch.adapters.claude_code_daemon": ["main", "server_status", "stop_servers"],
    "loopwatch.adapters.claude_code_hook": ["IDLE_EXIT", "TIMEOUT", "main", "runtime_dir"],
    "loopwatch.adapters.claude_code_relay": ["TIMEOUT", "main"],
    "loopwatch.adapters.claude_code_server": [
        "DEFAULT_PORT",
        "PATH",
        "HookServer",
        "hook_answer",
        "make_server",
        "serve",
    ],
    "loopwatch.adapters.crewai": ["DEFAULT_SESSION", "CrewRun", "LoopStopped", "LoopwatchCrewAI"],
    "loopwatch.adapters.langchain": ["LoopStopped", "LoopwatchMiddleware", "LoopwatchState", "stop_verdict"],
    "loopwatch.adapters.litellm": ["MARK", "LoopStopped", "LoopwatchGuardrail", "default_session"],
    "loopwatch.adapters.mcp": [
        "DEFAULT_SESSION",
        "GRACE",
        "SERVER_GONE",
        "McpProxy",
        "main",
        "refusal_text",
        "result_text",
        "run_proxy",
        "stop_text",
    ],
    "loopwatch.adapters.openai_agents": ["DEFAULT_SESSION", "LoopStopped", "LoopwatchGuard", "LoopwatchHooks"],
    "loopwatch.adapters.pydantic_ai": ["DEFAULT_SESSION", "LoopStopped", "LoopwatchCapability"],
    "loopwatch.adapters.smolagents": ["DEFAULT_SESSION", "LoopStopped", "LoopwatchAgent", "LoopwatchCallback"],
    # the detection core: events, features, rules, policy, engine (its modules are private)
    "loopwatch.core": [
        "ACTIONS",
        "Action",
        "ChantHit",
        "ChantTracker",
        "Decision",
        "EVENT_TYPES",
        "Engine",
        "Evaluation",
        "Event",
        "JudgeAnswer",
        "JudgeRequest",
        "LOOP_DETECTED",
        "Ladder",
        "Limits",
        "LoopJudge",
        "Message",
        "Messages",
        "Pattern",
        "Policy",
        "REGISTRY",
        "Registry",
        "Reset",
        "Retired",
        "Role",
        "Rung",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "ToolSettings",
        "Usage",
        "Verdict",
        "event_to_json",
        "max_consecutive_failures",
        "max_cost",
        "max_iterations",
        "max_runtime",
        "max_tokens",
        "parse_event",
    ],
    # the package's own public modules
    "loopwatch.config": ["CONFIG_FILE", "Config", "PATTERNS", "config_from_mapping", "find_config", "load_config"],
    "loopwatch.memory": [
        "DEFAULT_FOLDER",
        "ForceDoneMemory",
        "Learning",
        "MarkdownMemory",
        "Memory",
        "RecallingGuard",
        "SinkMemory",
        "explain_force_done",
        "parse_learnings",
    ],
    "loopwatch.readers": [
        "ErrorHandler",
        "FORMATS",
        "Format",
        "Run",
        "expand_paths",
        "open_text",
        "read_file",
        "read_meter",
        "read_runs",
        "run_id_from_path",
        "sniff_format",
        "step_event",
        "trajectory_run",
    ],
    "loopwatch.redact": [
        "CYCLE",
        "DEFAULT_MAX_DEPTH",
        "DEFAULT_MAX_STRING",
        "KEY_FORMATS",
        "REDACTED",
        "REPR_LIMIT",
        "Redactor",
        "SECRET_KEY_WORDS",
        "TRUNCATED",
        "redact",
    ],
    "loopwatch.remote": [
        "SERVICE_TOKEN_ENV",
        "SERVICE_URL_ENV",
        "ServiceError",
        "ServiceGuard",
        "service_guard_from_env",
    ],
    "loopwatch.telemetry": ["SPAN_EVENT", "VerdictSpans", "instrument", "verdict_attributes", "work_context"],
    # the stores
    "loopwatch.stores": [
        "NO_STATE",
        "AsyncMemoryStore",
        "AsyncStore",
        "MemoryStore",
        "Store",
        "StoreError",
        "SwarmTally",
        "Versioned",
        "async_store_from_url",
        "from_storable",
        "new_token",
        "register",
        "storable",
        "store_from_url",
    ],
    "loopwatch.stores.redis": ["AsyncRedisStore", "RedisStore", "async_from_url", "from_url"],
    "loopwatch.stores.sqlite": ["SCHEMA_VERSION", "AsyncSqliteStore", "SqliteStore", "async_from_url", "from_url"],
    # the sinks
    "loopwatch.sinks": [
        "ACTIONS",
        "FORMATS",
        "AuditWriteError",
        "CallbackSink",
        "JsonlAuditSink",
        "MemorySink",
        "Sink",
        "WebhookFormat",
        "WebhookSink",
        "action_of",
        "summarize",
    ],
    # the trace formats' registry (each format module has NAMES, sniff and read)
    "loopwatch.formats": ["REGISTRY", "FormatReader", "load", "modules", "reader"],
    # the rules
    "loopwatch.core.detectors": [
        "BehavioralDetector",
        "ChantingDetector",
        "CycleDetector",
        "Detector",
        "DoomLoopDetector",
        "ErrorRetryDetector",
        "FailureStreakDetector",
        "FeedbackRepeatDetector",
        "Finding",
        "MonologueDetector",
        "NoProgressDetector",
        "RepeatDetector",
        "RephraseDetector",
        "RerunDetector",
        "RevisitDetector",
        "SelfReportDetector",
        "SimilarTextDetector",
        "Step",
        "SwarmDetector",
        "TestFixDetector",
        "behavioral",
        "chanting",
        "cycle",
        "doom_loop",
        "error_retry",
        "failure_streak",
        "feedback_repeat",
        "monologue",
        "no_progress",
        "repeat",
        "rephrase",
        "rerun",
        "revisit",
        "self_report",
        "similar_text",
        "swarm",
        "test_fix_cycle",
    ],
    # the embedders of the rephrase rule
    "loopwatch.semantic": [
        "MAX_LENGTH",
        "MODEL_DISTRIBUTION",
        "MODEL_NAME",
        "CacheInfo",
        "CachedEmbedder",
        "CallableEmbedder",
        "Embedder",
        "EmbeddingError",
        "EmbeddingInputError",
        "EncodeEmbedder",
        "MethodEmbedder",
        "MiniLMEmbedder",
        "OpenAIEmbedder",
        "Vector",
        "WordPieceTokenizer",
        "builtin_embedder",
        "cosine",
        "embedder_from",
        "packaged_model_path",
        "shared_minilm",
        "text_key",
        "to_vector",
        "to_vectors",
    ],
    # the service
    "loopwatch.server": ["ServiceSettings", "Tokens", "create_app", "serve"],
    # the service's errors (ApiError, in the error tree)
    "loopwatch.server.errors": ["CODES", "ApiError"],
    # the error tree (drawn in its docstring)
    "loopwatch.errors": [
        "ConfigError",
        "DamagedStateError",
        "EventError",
        "InputError",
        "JudgeAnswerError",
        "JudgingError",
        "LoopStopped",
        "LoopwatchError",
        "MissingExtraError",
        "OtherLayoutError",
        "StateError",
        "StoreError",
        "UnknownPresetError",
        "UnsupportedError",
    ],
    # the adapters' package imports nothing: each framework's module is imported by name
    "loopwatch.adapters": [],
    # each trace format: its reader and the test that tells its files (loopwatch.formats.reader(NAME) finds them)
    **{f"loopwatch.formats.{name}": ["read", "sniff"] for name in FORMATS},
}

PUBLIC_MODULES = {
    "": [
        "loopwatch",
        "loopwatch.config",
        "loopwatch.errors",
        "loopwatch.memory",
        "loopwatch.readers",
        "loopwatch.redact",
        "loopwatch.remote",
        "loopwatch.sinks",
        "loopwatch.telemetry",
    ],
    "adapters": [
        "loopwatch.adapters",
        "loopwatch.adapters.autogen",
        "loopwatch.adapters.claude_agent_sdk",
        "loopwatch.adapters.claude_code",
        "loopwatch.adapters.claude_code_daemon",
        "loopwatch.adapters.claude_code_hook",
        "loopwatch.adapters.claude_code_relay",
        "loopwatch.adapters.claude_code_server",
        "loopwatch.adapters.crewai",
        "loopwatch.adapters.langchain",
        "loopwatch.adapters.litellm",
        "loopwatch.adapters.mcp",
        "loopwatch.adapters.openai_agents",
        "loopwatch.adapters.pydantic_ai",
        "loopwatch.adapters.smolagents",
    ],
    "cli": ["loopwatch.cli"],
    "core": ["loopwatch.core", "loopwatch.core.detectors"],
    "formats": ["loopwatch.formats", *(f"loopwatch.formats.{name}" for name in FORMATS)],
    "semantic": ["loopwatch.semantic"],
    "server": ["loopwatch.server", "loopwatch.server.errors"],
    "stores": ["loopwatch.stores", "loopwatch.stores.redis", "loopwatch.stores.sqlite"],
}
"""Every module whose dotted path has no part starting with an underscore, by subpackage ("" is the package root)."""


def _module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _defined_but_not_exported(module: ModuleType) -> list[str]:
    """The classes and functions ``module`` defines without a leading underscore and leaves out of ``__all__``."""
    exported = set(getattr(module, "__all__", ()))
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
        and name not in exported
    )


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def test_the_package_exports_exactly_these_names() -> None:
    assert loopwatch.__all__ == LOOPWATCH


@pytest.mark.parametrize("package", ["loopwatch", "loopwatch.core"])
def test_the_lazy_packages_define_no_public_name_beyond_their_exports(package: str) -> None:
    # as httpx's test_exported_members: a function or a constant defined in the package itself, and not exported,
    # would be public by accident (the exported names are imported on first use, so they are not here yet)
    loaded = importlib.import_module(package)
    defined = {
        name
        for name, value in vars(loaded).items()
        if not name.startswith("_") and not isinstance(value, ModuleType) and name not in loaded.__all__
    }
    assert defined == {"annotations", "TYPE_CHECKING"}  # from __future__, and the flag the lazy imports read


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_each_public_module_exports_exactly_its_pinned_names(module: str) -> None:
    loaded = importlib.import_module(module)
    exported = getattr(loaded, "__all__", None)
    assert exported is not None, f"{module} has no __all__"
    assert sorted(exported) == sorted(EXPORTS[module])
    assert len(set(exported)) == len(exported)
    missing = [name for name in exported if not hasattr(loaded, name)]
    assert missing == []
    assert _defined_but_not_exported(loaded) == []


def test_the_public_modules_are_exactly_the_pinned_ones() -> None:
    public = [name for name in _module_names() if not _private(name)]
    pinned = [name for names in PUBLIC_MODULES.values() for name in names]
    added, removed = sorted(set(public) - set(pinned)), sorted(set(pinned) - set(public))
    assert (added, removed) == ([], []), "a module became public (or private): pin it here, or name it _module"


def test_every_public_module_has_its_names_pinned() -> None:
    # a public module whose __all__ nobody pins can grow public names unseen
    unpinned = [name for names in PUBLIC_MODULES.values() for name in names if name not in EXPORTS]
    assert unpinned == ["loopwatch"]  # pinned by LOOPWATCH above


def test_the_pins_see_what_they_pin() -> None:
    names = _module_names()
    # the walk sees private modules too (so the public list above is not everything by accident)
    assert {"loopwatch.cli._main", "loopwatch.cli._report", "loopwatch._entry", "loopwatch._timeline"} <= set(names)
    assert all(module in names for module in EXPORTS)
    # a class or function defined without an underscore and left out of __all__ is found
    made = ModuleType("made")
    exec("class Exported: ...\nclass Forgotten: ...\ndef _helper(): ...\n__all__ = ['Exported']", vars(made))
    assert _defined_but_not_exported(made) == ["Forgotten"]
