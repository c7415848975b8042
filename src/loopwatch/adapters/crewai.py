"""CrewAI: :class:`LoopwatchCrewAI`, a guard on a crew's tool calls and model calls through CrewAI's hooks.

    from loopwatch.adapters.crewai import LoopStopped, LoopwatchCrewAI

    lw = LoopwatchCrewAI(preset="default")
    try:
        result = lw.kickoff(crew, inputs={"topic": "the flaky test"})   # crew.kickoff(), guarded
    except LoopStopped as stop:
        print(stop.status, stop.verdict.reason)                        # LOOP_DETECTED, "search called 8 times..."

By hand: ``with lw.run_session(crew) as run: crew.kickoff()``, then ``run.stopped()`` (a :class:`LoopStopped`, or
``None``).

Needs ``pip install 'loopwatch[crewai]'`` (CrewAI 1.6 or later, for ``crewai.hooks``; tested with 1.6.1 and 1.15.30);
importing this module without crewai raises :class:`~loopwatch.errors.MissingExtraError` naming that extra.

What the guard sees, and where (CrewAI's ``before/after_tool_call`` and ``before/after_llm_call`` hooks):

- a tool call: ``ToolCall(tool_name, tool_input, thought=TEXT)`` in ``before_tool_call``, before the tool runs and
  before CrewAI's own checks (its result cache; its refusal of a call that repeats the previous one, "I tried
  reusing the same input..."). ``TEXT`` is the model's thought, the text before ``Action:``;
- a tool result: ``ToolResult(output, tool=tool_name, is_error=...)`` in ``after_tool_call``; ``is_error`` when
  CrewAI counted a tool error for the task (the tool raised). The format reminder CrewAI appends to every third
  result is cut off. CrewAI's refusal of a repeated call is not fed back as a result: the tool did not run;
- assistant text: ``Message("assistant", text)`` for a model response that made no tool call (observed at the next
  model call, or when the run ends); the tokens the LLM counted for the call as ``Usage``, for the policy's token
  limits.

What the verdicts become:

- ``nudge``: the message is appended to the conversation (``ctx.messages``) as a ``user`` message in the next
  ``before_llm_call``: the model reads it on its next call, and it stays in the task's conversation;
- ``block`` on a tool call: ``before_tool_call`` returns ``False``: the tool does not run, and CrewAI shows the
  model its fixed observation ``"Tool execution blocked by hook. Tool: NAME"``. loopwatch's reason reaches the
  model as well: where CrewAI runs ``after_tool_call`` for a refused call (newer releases, e.g. 1.15) the reason
  replaces that observation; where it does not (e.g. 1.6) the reason is appended to the next model call, like a
  nudge. A refused call has no result for the guard. A ``block`` on a result or a message, where nothing is left
  to refuse, is delivered as a nudge;
- ``stop``: the call that brought it is refused as for a block, and the run ends at its next model call, before
  the model is called: ``lw.kickoff`` raises :class:`LoopStopped`, carrying the :class:`~loopwatch.core.Verdict`,
  its ``status`` (``LOOP_DETECTED`` or a limit's own status, such as ``MAX_ITERATIONS``) and the ``session``.
  Where CrewAI has ``HookAborted`` (e.g. 1.15), ``LoopStopped`` subclasses it and the hook raises it; CrewAI passes
  it on out of ``crew.kickoff()``. Older CrewAI swallows exceptions raised in hooks: the hook returns ``False``,
  CrewAI raises ``ValueError("LLM call blocked by before_llm_call hook")`` (after the agent's ``max_retry_limit``
  retries, which fail at once, each printing CrewAI's error lines) and ``lw.kickoff`` raises ``LoopStopped`` from
  it. A stop on a run's last response is raised once ``crew.kickoff()`` has returned (``stop.output`` is the output).

CrewAI's own defences stay in place, and do not hide the loop from the guard: CrewAI answers a call that repeats
the previous one with "I tried reusing the same input..." (the guard has seen the call already) and lets the agent go
on until ``max_iter``; newer CrewAI also ends the run with ``ToolExecutionFailedError`` at the 5th identical (tool,
arguments, result). With the default preset loopwatch nudges at the 3rd identical call, and its refusals name how
many times the call ran, so CrewAI does not count them as one repeated result: loopwatch's stop ends the run.

Scope: the hooks are installed for one run and removed after it. CrewAI's hook registries are process-wide; where
CrewAI has execution-scoped hooks (``crewai.hooks.dispatch.scoped_hooks``, a context variable) they are used,
elsewhere global hooks are registered for the run's duration. Either way each hook acts only on calls of the crew
it guards (``ctx.crew``, or an agent of that crew): two crews guarded by two guards, or a crew started from inside
a tool, never see each other's calls. ``crew.kickoff_for_each`` copies the crew: call ``lw.kickoff`` per input.

Sessions (one per run, shared by all its agents and tasks): ``lw.kickoff(..., loop_session=NAME)`` /
``lw.run_session(crew, NAME)`` names it; else ``LoopwatchCrewAI(session=...)`` (a fixed name for every run); else a
fresh ``crewai-<hex>`` per run, forgotten by the guard when the run ends.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .. import errors
from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..core._verdict import Verdict
from ..errors import ConfigError, MissingExtraError
from ._shared import GuardedAdapter, as_text

try:
    from crewai import hooks as crewai_hooks
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without crewai
    raise MissingExtraError("crewai", "crewai") from exc

__all__ = ["DEFAULT_SESSION", "CrewRun", "LoopStopped", "LoopwatchCrewAI"]

DEFAULT_SESSION: Final = "crewai"
_REFUSED: Final = "Refused by loopwatch: this call repeats a loop."
_BLOCKED: Final = "Tool execution blocked by hook."  # CrewAI's observation for a refused call
_ROLE: Final = "user"


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_DISPATCH: Final[Any] = _module("crewai.hooks.dispatch")  # newer CrewAI: HookAborted, execution-scoped hooks
_SCOPED: Final = all(hasattr(_DISPATCH, name) for name in ("scoped_hooks", "register_scoped", "InterceptionPoint"))
_ABORTED: Final[type[Exception]] = getattr(_DISPATCH, "HookAborted", Exception)
_RAISES: Final = _ABORTED is not Exception  # a hook may raise HookAborted to end the run


class LoopStopped(errors.LoopStopped, _ABORTED):  # type: ignore[misc,valid-type]
    """The guard said ``stop``: raised out of :meth:`LoopwatchCrewAI.kickoff` (a ``HookAborted`` where CrewAI has it).

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session, ``output`` the crew's output when the run had already finished.
    """

    session: str

    def __init__(self, verdict: Verdict, session: str, output: Any = None) -> None:
        message = self._stopped(verdict, session)
        Exception.__init__(self, message)
        self.output = output
        self.reason = message  # HookAborted's fields
        self.source: Any = "loopwatch"


@dataclass
class CrewRun:
    """One guarded run of ``crew``: its loopwatch ``session`` and, once loopwatch stopped it, the stop ``verdict``."""

    crew: Any = field(repr=False)
    session: str
    fresh: bool
    verdict: Verdict | None = None
    active: bool = True
    _notes: list[str] = field(default_factory=list, repr=False)  # for the next model call
    _refusals: list[tuple[str, str]] = field(default_factory=list, repr=False)  # (tool, reason) not yet shown
    _text: str | None = field(default=None, repr=False)  # the last response, until a tool call claims it
    _errors: int | None = field(default=None, repr=False)  # the task's tool errors before the running call
    _tokens: tuple[int, int] | None = field(default=None, repr=False)  # the LLM's token counts before the call
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stopped(self, output: Any = None) -> LoopStopped | None:
        """The :class:`LoopStopped` of this run if loopwatch stopped it, else ``None``."""
        return None if self.verdict is None else LoopStopped(self.verdict, self.session, output)

    def owns(self, ctx: Any) -> bool:
        """Whether a hook context belongs to this (still running) run: its crew, or an agent of its crew."""
        if not self.active:
            return False
        crew = getattr(ctx, "crew", None)
        if crew is not None:
            return crew is self.crew
        agent = getattr(ctx, "agent", None)
        return agent is not None and any(agent is a for a in getattr(self.crew, "agents", ()))

    def refuse(self, tool: str, reason: str) -> bool:
        with self._lock:
            self._refusals.append((tool, reason))
        return False

    def take_refusal(self, tool: str) -> str | None:
        with self._lock:
            for i, (name, reason) in enumerate(self._refusals):
                if name == tool:
                    del self._refusals[i]
                    return reason
        return None

    def note(self, message: str) -> None:
        with self._lock:
            self._notes.append(message)

    def take_notes(self) -> list[str]:
        with self._lock:
            notes = [reason for _, reason in self._refusals] + self._notes
            self._refusals.clear()
            self._notes.clear()
        return notes

    def swap_text(self, text: str | None) -> str | None:
        with self._lock:
            previous, self._text = self._text, text
        return previous


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    return {} if raw is None or raw == "" else {"arguments": as_text(raw)}


def _thought(text: str | None) -> str | None:
    """The thought of a ReAct response: the text before ``Action:``, without ``Thought:``."""
    if not text:
        return None
    head = text.split("Action:", 1)[0].strip()
    head = head[len("Thought:") :].strip() if head.startswith("Thought:") else head
    return head or None


@functools.lru_cache(maxsize=1)
def _crewai_texts() -> tuple[str, str]:
    """The first lines of CrewAI's refusal of a repeated call and of its format reminder (default prompts)."""
    try:
        i18n = importlib.import_module("crewai.utilities.i18n").get_i18n()
        repeated = str(i18n.errors("task_repeated_usage")).strip().split("\n")[0]
        reminder = str(i18n.slice("tools")).strip().split("\n")[0]
    except Exception:  # another CrewAI layout: nothing to recognise
        return "", ""
    return repeated, reminder


def _tool_output(text: str) -> str | None:
    """A tool's output as the guard sees it: ``None`` for CrewAI's refusal of a repeated call, without the format
    reminder CrewAI appends."""
    repeated, reminder = _crewai_texts()
    if repeated and text.startswith(repeated):
        return None
    cut = text.find("\n" + reminder) if reminder else -1
    return text[:cut].rstrip() if cut > 0 else text


def _tool_errors(ctx: Any) -> int | None:
    count = getattr(getattr(ctx, "task", None), "tools_errors", None)
    return count if isinstance(count, int) else None


def _tokens(llm: Any) -> tuple[int, int] | None:
    summary = getattr(llm, "get_token_usage_summary", None)
    try:
        usage = summary() if callable(summary) else None
    except Exception:  # a custom LLM's own bookkeeping: no counts
        return None
    if usage is None:
        return None
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


class _Hooks:
    """The four CrewAI hooks of one run; each ignores the calls of other crews."""

    def __init__(self, lw: LoopwatchCrewAI, run: CrewRun) -> None:
        self.lw = lw
        self.run = run

    def pairs(self) -> list[tuple[str, Callable[[Any], Any]]]:
        """(the hook's kind, the hook): ``before_tool_call``, ``after_tool_call``, ``before_llm_call``, ...``."""
        return [
            ("before_tool_call", self.before_tool),
            ("after_tool_call", self.after_tool),
            ("before_llm_call", self.before_llm),
            ("after_llm_call", self.after_llm),
        ]

    def before_tool(self, ctx: Any) -> bool | None:
        run = self.run
        if not run.owns(ctx):
            return None
        tool = str(ctx.tool_name)
        call = ToolCall(tool, _arguments(ctx.tool_input), thought=_thought(run.swap_text(None)))
        if run.verdict is not None:  # stopping: refuse whatever else the model asked for
            return run.refuse(tool, run.verdict.message or _REFUSED)
        run._errors = _tool_errors(ctx)
        refusal = self.lw.act(run, call, can_block=True)
        return None if refusal is None else run.refuse(tool, refusal)

    def after_tool(self, ctx: Any) -> str | None:
        run = self.run
        if not run.owns(ctx):
            return None
        text = "" if ctx.tool_result is None else as_text(ctx.tool_result)
        if text.startswith(_BLOCKED):  # a refused call (newer CrewAI runs this hook for it): show our reason
            return run.take_refusal(str(ctx.tool_name))
        output = _tool_output(text)
        if output is not None:
            errors, before = _tool_errors(ctx), run._errors
            failed = None if errors is None or before is None else errors > before
            self.lw.act(run, ToolResult(output, tool=str(ctx.tool_name), is_error=failed), can_block=False)
        return None

    def before_llm(self, ctx: Any) -> bool | None:
        run = self.run
        if not run.owns(ctx):
            return None
        self.lw.flush(run)
        if run.verdict is not None:
            if _RAISES:
                raise LoopStopped(run.verdict, run.session)
            return False  # older CrewAI: ValueError("LLM call blocked by before_llm_call hook")
        messages = getattr(ctx, "messages", None)
        if isinstance(messages, list) and (notes := run.take_notes()):
            messages.append({"role": _ROLE, "content": "\n\n".join(notes)})
        run._tokens = _tokens(getattr(ctx, "llm", None))
        return None

    def after_llm(self, ctx: Any) -> None:
        run = self.run
        if not run.owns(ctx):
            return
        before, after = run._tokens, _tokens(getattr(ctx, "llm", None))
        if before is not None and after is not None and after != before:
            usage = Usage(input_tokens=after[0] - before[0], output_tokens=after[1] - before[1])
            self.lw.act(run, usage, can_block=False)
        response = ctx.response
        if isinstance(response, str) and response.strip():
            self.lw.flush(run)
            run.swap_text(response)


@contextlib.contextmanager
def _installed(hooks: _Hooks) -> Iterator[None]:
    """``hooks`` installed in CrewAI for the block: execution-scoped where CrewAI has that, else global."""
    if _SCOPED:
        with _scoped(hooks):
            yield
        return
    for kind, hook in hooks.pairs():
        getattr(crewai_hooks, f"register_{kind}_hook")(hook)
    try:
        yield
    finally:
        for kind, hook in hooks.pairs():
            getattr(crewai_hooks, f"unregister_{kind}_hook")(hook)


@contextlib.contextmanager
def _scoped(hooks: _Hooks) -> Iterator[None]:
    points = _DISPATCH.InterceptionPoint
    where = {
        "before_tool_call": points.PRE_TOOL_CALL,
        "after_tool_call": points.POST_TOOL_CALL,
        "before_llm_call": points.PRE_MODEL_CALL,
        "after_llm_call": points.POST_MODEL_CALL,
    }
    outer: Callable[[Any], list[Any]] = getattr(_DISPATCH, "get_scoped_hooks", lambda point: [])
    kept = {point: list(outer(point)) for point in points}  # the hooks of an enclosing scope stay
    with _DISPATCH.scoped_hooks({point: found for point, found in kept.items() if found}):
        for kind, hook in hooks.pairs():
            _DISPATCH.register_scoped(where[kind], hook)
        yield


class LoopwatchCrewAI(GuardedAdapter):
    """Loop detection for CrewAI crews: runs a crew with loopwatch's hooks installed for that run.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``: a preset's name or
    a :class:`~loopwatch.core.Policy`). ``session``: a fixed loopwatch session for every run. ``swarm``: passed
    to ``observe``.
    """

    def __repr__(self) -> str:
        return f"LoopwatchCrewAI({self.guard!r})"

    def kickoff(
        self, crew: Any, inputs: Mapping[str, Any] | None = None, *, loop_session: str | None = None, **kwargs: Any
    ) -> Any:
        """``crew.kickoff(inputs=inputs, **kwargs)`` in loopwatch session ``loop_session``; returns its output, or
        raises :class:`LoopStopped` if loopwatch stopped the run."""
        with self.run_session(crew, loop_session) as run:
            try:
                output = crew.kickoff(inputs=dict(inputs) if inputs is not None else None, **kwargs)
            except LoopStopped:
                raise
            except Exception as exc:
                stop = run.stopped()
                if stop is None:
                    raise
                raise stop from exc
        stop = run.stopped(output)
        if stop is not None:
            raise stop
        return output

    @contextlib.contextmanager
    def run_session(self, crew: Any, name: str | None = None) -> Iterator[CrewRun]:
        """Runs of ``crew`` inside the block are guarded, in loopwatch session ``name`` (see the module's
        documentation); yields the :class:`CrewRun`."""
        if name is not None and not isinstance(name, str):
            raise ConfigError("must be a string", field="loop_session")
        fixed = name or self.session
        run = CrewRun(crew, fixed or f"{DEFAULT_SESSION}-{uuid.uuid4().hex[:12]}", fresh=fixed is None)
        try:
            with _installed(_Hooks(self, run)):
                yield run
                self.flush(run)
        finally:
            run.active = False
            if run.fresh:
                self.guard.forget(run.session)

    # -- internals ---------------------------------------------------------------------------------------

    def flush(self, run: CrewRun) -> None:
        """Observe the run's last response as a message if no tool call claimed it."""
        text = run.swap_text(None)
        if text is not None:
            self.act(run, Message("assistant", text), can_block=False)

    def act(self, run: CrewRun, event: Event, can_block: bool) -> str | None:
        """Observe ``event`` and carry out the verdict; returns the refusal when the call is to be refused."""
        verdict = self.guard.observe(run.session, event, swarm=self.swarm)
        if verdict.action == "ok":
            return None
        message = verdict.message or verdict.reason or ""
        if verdict.action == "stop":
            if run.verdict is None:
                run.verdict = verdict
            return message or _REFUSED
        if verdict.action == "block" and can_block:
            return message or _REFUSED
        if message:
            run.note(message)
        return None
