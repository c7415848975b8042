"""Bounded work per event: inputs that used to cost seconds (a backtracking regular expression, a message of
blank lines) now cost work proportional to a capped input, with the same results. Speed itself is measured
by ``benchmarks/fuzz_guard.py``; these tests count work and compare results."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import Guard, Message, TextDelta
from loopwatch.core._canonical import fold_string
from loopwatch.core._chanting import ChantTracker
from loopwatch.core._events import MAX_MESSAGE_TEXT
from loopwatch.core._fingerprint import _PATH, _normalize_text, normalized_args

# the behavioral preset's path normalisation as it was written first: quadratic on a long word without a slash
_ORIGINAL_PATH = re.compile(r"(?:[\w.~-]*/)+([\w.-]+)")


@settings(max_examples=3_000, deadline=None)
@given(st.text(alphabet="ab/~.-_ é1/\n", max_size=40))
def test_the_path_normalisation_replaces_exactly_what_it_did(text: str) -> None:
    assert _PATH.sub(r"\1", text) == _ORIGINAL_PATH.sub(r"\1", text)


def test_the_path_normalisation_keeps_its_documented_examples() -> None:
    assert normalized_args({"path": "/a/b/file.ts"}) == '{"path":"file.ts"}'
    assert normalized_args({"p": "see ~/x/y.txt and ./a/b"}) == '{"p":"see y.txt and b"}'
    assert normalized_args({"p": "a/~b"}) == '{"p":"a/~b"}'  # no basename after the last slash
    hexes = ["0123456789abcdef" * 256] * 4  # each a 4 KB word without a slash: kept whole, not searched again
    assert normalized_args({"h": hexes}).startswith('{"h":["0123456789abcdef')


def _eager(value: Any, depth: int = 0) -> Any:
    """the behavioral preset's normalisation as first written: every value normalised, then the JSON cut at 200."""
    if isinstance(value, str):
        return _normalize_text(fold_string(value, 4_096))
    if depth > 16:
        return None
    if isinstance(value, Mapping):
        return {str(k): _eager(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_eager(v, depth + 1) for v in value[:256]]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    return value if value is None or isinstance(value, bool) else _normalize_text(repr(value))


_pieces = st.sampled_from(
    ["/a/b/file.ts", "2024-05-01T10:00:00Z", "1700000000", "0f8fad5b-d9cb-469f-a165-70867728950e", "Find LOGIN",
     "x" * 300, "ü/é", "12", "-", "a~/b", ""]
)  # fmt: skip
_texts = st.lists(st.one_of(_pieces, st.text(max_size=12)), max_size=6).map(" ".join)
_json_args = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _texts),
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=6), inner, max_size=6)),
    max_leaves=40,
)


@settings(max_examples=1_500, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _json_args, max_size=8))
def test_the_seed004_normalisation_writes_what_it_wrote_whole(args: dict[str, Any]) -> None:
    """Only the first 200 characters of the normalised JSON are kept: writing it key by key and stopping
    there gives the same text as normalising everything first."""
    whole = json.dumps(_eager(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)[:200]
    assert normalized_args(args) == whole


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the checkpoints the chanting tracker examines one by one (in Python)."""
    seen = [0]
    original = ChantTracker._check

    def counted(self: ChantTracker, *args: Any) -> Any:
        seen[0] += 1
        return original(self, *args)

    monkeypatch.setattr(ChantTracker, "_check", counted)
    return seen


@pytest.mark.parametrize("filler", ["\n", " \n", "-----\n", "ab\n", "a. ", "1.\n", "é. "])
def test_checkpoints_that_can_never_count_are_not_examined(monkeypatch: pytest.MonkeyPatch, filler: str) -> None:
    """Blank lines, rulers and very short repeated units are thousands of sentence ends; their chunks hold no
    letter or digit, or repeat with a period under ``min_distinct_period``: they can never count. Before,
    each was examined in Python (a 3 MB message of blank lines took seconds)."""
    seen = _checks(monkeypatch)
    tracker = ChantTracker()
    assert tracker.feed(filler * 20_000) is None
    assert seen[0] < 10


def test_a_chant_between_long_blank_stretches_is_still_found() -> None:
    blank = "\n" * 5_000
    chant = "I will read the configuration file again to be sure. " * 12
    for text in (blank + chant, chant + blank, blank + "Intro.\n" + blank + chant + blank):
        whole = ChantTracker().feed(text)
        streamed = ChantTracker()
        hits = [hit for i in range(0, len(text), 97) if (hit := streamed.feed(text[i : i + 97])) is not None]
        assert whole is not None and hits == [whole]  # the same hit, however the text is split
        assert whole.chunk.startswith("I will read the configuration file") and whole.count == 10


def test_a_huge_message_is_judged_on_its_capped_text(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _checks(monkeypatch)
    guard = Guard()
    verdict = guard.observe("s", Message("assistant", "\n" * 3_000_000))
    assert verdict.action == "ok" and guard.stats["errors"] == 0 and seen[0] == 0
    message = Message("assistant", "Thinking... " + "\n" * 3_000_000 + "Done. " * 20)
    assert len(message.text) <= MAX_MESSAGE_TEXT + 64 and message.text.endswith("Done. " * 20)
    assert len(TextDelta("x" * 3_000_000).text) <= MAX_MESSAGE_TEXT + 64  # streamed chunks are capped one by one
