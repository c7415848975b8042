"""PydanticAI (``pydantic-ai-slim``): :class:`LoopwatchCapability`, a :class:`~loopwatch._guard.Guard` as a capability.

    from pydantic_ai import Agent
    from loopwatch.adapters.pydantic_ai import LoopStopped, LoopwatchCapability

    lw = LoopwatchCapability(preset="default")
    agent = Agent("openai:gpt-5", tools=[...], capabilities=[lw])
    try:
        result = await lw.run(agent, "fix the failing test")     # or lw.run_sync(...)
    except LoopStopped as stop:
        print(stop.status, stop.verdict.reason)                   # LOOP_DETECTED, "search called 8 times..."

Needs ``pip install 'loopwatch[pydantic-ai]'``; importing this module without PydanticAI raises
:class:`~loopwatch.errors.MissingExtraError` naming that extra.

``lw.run`` / ``lw.run_sync`` call ``agent.run`` / ``agent.run_sync`` (with the capability added for that run
when the agent does not already have it) and turn a loopwatch stop into :class:`LoopStopped`. Called directly,
``agent.run(...)`` ends a stopped run with PydanticAI's own ``RunCancelled``; :meth:`LoopwatchCapability.stopped`
turns it into the :class:`LoopStopped` (``None`` for a cancellation that was not loopwatch's).

What the guard sees, and where:

- ``before_tool_execute``: ``ToolCall(tool_name, call.args_as_dict(), id=tool_call_id, thought=TEXT)`` before
  the tool runs (after PydanticAI validated the arguments); ``TEXT`` is the text of the model response that
  made the call. Each call id is observed once;
- ``after_tool_execute``: ``ToolResult(result, tool=..., id=...)`` (the return value as text, JSON for
  structured values); ``on_tool_execute_error``: ``ToolResult(ERROR, is_error=True)``, and the error goes on;
- ``after_model_request``: ``Message("assistant", text)`` for a response without tool calls (with tool calls,
  its text is their ``thought``), and the response's token counts as ``Usage`` for the policy's token limits.

What the verdicts become:

- ``nudge``: ``ctx.enqueue(message)`` (priority ``"asap"``): a user prompt part the model reads on its next
  request, right after the tool return of the call that caused it; it is persisted in the run's history.
  A nudge on a final answer should make the agent take one more turn (PydanticAI documents that ``"asap"``
  content redirects a run that would otherwise end; not covered by this module's tests);
- ``block`` on a tool call: ``raise SkipToolExecution(message)``: the tool does not run; the model reads the
  message as the call's result. A refused call is a call without a result for the guard (the refusal is not
  fed back as the tool's output). A ``block`` on a result or a message, where nothing is left to refuse, is
  delivered as a nudge;
- ``stop``: the call is refused as for a block, then ``ctx.cancel()``: the run ends cleanly (tasks torn down,
  history kept) and ``lw.run`` raises :class:`LoopStopped`, a subclass of ``RunCancelled`` (so
  ``stop.all_messages()`` resumes the conversation) carrying the :class:`~loopwatch.core.Verdict`, its
  ``status`` (``LOOP_DETECTED`` or a limit's own status, such as ``MAX_ITERATIONS``) and the ``session``.

Sessions: PydanticAI calls ``for_run`` once per run, and the capability returns a per-run copy, so runs never
share pending state. The loopwatch session of a run is the one ``lw.run(..., loop_session=NAME)`` or ``with
lw.run_session(NAME)`` names; else ``LoopwatchCapability(session=...)``: a fixed name, or a function of the
run's ``RunContext`` (e.g. of ``ctx.deps``); else a fresh ``pydantic-ai-<hex>`` for each run, forgotten by the
guard when the run ends. Named sessions carry their loop state from one run to the next (a conversation).

The hooks call the guard directly on the run's event loop: fine in memory, to be borne in mind with a
networked store (Redis) for latency.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError, MissingExtraError
from ._shared import as_text, guard_of, session_scope

try:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
    from pydantic_ai.exceptions import RunCancelled, SkipToolExecution
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without PydanticAI
    raise MissingExtraError("pydantic-ai", "pydantic-ai") from exc

__all__ = ["DEFAULT_SESSION", "LoopStopped", "LoopwatchCapability"]

DEFAULT_SESSION: Final = "pydantic-ai"
_MAX_REMEMBERED: Final = 4_096
_REFUSED: Final = "Refused by loopwatch: this call repeats a loop."
_RUN_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("loopwatch_pydantic_ai", default=None)

SessionOf = Callable[[RunContext[Any]], str]


class LoopStopped(errors.LoopStopped, RunCancelled):
    """The guard said ``stop``: the run was cancelled (``ctx.cancel()``) and ``lw.run`` raises this.

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session. As a ``RunCancelled`` it keeps the run's history (``all_messages()``,
    ``new_messages()``), ``usage`` and ``run_id`` when made from PydanticAI's ``RunCancelled``.
    """

    session: str

    def __init__(self, verdict: Verdict, session: str, cancelled: RunCancelled | None = None) -> None:
        message = self._stopped(verdict, session)
        if cancelled is None:
            RunCancelled.__init__(self, message)
            return
        messages = cancelled.all_messages()
        RunCancelled.__init__(
            self,
            message,
            messages=messages,
            new_message_index=len(messages) - len(cancelled.new_messages()),
            usage=cancelled.usage,
            metadata=cancelled.metadata,
            run_id=cancelled.run_id,
            conversation_id=cancelled.conversation_id,
        )


def _arguments(call: ToolCallPart) -> dict[str, Any]:
    try:
        args = call.args_as_dict()
    except (TypeError, ValueError):
        return {"arguments": as_text(call.args)}
    return dict(args) if isinstance(args, Mapping) else {"arguments": args}


class _Shared:
    """What the per-run copies of one capability share: the stops, by run id."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stops: OrderedDict[str, tuple[Verdict, str]] = OrderedDict()

    def record(self, run_id: str, verdict: Verdict, session: str) -> None:
        with self.lock:
            self.stops[run_id] = (verdict, session)
            while len(self.stops) > _MAX_REMEMBERED:
                self.stops.popitem(last=False)

    def take(self, run_id: str | None) -> tuple[Verdict, str] | None:
        if run_id is None:
            return None
        with self.lock:
            return self.stops.pop(run_id, None)


class LoopwatchCapability(AbstractCapability[Any]):
    """Loop detection for PydanticAI agents: ``Agent(capabilities=[lw])`` or ``agent.run(..., capabilities=[lw])``.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``: a preset's name or
    a :class:`~loopwatch.core.Policy`). ``session``: a fixed loopwatch session for every run, or a function
    of the run's ``RunContext`` returning one (see the module's documentation). ``swarm``: passed to
    ``observe``.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        session: str | SessionOf | None = None,
        swarm: str | None = None,
    ) -> None:
        if session is not None and not isinstance(session, str) and not callable(session):
            raise ConfigError("must be a string or a function of the run context", field="session")
        self.guard = guard_of(guard, preset)
        self.session = session
        self.swarm = swarm
        self._shared = _Shared()
        # per run (set on the copy for_run returns)
        self._run_session: str | None = None
        self._fresh = False
        self._seen: set[str] = set()
        self._thoughts: dict[str, str] = {}

    def __repr__(self) -> str:
        bound = f", session={self._run_session!r}" if self._run_session else ""
        return f"LoopwatchCapability({self.guard!r}{bound})"

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    # -- running -----------------------------------------------------------------------------------------

    async def run(self, agent: Agent[Any, Any], *args: Any, loop_session: str | None = None, **kwargs: Any) -> Any:
        """``agent.run(*args, **kwargs)`` with this capability, in loopwatch session ``loop_session`` if given.
        Returns the run's result; raises :class:`LoopStopped` when loopwatch stopped the run."""
        kwargs = self._run_kwargs(agent, kwargs)
        with self.run_session(loop_session) if loop_session else contextlib.nullcontext():
            try:
                return await agent.run(*args, **kwargs)
            except RunCancelled as exc:
                raise self._stopped_or(exc) from exc

    def run_sync(self, agent: Agent[Any, Any], *args: Any, loop_session: str | None = None, **kwargs: Any) -> Any:
        """:meth:`run` through ``agent.run_sync``."""
        kwargs = self._run_kwargs(agent, kwargs)
        with self.run_session(loop_session) if loop_session else contextlib.nullcontext():
            try:
                return agent.run_sync(*args, **kwargs)
            except RunCancelled as exc:
                raise self._stopped_or(exc) from exc

    def run_session(self, name: str | None = None) -> contextlib.AbstractContextManager[str]:
        """Runs started inside the block use loopwatch session ``name`` (a fresh ``pydantic-ai-<hex>`` when not
        given); yields it."""
        return session_scope(_RUN_SESSION, name, DEFAULT_SESSION)

    def stopped(self, error: BaseException) -> LoopStopped | None:
        """The :class:`LoopStopped` for a ``RunCancelled`` (or a ``CancelledError`` carrying one) of a run this
        capability stopped; ``None`` when loopwatch did not stop that run. Each stop is given out once."""
        if isinstance(error, LoopStopped):
            return error
        cancelled = RunCancelled.from_cancellation(error)
        if cancelled is None:
            return None
        found = self._shared.take(cancelled.run_id)
        if found is None:
            return None
        return LoopStopped(found[0], found[1], cancelled)

    def _stopped_or(self, exc: RunCancelled) -> RunCancelled:
        stop = self.stopped(exc)
        return stop if stop is not None else exc

    def _run_kwargs(self, agent: Agent[Any, Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(kwargs)
        if any(cap is self for cap in _capabilities_of(agent)):
            return out
        extra = list(out.get("capabilities") or [])
        if not any(cap is self for cap in extra):
            out["capabilities"] = [*extra, self]
        return out

    # -- the capability ----------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> LoopwatchCapability:
        """A copy of this capability for one run, bound to the run's loopwatch session."""
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound._seen = set()
        bound._thoughts = {}
        named = _RUN_SESSION.get()
        if named is not None:
            bound._run_session, bound._fresh = named, False
        elif isinstance(self.session, str):
            bound._run_session, bound._fresh = self.session, False
        elif self.session is not None:
            bound._run_session, bound._fresh = str(self.session(ctx)), False
        else:
            bound._run_session, bound._fresh = f"{DEFAULT_SESSION}-{uuid.uuid4().hex[:12]}", True
        return bound

    @property
    def run_session_name(self) -> str:
        """The loopwatch session of this run (``DEFAULT_SESSION`` outside a run)."""
        return self._run_session or DEFAULT_SESSION

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        try:
            return await handler()
        finally:  # also when the run was stopped (cancelled) or failed
            if self._fresh:
                self.guard.forget(self.run_session_name)

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        session = self.run_session_name
        text = "\n".join(p.content for p in response.parts if isinstance(p, TextPart) and p.content)
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        if calls:
            if text:
                for part in calls:
                    self._thoughts[part.tool_call_id] = text
        elif text.strip():
            self._act(ctx, self._observe(Message("assistant", text)), can_block=False)
        usage = response.usage
        if usage.input_tokens or usage.output_tokens:
            event = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            self._act(ctx, self.guard.observe(session, event, swarm=self.swarm), can_block=False)
        return response

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if call.tool_call_id in self._seen:
            return args
        self._seen.add(call.tool_call_id)
        event = ToolCall(
            call.tool_name, _arguments(call), id=call.tool_call_id, thought=self._thoughts.pop(call.tool_call_id, None)
        )
        refusal = self._act(ctx, self._observe(event), can_block=True)
        if refusal is not None:
            raise SkipToolExecution(refusal)
        return args

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        event = ToolResult(as_text(result), tool=call.tool_name, id=call.tool_call_id)
        self._act(ctx, self._observe(event), can_block=False)
        return result

    async def on_tool_execute_error(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, error: Exception
    ) -> Any:
        event = ToolResult(f"{type(error).__name__}: {error}", tool=call.tool_name, is_error=True, id=call.tool_call_id)
        self._act(ctx, self._observe(event), can_block=False)
        raise error

    # -- internals ---------------------------------------------------------------------------------------

    def _observe(self, event: Event) -> Verdict:
        return self.guard.observe(self.run_session_name, event, swarm=self.swarm)

    def _act(self, ctx: RunContext[Any], verdict: Verdict, *, can_block: bool) -> str | None:
        """Carry out a verdict; returns the refusal when the call is to be refused."""
        if verdict.action == "ok":
            return None
        message = verdict.message or verdict.reason or ""
        if verdict.action == "stop":
            self._shared.record(ctx.run_id or "", verdict, self.run_session_name)
            ctx.cancel()
            return message or _REFUSED
        if verdict.action == "block" and can_block:
            return message or _REFUSED
        if message:
            ctx.enqueue(message)
        return None


def _capabilities_of(agent: Agent[Any, Any]) -> Sequence[Any]:
    """The capabilities an agent was built with (best effort: PydanticAI keeps them privately)."""
    for name in ("_capabilities", "capabilities"):
        value = getattr(agent, name, None)
        if isinstance(value, Sequence):
            return value
    root = getattr(agent, "_root_capability", None)
    children = getattr(root, "capabilities", None)
    return children if isinstance(children, Sequence) else ()
