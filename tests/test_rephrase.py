"""The rephrase detector: the same intent in other words, counted only while nothing new comes back."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import Guard, Ladder, Message, ToolCall, ToolResult
from loopwatch.core._engine import Engine
from loopwatch.core._policy import Policy
from loopwatch.core.detectors import RephraseDetector, rephrase
from loopwatch.core.detectors._rephrase_text import CODE_BLOCK, intent_text, without_code
from loopwatch.core.detectors._semantic import quantize, quantized_cosine
from loopwatch.core.detectors._state import flat_values
from loopwatch.errors import StateError

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
    # intents, and the user's replies (to tell a restated reply from news): each text once
    assert sorted(set(embedder.texts)) == sorted({*asks, SAME_REPLY})


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
    state = session.detectors[0]
    channels = flat_values(state.channels)
    assert len(channels) <= 3 and all(len(c.intents()) <= detector.window for c in channels)
    assert len(json.dumps(engine.dump(session))) < 4096
    restored = engine.load(json.loads(json.dumps(engine.dump(session))))
    assert restored.detectors[0] == state


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


INSTRUCTIONS = (
    "Please scan through the video at https://example.com/v/L1vXCY and identify the timestamps where several "
    "bird species appear on camera at the same time.",
    "Please scan through the video https://example.com/v/L1vXCY and identify timestamps where several bird "
    "species appear on camera at the same time.",
    "Please scan through the video at this URL: https://example.com/v/L1vXCY and identify the timestamps where "
    "several bird species appear on camera at the same time.",
    "Please scan through the video at https://example.com/v/L1vXCY and identify the specific timestamps where "
    "several bird species appear on camera at the same time.",
)
SCROLLED = "I scrolled down one page in the browser.\nThe page shows the video player and its comments."


def _delegation(replies: Sequence[str], instructions: Sequence[str] = INSTRUCTIONS) -> list[object]:
    """An orchestrator handing a web agent the same instruction, reworded; ``replies`` come back."""
    events: list[object] = []
    for n, (instruction, reply) in enumerate(zip(instructions, replies, strict=True)):
        events += [ToolCall("WebSurfer", {"instruction": instruction}, id=str(n)), ToolResult(reply, id=str(n))]
    return events


def test_the_same_instruction_reworded_to_a_delegate_is_a_loop() -> None:
    """No reasoning text at all: the instruction handed over is the intent. A reply bringing a line or two that
    is new (a screenshot's caption) still counts as little."""
    replies = [SCROLLED, SCROLLED + "\nA comment: lovely chicks", SCROLLED, SCROLLED + "\nPaused at 0:42"]
    guard = Guard(policy=_policy(rephrase()), clock=None)
    verdicts = [guard.observe("s", e) for e in _delegation(replies)]  # type: ignore[arg-type]
    assert [v.action for v in verdicts[:7]] == ["ok"] * 7
    hit = verdicts[7]  # the 4th instruction, judged when its reply arrives
    assert hit.action == "nudge" and hit.count == 4 and hit.loop_start == 0
    assert "instruction to WebSurfer" in (hit.reason or "")
    assert "nudge" not in _run(rephrase(instructions=False), _delegation(replies))


WORDS = (("red", "blue", "green"), ("north", "south", "east"), ("early", "late", "noon"), ("one", "two", "few"))


def test_instructions_with_news_from_elsewhere_in_between_are_progress() -> None:
    """A delegate always reports something new (a screenshot's caption), so one observation's worth of new lines
    (gain is capped per observation) is allowed between two instructions; news from the user on top of the
    reply is progress."""
    events: list[object] = []
    for step in range(4):
        user = "\n".join(f"{word} {animal} seen" for word in WORDS[step] for animal in ("skua", "tern"))
        events += [
            ToolCall("WebSurfer", {"instruction": INSTRUCTIONS[step]}, id=str(step)),
            ToolResult(f"{SCROLLED}\nCaption: {' '.join(WORDS[step])}", id=str(step)),
            Message("user", user),
        ]
    assert "nudge" not in _run(rephrase(), events)
    assert _run(rephrase(), [e for e in events if not isinstance(e, Message)])[-1] == "nudge"


def test_working_through_a_list_is_not_a_reworded_instruction() -> None:
    """An orchestrator checking one shop after another: the same words, other items each time."""
    shops = ["The Shack", "Olio Restaurant", "Sneekers Cafe", "Waterford Pizza Palace"]
    instructions = [
        f"Check the operating hours for '{shop}' on weekdays and report whether it is open until eleven at night."
        for shop in shops
    ]
    # the lexical overlap of these is high, yet under the instruction threshold: the item is what differs
    assert "nudge" not in _run(rephrase(), _delegation([SCROLLED] * 4, instructions))


def test_only_prose_arguments_are_instructions() -> None:
    from loopwatch.core.detectors._semantic import instruction_of

    long_command = "cd /repo && python -m pytest tests/test_config.py -x -q 2>&1 | tail -n 40 && echo done now"
    assert instruction_of({"command": long_command}, 40) is None  # code keys never count
    assert instruction_of({"query": "x = [1, 2, 3]; y = {'a': (4, 5)}; z = x[0] * y['a'][1] + 7"}, 40) is None
    assert instruction_of({"path": "src/a.py", "note": "short"}, 40) is None
    edit = {"path": "a.py", "new_str": "    # return the value of the answer to the caller right away", "old_str": "x"}
    assert instruction_of(edit, 40) is None  # nor do an edit's texts
    task = "Find the official Fidelity page that lists every emerging markets fund without a transaction fee."
    assert instruction_of({"task": task, "priority": 2, "context": "the user asked twice"}, 40) == task
    assert instruction_of(None, 40) is None


def test_snapshots_from_before_instructions_still_load() -> None:
    engine = Engine(_policy(rephrase()))
    session = engine.new_session()
    data = json.loads(json.dumps(engine.dump(session)))
    del data["detectors"][0]["asked"]
    assert engine.load(data).detectors[0].asked is None
    for damaged in (5, [1, "text"], ["1", "text", "tool"]):
        data["detectors"][0]["asked"] = damaged
        with pytest.raises(StateError):
            engine.load(data)


def test_instructions_are_kept_apart_from_reasoning_and_messages() -> None:
    """An orchestrator that also reasons on each call and posts a ledger message each round: three channels,
    none pushing the instructions out."""
    ledgers = [
        "Updated ledger: the request is not satisfied yet because the bird count is still unknown to us.",
        "Updated ledger: progress is slow; the timestamps with several species have not been found so far.",
        "Updated ledger: we are not in a loop yet but the surfer keeps reporting the same page to everyone.",
        "Updated ledger: next speaker is the web surfer, who should look at the video description instead.",
    ]
    thoughts = [
        "Thinking about which agent should act next given the state of the page and the original request.",
        "Considering the options once more: the video itself holds the answer, so the surfer must go there.",
        "Weighing whether the file surfer could help, but only the web surfer can open the video at all.",
        "Deciding between asking the user and retrying; retrying with the surfer looks like the best option.",
    ]
    events: list[object] = []
    for n in range(4):
        events += [
            Message("assistant", ledgers[n], worker="Orchestrator"),
            ToolCall("WebSurfer", {"instruction": INSTRUCTIONS[n]}, thought=thoughts[n], id=str(n)),
            ToolResult(SCROLLED, id=str(n)),
        ]
    assert _run(rephrase(), events)[-1] == "nudge"
    plain = [e for e in events if not isinstance(e, Message)]
    plain[-2] = ToolCall("WebSurfer", {"path": "/tmp/x"}, id="3")  # no instruction: the last call asks nothing
    assert "nudge" not in _run(rephrase(), plain)


class TurningEmbedder:
    """Each new text a step further round a circle: consecutive texts are ``cosine`` similar, others less."""

    def __init__(self, cosine: float) -> None:
        self.step = math.acos(cosine)
        self.seen: dict[str, int] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        angles = [self.step * self.seen.setdefault(text, len(self.seen)) for text in texts]
        return [[math.cos(angle), math.sin(angle)] for angle in angles]


def test_messages_are_compared_at_a_lower_cosine_than_call_reasoning() -> None:
    events: list[object] = [Message("user", SAME_REPLY)]
    for ask in ASKS:
        events += [Message("assistant", ask), Message("user", SAME_REPLY)]
    # consecutive asks 0.84 similar: under the reasoning threshold (0.95), over the messages' (0.8)
    assert _run(rephrase(embedder=TurningEmbedder(0.84)), events)[5] == "nudge"
    assert "nudge" not in _run(rephrase(embedder=TurningEmbedder(0.84), message_threshold=0.88), events)
    calls: list[object] = []  # the first "No matches found" is news: four calls make three repeats
    for n, ask in enumerate([*ASKS, f"{ASKS[0]} Thank you."]):
        calls += [ToolCall("lookup", {"q": str(n)}, thought=ask, id=str(n)), ToolResult("No matches found", id=str(n))]
    assert "nudge" not in _run(rephrase(embedder=TurningEmbedder(0.84)), calls)
    assert _run(rephrase(embedder=TurningEmbedder(0.84), threshold=0.8), calls)[7] == "nudge"
    with pytest.raises(ValueError, match="message_threshold"):
        rephrase(message_threshold=1.5)


RESTATED = (
    "I don't have the reservation ID with me, but support said my user ID would be enough.",
    "Sorry, the reservation ID is not something I have at hand; can we go on with my user ID?",
    "As I said, I can't find my reservation ID anywhere. Isn't the user ID sufficient?",
)


def test_a_reply_restated_in_new_sentences_is_not_news() -> None:
    """The user answers every ask with the same thing in new words: new lines, nothing new said."""
    events = _conversation(list(RESTATED))
    assert _run(rephrase(embedder=KeywordEmbedder()), events)[5] == "nudge"
    # by lines alone each reply is news; so it is when the replies say different things
    assert "nudge" not in _run(rephrase(), events)
    news = [
        "I don't have the reservation ID, but the invoice from the travel agency is here.",
        "The weather delayed my flight, and the flight number was on the invoice.",
        "Here is the invoice number from the booking e-mail, with the weather report.",
    ]
    assert "nudge" not in _run(rephrase(embedder=KeywordEmbedder()), _conversation(news))
    # a new ID, date or amount is news however alike the sentences are
    codes = ("8JX2QZ", "7HKL3M", "Q2W9PX")
    ids = [f"{reply} My booking reference is {code}." for reply, code in zip(RESTATED, codes, strict=True)]
    assert "nudge" not in _run(rephrase(embedder=KeywordEmbedder()), _conversation(ids))


def test_a_templated_reply_with_another_reason_is_news() -> None:
    """A harness answers with one template whose reason changes: the sentence that changed is news, however close
    the embedding reads the two replies (it weighs the words they share). The same thing in new words is not."""
    first = "Your edit could not be applied to the program. None of the edits can match the original program."
    other = "Your edit could not be applied to the program. No edits can be parsed from your reply."
    reworded = "The program did not take your change: nothing in it could be read as an edit."

    def asked_three_times(replies: Sequence[str]) -> list[Message]:
        events = [Message("user", first)]
        for ask, reply in zip(ASKS, replies, strict=True):
            events += [Message("assistant", ask), Message("user", reply)]
        return events

    # the reason changed once (news), then the template's two replies come back: two repeats, not three
    assert "nudge" not in _run(rephrase(embedder=KeywordEmbedder()), asked_three_times([other, first, other]))
    # told again in new words: no news, the third ask is a loop
    assert _run(rephrase(embedder=KeywordEmbedder()), asked_three_times([reworded, first, reworded]))[5] == "nudge"


def test_restated_replies_keep_a_small_state_that_old_snapshots_lack() -> None:
    detector = rephrase(embedder=KeywordEmbedder())
    policy = _policy(detector)
    engine = Engine(policy)
    session = engine.new_session()
    for event in _conversation(list(RESTATED)):
        engine.observe(session, event)
    replies = session.detectors[0].replies
    assert len(replies) == 2 and all(isinstance(x, str) for x in replies)  # the last two, quantized
    said = session.detectors[0].said  # and their sentences, 4 bytes each
    assert [len(x) for x in said] == [4, 8]  # one sentence, then two
    assert Engine(policy).load(json.loads(json.dumps(engine.dump(session)))).detectors[0].said == said
    old = json.loads(json.dumps(engine.dump(session)))
    del old["detectors"][0]["replies"], old["detectors"][0]["said"]
    assert Engine(policy).load(old).detectors[0].replies == ()
    older = json.loads(json.dumps(engine.dump(session)))  # vectors kept, sentences not yet
    del older["detectors"][0]["said"]
    resumed = Engine(policy).load(older)
    assert resumed.detectors[0].said == ()
    engine.observe(resumed, Message("user", RESTATED[0]))
    assert len(resumed.detectors[0].said) == 2  # one per vector again
    for key, damaged in (
        *(("replies", x) for x in (["a", "b", "c"], ["a"], [1], "x")),  # too many; not base64; not text; not a list
        *(("said", x) for x in ([[1], [2], [3]], [[-1], [2]], "x")),  # not one per reply; not a hash; not a list
    ):
        bad = json.loads(json.dumps(engine.dump(session)))
        bad["detectors"][0][key] = damaged
        with pytest.raises(StateError):
            Engine(policy).load(bad)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(["`", "``", "```", "````", "x", "say it", "\n", " ", "~~~"]), max_size=14).map("".join))
def test_code_blocks_go_as_the_regular_expression_removes_them(text: str) -> None:
    assert without_code(text) == CODE_BLOCK.sub(" ", text)


def test_an_intent_keeps_its_prose_around_code_blocks() -> None:
    text = "THOUGHT: I will look for the model.\n```\nfind_file models.py\n```\nthen run ```ls src"
    assert intent_text(text, 400) == "I will look for the model. then run"
