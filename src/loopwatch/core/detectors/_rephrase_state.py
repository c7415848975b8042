"""The rephrase rule's session state (:class:`RephraseState`, one :class:`Channel` of recent intents per channel)
and its JSON form, as :class:`~loopwatch.core.detectors.RephraseDetector` dumps and loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any, Final

from ._base import bits_text, mypyc_attr
from ._rephrase_text import _is_vector
from ._state import (
    Flat,
    flat_items,
    flat_of,
    integer,
    integer_tuple,
    keys_of,
    listed,
    optional_integer,
    sketch,
    table,
    text,
    words,
    words_json,
)

_SEEN_BITS: Final = 1024
"""The bits the lines observed so far are folded into."""
_SKETCH_BITS: Final = 512
"""The bits an intent's word sketch is folded into."""
_REPLIES: Final = 2
"""User replies a new one is compared with (to tell a restated reply from news)."""


Rep = int | str
"""An intent as compared: a sketch of its words (a folded set of 512 bits) or, with an embedder, its quantized
vector (:func:`~loopwatch.core.detectors._semantic.quantize`)."""


@mypyc_attr(native_class=False)  # a tuple of its own class: compiled, it stays a Python class
class Channel(tuple[Any, ...]):
    """One channel's streak of repeats and recent intents (see :meth:`intents`), in one tuple (an object and a tuple
    fewer than a class holding a tuple of intents): ``n``, ``start``, ``idx``, ``sim``, then :attr:`past`. Never
    changed: :meth:`of` makes the next one."""

    __slots__ = ()

    @staticmethod
    def of(n: int, start: int | None, idx: tuple[int, ...], sim: float | int, past: tuple[Any, ...]) -> Channel:
        return Channel((n, start, idx, sim, *past))

    @property
    def n(self) -> int:
        """The intents in a row like a recent one."""
        n: int = self[0]
        return n

    @property
    def start(self) -> int | None:
        start: int | None = self[1]
        return start

    @property
    def idx(self) -> tuple[int, ...]:
        idx: tuple[int, ...] = self[2]
        return idx

    @property
    def sim(self) -> float | int:
        sim: float | int = self[3]  # (an int from a snapshot stays one: compiled, a `float` is a double)
        return sim

    @property
    def past(self) -> tuple[Any, ...]:
        """The recent intents, the latest last, flat: index, representation, gain then, index..."""
        return self[4:]

    def intents(self) -> tuple[tuple[int, Rep, int], ...]:
        """The recent intents, the latest last: (index, representation, gain then)."""
        past = self[4:]
        return tuple(zip(past[::3], past[1::3], past[2::3], strict=True))


NO_CHANNEL: Final = Channel.of(0, None, (), 0.0, ())
"""A channel not used yet."""


def remembered(past: tuple[Any, ...], index: int, rep: Rep, gain: int, window: int) -> tuple[Any, ...]:
    """A channel's intents (:attr:`Channel.past`) with one added, keeping the last ``window``."""
    if len(past) >= 3 * window:
        past = past[len(past) - 3 * (window - 1) :]
    return (*past, index, rep, gain)


@dataclass(slots=True)
class RephraseState:
    """A :class:`RephraseDetector`'s session state."""

    seen: int | None = None
    """The lines observed so far, folded into 1,024 bits (``None``: nothing observed yet)."""
    gain: int = 0
    """New lines observed so far (each observation's capped)."""
    channels: Flat = ()
    """Each channel's :class:`Channel` by its name, the least recently used first (a small table,
    :data:`~._state.Flat`)."""
    pending: tuple[int, str] | None = None
    """The call awaiting its result: (index, its reasoning)."""
    asked: tuple[int, str, str] | None = None
    """The instruction of the call awaiting its result: (index, text, tool)."""
    undecided: int | None = None
    replies: tuple[str, ...] = ()
    """The last user replies' vectors (with an embedder)."""
    said: tuple[bytes, ...] = ()
    """The sentences of those replies (:func:`~._rephrase_text.sentence_hashes`), one per vector; empty in a state
    saved before they were kept."""


def state_json(state: RephraseState) -> dict[str, Any]:
    """``state`` as JSON-able data."""
    data = {
        "seen": "" if state.seen is None else bits_text(state.seen, _SEEN_BITS),
        "gain": state.gain,
        "channels": {
            name: {
                "past": [[index, _rep_json(rep), gain] for index, rep, gain in channel.intents()],
                "n": channel.n,
                "start": channel.start,
                "idx": list(channel.idx),
                "sim": channel.sim,
            }
            for name, channel in flat_items(state.channels)
        },
        "pending": None if state.pending is None else list(state.pending),
        "asked": None if state.asked is None else list(state.asked),
        "undecided": state.undecided,
        "replies": list(state.replies),
    }
    if state.said:  # only with an embedder: other sessions write what they wrote before
        data["said"] = [words_json(sentences) for sentences in state.said]
    return data


def _rep_json(rep: Rep) -> str:
    return bits_text(rep, _SKETCH_BITS) if isinstance(rep, int) else rep


def state_from_json(data: dict[str, Any], vectors: bool) -> RephraseState:
    """The state :func:`state_json` gave (``vectors``: its intents are vectors, from an embedder, not word
    sketches); a :class:`ValueError` when ``data`` is not one."""
    keys_of("rephrase", data, ("seen", "gain", "channels", "pending", "undecided"), ("asked", "replies", "said"))
    seen = data["seen"]
    asked = data.get("asked")
    if asked is not None and not (
        isinstance(asked, list) and len(asked) == 3 and type(asked[0]) is int and all(type(x) is str for x in asked[1:])
    ):
        raise ValueError(f"rephrase: a pending instruction must be [index, text, tool], got {asked!r}")
    replies = data.get("replies", [])
    if not (isinstance(replies, list) and len(replies) <= _REPLIES and all(map(_is_vector, replies))):
        raise ValueError(f"rephrase: replies must be a list of at most {_REPLIES} vectors, got {replies!r}")
    said = data.get("said", [])
    if not (isinstance(said, list) and len(said) in (0, len(replies))):
        raise ValueError(f"rephrase: said must be a list of one sentence list per reply, got {said!r}")
    pending = data["pending"]
    if pending is not None and not (
        isinstance(pending, list) and len(pending) == 2 and type(pending[0]) is int and type(pending[1]) is str
    ):
        raise ValueError(f"rephrase: a pending intent must be [index, text], got {pending!r}")
    return RephraseState(
        seen=None if seen == "" else sketch(seen, "rephrase: seen", _SEEN_BITS),
        gain=integer(data["gain"], "rephrase: gain"),
        channels=flat_of(table(data["channels"], "rephrase: channels", partial(_channel, vectors=vectors))),
        pending=None if pending is None else (pending[0], pending[1]),
        asked=None if asked is None else (asked[0], asked[1], asked[2]),
        undecided=optional_integer(data["undecided"], "rephrase: undecided"),
        replies=tuple(replies),
        said=tuple(words(sentences, "rephrase: said") for sentences in said),
    )


def _channel(data: object, what: str, *, vectors: bool) -> Channel:
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be an object, got {data!r}")
    keys_of(what, data, ("past", "n", "start", "idx", "sim"))
    sim = data["sim"]
    if type(sim) not in (int, float):
        raise ValueError(f"{what}: sim must be a number, got {sim!r}")
    return Channel.of(
        integer(data["n"], f"{what}: n"),
        optional_integer(data["start"], f"{what}: start"),
        integer_tuple(data["idx"], f"{what}: idx"),
        sim,
        tuple(chain.from_iterable(listed(data["past"], f"{what}: past", partial(_past, vectors=vectors)))),
    )


def _past(data: object, what: str, *, vectors: bool) -> tuple[int, Rep, int]:
    if not (isinstance(data, list) and len(data) == 3):
        raise ValueError(f"{what} must be [index, intent, gain], got {data!r}")
    index, rep, gain = data
    read = text(rep, what) if vectors else sketch(rep, what, _SKETCH_BITS)
    return integer(index, what), read, integer(gain, what)
