"""The shortcuts of the per-event feature pass give what the plain definitions give (hypothesis)."""

from __future__ import annotations

import re
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.detectors.base import first_word_hashes
from loopwatch.detectors.failures import _ERROR_LINE, error_lines

SETTINGS = settings(max_examples=400, deadline=None)

_WORD = re.compile(r"[^\W_]+")


def _word_hashes_by_regex(text: str, limit: int) -> list[int]:
    """The definition: every word found by the regular expression, hashed, first ``limit`` distinct hashes."""
    hashes = dict.fromkeys(zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in _WORD.findall(text.lower()))
    return list(hashes)[:limit]


_WORDY = st.text(st.sampled_from([*"abXY09_ -.\n\tÉßİı½²٣ǅ", "\ud800"]), max_size=80)


@SETTINGS
@given(_WORDY, st.sampled_from([1, 2, 3, 64]))
def test_first_word_hashes_are_the_regex_words(text: str, limit: int) -> None:
    assert first_word_hashes(text, limit) == _word_hashes_by_regex(text, limit)


def test_first_word_hashes_read_on_past_a_collision() -> None:
    # "plumless" and "buckeroo" have the same CRC-32: the limit counts distinct hashes, not distinct words
    assert zlib.crc32(b"plumless") == zlib.crc32(b"buckeroo")
    text = "plumless buckeroo third"
    assert (
        first_word_hashes(text, 2) == _word_hashes_by_regex(text, 2) == [zlib.crc32(b"plumless"), zlib.crc32(b"third")]
    )


_LINE_PARTS = st.sampled_from(
    [b"error", b"Error", b"FAIL", b"fail", b"0 ", b"no ", b"No ", b"10 ", b"x", b"_", b"1", b" ", b"\n", b"\r",
     b"not found", b"Exception", b"cannot", b"can't", b"TimeOut", b"timed out", b"not allowed", b"\xc3\xa9", b"no"]
)  # fmt: skip


@SETTINGS
@given(st.lists(_LINE_PARTS, max_size=30).map(b"".join))
def test_error_lines_are_the_regex_lines(text: bytes) -> None:
    assert error_lines(text) == _ERROR_LINE.findall(text)


def test_error_lines_of_a_build_log() -> None:
    log = b"Building...\n0 errors, no failures\nsrc/a.c:3: error: x undefined\n\nFAILED: 1 test\ndone"
    assert error_lines(log) == [b"src/a.c:3: error: x undefined", b"FAILED: 1 test"]
