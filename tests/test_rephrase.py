"""The rephrase detector: the same intent in other words, counted only while nothing new comes back."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from loopwatch import Guard, Ladder, Message, ToolCall, ToolResult
from loopwatch.detectors import RephraseDetector, rephrase
from loopwatch.detectors.semantic import quantize, quantized_cosine
from loopwatch.engine import Engine
from loopwatch.policy import Policy

ASKS = (
    "To cancel the booking I need the reservation ID. Could you please share the reservation ID with me?",
    "I still need the reservation ID to cancel the booking. Could you please share the reservation ID?",
    "Without the reservation ID I cannot cancel the booking. Please share the reservation ID with me.",
)
SAME_REPLY = "I don't have the reservation ID, support told me the user ID is enough."


def _policy(detector: RephraseDetector) -> Policy:
    return Policy("t", (detector,), {"rephrase": Ladder.of(nudge=3)})


def _conversation(replies: Sequence[str]) -> list[Message]:
    """The user opens with what they know; then each ask is answered with ``replies[i]``."""
    events: list[Message] = [Message("user", SAME_REPLY)]
    for ask, reply in zip(ASKS, replies, strict=True):
        events += [Message("assistant", ask), Message("user", reply)]
    return events


def _run(detector: RephraseDetector, events: Sequence[object]) -> list[str]:
    guard = Guard(policy=_policy(detector), clock=None)
    return [guard.observe("s", e).action for e in events]  # type: ignore[arg-type]


def test_the_same_request_reworded_with_nothing_new_is_a_loop() -> None:
    actions = _run(rephrase(), _conversation([SAME_REPLY, SAME_REPLY, SAME_REPLY]))
    assert actions[5] == "nudge"  # the third ask
    assert actions[:5] == ["ok"] * 5


def test_new_information_in_between_is_progress() -> None:
    replies = [
        "My user ID is raj_sanchez and the flight left from Boston on a Tuesday morning.",
        "Here is the confirmation email: booking made through the corporate travel portal, paid by invoice.",
        "The ticket number printed on my receipt starts with seven digits, issued at the Denver airport counter.",
    ]
    assert "nudge" not in _run(rephrase(), _conversation(replies))


def test_the_verdict_names_the_intent_and_where_the_loop_began() -> None:
    guard = Guard(policy=_policy(rephrase()), clock=None)
    verdicts = [guard.observe("s", e) for e in _conversation([SAME_REPLY] * 3)]
    hit = verdicts[5]
    assert hit.pattern == "rephrase" and hit.count == 3 and hit.loop_start == 1
    assert "reservation ID" in (hit.message or "") and "RephraseDetector(" in (hit.detector or "")
    assert hit.evidence["indices"] == [1, 3, 5]


class KeywordEmbedder:
    """A user's embedder: one dimension per topic word (a stand-in for a real model, counted)."""

    TOPICS = ("reservation", "weather", "invoice", "flight")

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        out = []
        for text in texts:
            vector = [float(text.lower().count(word)) + 0.01 for word in self.TOPICS]
            norm = sum(v * v for v in vector) ** 0.5
            out.append([v / norm for v in vector])
        return out


def test_with_an_embedder_rewordings_that_share_few_words_are_caught() -> None:
    asks = (
        "Could you tell me your reservation code so I can look it up?",
        "What is the reservation number on your booking confirmation?",
        "Please provide the reservation locator, I cannot continue otherwise.",
    )
    embedder = KeywordEmbedder()
    events: list[Message] = [Message("user", SAME_REPLY)]
    for ask in asks:
        events += [Message("assistant", ask), Message("user", SAME_REPLY)]
    assert _run(rephrase(embedder=embedder), events)[5] == "nudge"
    assert _run(rephrase(), events)[5] == "ok"  # the words differ too much for the lexical fallback
    assert embedder.texts == list(asks)  # intents only: observations are never embedded


def test_tool_call_reasoning_is_judged_when_its_result_arrives() -> None:
    thought = "Let me search the repository for the installation instructions of the build tool {}."
    events: list[object] = []
    for n in range(4):
        events += [
            ToolCall("search_dir", {"term": f"install guide {n}"}, thought=thought.format(n), id=str(n)),
            ToolResult(f'No matches found for "install guide {n}"', id=str(n)),
        ]
    actions = _run(rephrase(), events)
    # the first "no matches" was news; the next two taught nothing: the 4th search is the 3rd repeat in a row
    assert actions[7] == "nudge" and actions[6] == "ok"  # on the result, not on the call
    assert set(actions[:7]) == {"ok"}


def test_one_short_of_the_count_is_undecided() -> None:
    guard = Guard(policy=_policy(rephrase()), clock=None)
    verdicts = [guard.observe("s", e) for e in _conversation([SAME_REPLY] * 3)]
    assert verdicts[3].action == "ok" and "restating" in verdicts[3].evidence["undecided"]
    assert "undecided" not in verdicts[1].evidence


def test_user_replies_do_not_reset_it_and_state_stays_small_and_json() -> None:
    detector = rephrase()
    engine = Engine(_policy(detector))
    session = engine.new_session()
    for n in range(200):
        engine.observe(
            session, Message("assistant", f"{ASKS[n % 3]} (attempt {n}) " + "word " * 50, worker=f"w{n % 7}")
        )
        engine.observe(session, Message("user", SAME_REPLY))
    state = session["detectors"][0]
    assert len(state["channels"]) <= 3 and all(len(c["past"]) <= detector.window for c in state["channels"].values())
    assert len(json.dumps(engine.dump(session))) < 4096
    restored = engine.load(json.loads(json.dumps(engine.dump(session))))
    assert restored["detectors"][0] == state


def test_quantized_vectors_keep_the_cosine() -> None:
    a, b = [0.6, 0.8, 0.0], [0.8, 0.6, 0.0]
    assert quantized_cosine(quantize(a), quantize(b)) == pytest.approx(0.96, abs=0.01)
    assert quantized_cosine(quantize(a), quantize([0.6, 0.8])) == 0.0  # other dimensions: never "the same"


def test_bad_settings_are_refused_and_repr_names_them() -> None:
    with pytest.raises(ValueError):
        RephraseDetector(count=1)
    with pytest.raises(ValueError):
        RephraseDetector(threshold=0.0)
    assert repr(rephrase()).startswith("RephraseDetector(similarity='lexical', threshold=0.6")
    assert "embedder=" in repr(rephrase(embedder=KeywordEmbedder()))
