"""OpenAI Agents SDK (``openai-agents``): a :class:`~loopwatch._guard.Guard` inside ``Runner.run``.

    from loopwatch.adapters.openai_agents import LoopStopped, LoopwatchGuard

    lw = LoopwatchGuard(preset="default")
    try:
        result = await lw.run(agent, "fix the failing test")       # or lw.run_sync(...)
    except LoopStopped as stop:
        print(stop.status, stop.verdict.reason)                     # LOOP_DETECTED, "bash called 8 times..."

``lw.run`` / ``lw.run_sync`` call ``Runner.run`` / ``Runner.run_sync`` with everything wired and a fresh
loopwatch session per call. Wiring it by hand::

    lw.protect(agent)                                               # the guardrail on every FunctionTool
    with lw.run_session():                                          # one loopwatch session for this run
        await Runner.run(agent, task, hooks=lw.hooks, run_config=RunConfig(call_model_input_filter=lw.input_filter))

What the guard sees, and where:

- a tool call: ``ToolCall(tool_name, arguments, id=tool_call_id, thought=TEXT)`` in :attr:`LoopwatchGuard.guardrail`,
  a tool input guardrail, which the SDK runs *before* ``on_tool_start`` and before the tool. ``arguments`` is
  the call's JSON object (``{"arguments": RAW}`` when it is not one); ``thought`` is the text the model wrote
  in the same response. Tools without the guardrail (not a ``FunctionTool``, or not protected) are observed
  in ``on_tool_start`` instead, where a call can still be stopped but no longer refused. Each call id is
  observed once (the SDK may run input guardrails twice for a tool that needs approval);
- a tool result: ``ToolResult(output, tool=tool_name, id=tool_call_id)`` in ``on_tool_end`` (``output`` is
  the value the tool returned, as text: the SDK's error text when the tool raised);
- assistant text: ``Message("assistant", text)`` in ``on_llm_end``, for a response without tool calls (the
  text of a response with tool calls is their ``thought``); the response's token counts as ``Usage``, for the
  policy's token limits.

What the verdicts become:

- ``nudge``: the message is queued (once while it waits; the queue is bounded, and what it drops is logged and
  counted) and appended to the input of the run's next model call by
  :attr:`LoopwatchGuard.input_filter` (``RunConfig.call_model_input_filter``), as a ``user`` message
  (``nudge_role``). The filter's changes are not persisted by the SDK: the model sees the nudge on that one
  call, and it is not in ``result.to_input_list()``;
- ``block`` on a tool call: the guardrail answers ``ToolGuardrailFunctionOutput.reject_content(message)``:
  the tool does not run, and the model reads the message as the call's output. The SDK calls neither
  ``on_tool_start`` nor ``on_tool_end`` for a refused call, so the guard sees a call without a result; the
  refusal text is never fed back as the tool's output (the same refusal each time would look like the tool
  returning the same thing again, and the next real result, which tells whether the agent is getting
  anywhere, would be compared with a message loopwatch wrote). A ``block`` on a result or a message, where
  nothing is left to refuse, is delivered as a nudge;
- ``stop``: :class:`LoopStopped` is raised from the guardrail or the hook that saw the event, and reaches
  the caller of ``Runner.run``: it subclasses the SDK's ``AgentsException``, which the SDK re-raises as is
  (any other exception raised around a tool is wrapped in ``UserError``), so ``stop.run_data`` also carries
  the SDK's details of the run. It carries the :class:`~loopwatch.core.Verdict`, its ``status``
  (``LOOP_DETECTED`` or a limit's own status) and the loopwatch ``session``.

Sessions (one per run): the session of ``lw.run(..., loop_session=None)`` / ``with lw.run_session(name)``
(a fresh ``openai-agents-<hex>`` when no name is given); else ``LoopwatchGuard(session=...)``: a fixed name,
or a function of the run's context object (``Runner.run(context=...)``); else one session per context
object; runs without a context object and without any of these share the session ``"openai-agents"``.
The SDK gives the input filter only the context object, so the session must be found from it (or from the
``contextvars`` value ``run_session`` sets) rather than from the SDK's per-run wrapper.

The guard is called synchronously from the SDK's event loop: fine in memory, to be borne in mind with a
networked store (Redis) for latency.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import json
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeVar, cast

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError, MissingExtraError
from ._shared import NudgeQueue, as_text, default_guard, session_scope

try:
    from agents import (
        Agent,
        AgentsException,
        FunctionTool,
        ModelResponse,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Runner,
        RunResult,
        Tool,
        ToolGuardrailFunctionOutput,
    )
    from agents.items import TResponseInputItem
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
    from agents.tool_guardrails import ToolInputGuardrail, ToolInputGuardrailData
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise MissingExtraError("openai-agents", "openai-agents") from exc

__all__ = ["DEFAULT_SESSION", "LoopStopped", "LoopwatchGuard", "LoopwatchHooks"]

DEFAULT_SESSION: Final = "openai-agents"
_MAX_REMEMBERED: Final = 4_096
_RUN_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("loopwatch_openai_agents", default=None)

NudgeRole = Literal["user", "system", "developer"]
SessionOf = Callable[[Any], str]
_T = TypeVar("_T")


class LoopStopped(errors.LoopStopped, AgentsException):
    """The guard said ``stop``: raised out of ``Runner.run`` (and ``lw.run``), ending the run.

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status, such as
    ``MAX_ITERATIONS``), ``session`` the loopwatch session. As an ``AgentsException``, ``run_data`` holds the
    SDK's details of the run when the SDK attached them.
    """

    session: str

    def __init__(self, verdict: Verdict, session: str) -> None:
        super().__init__(verdict, session)


def _arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": value}


def _remember(table: OrderedDict[Any, _T], key: Any, value: _T) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > _MAX_REMEMBERED:
        table.popitem(last=False)


class LoopwatchHooks(RunHooks[Any]):
    """The ``RunHooks`` of a :class:`LoopwatchGuard`: tool results, unguarded tool calls, assistant text."""

    def __init__(self, owner: LoopwatchGuard) -> None:
        self.owner = owner

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        if isinstance(context, ToolContext):
            self.owner._observe_call(context, guarded=False)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        if isinstance(context, ToolContext):
            session = self.owner.session_of(context.context)
            event = ToolResult(as_text(result), tool=context.tool_name, id=context.tool_call_id)
            self.owner._act(session, self.owner._observe(session, event), can_block=False)

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        self.owner._observe_response(self.owner.session_of(context.context), response)


class LoopwatchGuard:
    """Loop detection for the OpenAI Agents SDK: a guardrail, run hooks and a model input filter around a guard.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``: a preset's name or
    a :class:`~loopwatch.core.Policy`). ``session``: a fixed loopwatch session for every run through this
    object, or a function of the run's context object returning one (see the module's documentation).
    ``nudge_role``: the role of the message a nudge is delivered as.

    Attributes: ``guard``; :attr:`hooks` (``Runner.run(hooks=...)``); :attr:`input_filter`
    (``RunConfig(call_model_input_filter=...)``); :attr:`guardrail` (a ``ToolInputGuardrail``; :meth:`protect`
    attaches it to tools).
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy = "default",
        session: str | SessionOf | None = None,
        nudge_role: NudgeRole = "user",
    ) -> None:
        if nudge_role not in ("user", "system", "developer"):
            raise ConfigError("must be 'user', 'system' or 'developer'", field="nudge_role")
        self.guard = guard if guard is not None else default_guard(preset)
        self.nudge_role: NudgeRole = nudge_role
        self._session = session
        self._lock = threading.Lock()
        self._nudges = NudgeQueue()
        self._decided: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._thoughts: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._by_context: OrderedDict[int, tuple[Callable[[], object], str]] = OrderedDict()
        self.hooks = LoopwatchHooks(self)
        self.guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(guardrail_function=self._check, name="loopwatch")

    def __repr__(self) -> str:
        return f"LoopwatchGuard({self.guard!r})"

    # -- wiring ----------------------------------------------------------------------------------------

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: appends the run's pending nudges to this model call's input."""
        notes = self.pending(self.session_of(data.context), clear=True)
        model_data = data.model_data
        if notes:
            message = cast("TResponseInputItem", {"role": self.nudge_role, "content": "\n\n".join(notes)})
            model_data.input = [*model_data.input, message]
        return model_data

    def protect(self, target: _T) -> _T:
        """Attach :attr:`guardrail` (first among its guardrails) to every ``FunctionTool`` of an agent and of the
        agents it hands off to (given as ``Agent`` objects), or of a tool or an iterable of tools; returns
        ``target``. Idempotent."""
        if isinstance(target, Agent):
            self._protect_agent(target, set())
        elif isinstance(target, FunctionTool):
            self._protect_tool(target)
        elif isinstance(target, Iterable):
            for tool in target:
                self._protect_tool(tool)
        else:
            raise ConfigError(f"expected an Agent or tools, got {type(target).__name__}", field="target")
        return target

    def run_config(self, run_config: RunConfig | None = None) -> RunConfig:
        """``run_config`` (or a new ``RunConfig``) with :attr:`input_filter` as ``call_model_input_filter``
        (after the one it had, if any)."""
        config = run_config if run_config is not None else RunConfig()
        inner = config.call_model_input_filter
        if inner is None or inner == self.input_filter:
            return dataclasses.replace(config, call_model_input_filter=self.input_filter)

        async def chained(data: CallModelData[Any]) -> ModelInputData:
            filtered = inner(data)
            model_data = await filtered if inspect.isawaitable(filtered) else filtered
            return self.input_filter(dataclasses.replace(data, model_data=model_data))

        return dataclasses.replace(config, call_model_input_filter=chained)

    async def run(
        self, starting_agent: Agent[Any], input: Any, *, loop_session: str | None = None, **kwargs: Any
    ) -> RunResult:
        """``Runner.run`` with the guardrail, the hooks and the filter wired, in a session of its own (a fresh
        one unless ``loop_session`` names it). Other keywords go to ``Runner.run`` (``session`` there is the
        SDK's conversation memory, not loopwatch's). Raises :class:`LoopStopped` on a stop."""
        kwargs = self._run_kwargs(starting_agent, kwargs)
        with self.run_session(loop_session):
            return await Runner.run(starting_agent, input, **kwargs)

    def run_sync(
        self, starting_agent: Agent[Any], input: Any, *, loop_session: str | None = None, **kwargs: Any
    ) -> RunResult:
        """:meth:`run` through ``Runner.run_sync``."""
        kwargs = self._run_kwargs(starting_agent, kwargs)
        with self.run_session(loop_session):
            return Runner.run_sync(starting_agent, input, **kwargs)

    def run_session(self, name: str | None = None) -> contextlib.AbstractContextManager[str]:
        """Runs started inside the block (and the tasks they start) use loopwatch session ``name`` (a fresh
        ``openai-agents-<hex>`` when not given); yields it."""
        return session_scope(_RUN_SESSION, name, DEFAULT_SESSION)

    # -- state -----------------------------------------------------------------------------------------

    def session_of(self, context: Any) -> str:
        """The loopwatch session of a run whose context object (``Runner.run(context=...)``) is ``context``."""
        current = _RUN_SESSION.get()
        if current is not None:
            return current
        if isinstance(self._session, str):
            return self._session
        if self._session is not None:
            return str(self._session(context))
        if context is None:
            return DEFAULT_SESSION
        with self._lock:
            entry = self._by_context.get(id(context))
            if entry is not None and entry[0]() is context:
                return entry[1]
            try:
                ref: Callable[[], object] = weakref.ref(context)
            except TypeError:  # a dict, a list...: kept alive while remembered, so its id is not reused
                ref = lambda: context  # noqa: E731
            session = f"{DEFAULT_SESSION}-{uuid.uuid4().hex[:12]}"
            _remember(self._by_context, id(context), (ref, session))
            return session

    def pending(self, session: str, *, clear: bool = False) -> list[str]:
        """The nudges waiting for the session's next model call (taken away with ``clear=True``)."""
        return self._nudges.take(session) if clear else self._nudges.peek(session)

    # -- internals -------------------------------------------------------------------------------------

    def _observe(self, session: str, event: Event) -> Verdict:
        return self.guard.observe(session, event)

    def _act(self, session: str, verdict: Verdict, *, can_block: bool) -> str | None:
        """Carry out a verdict; returns the refusal message when a call is to be refused."""
        if verdict.action == "ok":
            return None
        if verdict.action == "stop":
            raise LoopStopped(verdict, session)
        message = verdict.message or verdict.reason or ""
        if verdict.action == "block" and can_block:
            return message
        self._nudges.add(session, message)
        return None

    def _observe_call(self, context: ToolContext[Any], *, guarded: bool) -> str | None:
        session = self.session_of(context.context)
        key = (session, context.tool_call_id)
        with self._lock:
            if key in self._decided:
                return self._decided[key]
            self._decided[key] = None  # claimed: observed once even if the hook runs again concurrently
            thought = self._thoughts.pop(key, None)
        event = ToolCall(
            context.tool_name, _arguments(context.tool_arguments), id=context.tool_call_id, thought=thought
        )
        refusal = self._act(session, self._observe(session, event), can_block=guarded)
        with self._lock:
            _remember(self._decided, key, refusal)
        return refusal

    async def _check(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        refusal = self._observe_call(data.context, guarded=True)
        if refusal is not None:
            return ToolGuardrailFunctionOutput.reject_content(refusal, output_info={"loopwatch": "block"})
        return ToolGuardrailFunctionOutput.allow()

    def _observe_response(self, session: str, response: ModelResponse) -> None:
        texts: list[str] = []
        call_ids: list[str] = []
        for item in response.output:
            kind = getattr(item, "type", None)
            if kind == "message":
                for part in getattr(item, "content", None) or ():
                    text = getattr(part, "text", None)
                    if getattr(part, "type", None) == "output_text" and isinstance(text, str):
                        texts.append(text)
            elif kind == "function_call":
                call_id = getattr(item, "call_id", None)
                if isinstance(call_id, str):
                    call_ids.append(call_id)
        text = "\n".join(t for t in texts if t)
        if call_ids:
            if text:
                with self._lock:
                    for call_id in call_ids:
                        _remember(self._thoughts, (session, call_id), text)
        elif text:
            self._act(session, self._observe(session, Message("assistant", text)), can_block=False)
        usage = response.usage
        if usage.input_tokens or usage.output_tokens:
            event = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            self._act(session, self._observe(session, event), can_block=False)

    def _run_kwargs(self, agent: Agent[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(kwargs)
        hooks = out.get("hooks")
        if hooks is not None and not (isinstance(hooks, LoopwatchHooks) and hooks.owner is self):
            raise ConfigError("give hooks=LoopwatchHooks(lw) (or a subclass of it, to add yours)", field="hooks")
        self.protect(agent)
        out["hooks"] = hooks if hooks is not None else self.hooks
        out["run_config"] = self.run_config(out.get("run_config"))
        return out

    def _protect_tool(self, tool: object) -> None:
        if isinstance(tool, FunctionTool):
            guardrails = list(tool.tool_input_guardrails or [])
            if self.guardrail not in guardrails:
                tool.tool_input_guardrails = [self.guardrail, *guardrails]

    def _protect_agent(self, agent: Agent[Any], seen: set[int]) -> None:
        if id(agent) in seen:
            return
        seen.add(id(agent))
        for tool in agent.tools:
            self._protect_tool(tool)
        for handoff in agent.handoffs:
            if isinstance(handoff, Agent):
                self._protect_agent(handoff, seen)
