"""Self-reported stalls: an orchestrator whose own progress ledger keeps saying it is stuck.

Magentic-One's orchestrator writes a *progress ledger* before every turn, a JSON object that answers, among
other things, ``"is_in_loop"`` and ``"is_progress_being_made"``, each with a reason::

    Updated Ledger:
    {"is_request_satisfied": {"reason": "...", "answer": false},
     "is_in_loop": {"reason": "The recent actions have been repetitive...", "answer": true},
     "is_progress_being_made": {"reason": "No new significant information...", "answer": false}, ...}

Magentic-One counts such turns as *stalls* and replans after a few of them; until then it keeps re-issuing
reworded instructions to its web agent, the rephrase loops of its recorded runs. The orchestrator's own
verdict is an LLM's judgement that loopwatch did not have to pay for: ``threshold`` ledgers in a row that say
the run is in a loop or not making progress are reported as pattern ``stalled``. A ledger that says progress is
being made is not a stall, whatever it says about loops: its own reasons then read "we are repeatedly scrolling
down the page" beside "the agent is making progress through the article".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from .._checked import integer_at_least
from .._fingerprint import preview
from .._ladder import Ladder
from .._patterns import Pattern
from ._base import Detector, Finding, Step, pushed
from ._state import integer, integer_tuple, keys_of, optional_integer

STALLED = Pattern(
    "stalled",
    "Your own progress ledger has said {count} times in a row that you are stuck ({ledger}). Believe it: do "
    "not hand out the same instruction again in other words. Change the plan (another source, another agent, "
    "another way to get the answer) or say what is blocking you.",
    ladder=Ladder.of(nudge=2),
)
"""An orchestrator's own progress ledger saying, again, that the run is stuck."""

_MARK: Final = '"is_in_loop"'
_MAX_CHARS: Final = 20_000
"""A ledger is a few hundred words; a longer message is not parsed."""
_DECODER: Final = json.JSONDecoder()
_ATTEMPTS: Final = 4
"""Braces a ledger may start at (a ``{`` or two in the prose before it); past them the message is not one."""


def ledger_of(text: str) -> dict[str, Any] | None:
    """The progress ledger a message holds (a JSON object in it, text before and after aside, that answers
    ``is_in_loop``, starting at one of its first four braces), or ``None``."""
    if _MARK not in text or len(text) > _MAX_CHARS:
        return None
    start = text.find("{")
    for _ in range(_ATTEMPTS):
        if start < 0:
            break
        try:
            ledger, _ = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON from here (or nested past the parser's depth)
            ledger = None
        if isinstance(ledger, dict) and isinstance(ledger.get("is_in_loop"), dict):
            return ledger
        start = text.find("{", start + 1)
    return None


def stalled(ledger: dict[str, Any]) -> str | None:
    """The ledger's own reason when it says the run is in a loop or not making progress, else ``None``. A ledger
    that says progress is being made is not a stall, even when it also says the run is in a loop (scrolling down a
    page: the same action, a new part of the page each time)."""
    loop, progress = ledger.get("is_in_loop"), ledger.get("is_progress_being_made")
    progressing = progress.get("answer") if isinstance(progress, dict) else None
    if progressing is True:
        return None
    if isinstance(loop, dict) and loop.get("answer") is True:
        return str(loop.get("reason") or "is_in_loop")
    if isinstance(progress, dict) and progressing is False:
        return str(progress.get("reason") or "is_progress_being_made")
    return None


@dataclass(slots=True)
class StallState:
    """A :class:`SelfReportDetector`'s session state: the ledgers in a row that said the run is stuck."""

    n: int = 0
    start: int | None = None
    idx: tuple[int, ...] = ()


class SelfReportDetector(Detector[StallState]):
    """``threshold`` progress ledgers in a row (see the module docstring) that say the run is stuck; a ledger
    that says it is making progress ends the streak."""

    name = "self_report"
    kinds = frozenset({"message"})
    patterns = (STALLED,)
    reset_on_user = False  # the orchestrator's ledger speaks for the whole run

    def __init__(self, *, threshold: int = 2) -> None:
        integer_at_least(threshold, 1, "self_report.threshold")
        self.threshold = threshold

    fresh_shared = True  # only an orchestrator's ledgers change the state

    def new_state(self) -> StallState:
        return StallState()

    def keeps_fresh(self, step: Step) -> bool:
        return not (step.role == "assistant" and step.text and _MARK in step.text)  # see ledger_of

    def is_fresh(self, state: StallState) -> bool:
        return state.n == 0 and state.start is None and not state.idx

    def dump_state(self, state: StallState) -> dict[str, Any]:
        return {"n": state.n, "start": state.start, "idx": list(state.idx)}

    def load_state(self, data: dict[str, Any]) -> StallState:
        keys_of("self_report", data, ("n", "start", "idx"))
        return StallState(
            integer(data["n"], "self_report: n"),
            optional_integer(data["start"], "self_report: start"),
            integer_tuple(data["idx"], "self_report: idx"),
        )

    def observe(self, state: StallState, step: Step) -> Finding | None:
        if step.role != "assistant" or not step.text:
            return None
        ledger = ledger_of(step.text)
        if ledger is None:
            return None
        reason = stalled(ledger)
        if reason is None:
            state.n, state.start, state.idx = 0, None, ()
            return None
        if state.n == 0:
            state.start = step.index
        state.n += 1
        state.idx = pushed(state.idx, step.index, 8)
        if state.n < self.threshold:
            return None
        n = state.n
        return Finding(
            pattern="stalled",
            count=n,
            key=f"stalled:{state.start}",
            loop_start=state.start,
            reason=f"the orchestrator's own progress ledger said {n} times in a row that it is stuck: "
            f"{preview(reason, 160)}",
            indices=state.idx,
            facts={"ledger": preview(reason, 200)},
        )


def self_report(*, threshold: int = 2) -> SelfReportDetector:
    """The self-reported stall detector (see :class:`SelfReportDetector`)."""
    return SelfReportDetector(threshold=threshold)
