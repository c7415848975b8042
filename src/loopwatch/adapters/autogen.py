"""AutoGen AgentChat (``autogen-agentchat`` 0.7): a :class:`~loopwatch._guard.Guard` around an AgentChat team.

    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from loopwatch.adapters.autogen import LoopwatchAutoGen

    lw = LoopwatchAutoGen(preset="default")
    agent = AssistantAgent("coder", model_client, workbench=lw.workbench([search]), model_context=lw.model_context())
    team = RoundRobinGroupChat([agent], termination_condition=lw.termination() | MaxMessageTermination(50))
    result = await lw.run(team, task="fix the failing test")
    if (stop := lw.stopped(result)) is not None:
        print(stop.status, stop.verdict.reason)                   # LOOP_DETECTED, "search called 8 times..."

Needs ``pip install 'loopwatch[autogen]'``; importing this module without AutoGen AgentChat raises
:class:`~loopwatch.errors.MissingExtraError` naming that extra.

The three pieces, one per agent or team, all bound to the same :class:`LoopwatchAutoGen`:

- :meth:`LoopwatchAutoGen.workbench` (``AssistantAgent(workbench=...)``, a ``StaticWorkbench``): sees each tool
  call as ``ToolCall(name, arguments, id=call_id)`` before the tool runs, and its result as
  ``ToolResult(text, tool=name, id=call_id, is_error=...)`` after;
- :meth:`LoopwatchAutoGen.model_context` (``AssistantAgent(model_context=...)``, an
  ``UnboundedChatCompletionContext``): delivers nudges;
- :meth:`LoopwatchAutoGen.termination` (``RoundRobinGroupChat(termination_condition=...)``, a
  ``TerminationCondition``, composable with ``|`` and ``&``): sees each agent's ``TextMessage`` as
  ``Message("assistant", text)`` (messages from ``"user"`` are skipped) and the responses' token counts as
  ``Usage``; ends the run on a stop.

What the verdicts become:

- ``nudge``: the message is queued for the run's session (once while it waits; the queue is bounded, and what it
  drops is logged and counted); the model context adds it, as a
  ``UserMessage(content=message, source="loopwatch")``, at the end of the messages of the agent's next model
  call, and keeps it in the context's history;
- ``block`` on a tool call: the workbench returns ``ToolResult(is_error=True)`` carrying the message; the tool
  does not run, the model reads the message as the call's result. A refused call is a call without a result
  for the guard. A ``block`` on a result or a message, where nothing is left to refuse, is delivered as a
  nudge;
- ``stop``: the call is refused as for a block, and the termination condition ends the run after the agent's
  turn with ``StopMessage(content="loopwatch: STATUS: REASON", source="loopwatch")``: the team's ``TaskResult``
  has ``stop_reason`` ``"loopwatch: LOOP_DETECTED: ..."`` (or a limit's own status, such as
  ``MAX_ITERATIONS``). :meth:`LoopwatchAutoGen.stopped` gives the :class:`LoopStopped` for such a result
  (``verdict``, ``status``, ``session``, ``result``); ``lw.run(..., raise_on_stop=True)`` raises it. Without
  the termination condition a stop only refuses calls (an agent run alone has no termination condition: bound
  it with ``max_tool_iterations``).

Sessions: the loopwatch session of a run is the one ``lw.run(..., loop_session=NAME)`` or ``with
lw.run_session(NAME)`` names (a ``contextvars`` value, inherited by the tasks AgentChat's runtime starts from
the run); else ``LoopwatchAutoGen(session=NAME)``; else ``"autogen"``. ``lw.run`` without ``loop_session``
uses a fresh ``autogen-<hex>`` session for each run, forgotten by the guard when the run ends, so two runs do
not share loop state. Named sessions carry their state from one run to the next (a conversation).

The guard is called directly on the run's event loop: fine in memory, to be borne in mind with a networked
store (Redis) for latency.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..core._policy import Policy
from ..core._verdict import LOOP_DETECTED, Verdict
from ..errors import MissingExtraError
from ._shared import GuardedAdapter, as_text, session_scope

try:
    from autogen_agentchat.base import TaskResult, Team, TerminatedException, TerminationCondition
    from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage, TextMessage
    from autogen_core import CancellationToken
    from autogen_core.model_context import UnboundedChatCompletionContext
    from autogen_core.models import LLMMessage, UserMessage
    from autogen_core.tools import BaseTool, StaticWorkbench, TextResultContent
    from autogen_core.tools import ToolResult as AutoGenToolResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without AutoGen
    raise MissingExtraError("autogen-agentchat", "autogen") from exc

__all__ = [
    "DEFAULT_SESSION",
    "STOP_SOURCE",
    "LoopStopped",
    "LoopwatchAutoGen",
    "LoopwatchModelContext",
    "LoopwatchTermination",
    "LoopwatchWorkbench",
]

DEFAULT_SESSION: Final = "autogen"
STOP_SOURCE: Final = "loopwatch"
_REFUSED: Final = "Refused by loopwatch: this call repeats a loop."
_RUN_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("loopwatch_autogen", default=None)


class LoopStopped(errors.LoopStopped):
    """The guard said ``stop`` and the termination condition ended the run.

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session, ``result`` the team's ``TaskResult`` (when known).
    """

    session: str

    def __init__(self, verdict: Verdict, session: str, result: TaskResult | None = None) -> None:
        super().__init__(verdict, session)
        self.result = result


def _stop_reason(verdict: Verdict) -> str:
    status = verdict.status or LOOP_DETECTED
    pattern = f" ({verdict.pattern})" if verdict.pattern else ""
    return f"{STOP_SOURCE}: {status}{pattern}: {verdict.reason or verdict.message or 'stopped'}"


class LoopwatchAutoGen(GuardedAdapter):
    """Loop detection for AutoGen AgentChat: hands out the workbench, model context and termination condition.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``: a preset's name or
    a :class:`~loopwatch.core.Policy`). ``session``: the loopwatch session of runs not started in a named
    session (see the module's documentation). ``swarm``: passed to ``observe``.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        session: str | None = None,
        swarm: str | None = None,
    ) -> None:
        super().__init__(guard, preset=preset, session=session, swarm=swarm)
        self._lock = threading.Lock()
        self._stops: dict[str, Verdict] = {}  # pending: not yet seen by a termination condition
        self._ended: dict[str, tuple[Verdict, str]] = {}  # by stop reason: the stops the conditions reported

    def __repr__(self) -> str:
        return f"LoopwatchAutoGen({self.guard!r}, session={self.current_session!r})"

    # -- the pieces --------------------------------------------------------------------------------------

    def workbench(self, tools: Sequence[BaseTool[Any, Any]]) -> LoopwatchWorkbench:
        """A ``StaticWorkbench`` of ``tools`` whose calls this guard watches (``AssistantAgent(workbench=...)``)."""
        return LoopwatchWorkbench(self, tools)

    def model_context(self, initial_messages: list[LLMMessage] | None = None) -> LoopwatchModelContext:
        """An ``UnboundedChatCompletionContext`` that delivers this guard's nudges
        (``AssistantAgent(model_context=...)``)."""
        return LoopwatchModelContext(self, initial_messages)

    def termination(self) -> LoopwatchTermination:
        """A ``TerminationCondition`` that ends the run on a stop; compose it with ``|`` / ``&``:
        ``lw.termination() | MaxMessageTermination(50)``."""
        return LoopwatchTermination(self)

    # -- running -----------------------------------------------------------------------------------------

    @property
    def current_session(self) -> str:
        """The loopwatch session of the current run."""
        return _RUN_SESSION.get() or self.session or DEFAULT_SESSION

    def run_session(self, name: str | None = None) -> contextlib.AbstractContextManager[str]:
        """Runs started inside the block use loopwatch session ``name`` (a fresh ``autogen-<hex>`` when not given);
        yields it."""
        return session_scope(_RUN_SESSION, name, DEFAULT_SESSION)

    async def run(
        self,
        team: Team,
        task: Any = None,
        *,
        loop_session: str | None = None,
        raise_on_stop: bool = False,
        **kwargs: Any,
    ) -> TaskResult:
        """``team.run(task=task, **kwargs)`` in loopwatch session ``loop_session`` (a fresh one, forgotten after the
        run, when not given). Returns the ``TaskResult``; with ``raise_on_stop`` a loopwatch stop raises
        :class:`LoopStopped` instead."""
        with self.run_session(loop_session) as session:
            try:
                result = await team.run(task=task, **kwargs)
            finally:
                self._clear(session)
                if loop_session is None:
                    self.guard.forget(session)
        if raise_on_stop and (stop := self.stopped(result)) is not None:
            raise stop
        return result

    def stopped(self, result: TaskResult) -> LoopStopped | None:
        """The :class:`LoopStopped` for a ``TaskResult`` that loopwatch's termination condition ended; ``None``
        otherwise."""
        reason = result.stop_reason or ""
        with self._lock:
            for key, (verdict, session) in reversed(self._ended.items()):
                if key in reason:
                    return LoopStopped(verdict, session, result)
        return None

    # -- internals ---------------------------------------------------------------------------------------

    def _observe(self, event: Event) -> Verdict:
        return self.guard.observe(self.current_session, event, swarm=self.swarm)

    def _act(self, verdict: Verdict, *, can_block: bool) -> str | None:
        """Carry out a verdict; returns the refusal when the call is to be refused."""
        if verdict.action == "ok":
            return None
        message = verdict.message or verdict.reason or ""
        session = self.current_session
        if verdict.action == "stop":
            with self._lock:
                self._stops.setdefault(session, verdict)
            return message or _REFUSED
        if verdict.action == "block" and can_block:
            return message or _REFUSED
        self._nudges.add(session, message)
        return None

    def _take_nudges(self) -> list[str]:
        return self._nudges.take(self.current_session)

    def _take_stop(self) -> StopMessage | None:
        session = self.current_session
        with self._lock:
            verdict = self._stops.pop(session, None)
            if verdict is None:
                return None
            reason = _stop_reason(verdict)
            self._ended.pop(reason, None)
            self._ended[reason] = (verdict, session)
            while len(self._ended) > 256:
                del self._ended[next(iter(self._ended))]
        return StopMessage(content=reason, source=STOP_SOURCE)

    def _clear(self, session: str) -> None:
        self._nudges.discard(session)
        with self._lock:
            self._stops.pop(session, None)


class LoopwatchWorkbench(StaticWorkbench):
    """A ``StaticWorkbench`` whose tool calls go through a :class:`LoopwatchAutoGen` first."""

    def __init__(self, loopwatch: LoopwatchAutoGen, tools: Sequence[BaseTool[Any, Any]]) -> None:
        super().__init__(list(tools))
        self.loopwatch = loopwatch

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> AutoGenToolResult:
        lw = self.loopwatch
        event = ToolCall(name, dict(arguments or {}), id=call_id)
        refusal = lw._act(lw._observe(event), can_block=True)
        if refusal is not None:
            return AutoGenToolResult(name=name, result=[TextResultContent(content=refusal)], is_error=True)
        result = await super().call_tool(name, arguments, cancellation_token, call_id)
        text = "".join(part.content for part in result.result if isinstance(part, TextResultContent))
        if not text:
            text = as_text([part.model_dump() for part in result.result])
        lw._act(lw._observe(ToolResult(text, tool=name, id=call_id, is_error=result.is_error)), can_block=False)
        return result


class LoopwatchModelContext(UnboundedChatCompletionContext):
    """An ``UnboundedChatCompletionContext`` that adds a :class:`LoopwatchAutoGen`'s pending nudges, as
    ``UserMessage(source="loopwatch")``, before the model reads it (and keeps them)."""

    def __init__(self, loopwatch: LoopwatchAutoGen, initial_messages: list[LLMMessage] | None = None) -> None:
        super().__init__(initial_messages)
        self.loopwatch = loopwatch

    async def get_messages(self) -> list[LLMMessage]:
        for nudge in self.loopwatch._take_nudges():
            await self.add_message(UserMessage(content=nudge, source=STOP_SOURCE))
        return await super().get_messages()


class LoopwatchTermination(TerminationCondition):
    """Ends a team's run when a :class:`LoopwatchAutoGen` says ``stop``: ``StopMessage(source="loopwatch")``."""

    def __init__(self, loopwatch: LoopwatchAutoGen) -> None:
        self.loopwatch = loopwatch
        self._terminated = False

    @property
    def terminated(self) -> bool:
        return self._terminated

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        if self._terminated:
            raise TerminatedException("Termination condition has already been reached")
        lw = self.loopwatch
        for message in messages:
            if message.source == "user" or message.source == STOP_SOURCE:
                continue
            usage = getattr(message, "models_usage", None)
            if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
                event = Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
                lw._act(lw._observe(event), can_block=False)
            if isinstance(message, TextMessage) and message.content.strip():
                lw._act(lw._observe(Message("assistant", message.content)), can_block=False)
        stop = lw._take_stop()
        if stop is not None:
            self._terminated = True
        return stop

    async def reset(self) -> None:
        self._terminated = False
