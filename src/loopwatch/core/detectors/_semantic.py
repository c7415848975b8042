"""Rephrase loops: the same intent in other words, while nothing new comes back.

An *intent* is what the agent says it will do: an assistant message, or the reasoning that comes with a tool
call. Two intents are "the same" when their embeddings are close (cosine, with an embedder such as
:func:`loopwatch.semantic.builtin_embedder`) or, without one, when their words overlap (a bottom-k word
sketch). An *observation* is what comes back: a tool result or a user reply. Its *information gain* is the
number of its lines the session has not seen in an observation before (lowercased, quoted strings and numbers
aside, so ``No matches found for "x"`` and ``No matches found for "y"`` are one line; capped per
observation). A change that works (an edit, a write) is new information too. With an embedder, a user reply
that restates one of the last two replies in other words (cosine 0.75 or more: "I don't have the reservation
ID", then "Sorry, the reservation ID is not something I have at hand") brings nothing new, whatever its lines,
unless it holds a digit or repeats a sentence of that reply word for word and says another beside it (a template
with its reason changed): changes an embedding barely weighs.

A repeated intent is evidence of a loop only when the observations since its earlier occurrence brought
(almost) nothing new: an agent working through new material in similar words is not flagged.

An *instruction* is an intent too: the prose a call hands to another agent or tool (an orchestrator's
``{"instruction": "Please scan through the video..."}`` to a web-surfing agent, a delegated task, a question).
The same instruction reworded again and again, with nothing new in between but the delegate's replies, is
the orchestrator's rephrase loop. A delegate's reply always brings new lines (a new screenshot's text), in loops
as much as in healthy runs, so it cannot tell them apart and is not counted as progress: a delegate told four
times in a row, in nearly the same words, to page through results is reported too (a nudge in the default
preset, never a stop).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any, Final, Protocol

from .._checked import fraction, integer_at_least
from .._errors import ConfigError
from .._fingerprint import preview
from .._ladder import Ladder
from .._patterns import Pattern
from .._tools import moves
from ._base import Detector, Finding, Step, bits_similarity, has_code_fence, mutates, pushed
from ._rephrase_state import _REPLIES, _SEEN_BITS, _SKETCH_BITS, NO_CHANNEL, remembered, state_from_json, state_json
from ._rephrase_state import Channel as Channel
from ._rephrase_state import Rep as Rep
from ._rephrase_state import RephraseState as RephraseState
from ._rephrase_text import instruction_of as instruction_of
from ._rephrase_text import intent_text as intent_text
from ._rephrase_text import observation_bits, one_changed, sentence_hashes, word_sketch
from ._rephrase_text import quantize as quantize
from ._rephrase_text import quantized_cosine as quantized_cosine
from ._state import Flat, flat_append, flat_pop
from ._state_pack import pack_table, pack_with, table_unpacker, unpack_with

_SEEN_FULL: Final = _SEEN_BITS // 2
"""When half the bits of the seen-lines filter are set it starts afresh: "new" means new lately."""
_CHANNELS: Final = 3
_ASKS: Final = "asks:"
"""The prefix of an instructions channel (one per tool the instructions go to)."""
_DIGIT: Final = re.compile(r"\d")


class TextEmbedder(Protocol):
    """Texts in, vectors out (see :class:`loopwatch.semantic.Embedder`)."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


REPHRASE = Pattern(
    "rephrase",
    "You have stated the same intent {count} times in different words and learned nothing new in between "
    "({intent}). Rewording the same request or plan will not change the outcome: say what is blocking you, "
    "use what you already have, or try a genuinely different approach.",
    ladder=Ladder.of(nudge=3),
    evidence=("similarity", "match"),
)
"""The same intent reworded while nothing new is learned."""


def _pack_channels(channels: Flat) -> tuple[Any, ...]:
    return pack_table(channels, tuple)  # a Channel is a tuple (of its own class, which marshal does not write)


_unpack_channels = table_unpacker(Channel)


class RephraseDetector(Detector[RephraseState]):
    """The same intent reworded (see the module docstring), per channel: tool-call reasoning, or one
    worker's messages.

    An intent of at least ``min_chars`` characters (its first ``max_chars`` compared) *repeats* when it is at
    least ``threshold`` similar (cosine with ``embedder``, ``message_threshold`` for messages; else
    ``lexical_threshold`` word overlap) to one of the channel's last ``window`` intents and the observations
    since that one brought at most ``max_gain`` new lines. ``count`` repeats in a row (the earlier occurrence
    counts) are reported as pattern ``rephrase``; an intent that does not repeat ends the streak.
    ``undecided`` (in the state) is set on a step where the cheap evidence is suggestive but not enough (a streak of
    repeats short of ``count``, or a similarity within ``margin`` under the threshold with no new
    information): what an LLM judge may be asked about.

    Intents are compared without their code blocks (the call itself, again) and labels (``THOUGHT:``). Intents
    of tool calls are judged when the call's result arrives (the embedding then stays off the call's path); a
    call that changes something (an edit, a write) and works counts as new information. Messages are judged
    when they arrive. User replies do not reset this rule: they are observations (with an embedder, a reply
    at least ``reply_threshold`` similar to one of the last two and without a digit is no news).

    Messages are compared at a lower cosine (0.8 by default) than a call's reasoning (0.95). Between two
    messages not one new line may have come back; reasoning comes with calls whose own results may be new in
    ways lines do not show ("More than 594 files matched", then 288, then 192: three searches narrowing down).
    On the dev labels messages gain two episodes from 0.76 to 0.82 and no false alarm (at 0.75 a run's
    repeated final summary counts); reasoning catches nothing the other rules miss at any cosine from 0.88 to
    1.0, and below 0.93 it flags that narrowing search, which the labels call healthy.

    With ``instructions=True`` the prose a call hands over (see :func:`instruction_of`) is compared with the
    last instructions to the same tool, once its result has arrived: ``instruction_count`` in a row at least
    ``instruction_threshold`` similar (cosine or word overlap), with at most ``instruction_gain`` new lines
    between consecutive ones, are reported too. The default, 5, is what one observation can add (gain is
    capped per observation): a delegate's reply always brings new lines (a new screenshot's text, as many in
    the corpus's loops as in its healthy runs), so its own reply is allowed whatever it says; news from
    elsewhere on top of it (a user reply, a change that worked) is progress. The higher threshold and count
    keep an orchestrator working through a list ("check the hours of A, B and C", then "of B and C") from
    counting.
    """

    name = "rephrase"
    kinds = frozenset({"call", "result", "message"})
    patterns = (REPHRASE,)
    reset_on_user = False

    def __init__(
        self,
        *,
        embedder: TextEmbedder | None = None,
        threshold: float = 0.95,
        message_threshold: float = 0.8,
        lexical_threshold: float = 0.6,
        window: int = 2,
        max_gain: int = 0,
        count: int = 3,
        min_chars: int = 40,
        max_chars: int = 400,
        gain_cap: int = 5,
        margin: float = 0.1,
        instructions: bool = True,
        instruction_threshold: float = 0.9,
        instruction_count: int = 4,
        instruction_gain: int = 5,
        reply_threshold: float = 0.75,
    ) -> None:
        for name, share in (
            ("threshold", threshold),
            ("message_threshold", message_threshold),
            ("lexical_threshold", lexical_threshold),
            ("instruction_threshold", instruction_threshold),
            ("reply_threshold", reply_threshold),
        ):
            fraction(share, f"rephrase.{name}")
        for name, number, low in (
            ("window", window, 1),
            ("count", count, 2),
            ("instruction_count", instruction_count, 2),
            ("max_gain", max_gain, 0),
            ("instruction_gain", instruction_gain, 0),
            ("gain_cap", gain_cap, 1),
            ("min_chars", min_chars, 0),
            ("max_chars", max_chars, 1),
        ):
            integer_at_least(number, low, f"rephrase.{name}")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 1:
            raise ConfigError(f"must be a number from 0 to 1, got {margin!r}", field="rephrase.margin")
        if embedder is not None and not callable(getattr(embedder, "embed", None)):  # a model's name, say
            raise ConfigError(
                f"must be an embedder (an object with embed(texts)), not a {type(embedder).__name__}: "
                "loopwatch.semantic.embedder_from() makes one of a model, an API client or a callable, "
                "loopwatch.semantic.builtin_embedder() is the built-in one",
                field="embedder",
            )
        self._embedder = embedder
        self.similarity = "embedding" if embedder is not None else "lexical"
        self.threshold = threshold if embedder is not None else lexical_threshold
        self.message_threshold = message_threshold if embedder is not None else lexical_threshold
        self.window = window
        self.max_gain = max_gain
        self.count = count
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.gain_cap = gain_cap
        self.margin = margin
        self.instructions = instructions
        self.instruction_threshold = instruction_threshold
        self.instruction_count = instruction_count
        self.instruction_gain = instruction_gain
        self.reply_threshold = reply_threshold

    def _params(self) -> dict[str, Any]:
        params = super()._params()
        if self._embedder is not None:
            params["embedder"] = self._embedder
        return params

    def new_state(self) -> RephraseState:
        return RephraseState()

    def dump_state(self, state: RephraseState) -> dict[str, Any]:
        return state_json(state)

    def pack_state(self, state: RephraseState) -> tuple[Any, ...]:
        return pack_with(state, channels=_pack_channels)

    def unpack_state(self, packed: Any) -> RephraseState:
        return unpack_with(RephraseState, packed, channels=_unpack_channels)

    def load_state(self, data: dict[str, Any]) -> RephraseState:
        return state_from_json(data, vectors=self._embedder is not None)

    def observe(self, state: RephraseState, step: Step) -> Finding | None:
        state.undecided = None
        if step.kind == "call":
            # kept raw: the work (and the embedding) waits for the result, off the tool call's path
            text = step.text
            if text and len(text) >= self.min_chars:
                head = text[: self.max_chars]
                state.pending = (step.index, text[: 2 * self.max_chars] if has_code_fence(head) else head)
            else:
                state.pending = None
            asked = instruction_of(step.args, self.min_chars) if self.instructions else None
            state.asked = (step.index, asked[: self.max_chars], step.tool or "") if asked else None
            return None
        if step.kind == "result":
            return self._result(state, step)
        if step.role == "assistant":
            text = intent_text(step.text or "", self.max_chars)
            if len(text) < self.min_chars:
                return None
            rule = (self.message_threshold, self.max_gain, self.count)
            return self._intent(state, f"said:{step.event.worker or ''}", text, step.index, step.index, rule)
        if step.role == "user":
            self._reply(state, step)
        return None

    def _result(self, state: RephraseState, step: Step) -> Finding | None:
        """Judge the intent of the call this result answers, then (after counting what the result brought) the
        instruction the call handed over."""
        pending, state.pending = state.pending, None
        asked, state.asked = state.asked, None
        finding = None
        if pending is not None and pending[0] == step.call_index:
            if not step.failed and (mutates(step) or moves(step.tool_key)):
                state.gain += self.gain_cap  # a change that worked, or a move elsewhere: something new happened
            text = intent_text(pending[1], self.max_chars)
            if len(text) >= self.min_chars:
                finding = self._intent(state, "calls", text, pending[0], step.index)
        self._observe(state, step)
        if finding is None and asked is not None and asked[0] == step.call_index:
            text = intent_text(asked[1], self.max_chars)
            if len(text) >= self.min_chars:
                rule = (self.instruction_threshold, self.instruction_gain, self.instruction_count)
                finding = self._intent(state, _ASKS + asked[2], text, asked[0], step.index, rule)
        return finding

    def suspicion(self, state: RephraseState, index: int) -> str | None:
        if state.undecided != index:
            return None
        return "the agent may be restating an earlier intent in other words, with nothing new learned since"

    # -- information gain --------------------------------------------------------------------------------

    def _reply(self, state: RephraseState, step: Step) -> None:
        """A user reply: its new lines are news, unless (with an embedder) it restates one of the last replies
        in other words (cosine at least ``reply_threshold``): a user saying once more, in new sentences, that
        they do not have the number brings nothing new. Embeddings cannot weigh a small change in much the same
        text, so two replies are always news: one with a digit in it (an ID, a date, an amount: embeddings barely
        tell ``ID 8JX2QZ`` from ``ID 7HKL3M``), and one that repeats a sentence of the close reply word for word
        and says another beside it (a harness's template with its reason changed: "Your edit could not be applied
        to the program. None of the edits can match the original program.", then "... No edits can be parsed.")."""
        if self._embedder is not None:
            said = intent_text(step.text or "", self.max_chars)
            if len(said) >= self.min_chars:
                rep = self._represent(said)
                if rep:  # a reply without a vector is compared with nothing, and not kept
                    replies = state.replies
                    earlier = state.said if len(state.said) == len(replies) else (b"",) * len(replies)
                    sentences = sentence_hashes(said)
                    close = [n for n, other in enumerate(replies) if self._compare(rep, other) >= self.reply_threshold]
                    state.replies = pushed(replies, str(rep), _REPLIES)
                    state.said = pushed(earlier, sentences, _REPLIES)
                    if close and not _DIGIT.search(said) and not any(one_changed(sentences, earlier[n]) for n in close):
                        return
        self._observe(state, step)

    def _observe(self, state: RephraseState, step: Step) -> None:
        """Count the lines of an observation the session has not seen before, and remember them."""
        seen = state.seen or 0
        known = seen.bit_count()
        if known >= _SEEN_FULL:
            seen, known = 0, 0
        seen |= observation_bits(step, _SEEN_BITS)
        # the new lines are the bits the union holds beyond the ones known (no complement of 1,024 bits made)
        state.gain += min(seen.bit_count() - known, self.gain_cap)
        state.seen = seen

    # -- intents -----------------------------------------------------------------------------------------

    def _intent(
        self,
        state: RephraseState,
        channel: str,
        text: str,
        index: int,
        report_at: int,
        rule: tuple[float, int, int] | None = None,
    ) -> Finding | None:
        """Compare an intent with its channel's recent ones; ``rule`` is (threshold, max_gain, count), the
        detector's own unless given (instructions have theirs)."""
        threshold, max_gain, count = rule or (self.threshold, self.max_gain, self.count)
        rep = self._represent(text)
        if not rep:
            return None
        channels, found = flat_pop(state.channels, channel)
        entry: Channel = found or NO_CHANNEL
        earlier = entry.past
        match, similarity, near = self._match(state, earlier, rep, threshold, max_gain)
        past = remembered(earlier, index, rep, state.gain, self.window)
        if match is None:
            entry = Channel.of(0, None, (), 0.0, past)
        else:
            n, start, idx = (1, match, (match,)) if entry.n == 0 else (entry.n, entry.start, entry.idx)
            entry = Channel.of(n + 1, start, pushed(idx, index, 8), similarity, past)
        # most recently used last (a name shared by the sessions)
        state.channels = flat_append(channels, sys.intern(channel), entry, _CHANNELS)
        if match is None:
            if near:
                state.undecided = index
            return None
        if entry.n < count:
            state.undecided = index
            return None
        return self._finding(entry, text, report_at, channel)

    def _represent(self, text: str) -> Rep:
        """A sketch of the words of ``text`` (0 when it has none), or with an embedder its quantized vector."""
        if self._embedder is None:
            return word_sketch(text, self.max_chars, 48, _SKETCH_BITS)
        vectors = self._embedder.embed([text])
        return quantize(vectors[0]) if vectors else ""

    def _compare(self, a: Rep, b: Rep) -> float:
        """How similar two intents are: the cosine of their vectors, or the overlap of their word sketches."""
        if isinstance(a, int) and isinstance(b, int):
            return bits_similarity(a, b)
        return quantized_cosine(str(a), str(b))

    def _match(
        self, state: RephraseState, past: tuple[Any, ...], rep: Rep, threshold: float, max_gain: int
    ) -> tuple[int | None, float, bool]:
        """(index of the most similar earlier intent that repeats, its similarity, near miss?); ``past``: the
        channel's (:attr:`Channel.past`)."""
        best: tuple[int | None, float] = (None, 0.0)
        near = False
        for at in range(len(past) - 3, -1, -3):  # the latest first
            index, other, gain_then = past[at], past[at + 1], past[at + 2]
            if state.gain - gain_then > max_gain:
                break  # older intents are further back still: new information came since
            similarity = self._compare(rep, other)
            if similarity >= threshold and similarity > best[1]:
                best = (index, similarity)
            elif similarity >= threshold - self.margin:
                near = True
        return best[0], best[1], near and best[0] is None

    def _finding(self, entry: Channel, text: str, index: int, channel: str) -> Finding:
        n = entry.n
        if channel.startswith(_ASKS):
            what, since = f"instruction to {channel[len(_ASKS) :]}", "only its replies"
        else:
            what, since = "intent", "nothing new learned"
        return Finding(
            pattern="rephrase",
            count=n,
            key=f"rephrase:{entry.start}",
            loop_start=entry.start,
            reason=(
                f"the same {what} {n} times in other words ({self.similarity} similarity {entry.sim:.2f}) "
                f"with {since} in between: {preview(text, 120)}"
            ),
            indices=entry.idx,
            facts={"similarity": round(entry.sim, 3), "intent": preview(text, 200), "match": self.similarity},
        )


def rephrase(
    *,
    embedder: TextEmbedder | None = None,
    threshold: float = 0.95,
    message_threshold: float = 0.8,
    lexical_threshold: float = 0.6,
    window: int = 2,
    max_gain: int = 0,
    count: int = 3,
    instructions: bool = True,
    instruction_threshold: float = 0.9,
    instruction_count: int = 4,
    instruction_gain: int = 5,
    reply_threshold: float = 0.75,
) -> RephraseDetector:
    """The rephrase detector (see :class:`RephraseDetector`)."""
    return RephraseDetector(
        embedder=embedder,
        threshold=threshold,
        message_threshold=message_threshold,
        lexical_threshold=lexical_threshold,
        window=window,
        max_gain=max_gain,
        count=count,
        instructions=instructions,
        instruction_threshold=instruction_threshold,
        instruction_count=instruction_count,
        instruction_gain=instruction_gain,
        reply_threshold=reply_threshold,
    )
