"""smolagents: :class:`LoopwatchAgent`, a ``ToolCallingAgent`` that asks a guard before each tool call, and
:class:`LoopwatchCallback`, the step callback it uses (usable alone with any ``MultiStepAgent``).

    from smolagents import InferenceClientModel
    from loopwatch.adapters.smolagents import LoopStopped, LoopwatchAgent

    agent = LoopwatchAgent(tools=[...], model=InferenceClientModel(), loopwatch_preset="default")
    try:
        answer = agent.run("fix the failing test")
    except LoopStopped as stop:
        print(stop.status, stop.verdict.reason)                     # LOOP_DETECTED, "search called 8 times..."

Needs ``pip install 'loopwatch[smolagents]'``; importing this module without smolagents raises
:class:`~loopwatch.errors.MissingExtraError` naming that extra.

What the guard sees, and where (:class:`LoopwatchAgent`):

- a tool call: ``ToolCall(tool_name, arguments, thought=TEXT)`` in ``execute_tool_call``, before the tool runs
  (``TEXT`` is the text of the model message that made the call). ``final_answer`` is not observed;
- a tool result: ``ToolResult(output, tool=tool_name)`` (the return value as text) after it ran, or
  ``ToolResult(ERROR, is_error=True)`` when it raised (the error goes on to smolagents);
- in the ``ActionStep`` callback: ``Message("assistant", text)`` for a step without tool calls, and the step's
  token counts as ``Usage`` for the policy's token limits.

With :class:`LoopwatchCallback` alone (``step_callbacks={ActionStep: cb}``, e.g. for a ``CodeAgent``), the calls
are seen after the step, from ``step.tool_calls``, with the step's observations (or error) as their result:
a stop ends the run at the next step, but nothing can be refused.

What the verdicts become:

- ``nudge``: the message is appended to the step's ``observations`` at the end of the step (by the callback);
  smolagents builds the next prompt from memory, so the model reads it on its next turn, and it stays in memory;
- ``block`` on a tool call: ``execute_tool_call`` returns the message instead of running the tool; the model
  reads it as the call's observation. A refused call has no result for the guard. A ``block`` on a result or a
  message, where nothing is left to refuse, is delivered as a nudge;
- ``stop``: the call is refused as for a block, then ``agent.interrupt()``; smolagents ends the run at the
  next step (``AgentError("Agent interrupted.")``), and ``run`` raises :class:`LoopStopped` instead (a subclass
  of ``AgentError``) carrying the :class:`~loopwatch.core.Verdict`, its ``status`` (``LOOP_DETECTED`` or a
  limit's own status, such as ``MAX_ITERATIONS``) and the ``session``. A stop seen on the run's last step also
  raises :class:`LoopStopped` once the run returns. With ``run(stream=True)`` the generator raises it.
  With the callback alone, ``callback.stopped(agent)`` gives the verdict after smolagents' ``AgentError``.

Sessions (one per run): ``agent.run(..., loop_session=NAME)`` names it; else ``loopwatch_session=`` (a fixed
name for every run); else a fresh ``smolagents-<hex>`` per run, forgotten by the guard when the agent's next run
starts in another session. A run with ``reset=False`` continues the session of the previous run. Not
thread-safe across concurrent runs of one agent object (smolagents agents are not either).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall, ToolResult, Usage
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError, MissingExtraError
from ._shared import GuardedAdapter, as_text

try:
    from smolagents import ActionStep, ToolCallingAgent  # type: ignore[import-untyped]
    from smolagents.utils import AgentError  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without smolagents
    raise MissingExtraError("smolagents", "smolagents") from exc

__all__ = ["DEFAULT_SESSION", "LoopStopped", "LoopwatchAgent", "LoopwatchCallback"]

DEFAULT_SESSION: Final = "smolagents"
_REFUSED: Final = "Refused by loopwatch: this call repeats a loop."
_FINAL_ANSWER: Final = "final_answer"
_STATE: Final = "_loopwatch_run"


class LoopStopped(errors.LoopStopped, AgentError):  # type: ignore[misc]
    """The guard said ``stop``: raised out of ``agent.run`` instead of smolagents' ``"Agent interrupted."``.

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session.
    """

    session: str

    def __init__(self, verdict: Verdict, session: str) -> None:
        message = self._stopped(verdict, session)
        Exception.__init__(self, message)  # AgentError.__init__ would log it through an AgentLogger
        self.message = message


@dataclass
class _Run:
    """The loopwatch state of one run of one agent."""

    session: str
    fresh: bool
    stop: Verdict | None = None
    thought: str | None = None


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"arguments": raw} if raw else {}
        return dict(value) if isinstance(value, dict) else {"arguments": value}
    return {} if raw is None else {"arguments": as_text(raw)}


class LoopwatchCallback(GuardedAdapter):
    """The ``ActionStep`` callback: ``ToolCallingAgent(..., step_callbacks={ActionStep: cb})``.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``: a preset's name or
    a :class:`~loopwatch.core.Policy`). ``session``: a fixed loopwatch session for every run. ``swarm``:
    passed to ``observe``.
    """

    def __repr__(self) -> str:
        return f"LoopwatchCallback({self.guard!r})"

    # -- the callback ------------------------------------------------------------------------------------

    def __call__(self, step: Any, agent: Any = None) -> None:
        if not isinstance(step, ActionStep) or agent is None:
            return
        run = self.run_of(agent, step)
        calls = [c for c in (step.tool_calls or []) if c.name != _FINAL_ANSWER]
        if not isinstance(agent, LoopwatchAgent):
            self._observe_step(agent, run, step, calls)
        elif not step.tool_calls and isinstance(step.model_output, str) and step.model_output.strip():
            self.act(agent, run, Message("assistant", step.model_output), can_block=False)
        usage = step.token_usage
        if usage is not None and (usage.input_tokens or usage.output_tokens):
            event = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            self.act(agent, run, event, can_block=False)
        waiting = self._nudges.take(run.session)
        if waiting:
            notes = "\n\n".join(waiting)
            step.observations = f"{step.observations}\n\n{notes}" if step.observations else notes

    def stopped(self, agent: Any) -> LoopStopped | None:
        """The :class:`LoopStopped` of ``agent``'s current (or last) run if loopwatch stopped it, else ``None``."""
        run = getattr(agent, _STATE, None)
        if isinstance(run, _Run) and run.stop is not None:
            return LoopStopped(run.stop, run.session)
        return None

    # -- internals ---------------------------------------------------------------------------------------

    def run_of(self, agent: Any, step: Any = None) -> _Run:
        """The loopwatch state of ``agent``'s run; a new run starts on the first action step of a fresh memory."""
        run = getattr(agent, _STATE, None)
        starting = (
            step is not None
            and step.step_number == 1
            and not any(isinstance(s, ActionStep) for s in agent.memory.steps)
        )
        if isinstance(run, _Run) and not (starting and not isinstance(agent, LoopwatchAgent)):
            return run
        if isinstance(run, _Run):
            self._nudges.discard(run.session)  # what the run that ended was to be told
            if run.fresh:
                self.guard.forget(run.session)
        if self.session is not None:
            run = _Run(self.session, fresh=False)
        else:
            run = _Run(f"{DEFAULT_SESSION}-{uuid.uuid4().hex[:12]}", fresh=True)
        setattr(agent, _STATE, run)
        return run

    def _observe_step(self, agent: Any, run: _Run, step: Any, calls: list[Any]) -> None:
        thought = step.model_output if isinstance(step.model_output, str) and step.model_output.strip() else None
        for call in calls:
            self.act(agent, run, ToolCall(call.name, _arguments(call.arguments), id=call.id, thought=thought), False)
        if not calls:
            if thought and not step.tool_calls:
                self.act(agent, run, Message("assistant", thought), can_block=False)
            return
        single = calls[0] if len(calls) == 1 else None
        tool, call_id = (single.name, single.id) if single is not None else (None, None)
        if step.error is not None:
            event = ToolResult(str(step.error), tool=tool, is_error=True, id=call_id)
        else:
            event = ToolResult(as_text(step.observations or ""), tool=tool, id=call_id)
        self.act(agent, run, event, can_block=False)

    def act(self, agent: Any, run: _Run, event: Event, can_block: bool) -> str | None:
        """Observe ``event`` and carry out the verdict; returns the refusal when the call is to be refused."""
        verdict = self.guard.observe(run.session, event, swarm=self.swarm)
        if verdict.action == "ok":
            return None
        message = verdict.message or verdict.reason or ""
        if verdict.action == "stop":
            if run.stop is None:
                run.stop = verdict
            agent.interrupt()
            return message or _REFUSED
        if verdict.action == "block" and can_block:
            return message or _REFUSED
        if message:
            self._nudges.add(run.session, message)
        return None


class LoopwatchAgent(ToolCallingAgent):  # type: ignore[misc]
    """A ``ToolCallingAgent`` whose tool calls a loopwatch guard sees (and may refuse) before they run.

    Takes ``ToolCallingAgent``'s arguments, plus ``loopwatch``: a :class:`LoopwatchCallback` (else one is made
    from ``loopwatch_guard`` / ``loopwatch_preset`` / ``loopwatch_session``). The callback is added to the
    agent's ``ActionStep`` callbacks. ``run(..., loop_session=NAME)`` runs in loopwatch session ``NAME``.
    """

    def __init__(
        self,
        *args: Any,
        loopwatch: LoopwatchCallback | None = None,
        loopwatch_guard: Guard | None = None,
        loopwatch_preset: str | Policy | None = None,
        loopwatch_session: str | None = None,
        **kwargs: Any,
    ) -> None:
        if loopwatch is not None and (loopwatch_guard, loopwatch_preset, loopwatch_session) != (None, None, None):
            raise ConfigError("give either loopwatch or loopwatch_guard/preset/session", field="loopwatch")
        self.loopwatch = loopwatch or LoopwatchCallback(
            loopwatch_guard, preset=loopwatch_preset, session=loopwatch_session
        )
        callbacks = kwargs.pop("step_callbacks", None)
        if callbacks is None:
            callbacks = {ActionStep: [self.loopwatch]}
        elif isinstance(callbacks, Mapping):
            callbacks = dict(callbacks)
            mine = callbacks.get(ActionStep)
            others = [] if mine is None else list(mine) if isinstance(mine, (list, tuple)) else [mine]
            callbacks[ActionStep] = [*others, self.loopwatch]
        else:  # a list of callbacks for every step type
            callbacks = {ActionStep: [*callbacks, self.loopwatch]}
        super().__init__(*args, step_callbacks=callbacks, **kwargs)

    def run(self, task: str, *args: Any, loop_session: str | None = None, **kwargs: Any) -> Any:
        """``ToolCallingAgent.run`` in a loopwatch session of its own; raises :class:`LoopStopped` on a stop."""
        reset = kwargs.get("reset", True) if len(args) < 2 else args[1]
        previous = getattr(self, _STATE, None)
        if loop_session is not None:
            run = _Run(loop_session, fresh=False)
        elif not reset and isinstance(previous, _Run):
            run = _Run(previous.session, fresh=previous.fresh)
        elif self.loopwatch.session is not None:
            run = _Run(self.loopwatch.session, fresh=False)
        else:
            run = _Run(f"{DEFAULT_SESSION}-{uuid.uuid4().hex[:12]}", fresh=True)
        if isinstance(previous, _Run) and previous.fresh and previous.session != run.session:
            self.loopwatch.guard.forget(previous.session)
        setattr(self, _STATE, run)
        stream = kwargs.get("stream", False) if not args else args[0]
        if stream:
            return self._guarded_stream(run, super().run(task, *args, **kwargs))
        try:
            result = super().run(task, *args, **kwargs)
        except AgentError as exc:
            if run.stop is not None and not isinstance(exc, LoopStopped):
                raise LoopStopped(run.stop, run.session) from exc
            raise
        if run.stop is not None:
            raise LoopStopped(run.stop, run.session)
        return result

    def _guarded_stream(self, run: _Run, steps: Iterator[Any]) -> Generator[Any, None, None]:
        try:
            yield from steps
        except AgentError as exc:
            if run.stop is not None and not isinstance(exc, LoopStopped):
                raise LoopStopped(run.stop, run.session) from exc
            raise
        if run.stop is not None:
            raise LoopStopped(run.stop, run.session)

    def process_tool_calls(self, chat_message: Any, memory_step: Any) -> Any:
        content = chat_message.content
        self._loopwatch_thought = content.strip() if isinstance(content, str) and content.strip() else None
        return super().process_tool_calls(chat_message, memory_step)

    def execute_tool_call(self, tool_name: str, arguments: dict[str, str] | str) -> Any:
        if tool_name == _FINAL_ANSWER:
            return super().execute_tool_call(tool_name, arguments)
        run = self.loopwatch.run_of(self)
        if run.stop is not None:  # stopping: refuse whatever else the model asked for
            return run.stop.message or _REFUSED
        thought = getattr(self, "_loopwatch_thought", None)
        refusal = self.loopwatch.act(self, run, ToolCall(tool_name, _arguments(arguments), thought=thought), True)
        if refusal is not None:
            return refusal
        try:
            result = super().execute_tool_call(tool_name, arguments)
        except AgentError as exc:
            event = ToolResult(f"{type(exc).__name__}: {exc}", tool=tool_name, is_error=True)
            self.loopwatch.act(self, run, event, can_block=False)
            raise
        self.loopwatch.act(self, run, ToolResult(as_text(result), tool=tool_name), can_block=False)
        return result
