"""The feedback-repeat rule: the environment (or the user) answering every attempt with the same canned complaint."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .._checked import fraction, integer_at_least, optional_integer_at_least
from .._fingerprint import preview
from .._kernels import alnum_word_pair
from .._lazy_re import lazy_compile
from ._base import (
    Detector,
    Finding,
    Step,
    argument_word_bytes,
    has_code_fence,
    signature_of,
)
from ._error_retry import ErrorRetryDetector, _same_action
from ._failure_text import _jaccard, error_bits_of
from ._packed import (
    Indices,
    index_tuple,
    indices,
    indices_json,
    indices_pushed,
)
from ._state import (
    flag,
    integer,
    keys_of,
    optional_integer,
    optional_text,
    optional_words,
    sketch,
    sketch_json,
    text,
    words_json,
)


@dataclass(slots=True)
class FeedbackState:
    """A :class:`FeedbackRepeatDetector`'s session state."""

    sig: str | None = None
    """The signature of the reply that keeps coming back."""
    n: int = 0
    start: int | None = None
    last_action: int | None = None
    text: str = ""
    idx: Indices = b""
    words: int | None = None
    """The reply's sketch (:func:`error_bits`); ``None`` until a reply is counted."""
    attempt: bytes | None = None
    """The words of the last attempt (see :func:`_attempt_words`)."""
    variants: bool = False
    """Did the last attempt differ from the one before it?"""


class FeedbackRepeatDetector(Detector[FeedbackState]):
    """The environment (or the user) answering every attempt with the same canned complaint.

    Harnesses reply to a malformed turn with a user message ("Please always provide EXACTLY ONE
    action..."); when that same reply (digits aside) keeps coming back and the agent keeps trying, it is
    an error retry. Reported on the agent's next attempt once the same reply came ``threshold - 1`` times.

    An attempt that again writes its action out in a reply (a fenced code block) instead of making a call the
    harness could run is the same failure once more (the complaint was about the turn's form, and the form
    has not changed): it is reported from ``reply_threshold`` attempts on (``reply_threshold - 1``
    complaints before it). A call may be the fix, and a reply without code (a story told on, "continue" after
    "continue") is a conversation: they wait for ``threshold``. ``None`` (the default) treats all alike.

    An attempt that differs from the one before it (less than ``variant_similarity`` of their words shared: another
    patch after "the patch did not resolve the issue, try again") is the agent trying something, as an error retried
    with other arguments is: it is reported from ``variants`` attempts on. What is judged is the latest attempt: the
    same attempt made again after the same reply counts from ``threshold`` (or ``reply_threshold``) again, however
    much the attempts before it varied.
    """

    name = "feedback_repeat"
    kinds = frozenset({"call", "result", "message"})
    patterns = ErrorRetryDetector.patterns
    reset_on_user = False

    def __init__(
        self,
        *,
        threshold: int = 3,
        reply_threshold: int | None = None,
        similarity: float = 0.8,
        variant_similarity: float = 0.5,
        variants: int = 5,
    ) -> None:
        integer_at_least(threshold, 2, "feedback_repeat.threshold")
        optional_integer_at_least(reply_threshold, 2, "feedback_repeat.reply_threshold")
        integer_at_least(variants, 2, "feedback_repeat.variants")
        fraction(similarity, "feedback_repeat.similarity")
        fraction(variant_similarity, "feedback_repeat.variant_similarity")
        self.threshold = threshold
        self.reply_threshold = reply_threshold
        self.similarity = similarity
        self.variant_similarity = variant_similarity
        self.variants = variants

    def new_state(self) -> FeedbackState:
        return FeedbackState()

    def dump_state(self, state: FeedbackState) -> dict[str, Any]:
        return {
            "sig": state.sig,
            "n": state.n,
            "start": state.start,
            "last_action": state.last_action,
            "text": state.text,
            "idx": indices_json(state.idx),
            "words": "" if state.words is None else sketch_json(state.words),
            "attempt": words_json(state.attempt),
            "variants": state.variants,
        }

    def load_state(self, data: dict[str, Any]) -> FeedbackState:
        what = "feedback_repeat"
        keys_of(what, data, ("sig", "n", "start", "last_action", "text", "idx"), ("words", "attempt", "variants"))
        said = data.get("words", "")
        return FeedbackState(
            sig=optional_text(data["sig"], f"{what}: sig"),
            n=integer(data["n"], f"{what}: n"),
            start=optional_integer(data["start"], f"{what}: start"),
            last_action=optional_integer(data["last_action"], f"{what}: last_action"),
            text=text(data["text"], f"{what}: text"),
            idx=indices(data["idx"], f"{what}: idx"),
            words=None if said == "" else sketch(said, f"{what}: words"),
            attempt=optional_words(data.get("attempt"), f"{what}: attempt"),
            variants=flag(data.get("variants", False), f"{what}: variants"),
        )

    def observe(self, state: FeedbackState, step: Step) -> Finding | None:
        if step.kind == "message" and step.role == "user":
            # the same complaint, or an equivalent one ("found 3 actions", then "found 2 actions")
            signature = signature_of(step)
            words = error_bits_of(step)
            if signature != state.sig and not (
                state.words is not None and _jaccard(words, state.words) >= self.similarity
            ):
                state.sig, state.n, state.start, state.idx = signature, 0, state.last_action, b""
                state.words, state.variants = words, False
                state.text = preview(step.text or "", 160)
            state.n += 1
            return None
        acting = step.kind == "call" or (step.kind == "message" and step.role == "assistant")
        if step.kind == "result" and not step.failed:
            state.sig, state.n, state.start, state.idx, state.words, state.variants = None, 0, None, b"", None, False
        if not acting:
            return None
        state.last_action = step.index
        state.idx = indices_pushed(state.idx, step.index, 8)
        attempt = _attempt_words(step)
        previous = state.attempt
        state.variants = (
            state.sig is not None
            and attempt is not None
            and previous is not None
            and not _same_action(attempt, previous, self.variant_similarity)
        )
        state.attempt = attempt
        unrun = step.kind == "message" and has_code_fence(step.text or "")  # an action written out, not made
        threshold = self.reply_threshold if unrun and self.reply_threshold is not None else self.threshold
        if state.variants:
            threshold = max(threshold, self.variants)
        if state.sig is None or state.n + 1 < threshold:
            return None
        n = state.n + 1
        return Finding(
            pattern="error_retry",
            count=n,
            key=f"feedback:{state.sig}:{state.start}",
            loop_start=state.start,
            reason=f"attempt {n} after the same reply {state.n} times: {state.text}",
            indices=index_tuple(state.idx),
            facts={
                "tool": step.tool or "reply",
                "error": state.text,
                "call": step.tool or "reply",
                "failures": state.n,
            },
            blockable=step.kind == "call",
        )


def feedback_repeat(
    *,
    threshold: int = 3,
    reply_threshold: int | None = None,
    similarity: float = 0.8,
    variant_similarity: float = 0.5,
    variants: int = 5,
) -> FeedbackRepeatDetector:
    """The repeated-feedback detector (see :class:`FeedbackRepeatDetector`)."""
    return FeedbackRepeatDetector(
        threshold=threshold,
        reply_threshold=reply_threshold,
        similarity=similarity,
        variant_similarity=variant_similarity,
        variants=variants,
    )


FENCED_CODE: Final = lazy_compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
"""The code of a fenced block (what follows the fence's line, up to the next fence or the end of the text), as a
regular expression: what :func:`fenced_code` finds (the definition the tests compare it with)."""


def fenced_code(text: str) -> list[str]:
    """``FENCED_CODE.findall(text)``, found with ``str.find`` (the expression's lazy ``.*?`` looks for the closing
    fence at every character). A block opens at the first fence left: a fence with no line break after it opens none,
    and neither can any fence after it."""
    blocks = []
    fence = text.find("```")
    while fence >= 0:
        start = text.find("\n", fence + 3) + 1
        if start == 0:
            break
        end = text.find("```", start)
        if end < 0:
            blocks.append(text[start:])
            break
        blocks.append(text[start:end])
        fence = text.find("```", end + 3)
    return blocks


def _attempt_words(step: Step, limit: int = 128) -> bytes | None:
    """What an attempt does, as sorted word hashes: a call's argument values, or the code a reply writes out (its
    fenced blocks: the hashes of their first ``limit`` distinct words, as a call's are read); ``None`` for a reply
    without code (talk, not an action to compare)."""
    if step.kind == "call":
        return argument_word_bytes(step)
    text = step.text or ""
    if not has_code_fence(text):
        return None
    return alnum_word_pair(" ".join(fenced_code(text[:8_000])), limit)[0]
