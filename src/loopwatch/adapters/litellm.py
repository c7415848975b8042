"""LiteLLM: :class:`LoopwatchGuardrail`, a LiteLLM ``CustomGuardrail`` that reads each request's whole message
history, in the SDK (``litellm.callbacks``) or as a guardrail of the LiteLLM proxy, for agents you cannot modify.

    import litellm
    from loopwatch.adapters.litellm import LoopStopped, LoopwatchGuardrail

    guard = LoopwatchGuardrail(preset="default")
    litellm.callbacks = [guard]                      # litellm.acompletion(...) is guarded from now on
    try:
        response = await litellm.acompletion(model=MODEL, messages=history, tools=TOOLS,
                                             metadata={"loopwatch_session": "run-42"})
        response = guard.completion(model=MODEL, messages=history, tools=TOOLS)   # the sync path
    except LoopStopped as stop:
        print(stop.status, stop.verdict.reason)      # LOOP_DETECTED, "search called 8 times..."

The proxy (``litellm --config config.yaml``) loads a custom guardrail class from a Python file next to its
config file, so add a one-line ``loopwatch_guardrail.py`` there
(``from loopwatch.adapters.litellm import LoopwatchGuardrail``) and::

    guardrails:
      - guardrail_name: loopwatch
        litellm_params: {guardrail: loopwatch_guardrail.LoopwatchGuardrail, mode: [pre_call, post_call],
                         default_on: true, preset: default}   # also: store: "sqlite:///loops.db"

Needs ``pip install 'loopwatch[litellm]'``; importing this module without litellm raises
:class:`~loopwatch.errors.MissingExtraError` naming that extra. Tested with litellm 1.82.

What the guard sees, and where:

- before a request (``pre_call``): the messages of the history that it has not seen in an earlier request of
  the session (see Sessions), turned into events by the OpenAI / Anthropic message reader
  (:mod:`loopwatch.formats._chat`): tool results, user and system messages, and any tool call or assistant
  text the guard did not already see in a response (a streamed response, say);
- after the model answered (``post_call``), before the agent can act on it: the response's tool calls
  (``ToolCall(name, arguments, id, thought=TEXT)``; a chat completion, or an Anthropic message on the proxy's
  ``/v1/messages``), or its text as ``Message("assistant", text)`` when it calls
  nothing, and its token counts as ``Usage``. Only the first choice of a chat completion is read.

What the verdicts become:

- ``nudge``: the message is added to the next request of the session as a new ``user`` message (``nudge_role``;
  starting with ``[loopwatch]``) at the end of ``messages``, before it goes to the model. The agent's own history
  is not changed, so the model reads each nudge once;
- ``block`` on a tool call in a response: the call is removed from the response and the reason added to its
  text (``finish_reason`` becomes ``stop`` when no call is left), so the agent never runs that tool. Many agent
  loops end their turn on an answer without tool calls: the reason is then the answer they show. A ``block``
  on anything else (a result, a message, or a call seen only in the history, which already ran) is a nudge;
- ``stop``: the request is rejected with :class:`LoopStopped` (``status`` ``LOOP_DETECTED`` or a limit's own
  status, such as ``MAX_ITERATIONS``; the proxy answers HTTP 400 with its message), raised from ``acompletion``
  or ``completion``. A stop seen in a response discards that response: the proposed calls never reach the
  agent. Every later request of the session is rejected the same way, without asking the model, until
  ``guard.reset(session)`` (a stop lasts, as in the guard itself; a new conversation is a new session).

Sessions: ``metadata={"loopwatch_session": NAME}`` (or ``litellm_metadata``), else the request header
``x-loopwatch-session`` (proxy), else ``litellm_session_id``, else ``metadata["session_id"]``, else a hash of the
request's ``user``, its API key hash and its first messages up to the first user message: one conversation, as
long as the agent does not rewrite its beginning. ``session_key=fn(data) -> str | None`` replaces this. For each
session the adapter remembers how many messages it has seen and a digest of the last ones, so every message is
observed once, and a request sent again (a retry, a router fallback) observes nothing new. When the history was
edited or shortened (trimmed, compacted), it re-syncs after the last message it recognises, or observes the whole
history again when it recognises none. Those counts live in the process: with several proxy workers, route a
session to one worker (a ``store`` shares the guard's state, not this bookkeeping).

litellm's hooks differ by path: ``acompletion`` (and the ``Router``) runs the guardrail's deployment hooks, and
``messages`` must be passed by keyword for them to see it; the sync ``litellm.completion`` runs none, so use
``guard.completion(...)`` there. The proxy runs ``async_pre_call_hook`` and ``async_post_call_success_hook`` (the
deployment hooks then leave the request alone). A streamed response is not rewritten: its calls are seen in the
history of the next request, where a block is a nudge and a stop still rejects the request.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping
from typing import Any, Final, Literal

from .. import errors
from .._guard import Guard
from ..core._events import Event, Message, ToolCall
from ..core._policy import Policy
from ..core._verdict import Verdict
from ..errors import ConfigError, EventError, MissingExtraError
from ..formats import _chat
from ._litellm_history import _RECENT, _REMEMBERED, MARK, _digest, _is_ours, _plain, _Session, default_session
from ._litellm_responses import _refuse, _reply, _shown
from ._shared import NudgeQueue, guard_of

try:
    import litellm
    from litellm.integrations.custom_guardrail import CustomGuardrail
    from litellm.types.guardrails import GuardrailEventHooks
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without litellm
    raise MissingExtraError("litellm", "litellm") from exc

__all__ = ["MARK", "LoopStopped", "LoopwatchGuardrail", "default_session"]

SessionKey = Callable[[Mapping[str, Any]], "str | None"]
NudgeRole = Literal["user", "system"]

_log = logging.getLogger(__name__)
_CHAT_CALLS: Final = frozenset({"completion", "acompletion", "anthropic_messages"})
_IN_WRAPPER: contextvars.ContextVar[bool] = contextvars.ContextVar("loopwatch_litellm_wrapper", default=False)


class LoopStopped(errors.LoopStopped):
    """The guard said ``stop``: the request was rejected (raised from ``acompletion`` / ``completion``).

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status),
    ``session`` the loopwatch session. The LiteLLM proxy answers with ``status_code`` (400, which clients do not
    retry), ``type`` (``loop_detected``) and ``message``.
    """

    status_code: int = 400
    type: str = "loop_detected"
    param: str | None = None

    session: str

    def __init__(self, verdict: Verdict, session: str) -> None:
        super().__init__(verdict, session)
        self.message = str(self)


# -- the guardrail -----------------------------------------------------------------------------------------

# Each step of a request is a generator that yields the events to judge and receives their verdicts, so that
# the sync and async paths share one implementation: _drive runs it with Guard.observe, _adrive with an await.
# Each step of a request is a generator that yields the events to judge and receives their verdicts, so that
# the sync and async paths share one implementation: _drive runs it with Guard.observe, _adrive with an await.
_Steps = Generator[tuple[str, Event], Verdict, Any]


class LoopwatchGuardrail(CustomGuardrail):
    """A LiteLLM guardrail running a loopwatch guard on every chat request and response.

    ``guard``: the :class:`~loopwatch._guard.Guard` to use (else one is made with ``preset``, a preset's name or a
    :class:`~loopwatch.core.Policy`, and ``store``, a store URL). ``session_key``: ``fn(data) -> str | None``,
    the session of a request (``None``: the default rules). ``nudge_role``: the role of nudge messages.
    ``swarm``: passed to ``observe``. ``max_sessions``: how many sessions' bookkeeping to keep (least recently
    used dropped first, and forgotten by an in-memory guard). The other arguments are ``CustomGuardrail``'s
    (``guardrail_name``, ``event_hook``, ``default_on``...), which the proxy passes from its config.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        store: str | None = None,
        session_key: SessionKey | None = None,
        nudge_role: NudgeRole = "user",
        swarm: str | None = None,
        max_sessions: int = 10_000,
        guardrail_name: str | None = "loopwatch",
        event_hook: Any = None,
        default_on: bool = True,
        **kwargs: Any,
    ) -> None:
        if nudge_role not in ("user", "system"):
            raise ConfigError("must be 'user' or 'system'", field="nudge_role")
        if not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError("must be a positive integer", field="max_sessions")
        if store is not None:
            if guard is not None:
                raise ConfigError("give either guard or store, not both", field="store")
            guard = Guard(preset, store=store)
            preset = None
        self.guard = guard_of(guard, preset)
        self.session_key = session_key
        self.nudge_role: NudgeRole = nudge_role
        self.swarm = swarm
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._nudges = NudgeQueue(max_sessions=max_sessions)  # for each session's next request
        self._requests: OrderedDict[str, str] = OrderedDict()  # litellm_call_id -> session
        self._lock = threading.Lock()
        try:
            super().__init__(
                guardrail_name=guardrail_name,
                supported_event_hooks=[GuardrailEventHooks.pre_call, GuardrailEventHooks.post_call],
                event_hook=event_hook,
                default_on=default_on,
                **kwargs,
            )
        except ValueError as exc:  # LiteLLM's own check of a setting (an event hook it does not know)
            hooks = "GuardrailEventHooks" in str(exc)
            choices = f" (expected one of {', '.join(repr(h.value) for h in GuardrailEventHooks)})" if hooks else ""
            raise ConfigError(f"{exc}{choices}", field="event_hook" if hooks else "guardrail") from exc

    def __repr__(self) -> str:
        return f"LoopwatchGuardrail({self.guard!r})"

    # -- the SDK: litellm.acompletion runs these two (litellm.completion runs none) -------------------------

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        if not self._sdk_request(kwargs, call_type, GuardrailEventHooks.pre_call):
            return kwargs
        result: dict[str, Any] = await self._adrive(self._before(kwargs, call_type))
        return result

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        if not self._sdk_request(request_data, call_type, GuardrailEventHooks.post_call):
            return response
        return await self._adrive(self._after(request_data, response))

    def completion(self, model: str, messages: list[Any], **kwargs: Any) -> Any:
        """``litellm.completion`` with this guardrail around it (the sync path runs no request hooks)."""
        token = _IN_WRAPPER.set(True)
        try:
            data = self._drive(self._before({**kwargs, "model": model, "messages": messages}, "completion"))
            response = litellm.completion(**data)
            if data.get("stream"):
                return response
            return self._drive(self._after(data, response))
        finally:
            _IN_WRAPPER.reset(token)

    # -- the proxy: run when the guardrail's mode and default_on (or the request's guardrails) say so ---------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> Any:
        if _call_type(call_type) not in _CHAT_CALLS:
            return data
        return await self._adrive(self._before(data, call_type))

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: Any, response: Any) -> Any:
        return await self._adrive(self._after(data, response))

    # -- sessions ----------------------------------------------------------------------------------------------

    def session_of(self, data: Mapping[str, Any]) -> str:
        """The loopwatch session of a request (see the module's documentation)."""
        if self.session_key is not None:
            name = self.session_key(data)
            if name is not None:
                return name
        return default_session(data)

    def stopped(self, session: str) -> LoopStopped | None:
        """The :class:`LoopStopped` that rejects ``session``'s requests, or ``None``."""
        with self._lock:
            state = self._sessions.get(session)
        return LoopStopped(state.stop, session) if state is not None and state.stop is not None else None

    def reset(self, session: str) -> None:
        """Let ``session`` go on after a stop: its loop state is cleared (limits keep counting)."""
        with self._lock:
            state = self._sessions.get(session)
            if state is not None:
                state.stop = None
        self._nudges.discard(session)
        self.guard.reset(session)

    def forget(self, session: str) -> None:
        """Drop everything known of ``session``, here and in the guard."""
        with self._lock:
            self._sessions.pop(session, None)
        self._nudges.discard(session)
        self.guard.forget(session)

    # -- internals ---------------------------------------------------------------------------------------------

    def _sdk_request(self, data: Mapping[str, Any], call_type: Any, hook: GuardrailEventHooks) -> bool:
        if _IN_WRAPPER.get() or data.get("proxy_server_request") is not None:
            return False  # the wrapper or the proxy's own hooks deal with it
        if _call_type(call_type) not in _CHAT_CALLS:
            return False
        return self.event_hook is None or bool(self._event_hook_is_event_type(hook))

    def _state(self, session: str) -> _Session:
        evicted: list[str] = []
        with self._lock:
            state = self._sessions.get(session)
            if state is None:
                state = self._sessions[session] = _Session(session)
                while len(self._sessions) > self.max_sessions:
                    evicted.append(self._sessions.popitem(last=False)[0])
            self._sessions.move_to_end(session)
        for name in evicted:
            self._nudges.discard(name)
            if self.guard.store is None:  # a stored session may be in use elsewhere
                self.guard.forget(name)
        return state

    def _remember_request(self, data: Mapping[str, Any], session: str) -> None:
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str):
            with self._lock:
                self._requests[call_id] = session
                while len(self._requests) > _REMEMBERED:
                    self._requests.popitem(last=False)

    def _request_session(self, data: Mapping[str, Any]) -> str:
        call_id = data.get("litellm_call_id")
        with self._lock:
            known = self._requests.get(call_id) if isinstance(call_id, str) else None
        return known if known is not None else self.session_of(data)

    def _claim(self, state: _Session, messages: list[Any]) -> list[Any]:
        """The messages of ``messages`` the session has not observed yet, marked as observed."""
        plain = [_plain(m) for m in messages]
        with self._lock:
            n = len(plain)
            start = 0
            if state.seen and state.seen <= n and _digest(plain[state.seen - 1]) == state.last:
                start = state.seen
            elif state.seen:  # the history was edited or shortened: go on after the last message recognised
                recent = set(state.recent)
                start = next((i + 1 for i in range(n - 1, -1, -1) if _digest(plain[i]) in recent), 0)
            new = plain[start:]
            state.recent.extend(_digest(m) for m in new[-_RECENT:])
            state.seen = n
            state.last = _digest(plain[-1]) if plain else ""
        return new

    def _before(self, data: dict[str, Any], call_type: Any) -> _Steps:
        """The request's new messages are observed; nudges are added to it; a stop rejects it."""
        messages = data.get("messages")
        if not isinstance(messages, list):
            return data
        session = self.session_of(data)
        self._remember_request(data, session)
        state = self._state(session)
        events: list[Event] = []
        for message in self._claim(state, messages):
            if _is_ours(message):
                continue
            try:
                events += _chat.message_events(message, state.conversation)
            except EventError as exc:
                _log.warning("loopwatch: skipped a message of session %s: %s", session, exc)
        if state.stop is not None:
            raise LoopStopped(state.stop, session)
        notes: list[str] = []
        for event in events:
            if isinstance(event, ToolCall):
                if event.id is not None and event.id in state.calls:
                    continue  # seen in the response that proposed it
                state.saw_call(event)
            elif isinstance(event, Message) and event.role == "assistant" and _digest(event.text) in state.texts:
                continue
            verdict = yield session, event
            if verdict.action == "stop":
                state.stop = verdict
                raise LoopStopped(verdict, session)
            if verdict.action != "ok" and (verdict.message or verdict.reason):
                notes.append(verdict.message or verdict.reason or "")
        notes = [*self._nudges.take(session), *notes]
        if notes:
            role = "user" if _call_type(call_type) == "anthropic_messages" else self.nudge_role
            data["messages"] = [*messages, {"role": role, "content": f"{MARK} " + "\n\n".join(notes)}]
        return data

    def _after(self, data: Mapping[str, Any], response: Any) -> _Steps:
        """The response's calls (or text) and usage are observed; blocked calls are removed; a stop rejects it."""
        found = _reply(response)
        if found is None:
            return response
        message, usage = found
        session = self._request_session(data)
        state = self._state(session)
        try:
            events = _chat.message_events(message, state.conversation)
        except EventError as exc:
            _log.warning("loopwatch: could not read a response of session %s: %s", session, exc)
            return response
        spent = _chat.usage_event(usage)
        refused: dict[int, str] = {}  # position among the response's tool calls -> the reason
        calls = -1
        for event in [*events, *([spent] if spent is not None else [])]:
            if isinstance(event, ToolCall):
                calls += 1
                state.saw_call(event)
            verdict = yield session, event
            if verdict.action == "stop":
                state.stop = verdict
                raise LoopStopped(verdict, session)
            text = verdict.message or verdict.reason or ""
            if verdict.action == "block" and isinstance(event, ToolCall):
                refused[calls] = f"{MARK} {event.tool}({_shown(event.args)}) was not run. {text}".rstrip()
            elif verdict.action != "ok" and text:
                self._nudges.add(session, text)
        if refused:
            _refuse(response, refused)
            found = _reply(response)
        if found is not None:
            final = _chat.assistant_text(found[0].get("content"))
            if final:
                state.texts.append(_digest(final))
        return response

    def _drive(self, steps: _Steps) -> Any:
        try:
            item = next(steps)
            while True:
                session, event = item
                item = steps.send(self.guard.observe(session, event, swarm=self.swarm))
        except StopIteration as done:
            return done.value

    async def _adrive(self, steps: _Steps) -> Any:
        try:
            item = next(steps)
            while True:
                session, event = item
                if self.guard.store is None:
                    verdict = self.guard.observe(session, event, swarm=self.swarm)
                else:  # store I/O off the event loop
                    verdict = await asyncio.to_thread(self.guard.observe, session, event, swarm=self.swarm)
                item = steps.send(verdict)
        except StopIteration as done:
            return done.value


def _call_type(call_type: Any) -> str:
    value = getattr(call_type, "value", call_type)
    return value if isinstance(value, str) else ""
