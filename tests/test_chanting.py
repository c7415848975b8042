"""Chanting: one message repeating the same text, without markdown false positives."""

from __future__ import annotations

import json
import random
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch.core._chanting import ChantHit, ChantTracker
from loopwatch.core.detectors import chanting
from loopwatch.errors import ConfigError

SENTENCE = "I will now fix the bug. "
INTRO = "Let me look at this again:\n"

PROSE = """\
I looked at the failing test first. The assertion compares the parsed configuration with a dictionary \
built by hand, and the two differ only in the order of the plugin list. That suggests the loader is not \
the problem; the merge step that combines the user file with the defaults is.

Reading `merge_config` confirms it: when both sides define `plugins`, the function concatenates the lists \
and then removes duplicates with a set, which loses the original order. Python sets are unordered, so the \
result depends on hashing and can change between runs. This also explains why the test only fails on some \
machines.

There are two reasonable fixes. We could keep the first occurrence of each plugin while preserving order, \
using a dictionary as an ordered set, or we could stop deduplicating entirely and let the later stage \
report conflicts. The first option keeps the current behaviour for users who list a plugin twice, so I \
prefer it.

I will change the merge to use `dict.fromkeys(defaults + user)` and add a regression test with three \
plugins in a deliberate order. After that I will run the whole configuration test module, then the \
integration tests that start the server with a sample file, because they exercise the same code path \
with real data.

The change is small, but the documentation also claims that user plugins are loaded after the defaults. \
That is true today only by accident, so I will state the ordering rule explicitly in the docstring and in \
the changelog entry. If the reviewers prefer the other approach, switching later will only touch this one \
function and its test.

Finally, I noticed that the error message for an unknown plugin prints the whole configuration object. It \
is noisy and may leak credentials from environment variables into logs. I will open a separate issue for \
that instead of mixing it into this fix, since it needs a decision about which fields are safe to show.

The test run finished: 214 passed, 3 skipped, and the two previously failing cases now pass on both the \
Linux and the macOS runners. The skipped tests need a database container, which the CI configuration \
starts only on the nightly schedule, so they are unrelated to this change.

Before opening the pull request I compared the behaviour with the previous release by loading the three \
example configurations from the repository. Two of them produce exactly the same plugin order as before. \
The third lists `metrics` in both files; it used to appear somewhere in the middle and now comes first, \
which matches what the documentation has always promised.

Summary of the change: ordered deduplication in `merge_config`, a regression test, a docstring that states \
the rule, and a changelog line under "Fixed". No public function changed its signature, and no \
configuration file needs to be edited by users.

One open question remains for the maintainers. Some deployments generate their plugin list from a \
template and may rely on the old, accidental order without knowing it. A short note in the upgrade guide \
would let them check quickly, and I can draft it if you agree that it belongs there rather than in the \
release announcement.
"""


def feed_all(text: str, pieces: list[str] | None = None, **kwargs: int) -> list[ChantHit]:
    """Feed ``text`` (as ``pieces`` if given) to a fresh tracker; return every hit reported."""
    tracker = ChantTracker(**kwargs)
    hits = [tracker.feed(piece) for piece in (pieces if pieces is not None else [text])]
    return [h for h in hits if h is not None]


def split_every(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def only_hit(text: str, **kwargs: int) -> ChantHit | None:
    hits = feed_all(text, **kwargs)
    assert len(hits) <= 1
    return hits[0] if hits else None


# ---------------------------------------------------------------------- repeated sentences


def test_sentence_repeated_12_times_is_flagged() -> None:
    hit = only_hit(INTRO + SENTENCE * 12)
    assert hit is not None
    assert hit.chunk == "I will now fix the bug."
    assert hit.count >= 10
    assert hit.first_offset == len(INTRO)
    assert hit.period == len(SENTENCE)


def test_same_text_streamed_as_7_char_deltas_gives_the_same_hit() -> None:
    text = INTRO + SENTENCE * 12
    hits = feed_all(text, split_every(text, 7))
    assert hits == [only_hit(text)]
    assert hits[0].chunk == "I will now fix the bug."


def test_threshold_boundary_9_vs_10_repetitions() -> None:
    assert only_hit(INTRO + SENTENCE * 9) is None
    hit = only_hit(INTRO + SENTENCE * 10)
    assert hit is not None and hit.count == 10
    # the last copy may lack its separator
    assert only_hit(INTRO + SENTENCE * 9 + SENTENCE.strip()) == hit
    assert only_hit(INTRO + SENTENCE * 8 + SENTENCE.strip()) is None


def _sentence(length: int, rng: random.Random) -> str:
    words = ["the", "a", "file", "test", "value", "check", "update", "parser", "agent", "fix", "bug"]
    text = ""
    while len(text) < length:
        text += rng.choice(words) + " "
    text = text[: length - 1].rstrip()
    text += "x" * (length - 1 - len(text))
    return text[0].upper() + text[1:] + "."


@pytest.mark.parametrize("length", [10, 11, 17, 33, 49, 50, 51, 80, 120, 250, 400, 500])
@pytest.mark.parametrize("sep", [" ", "\n", "\n\n"])
def test_sentence_of_any_length_repeated_10_times(length: int, sep: str) -> None:
    sentence = _sentence(length, random.Random(length))
    assert len(sentence) == length
    assert only_hit(INTRO + sep.join([sentence] * 9)) is None
    hit = only_hit(INTRO + sep.join([sentence] * 10))
    assert hit is not None
    assert hit.count == 10
    assert hit.period == length + len(sep)
    assert hit.first_offset == len(INTRO)
    assert hit.chunk == sentence[:120].rstrip()


def test_long_sentence_repeated_with_a_few_different_gaps() -> None:
    sentence = "I am going to carefully re-read the configuration file now to be sure it is right."
    gaps = [" Hmm.\n", "\n", " Again.\n"]
    text = INTRO + "".join(sentence + gaps[i % 3] for i in range(12))
    hit = only_hit(text)
    assert hit is not None
    assert hit.chunk.startswith("I am going to carefully re-read")
    assert hit.first_offset == len(INTRO)


def test_a_phrase_scattered_through_unrelated_text_is_not_a_chant() -> None:
    phrase = "Let me check the configuration loader module again."
    paragraphs = PROSE.split("\n\n")
    text = "\n\n".join(f"{phrase} {p}" for p in paragraphs * 2)
    assert only_hit(text) is None
    # the same phrase close together is one
    assert only_hit(" ".join([phrase] * 10)) is not None


def test_unicode_chant_is_flagged() -> None:
    hit = only_hit("好的。" + "我现在去修复这个错误,然后再运行一次测试。" * 12)
    assert hit is not None
    assert "修复" in hit.chunk


# ---------------------------------------------------------------------- things that are not chants


def test_normal_prose_of_3kb_is_not_flagged() -> None:
    assert len(PROSE) >= 3000
    assert only_hit(PROSE) is None
    assert feed_all(PROSE, split_every(PROSE, 7)) == []


def test_repeated_lines_in_a_code_block_are_skipped() -> None:
    lines = "assert x == 1\n" * 30
    for fence in ("```", "~~~"):
        assert only_hit(f"Here are the checks:\n{fence}python\n{lines}{fence}\nDone.\n") is None
    assert only_hit(f"Here are the checks:\n{lines}") is not None  # the same lines as prose chant


def test_code_block_content_does_not_close_another_fence_kind() -> None:
    text = "Example:\n~~~\n```\n" + "assert x == 1\n" * 30 + "~~~\n"
    assert only_hit(text) is None


_RUN, _STOP, _PEND = "RUNNING", "STOPPED", "PENDING"
_STATUSES = [_RUN, _STOP, _RUN, _PEND, _PEND, _RUN, _STOP, _STOP, _RUN, _PEND] * 3


def test_markdown_table_with_similar_rows_is_not_flagged() -> None:
    rows = "".join(f"| web | us-central1-a | {s} | n1-standard-4 | default-pool | 3 |\n" for s in _STATUSES)
    table = "| name | zone | status | type | pool | nodes |\n|---|---|---|---|---|---|\n" + rows
    assert only_hit("The clusters:\n\n" + table) is None
    # the same rows as plain prose lines would be flagged: the table rule is what protects them
    assert only_hit("The clusters:\n\n" + rows.replace("| web", "web")) is not None


def _resources(count: int, items: int) -> list[str]:
    prefix = "projects/my-project/locations/us-central1/clusters/cluster-"
    assert len(prefix) >= 59
    return [f"{prefix}{i % items + 1:03d}" for i in range(count)]


def test_list_of_names_sharing_a_long_prefix_is_not_flagged() -> None:
    names = _resources(30, 30)
    assert only_hit("Found:\n" + "".join(f"- {n}\n" for n in names)) is None
    assert only_hit("Found:\n" + "".join(f"{n}\n" for n in names)) is None  # bare lines too
    assert only_hit("Found:\n" + "".join(f"{i}. {n}\n" for i, n in enumerate(names, 1))) is None


def test_list_cycling_through_three_names_is_flagged() -> None:
    names = _resources(30, 3)
    assert only_hit("Found:\n" + "".join(f"- {n}\n" for n in names)) is not None
    assert only_hit("Found:\n" + "".join(f"{n}\n" for n in names)) is not None


_DIVIDERS = ["=" * 200, "-" * 200, "*" * 200, "-=" * 100, "─" * 200, "= " * 100, "_" * 200]


@pytest.mark.parametrize("divider", _DIVIDERS)
def test_divider_lines_are_not_flagged(divider: str) -> None:
    assert only_hit(f"Results\n{divider}\nAll good.\n") is None
    assert only_hit(f"Results {divider} all good.") is None  # inside a prose line too


def test_short_period_runs_are_not_flagged() -> None:
    assert only_hit("Loading" + "." * 300 + " done") is None
    assert only_hit("value: " + "0" * 300) is None
    assert only_hit("ok " + "ab" * 150) is None
    assert only_hit("ok " + "ab" * 150, min_distinct_period=1) is not None  # the guard is what stops it


# ---------------------------------------------------------------------- repeated markdown lines


def test_20_identical_list_items_are_flagged() -> None:
    text = "Working on it:\n" + "- Checking the file...\n" * 20
    hit = only_hit(text)
    assert hit is not None
    assert hit.chunk == "- Checking the file..."
    assert hit.count >= 10
    assert hit.first_offset == len("Working on it:\n")
    assert hit.period == len("- Checking the file...\n")
    assert feed_all(text, split_every(text, 5)) == [hit]


def test_9_identical_list_items_are_not_flagged() -> None:
    assert only_hit("Working on it:\n" + "- Checking the file...\n" * 9) is None


def test_numbered_items_with_the_same_text_are_flagged() -> None:
    text = "Plan:\n" + "".join(f"{i}. Check the file again\n" for i in range(1, 13))
    hit = only_hit(text)
    assert hit is not None and hit.count == 10


def test_identical_headings_and_quotes_are_flagged() -> None:
    assert only_hit("## Retrying\n\n" * 12) is not None
    assert only_hit("> still waiting for the build\n" * 12) is not None


def test_prose_between_identical_items_breaks_the_run() -> None:
    text = "".join(f"File {name}.py:\n- No issues found\n" for name in "abcdefghijklmn")
    assert only_hit(text) is None


def test_list_markers_reset_prose_tracking() -> None:
    # 6 copies, a list item, 6 copies: no 10 copies without markdown in between
    text = SENTENCE * 6 + "\n- note\n" + SENTENCE * 6
    assert only_hit(text) is None
    assert only_hit(SENTENCE * 6 + "\nnote\n" + SENTENCE * 6) is None
    assert only_hit(SENTENCE * 12) is not None


# ---------------------------------------------------------------------- offsets, reset, latch


def test_first_offset_counts_skipped_markdown_and_code() -> None:
    head = "Intro.\n```\ncode\n```\n- item\n| a | b |\n"
    hit = only_hit(head + SENTENCE * 11)
    assert hit is not None
    assert hit.first_offset == len(head)


def test_hit_is_latched_until_reset() -> None:
    tracker = ChantTracker()
    hit = tracker.feed(SENTENCE * 12)
    assert hit is not None
    assert tracker.hit == hit
    assert tracker.feed(SENTENCE * 12) is None
    tracker.reset()
    assert tracker.hit is None
    assert tracker.feed(SENTENCE * 12) == hit


def test_reset_clears_partial_progress() -> None:
    tracker = ChantTracker()
    assert tracker.feed(SENTENCE * 6) is None
    tracker.reset()
    assert tracker.feed(SENTENCE * 6) is None
    assert tracker.feed(SENTENCE * 4) is not None  # 10 since the reset


def test_parameters_change_the_threshold() -> None:
    assert only_hit(SENTENCE * 5, threshold=5) is not None
    assert only_hit(SENTENCE * 4, threshold=5) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"chunk_size": 0}, {"threshold": 1}, {"max_period": 10}, {"history": 1000}, {"min_distinct_period": 0}],
)
def test_invalid_parameters_are_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        ChantTracker(**kwargs)


@pytest.mark.parametrize("kwargs", [{"chunk_size": 0}, {"threshold": 1}, {"max_mean_distance": 0}])
def test_the_rule_rejects_a_bad_setting_when_it_is_made_not_at_the_first_reply(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        chanting(**kwargs)


# ---------------------------------------------------------------------- JSON state


def _round_trip(tracker: ChantTracker) -> ChantTracker:
    return ChantTracker.from_json(json.loads(json.dumps(tracker.to_json())))


@pytest.mark.parametrize("cut", [5, 100, 161, 250])
def test_state_round_trip_mid_stream_still_detects(cut: int) -> None:
    text = INTRO + SENTENCE * 12
    expected = only_hit(text)
    tracker = ChantTracker()
    assert tracker.feed(text[:cut]) is None
    restored = _round_trip(tracker)
    assert restored.to_json() == tracker.to_json()
    assert restored.feed(text[cut:]) == expected


def test_state_round_trip_inside_markdown_and_code() -> None:
    text = "```\nx = 1\n" + "y = 2\n" * 20 + "```\n" + "- Checking the file...\n" * 12
    expected = only_hit(text)
    assert expected is not None
    for cut in (3, 12, 40, len(text) - 60):
        tracker = ChantTracker()
        tracker.feed(text[:cut])
        assert _round_trip(tracker).feed(text[cut:]) == expected


def test_state_keeps_the_latched_hit() -> None:
    tracker = ChantTracker(threshold=5)
    hit = tracker.feed(SENTENCE * 5)
    restored = _round_trip(tracker)
    assert restored.hit == hit
    assert restored.feed(SENTENCE) is None
    assert restored.to_json()["params"]["threshold"] == 5


def test_state_is_bounded() -> None:
    tracker = ChantTracker()
    for i in range(40):
        tracker.feed(f"Paragraph {i}: " + PROSE)
    state = tracker.to_json()
    assert len(state["run"][0]) <= 5000
    assert len(json.dumps(state)) < 7000


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"v": 99},
        {"v": 1, "params": {"chunk_size": "50"}},
        "not a dict",
    ],
)
def test_malformed_state_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        ChantTracker.from_json(bad)  # type: ignore[arg-type]


def test_inconsistent_state_is_rejected() -> None:
    state = ChantTracker().to_json()
    state["run"][0] = "text longer than the run"
    with pytest.raises(ValueError):
        ChantTracker.from_json(state)


# ---------------------------------------------------------------------- chunking invariance


_BLOCKS = [
    SENTENCE,
    "I will now fix the bug.\n",
    "Let me check the configuration loader module once more. ",
    "Let me try again! ",
    "Why? ",
    "- Checking the file...\n",
    "1. Check the file\n",
    "| a | b |\n",
    "## Heading\n",
    "> quoted text\n",
    "```\n",
    "~~~\n",
    "=====\n",
    "\n",
    "   ",
    "\r\n",
    "assert x == 1\n",
    "projects/my-project/locations/us-central1/clusters/cluster-0",
    "好的。",
    "a" * 30,
]

_TEXTS = st.lists(
    st.one_of(
        st.sampled_from(_BLOCKS),
        st.builds(lambda b, n: b * n, st.sampled_from(_BLOCKS), st.integers(2, 14)),
        st.text(max_size=30),
        st.text(alphabet="ab .\n-|#`~>1*", max_size=30),
    ),
    max_size=25,
).map("".join)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in pairwise(points)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=40), st.sampled_from([3, 4, 10]))
def test_result_does_not_depend_on_how_the_text_is_split(text: str, cuts: list[int], threshold: int) -> None:
    whole, pieces = ChantTracker(threshold=threshold), ChantTracker(threshold=threshold)
    expected = [h for h in [whole.feed(text)] if h is not None]
    got = [h for h in (pieces.feed(p) for p in _split(text, cuts)) if h is not None]
    assert got == expected
    assert pieces.to_json() == whole.to_json()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXTS, st.integers(min_value=0, max_value=10_000))
def test_result_does_not_depend_on_a_save_and_restore(text: str, cut: int) -> None:
    cut %= len(text) + 1
    whole, first = ChantTracker(threshold=4), ChantTracker(threshold=4)
    expected = whole.feed(text)
    early = first.feed(text[:cut])
    restored = _round_trip(first)
    late = restored.feed(text[cut:])
    assert (early or late) == expected
    assert restored.to_json() == whole.to_json()


def test_a_list_marker_split_before_its_blanks_gives_the_same_state() -> None:
    """The blanks after a list marker belong to the marker, whichever delta they arrive in."""
    text = "0.  000000000"
    whole, pieces = ChantTracker(threshold=3), ChantTracker(threshold=3)
    whole.feed(text)
    pieces.feed(text[:3])
    pieces.feed(text[3:])
    assert pieces.to_json() == whole.to_json()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=40), st.sampled_from([3, 4, 10]))
def test_checkpoints_tested_one_by_one_or_as_zones_give_the_same_result(
    text: str, cuts: list[int], threshold: int
) -> None:
    """A few checkpoints are tested chunk by chunk, many as zones of the text: the same checkpoints are dropped."""
    from loopwatch.core import _chanting as chanting

    few = chanting._FEW_CHECKPOINTS
    try:
        results = []
        for limit in (few, -1):  # -1: always as zones
            chanting._FEW_CHECKPOINTS = limit
            tracker = ChantTracker(threshold=threshold)
            hits = [h for h in (tracker.feed(p) for p in _split(text, cuts)) if h is not None]
            results.append((hits, tracker.to_json()))
    finally:
        chanting._FEW_CHECKPOINTS = few
    assert results[0] == results[1]
