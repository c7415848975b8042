"""LangChain v1 agents (``create_agent``) and LangGraph: :class:`LoopwatchMiddleware`.

    from langchain.agents import create_agent
    from loopwatch.adapters.langchain import LoopwatchMiddleware, stop_verdict

    agent = create_agent(model, tools, middleware=[LoopwatchMiddleware(preset="default")])
    result = agent.invoke({"messages": [{"role": "user", "content": "..."}]})
    if (verdict := stop_verdict(result)) is not None:   # the run was stopped: verdict.status == "LOOP_DETECTED"
        ...

Needs ``pip install 'loopwatch[langchain]'``; importing this module without LangChain raises
:class:`~loopwatch.errors.MissingExtraError` naming that extra.

What the guard sees:

- ``wrap_tool_call``: ``ToolCall(name, args, id=tool_call_id, thought=TEXT)`` before the tool runs (``TEXT``:
  the assistant's text, given to the first call of its message), then ``ToolResult(content, id=...,
  is_error=status == "error")`` after it ran; a tool that raises gives ``ToolResult(..., is_error=True)`` and
  the exception goes on (LangGraph's interrupts are not results and are not observed);
- ``after_model``: ``Message("assistant", text)`` for a reply without tool calls (with tool calls, the text is
  the first call's ``thought``);
- ``before_agent``: ``Message("user", text)`` for the user's newest message (which resets the loop counters,
  as the policy's ``reset_on_user`` says).

What the verdicts become:

- ``nudge``: a ``HumanMessage`` with ``verdict.message`` added to the messages before the model's next call
  (``before_model``). A human message, not a system one: it is persisted in the conversation, and providers
  such as Anthropic accept no system message after the first. A ``block`` on a tool result (the tool already
  ran) is delivered the same way;
- ``block`` on a tool call: the tool does not run; its result is ``ToolMessage(verdict.message,
  status="error")``;
- ``stop`` (``on_stop="end"``, the default): the call is refused as for a block, and the run ends cleanly at
  the next step (``jump_to: "end"``) with a last ``AIMessage`` saying why. The verdict is in the run's final
  state under ``"loopwatch_stop"`` (its :meth:`~loopwatch.core.Verdict.to_json`); :func:`stop_verdict`
  turns it back into a :class:`~loopwatch.core.Verdict` (``None`` when the run was not stopped).
  With ``on_stop="raise"``, :class:`LoopStopped` (carrying ``.verdict``) is raised out of ``invoke``.

Sessions: the run's ``thread_id`` (``config["configurable"]["thread_id"]``, or the key named by
``session_key``, or what a ``session_key`` callable returns for the run's config): runs of one thread are one
conversation, and a run resumed after an ``interrupt()`` keeps its session. Without a thread id, each run gets
a session of its own (``langchain-<uuid>``, forgotten when the run ends), so two runs never share state.
Pending nudges and the stop live in the graph's state (checkpointed with the thread, never shared between
threads); a node re-executed on resume is not counted twice (verdicts are remembered per tool call id and
message id). A new run on a thread whose last run was stopped starts with the loop counters cleared (limits
keep counting), as a new user prompt does in the other adapters.

The hooks run the guard in the calling thread (``Guard.observe`` is fast and thread-safe); the async hooks
(``ainvoke``, ``astream``) call it directly too.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall, ToolResult
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError, MissingExtraError
from ._shared import guard_of

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
    from langchain.agents.middleware.types import OmitFromInput, PrivateStateAttr
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without langchain
    raise MissingExtraError("langchain", "langchain") from exc

__all__ = ["LoopStopped", "LoopwatchMiddleware", "LoopwatchState", "stop_verdict"]

logger = logging.getLogger("loopwatch")

SessionKey = str | Callable[[Mapping[str, Any]], str | None]
OnStop = Literal["end", "raise"]
STOP_KEY = "loopwatch_stop"
_RUN_PREFIX = "langchain-"
_CLEAR: dict[str, Any] = {"__loopwatch_clear__": True}
_MAX_REMEMBERED = 10_000
_REFUSED = "Refused by loopwatch: this call repeats a loop."


class LoopStopped(errors.LoopStopped):
    """The guard stopped the run (``on_stop="raise"``): raised out of ``invoke``.

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session. A :class:`loopwatch.LoopStopped`, as every adapter's stop is.
    """

    def __init__(self, verdict: Verdict, session: str | None = None) -> None:
        super().__init__(verdict, session)


def _pending(left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Reducer of the pending nudges: new ones are appended once (by id), delivery receipts remove theirs."""
    items = list(left or [])
    for item in right or []:
        if item.get("delivered"):
            items = [i for i in items if i["id"] != item["id"]]
        elif all(i["id"] != item["id"] for i in items):
            items.append(item)
    return items


def _stop(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any] | None:
    """Reducer of the stop: the first one wins (parallel tool calls), ``_CLEAR`` removes it."""
    if right is None or right.get("__loopwatch_clear__"):
        return None
    return left if left else right


class LoopwatchState(AgentState[Any]):
    """The agent state's loopwatch fields (merged into the agent's state by ``create_agent``)."""

    loopwatch_session: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwatch_nudges: NotRequired[Annotated[list[dict[str, Any]], PrivateStateAttr, _pending]]
    loopwatch_stop: NotRequired[Annotated[dict[str, Any] | None, OmitFromInput, _stop]]


def stop_verdict(result: Mapping[str, Any]) -> Verdict | None:
    """The stop verdict in a run's final state (what ``invoke`` returned), or ``None`` if it was not stopped."""
    data = result.get(STOP_KEY)
    if not data:
        return None
    fields = {k: v for k, v in data.items() if k in Verdict.__dataclass_fields__}
    return Verdict(**fields)


def _text(content: Any) -> str:
    """A message's content as text (a string, or the text of its content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return "" if content is None else str(content)


def _messages(state: Any) -> list[AnyMessage]:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    return list(messages) if isinstance(messages, Sequence) else []


def _stop_message(verdict: Verdict, session: str) -> AIMessage:
    return AIMessage(
        content=f"loopwatch stopped this run: {verdict.status} ({verdict.pattern}): "
        f"{verdict.reason or verdict.message}",
        id=f"loopwatch-stop-{session}:{verdict.index}",
    )


class LoopwatchMiddleware(AgentMiddleware[LoopwatchState, Any]):
    """Watches a LangChain agent for loops: nudges, blocks calls, stops the run (see the module's docs).

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (share one across agents to share its sinks and
    store); by default a new one with ``preset`` (``"default"``). ``session_key``: the ``configurable`` key
    naming the session (``"thread_id"``), or a callable given the run's config and returning the session (or
    ``None`` for a session of the run's own). ``on_stop``: ``"end"`` (end the run, the verdict in the state's
    ``"loopwatch_stop"``) or ``"raise"`` (raise :class:`LoopStopped`). ``swarm``: passed to ``observe``.
    """

    state_schema = LoopwatchState

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        session_key: SessionKey = "thread_id",
        on_stop: OnStop = "end",
        swarm: str | None = None,
    ) -> None:
        super().__init__()
        if on_stop not in ("end", "raise"):
            raise ConfigError("must be 'end' or 'raise'", field="on_stop")
        self.guard = guard_of(guard, preset)
        self.session_key = session_key
        self.on_stop = on_stop
        self.swarm = swarm
        self._seen: OrderedDict[tuple[str, str], Verdict] = OrderedDict()
        self._stopped: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LoopwatchMiddleware({self.guard!r}, on_stop={self.on_stop!r})"

    # -- sessions and observing ----------------------------------------------------------------------------

    def _config_session(self) -> str | None:
        """The session named by the run's config (its thread id by default), if any."""
        try:
            config: Mapping[str, Any] = get_config()
        except RuntimeError:  # outside a graph run
            return None
        if callable(self.session_key):
            value: Any = self.session_key(config)
        else:
            value = (config.get("configurable") or {}).get(self.session_key)
        return str(value) if value not in (None, "") else None

    @staticmethod
    def _thread_id() -> Any:
        try:
            return (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:
            return None

    def _session(self, state: Any) -> str:
        session = self._config_session()
        if session is None and isinstance(state, Mapping):
            session = state.get("loopwatch_session")
        return session or "langchain"

    def _observe(self, session: str, key: str | None, event: Event) -> Verdict:
        """The guard's verdict on ``event``; the same ``key`` again (a node re-executed on resume) is not re-counted."""
        if key is not None:
            with self._lock:
                cached = self._seen.get((session, key))
            if cached is not None:
                return cached
        verdict = self.guard.observe(session, event, swarm=self.swarm)
        with self._lock:
            if key is not None:
                self._seen[(session, key)] = verdict
                while len(self._seen) > _MAX_REMEMBERED:
                    self._seen.popitem(last=False)
            if verdict.action == "stop":
                self._stopped.add(session)
        return verdict

    @staticmethod
    def _nudge(session: str, verdict: Verdict) -> dict[str, Any]:
        return {"id": f"{session}:{verdict.index}", "text": verdict.message or verdict.reason or ""}

    def _stopped_update(self, verdict: Verdict, session: str) -> dict[str, Any]:
        if self.on_stop == "raise":
            raise LoopStopped(verdict, session)
        return {STOP_KEY: verdict.to_json()}

    # -- before_agent / after_agent: the session, the user's message ------------------------------------------

    def before_agent(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        update: dict[str, Any] = {}
        session = self._config_session() or state.get("loopwatch_session")
        if session is None:
            session = f"{_RUN_PREFIX}{uuid.uuid4().hex}"
        if state.get("loopwatch_session") != session:
            update["loopwatch_session"] = session
        with self._lock:
            was_stopped = session in self._stopped
            self._stopped.discard(session)
        if was_stopped or state.get(STOP_KEY):  # the thread's last run was stopped: this run starts afresh
            self.guard.reset(session)
            update[STOP_KEY] = _CLEAR
        messages = _messages(state)
        if messages and isinstance(messages[-1], HumanMessage):
            user = messages[-1]
            verdict = self._observe(
                session, f"user:{user.id}" if user.id else None, Message("user", _text(user.content))
            )
            if verdict.action in ("nudge", "block"):
                update["loopwatch_nudges"] = [self._nudge(session, verdict)]
        return update or None

    async def abefore_agent(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        session = state.get("loopwatch_session")
        if session and session.startswith(_RUN_PREFIX) and self._config_session() is None and not self._thread_id():
            self.guard.forget(session)  # a run of its own, without a thread to resume: drop its state
            with self._lock:
                self._stopped.discard(session)
        return None

    async def aafter_agent(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    # -- before_model: deliver nudges, end a stopped run ------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        verdict = stop_verdict(state)
        if verdict is not None:
            return {"jump_to": "end", "messages": [_stop_message(verdict, self._session(state))]}
        pending = state.get("loopwatch_nudges") or []
        if not pending:
            return None
        texts: list[str] = []
        for item in pending:
            if item["text"] and item["text"] not in texts:
                texts.append(item["text"])
        receipts = [{"id": item["id"], "delivered": True} for item in pending]
        if not texts:
            return {"loopwatch_nudges": receipts}
        nudge = HumanMessage(content="\n\n".join(texts), id=f"loopwatch-nudge-{pending[0]['id']}")
        return {"messages": [nudge], "loopwatch_nudges": receipts}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    # -- after_model: the assistant's reply -----------------------------------------------------------------

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = _messages(state)
        if not messages or not isinstance(messages[-1], AIMessage):
            return None
        reply = messages[-1]
        text = _text(reply.content)
        if reply.tool_calls or not text.strip():  # with tool calls, the text is the first call's thought
            return None
        session = self._session(state)
        verdict = self._observe(session, f"reply:{reply.id}" if reply.id else None, Message("assistant", text))
        if verdict.action == "stop":
            return {
                **self._stopped_update(verdict, session),
                "jump_to": "end",
                "messages": [_stop_message(verdict, session)],
            }
        if verdict.action in ("nudge", "block"):
            return {"loopwatch_nudges": [self._nudge(session, verdict)]}
        return None

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: LoopwatchState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    # -- wrap_tool_call: observe, block, observe the result -------------------------------------------------

    def _thought(self, state: Any, call_id: str | None) -> str | None:
        if call_id is None:
            return None
        for message in reversed(_messages(state)):
            if isinstance(message, AIMessage) and message.tool_calls:
                ids = [c.get("id") for c in message.tool_calls]
                if call_id in ids:
                    return (_text(message.content) or None) if ids[0] == call_id else None
        return None

    def _before_call(self, request: ToolCallRequest) -> tuple[str, Verdict, ToolMessage | Command[Any] | None]:
        """Observe the call; the refusal to return instead of running it, if any."""
        call = request.tool_call
        call_id = call.get("id")
        session = self._session(request.state)
        args = call.get("args")
        event = ToolCall(
            tool=call["name"],
            args=args if isinstance(args, Mapping) else {"input": args},
            id=call_id,
            thought=self._thought(request.state, call_id),
        )
        verdict = self._observe(session, f"call:{call_id}" if call_id else None, event)
        if verdict.action not in ("block", "stop"):
            return session, verdict, None
        refusal = ToolMessage(
            content=verdict.message or _REFUSED,
            tool_call_id=call_id or "",
            name=call["name"],
            status="error",
        )
        if verdict.action == "block":
            return session, verdict, refusal
        return session, verdict, Command(update={"messages": [refusal], **self._stopped_update(verdict, session)})

    def _after_call(
        self, request: ToolCallRequest, session: str, verdict: Verdict, result: ToolMessage | Command[Any]
    ) -> ToolMessage | Command[Any]:
        """Observe the result; add the nudges and the stop to it."""
        call_id = request.tool_call.get("id")
        message = result if isinstance(result, ToolMessage) else None
        if isinstance(result, Command) and isinstance(result.update, Mapping):
            for item in result.update.get("messages") or []:
                if isinstance(item, ToolMessage) and item.tool_call_id == call_id:
                    message = item
        verdicts = [verdict]
        if message is not None:
            event = ToolResult(
                output=_text(message.content),
                tool=request.tool_call["name"],
                is_error=message.status == "error",
                id=call_id,
            )
            verdicts.append(self._observe(session, f"result:{call_id}" if call_id else None, event))
        update: dict[str, Any] = {}
        nudges = [self._nudge(session, v) for v in verdicts if v.action in ("nudge", "block")]
        if nudges:
            update["loopwatch_nudges"] = nudges
        if verdicts[-1].action == "stop":
            update.update(self._stopped_update(verdicts[-1], session))
        if not update:
            return result
        if isinstance(result, ToolMessage):
            return Command(update={"messages": [result], **update})
        if result.update is None or isinstance(result.update, Mapping):
            merged = dict(result.update or {})
            merged.update(update)
            return Command(graph=result.graph, update=merged, resume=result.resume, goto=result.goto)
        logger.warning("loopwatch: cannot add a nudge to a tool's Command whose update is not a mapping")
        return result

    def _failed(self, request: ToolCallRequest, session: str, exc: BaseException) -> None:
        call_id = request.tool_call.get("id")
        event = ToolResult(
            output=f"{type(exc).__name__}: {exc}", tool=request.tool_call["name"], is_error=True, id=call_id
        )
        self._observe(session, f"result:{call_id}" if call_id else None, event)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        session, verdict, refusal = self._before_call(request)
        if refusal is not None:
            return refusal
        try:
            result = handler(request)
        except GraphBubbleUp:  # an interrupt: the call runs again on resume
            raise
        except Exception as exc:
            self._failed(request, session, exc)
            raise
        return self._after_call(request, session, verdict, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        session, verdict, refusal = self._before_call(request)
        if refusal is not None:
            return refusal
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self._failed(request, session, exc)
            raise
        return self._after_call(request, session, verdict, result)
