"""Text loops: near-identical replies, and a reply that chants (talking instead of working: :mod:`._monologue`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .. import _kernels
from .._chanting import ChantHit, ChantTracker
from .._checked import fraction, integer_at_least, optional_integer_at_least
from .._errors import ConfigError
from .._fingerprint import preview
from .._ladder import Ladder
from .._patterns import Pattern
from .._similarity import fuzz_ratio, jaccard_sets
from ._base import (
    SKETCH_BITS,
    Detector,
    Finding,
    Step,
    argument_word_bytes,
    beyond_echo,
    bits_text,
    mutates,
    numberless_argument_words,
    packed_bits_text,
    pushed,
    text_bits,
)
from ._packed import (
    Indices,
    index_at,
    index_tuple,
    indices,
    indices_json,
    indices_len,
    indices_pushed,
)
from ._state import (
    Reader,
    any_value,
    fields_json,
    flag,
    from_fields,
    integer,
    keys_of,
    listed,
    optional_integer,
    optional_words,
    text_tuple,
    words_json,
)

Metric = Literal["jaccard", "fuzz"]
Mode = Literal["consecutive", "any"]

SIMILAR_TEXT = Pattern(
    "similar_text",
    "Your last {count} replies say nearly the same thing. Saying it again will not move the task forward: "
    "take one concrete action (call a tool, ask one specific question) or say what is blocking you.",
    ladder=Ladder.of(nudge=3),
    evidence=("similarity",),
)
"""Replies that say nearly the same thing."""
CHANTING = Pattern(
    "chanting",
    "Your reply keeps repeating the same text ({chunk}). Stop repeating it: finish the reply in a few "
    "sentences and continue with the task.",
    ladder=Ladder.of(nudge=5),
    evidence=("chunk",),
)
"""One reply repeating the same text over and over."""


def word_bits(text: str, k: int) -> int:
    """Bottom-k sketch of the lower-cased whitespace words of ``text`` as an integer bit set (the words' CRC-32s;
    ``text_bits(sketch_of(hashes, k))`` without the text). Words are deduplicated before they are hashed."""
    # split, lowercased (ASCII letters; other text's letters first, which makes no ASCII capital), hashed and sketched
    # in one kernel call (the sketch drops repeats)
    data = text.encode("ascii") if text.isascii() else _kernels.lower(text).encode("utf-8", "surrogatepass")
    return _kernels.word_sketch(data, k, SKETCH_BITS)


def turn_text(step: Step, include_thoughts: bool) -> str | None:
    """The assistant text a step carries: a message, or the reasoning of a tool call."""
    if step.kind == "message" and step.role == "assistant":
        return step.text or ""
    if include_thoughts and step.kind == "call":
        return step.text
    return None


_SEEN: Final = 32
"""Recent results (their fingerprints) a turn's result is compared with to tell whether it is new."""


@dataclass(slots=True)
class SimilarTextState:
    """A :class:`SimilarTextDetector`'s session state."""

    history: tuple[Any, ...] | bytes = ()
    """The recent turns: word sets or texts, as the metric needs; sketches packed in one bytes object
    (:func:`_packed_sketches`)."""
    consecutive: int = 0
    start: int | None = None
    idx: Indices = b""
    seen: tuple[str, ...] = ()
    """What the recent results said (with ``novelty``)."""
    news: bool = False
    """Did a result say something new since the last turn?"""
    asked: bytes | None = None
    """The argument words of the call awaiting its result (:func:`~.base.word_bytes`, shared with the step)."""


_SIMILAR_TEXT_READERS: Final[dict[str, Reader]] = {
    "history": lambda value, what: tuple(listed(value, what, any_value)),
    "consecutive": integer,
    "start": optional_integer,
    "idx": indices,
    "seen": text_tuple,
    "news": flag,
    "asked": optional_words,
}


class SimilarTextDetector(Detector[SimilarTextState]):
    """Assistant turns compared with the last ``window`` turns.

    ``metric="jaccard"``: the ``jaccard-turns`` design's word-set overlap; ``metric="fuzz"``: the ``ralph``
    design's fuzzy ratio (rapidfuzz when installed, else an exact pure-Python twin). ``mode="consecutive"``: the
    count is the number of consecutive turns at or above ``threshold`` (a dissimilar turn resets it; the
    ``jaccard-turns`` design);
    ``mode="any"``: every turn at or above it is reported with count 1 (the ``ralph`` design). The first turn always
    passes. ``history`` caps what is kept per session; ``max_chars`` clips stored texts (None: whole);
    ``sketch=k`` keeps only the k smallest word hashes of each turn (a bottom-k sketch whose Jaccard
    estimate is close to the exact one) instead of its words: a few hundred bytes per session.

    ``novelty=True``: a turn that follows a result unlike the recent ones (something learned) does not count,
    however much it reads like the turns before: the same template on new ground (paging through a file, the next
    item of a list). A result that only says back what its call said (``echo step 7``), and what an edit answers
    (it shows what was written), are not news.

    ``actions=True`` (with a ``sketch``): a tool call's turn is what it says and what it does. The words of its
    arguments, numbers aside (:func:`~._base.numberless_argument_words`), join its reasoning's, so that a fixed
    reasoning template (``<Action: Command>``) around other commands is not the same turn, while the same
    reasoning around the same command with another counter (``echo "step 8"``, then ``"step 9"``) still is. A call
    whose reasoning has no words stays unlike any turn, as without ``actions``.
    """

    name = "similar_text"
    kinds = frozenset({"call", "message", "result"})  # results: only with novelty
    patterns = (SIMILAR_TEXT,)

    def __init__(
        self,
        *,
        metric: Metric = "jaccard",
        threshold: float = 0.85,
        window: int = 5,
        mode: Mode = "consecutive",
        history: int = 50,
        include_thoughts: bool = True,
        max_chars: int | None = None,
        min_chars: int = 0,
        sketch: int | None = None,
        novelty: bool = False,
        actions: bool = False,
    ) -> None:
        if metric not in ("jaccard", "fuzz"):
            raise ConfigError(f"must be 'jaccard' or 'fuzz', got {metric!r}", field="metric")
        if mode not in ("consecutive", "any"):
            raise ConfigError(f"must be 'consecutive' or 'any', got {mode!r}", field="mode")
        fraction(threshold, "similar_text.threshold")
        integer_at_least(window, 1, "similar_text.window")
        integer_at_least(history, 1, "similar_text.history")
        optional_integer_at_least(max_chars, 1, "similar_text.max_chars")
        integer_at_least(min_chars, 0, "similar_text.min_chars")
        optional_integer_at_least(sketch, 1, "similar_text.sketch")
        if actions and (metric != "jaccard" or sketch is None):
            raise ConfigError(
                "actions=true compares word sketches: it needs metric = 'jaccard' and a sketch size", field="actions"
            )
        self.metric = metric
        self.threshold = threshold
        self.window = window
        self.mode = mode
        self.history = max(history, window)
        self.include_thoughts = include_thoughts
        self.max_chars = max_chars
        self.sketch = sketch
        self.min_chars = min_chars
        self.novelty = novelty
        self.actions = actions

    def new_state(self) -> SimilarTextState:
        return SimilarTextState()

    def _item(self, text: str) -> Any:
        """The history item of ``text`` when it is not a sketch: the text (fuzz) or its word set (jaccard)."""
        if self.max_chars is not None:
            text = text[: self.max_chars]
        if self.metric == "fuzz":
            return text
        return frozenset(_kernels.lower(text).split())

    def _similarity(self) -> Callable[[Any, Any], float]:
        return fuzz_ratio if self.metric == "fuzz" else jaccard_sets

    def _compare(self, text: str, recent: Sequence[Any]) -> tuple[Any, float | None]:
        """The history item of ``text`` and its best similarity to the ``recent`` items (None if none)."""
        item, similarity = self._item(text), self._similarity()
        return item, max(similarity(prev, item) for prev in recent) if recent else None

    def _compare_sketch(self, text: str, history: bytes, step: Step) -> tuple[bytes, float | None]:
        """:meth:`_compare` for sketches: ``history`` with the sketch of ``text`` (and, with :attr:`actions`, of a
        call's argument words) added (keeping the last :attr:`history`), and its best similarity to the last
        ``window`` ones (None if none)."""
        k = self.sketch or 0
        bits = word_bits(text if self.max_chars is None else text[: self.max_chars], k)
        if bits and self.actions and step.kind == "call":
            # the action's words, numbers aside: sorted, so the first k are its bottom-k sketch
            bits |= _kernels.fold_words(numberless_argument_words(step), k, SKETCH_BITS)
        packed = bits.to_bytes(_SKETCH_BYTES, "big")
        # the best bits_similarity to the last `window` sketches, read from the packed bytes as they are
        best = _kernels.best_similarity(history[-_SKETCH_BYTES * self.window :], packed)
        if len(history) >= _SKETCH_BYTES * self.history:
            history = history[len(history) - _SKETCH_BYTES * (self.history - 1) :]
        return history + packed, best

    def observe(self, state: SimilarTextState, step: Step) -> Finding | None:
        if step.kind == "result":
            if not self.novelty:
                return None
            # what a change answers shows what was written, not something learned: an edit undone and redone
            # answers something different each time
            if state.asked is not None:
                said = beyond_echo(step, state.asked)
                if said not in state.seen:  # a result unlike the recent ones: something learned
                    state.news = True
                    state.seen = pushed(state.seen, said, _SEEN)
            return None
        if self.novelty and step.kind == "call":
            state.asked = None if mutates(step) else argument_word_bytes(step)
        text = turn_text(step, self.include_thoughts)
        if text is None or (self.min_chars and len(text.strip()) < self.min_chars):
            return None
        history = state.history
        if self.sketch is not None and self.metric == "jaccard":
            # sketches are kept as integer bit sets packed in one bytes object (base64 text only in the JSON form)
            state.history, best = self._compare_sketch(text, _packed_sketches(history), step)
        else:
            item, best = self._compare(text, history[-self.window :])
            state.history = pushed(tuple(history), item, self.history)
        state.idx = indices_pushed(state.idx, step.index, self.window + 1)
        if best is None:
            return None
        news, state.news = state.news, False
        if best < self.threshold or news:
            # a turn much like the last ones after something new came back is the same template on new
            # ground (paging through a file, the next item of a list), not a loop
            state.consecutive, state.start = 0, None
            return None
        if state.consecutive == 0:
            state.start = index_at(state.idx, -2) if indices_len(state.idx) > 1 else step.index
        state.consecutive = state.consecutive + 1 if self.mode == "consecutive" else 1
        count = state.consecutive
        return Finding(
            pattern="similar_text",
            count=count,
            key=f"similar_text:{state.start}",
            loop_start=state.start,
            reason=f"{count} consecutive similar turns ({best:.0%} similar to a recent turn)",
            indices=index_tuple(state.idx)[-(count + 1) :],
            facts={"similarity": round(best, 3), "text": preview(text, 160)},
        )

    def dump_state(self, state: SimilarTextState) -> dict[str, Any]:
        data = fields_json(state)
        data["idx"] = indices_json(state.idx)
        history = state.history
        if type(history) is bytes:
            data["history"] = [
                packed_bits_text(history[at : at + _SKETCH_BYTES]) for at in range(0, len(history), _SKETCH_BYTES)
            ]
        else:
            data["history"] = [_history_json(h) for h in history]
        data["asked"] = words_json(state.asked)
        return data

    def load_state(self, data: dict[str, Any]) -> SimilarTextState:
        keys_of("similar_text", data, ("history", "consecutive", "start", "idx"), ("seen", "news", "asked"))
        state = from_fields(SimilarTextState, data, "similar_text", _SIMILAR_TEXT_READERS)
        if self.metric == "jaccard":
            items: tuple[Any, ...] = tuple(state.history)  # as read: a JSON list
            if self.sketch is None:
                state.history = tuple(frozenset(h) for h in items)
            else:
                state.history = _packed_sketches(tuple(_sketch_bits(h) for h in items))
        return state


_SKETCH_BYTES: Final = SKETCH_BITS // 8
"""The bytes of a sketch in a packed history."""


def _packed_sketches(history: tuple[Any, ...] | bytes) -> bytes:
    """Sketches (integers of at most :data:`~.base.SKETCH_BITS` bits) packed in one bytes object, each in
    :data:`_SKETCH_BYTES` big-endian bytes: 33 bytes for the lot instead of 36 and an object's 28 each."""
    if type(history) is bytes:
        return history
    return b"".join(bits.to_bytes(_SKETCH_BYTES, "big") for bits in history)


def _sketch_bits(text: object) -> int:
    """A history sketch from its JSON form; ``ValueError`` unless it is a folded set of at most 1,024 bits."""
    if not isinstance(text, str):
        raise ValueError(f"similar_text: a sketch must be base64 text, not {type(text).__name__}")
    bits = text_bits(text)
    if bits.bit_length() > SKETCH_BITS:
        raise ValueError(f"similar_text: a sketch holds at most {SKETCH_BITS} bits")
    return bits


def _history_json(item: Any) -> Any:
    """The JSON form of a history item: a word set as a sorted list, a sketch as base64 text, a text as is."""
    if isinstance(item, frozenset):
        return sorted(item)
    return bits_text(item) if isinstance(item, int) else item


@dataclass(slots=True)
class ChantingState:
    """A :class:`ChantingDetector`'s session state: the streamed message being read."""

    tracker: ChantTracker | None = None
    start: int | None = None
    done: bool = False


class ChantingDetector(Detector[ChantingState]):
    """One assistant message (or its stream of ``text_delta`` chunks) repeating the same chunk of text.

    Code blocks, tables, lists, headings and dividers are not counted (see :mod:`loopwatch.core._chanting`).
    """

    name = "chanting"
    patterns = (CHANTING,)
    reset_on_user = False

    def __init__(self, *, chunk_size: int = 50, threshold: int = 10, max_mean_distance: int = 250) -> None:
        self.chunk_size = chunk_size
        self.threshold = threshold
        self.max_mean_distance = max_mean_distance
        self._tracker()  # a bad setting is an error now, not at the first reply

    def _tracker(self) -> ChantTracker:
        return ChantTracker(
            chunk_size=self.chunk_size, threshold=self.threshold, max_mean_distance=self.max_mean_distance
        )

    fresh_shared = True  # a reply streamed in chunks is rare: most sessions never need a state of their own
    fresh_kinds = frozenset({"call", "result", "usage"})

    def new_state(self) -> ChantingState:
        return ChantingState()

    def keeps_fresh(self, step: Step) -> bool:
        return step.kind != "delta" and not (step.kind == "message" and step.role == "assistant" and step.text)

    def is_fresh(self, state: ChantingState) -> bool:
        return state.tracker is None and state.start is None and not state.done

    def observe(self, state: ChantingState, step: Step) -> Finding | None:
        if step.kind == "delta":
            if state.tracker is None:
                state.tracker, state.start, state.done = self._tracker(), step.index, False
            return None if state.done else self._feed(state, step.text or "", step)
        if state.tracker is not None or state.start is not None or state.done:
            state.tracker, state.start, state.done = None, None, False  # any other event ends a streamed message
        if step.kind == "message" and step.role == "assistant" and step.text:
            hit = self._tracker().feed(step.text)  # a whole message: its tracker is not kept
            return None if hit is None else self._finding(hit, step.index, step)
        return None

    def _feed(self, state: ChantingState, text: str, step: Step) -> Finding | None:
        hit = state.tracker.feed(text) if state.tracker is not None else None
        if hit is None:
            return None
        state.done = True
        return self._finding(hit, state.start, step)

    def _finding(self, hit: ChantHit, start: int | None, step: Step) -> Finding:
        return Finding(
            pattern="chanting",
            count=hit.count,
            key=f"chanting:{start}",
            loop_start=start,
            reason=f"the reply repeats {hit.chunk!r} {hit.count} times",
            indices=(step.index,),
            facts={"chunk": hit.chunk, "offset": hit.first_offset},
        )

    def dump_state(self, state: ChantingState) -> dict[str, Any]:
        tracker = state.tracker
        return {"tracker": tracker.to_json() if tracker is not None else None, "start": state.start, "done": state.done}

    def load_state(self, data: dict[str, Any]) -> ChantingState:
        keys_of("chanting", data, ("tracker", "start", "done"))
        tracker = data["tracker"]
        return ChantingState(
            tracker=None if tracker is None else ChantTracker.from_json(tracker),
            start=optional_integer(data["start"], "chanting: start"),
            done=flag(data["done"], "chanting: done"),
        )


def similar_text(**kwargs: Any) -> SimilarTextDetector:
    """The similar-text detector (see :class:`SimilarTextDetector`)."""
    return SimilarTextDetector(**kwargs)


def chanting(*, chunk_size: int = 50, threshold: int = 10, max_mean_distance: int = 250) -> ChantingDetector:
    """The chanting detector (see :class:`ChantingDetector`)."""
    return ChantingDetector(chunk_size=chunk_size, threshold=threshold, max_mean_distance=max_mean_distance)
