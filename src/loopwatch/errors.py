"""Typed errors. Every error loopwatch raises is a :class:`LoopwatchError`.

The tree (each class with its other bases, and where it is raised); ``except LoopwatchError`` catches them all,
and the errors that are also a ``ValueError``, ``TypeError`` or ``ImportError`` keep working with code that
catches those::

    LoopwatchError
    ├── ConfigError (ValueError)           a bad setting or constructor argument (field; path and line when read
    │   │                                  from loopwatch.toml): Guard, Policy, Ladder, Rung, Messages, a
    │   │                                  pattern no rule declares (core.Pattern), the rules (core.detectors),
    │   │                                  limits, stores, sinks, LoopJudge, adapters, reports, ChantTracker,
    │   │                                  WordPieceTokenizer, Guard.evict_idle's seconds
    │   └── UnknownPresetError             preset("...") with a name that is not a preset
    ├── EventError (ValueError)            a malformed event: parse_event, trace readers, Guard.observe with
    │                                      on_error="raise" (else a logged, counted skip)
    ├── StateError (ValueError)            Guard.restore, Engine.load, ChantTracker.from_json given something that
    │   │                                  is not a snapshot
    │   └── OtherLayoutError               Engine.unpack given a state packed by a loopwatch whose rules keep other
    │                                      fields (a guard with a store starts that session afresh)
    ├── UnsupportedError                   an operation the guard's session backend cannot do: Guard.evict_idle
    │                                      with a store or the service (they expire sessions by their ttl)
    ├── InputError                         a trace file that cannot be read (path, line): loopwatch scan, eval
    ├── MissingExtraError (ImportError)    an optional extra is not installed (the message names it)
    ├── LoopStopped                        the guard said stop and an adapter ended the run (verdict, session);
    │                                      every framework adapter raises its own subclass:
    │                                      adapters.langchain.LoopStopped, adapters.openai_agents.LoopStopped
    │                                      (AgentsException), adapters.pydantic_ai.LoopStopped (RunCancelled),
    │                                      adapters.smolagents.LoopStopped (AgentError), adapters.crewai.LoopStopped
    │                                      (HookAborted where CrewAI has it), adapters.autogen.LoopStopped,
    │                                      adapters.litellm.LoopStopped
    ├── StoreError                         a store cannot be reached or refused an operation (stores.*)
    │   ├── DamagedStateError              a session's stored state this loopwatch cannot read (the guard)
    │   └── ServiceError                   the loopwatch service cannot be reached or refused (remote)
    ├── JudgingError                       the rules raised on a session's state (the guard handles it)
    ├── AuditWriteError                    an audit record could not be written (sinks, memory)
    ├── LabelError (ValueError)            a malformed label or label file (loopwatch eval)
    ├── OutcomeError (ValueError)          a malformed detection or run given to evaluation (loopwatch eval)
    ├── EmbeddingError (ValueError)        an embedder gave something that is not one vector per text (semantic)
    ├── EmbeddingInputError (TypeError)    texts given to an embedder are not a list of str (semantic)
    ├── JudgeAnswerError (ValueError)      a judge's answer that is not loop / not loop (core.JudgeAnswer.of)
    ├── HookInputError (ValueError)        a Claude Code hook's stdin it cannot judge (adapters.claude_code)
    ├── SettingsError                      a Claude Code settings.json that cannot be changed safely
    └── ApiError                           the service's answer to a bad request (server.errors: code, status)

Because every adapter's ``LoopStopped`` is a :class:`LoopStopped`, ``except loopwatch.LoopStopped`` catches a
stop from any framework.
"""

from __future__ import annotations

from typing import Any

from .core._errors import *  # noqa: F403 (the tree's classes, defined in the core: this is their public home)
from .core._errors import __all__ as _CORE

_ELSEWHERE = {
    "DamagedStateError": "loopwatch._stored",
    "JudgeAnswerError": "loopwatch.core._judge",
    "JudgingError": "loopwatch._session_backend",
}
"""The errors defined beside the code that raises them, named here too (imported when asked for: a guard without a
store never loads the stores)."""

__all__ = sorted([*_CORE, *_ELSEWHERE])


def __getattr__(name: str) -> Any:
    home = _ELSEWHERE.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
