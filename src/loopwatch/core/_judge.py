"""An optional LLM judge for what the cheap detectors cannot decide (as Gemini CLI does).

    from loopwatch import Guard, LoopJudge, JudgeAnswer

    def ask_model(request):                 # your LLM call; request.prompt() is a ready-made prompt
        reply = client.responses.create(model="gpt-5-mini", input=request.prompt())
        return JudgeAnswer.parse(reply.output_text)           # or JudgeAnswer(True, 0.9, "asks again")

    guard = Guard(judge=LoopJudge(ask_model, after=20, every=10, budget=3))

The judge is consulted only when a detector says it is undecided (for example the same intent reworded one
time short of the rephrase rule's count), only after ``after`` events of a session, at most once every
``every`` events, and at most ``budget`` times per session. It sees a compact summary of the last
``history`` events (:class:`JudgeRequest`) and answers loop / not loop with a confidence and a reason. A
"loop" answer with at least ``min_confidence`` becomes a ``nudge`` (pattern ``judged_loop``), never a block or
a stop; every answer, and every failure of the judge, is written to the audit log (``judge.verdict``,
``judge.error``). A judge that raises or answers nonsense never reaches the agent: the event stays ``ok``.

This module holds the settings and the bookkeeping; the guard calls the judge (the detection core never
calls out).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._checked import integer_at_least
from ._errors import ConfigError, LoopwatchError
from ._events import Event, Message, TextDelta, ToolCall, ToolResult, Usage

_LINE_CHARS: Final = 300
_CONFIDENCE: Final = re.compile(r"confidence\W+([01](?:\.\d+)?)", re.I)

PROMPT: Final = (
    "You watch an AI agent for loops: repeating the same action or the same request in other words while "
    "learning nothing new. Here are its last steps, oldest first:\n\n{history}\n\nThe cheap checks say: "
    "{suspicion}.\nIs the agent stuck in a loop? Answer with JSON only: "
    '{{"loop": true or false, "confidence": 0.0 to 1.0, "reason": "one sentence"}}'
)


class JudgeAnswerError(LoopwatchError, ValueError):
    """A judge's answer that cannot be read as loop / not loop; ``field`` names the wrong part (``loop``,
    ``confidence``) when there is one. Inside a guard it is logged and counted (``judge_errors``), and the rules'
    verdict stands."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message if field is None else f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    """The judge's answer: ``loop`` or not, its ``confidence`` (0..1) and a one-sentence ``reason``."""

    loop: bool
    confidence: float = 1.0
    reason: str = ""

    def __post_init__(self) -> None:
        if type(self.confidence) is int:  # a float as the rest of the answers give it (compiled, the engine reads one)
            object.__setattr__(self, "confidence", float(self.confidence))

    @classmethod
    def of(cls, value: Any) -> JudgeAnswer:
        """An answer from what a judge returned: a :class:`JudgeAnswer`, a mapping with ``loop`` (and
        ``confidence``, ``reason``), a ``(loop, confidence[, reason])`` tuple, a bool, or model text
        (:meth:`parse`). Raises :class:`JudgeAnswerError` (a ``ValueError``) for anything else."""
        if isinstance(value, JudgeAnswer):
            return value
        if isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            return cls._checked(value.get("loop"), value.get("confidence", 1.0), value.get("reason", ""))
        if isinstance(value, tuple) and 2 <= len(value) <= 3:
            return cls._checked(value[0], value[1], value[2] if len(value) == 3 else "")
        raise JudgeAnswerError(
            f"a judge must answer a JudgeAnswer, a mapping, a tuple or text, not {type(value).__name__}"
        )

    @classmethod
    def parse(cls, text: str) -> JudgeAnswer:
        """An answer from a model's text: the first JSON object in it, else a leading yes/no word."""
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                data = json.loads(text[start : end + 1])
            except ValueError:
                data = None
            if isinstance(data, Mapping) and "loop" in data:
                return cls.of(data)
        head = text.strip().lower()
        if head.startswith(("yes", "loop", "true")) or head.startswith(("no", "not", "false")):
            found = _CONFIDENCE.search(text)
            confidence = float(found.group(1)) if found else 0.5
            return cls._checked(head.startswith(("yes", "loop", "true")), confidence, text.strip()[:200])
        raise JudgeAnswerError(f"cannot read a loop / not loop answer from {text[:80]!r}")

    @classmethod
    def _checked(cls, loop: Any, confidence: Any, reason: Any) -> JudgeAnswer:
        if not isinstance(loop, bool):
            raise JudgeAnswerError(f"must be true or false, not {loop!r}", field="loop")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise JudgeAnswerError(f"must be a number from 0 to 1, not {confidence!r}", field="confidence")
        return cls(loop, float(confidence), str(reason)[:500])


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """What the judge sees: the session, the index of the event it is asked about, the last events as
    short lines (``"12 call bash {...}"``, ``"13 result: ..."``, ``"14 assistant: ..."``) and what the cheap
    detectors suspect."""

    session: str
    index: int
    history: tuple[str, ...]
    suspicion: str

    def prompt(self) -> str:
        """A ready-made prompt asking for a JSON answer (:meth:`JudgeAnswer.parse` reads it)."""
        return PROMPT.format(history="\n".join(self.history), suspicion=self.suspicion)


def summary_line(index: int, event: Event, limit: int = _LINE_CHARS) -> str | None:
    """One event as a short line for the judge (``None`` for events it need not see)."""
    if isinstance(event, ToolCall):
        args = json.dumps(event.args, ensure_ascii=False, sort_keys=True, default=str)
        thought = f" ({event.thought.strip()[:100]})" if event.thought else ""
        text = f"{index} call {event.tool} {args}{thought}"
    elif isinstance(event, ToolResult):
        status = "error" if event.is_error or (event.exit_code not in (None, 0)) else "result"
        text = f"{index} {status}: {event.output.strip()}"
    elif isinstance(event, Message):
        text = f"{index} {event.role}: {event.text.strip()}"
    elif isinstance(event, (TextDelta, Usage)):
        return None
    else:
        text = f"{index} {type(event).__name__.lower()}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class JudgeMemory:
    """One session's judge bookkeeping (kept by the guard, in its process): the last events as lines, how
    many times the judge was asked, and at which event last."""

    lines: deque[str] = field(default_factory=deque)
    asked: int = 0
    last: int | None = None


class LoopJudge:
    """The judge settings (see the module docstring). ``judge(request) -> answer`` is your callable."""

    def __init__(
        self,
        judge: Callable[[JudgeRequest], Any],
        *,
        after: int = 20,
        every: int = 10,
        budget: int = 3,
        min_confidence: float = 0.7,
        history: int = 12,
    ) -> None:
        if not callable(judge):
            raise ConfigError(f"the judge must be callable, not {type(judge).__name__}", field="judge")
        for name, value, low in (
            ("after", after, 0),
            ("every", every, 1),
            ("budget", budget, 0),
            ("history", history, 1),
        ):
            integer_at_least(value, low, name)
        if (
            isinstance(min_confidence, bool)
            or not isinstance(min_confidence, (int, float))
            or not 0 <= min_confidence <= 1
        ):
            raise ConfigError(f"must be a number from 0 to 1, not {min_confidence!r}", field="min_confidence")
        self.judge = judge
        self.after = after
        self.every = every
        self.budget = budget
        self.min_confidence = float(min_confidence)
        self.history = history

    def __repr__(self) -> str:
        name = getattr(self.judge, "__qualname__", type(self.judge).__name__)
        return (
            f"LoopJudge({name}, after={self.after}, every={self.every}, budget={self.budget}, "
            f"min_confidence={self.min_confidence}, history={self.history})"
        )

    def remember(self, memory: JudgeMemory, index: int, event: Event) -> None:
        """Add an event to the session's recent history."""
        line = summary_line(index, event)
        if line is not None:
            memory.lines.append(line)
            while len(memory.lines) > self.history:
                memory.lines.popleft()

    def due(self, memory: JudgeMemory, index: int) -> bool:
        """May the judge be asked about event ``index`` (turns, rate and budget allow it)?"""
        if index + 1 < self.after or memory.asked >= self.budget:
            return False
        return memory.last is None or index - memory.last >= self.every

    def ask(self, memory: JudgeMemory, session: str, index: int, suspicion: str) -> JudgeAnswer:
        """Ask the judge (counted against the budget even when it fails); raises what the judge raised, or
        :class:`JudgeAnswerError` for an unreadable answer."""
        memory.asked += 1
        memory.last = index
        request = JudgeRequest(session, index, tuple(memory.lines), suspicion)
        return JudgeAnswer.of(self.judge(request))
