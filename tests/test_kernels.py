"""The text kernels: the compiled ones (``loopwatch.core._kernels_c``) give exactly what their pure-Python twins
(``loopwatch.core._kernels_py``) give, on arbitrary text (hypothesis: unicode, lone surrogates, NULs, huge inputs)
and on a sample of the corpus; the twins give what their definitions (the regular expressions they replace) give; and
``LOOPWATCH_PURE_PYTHON=1`` picks the twins.

Without a C compiler the compiled module is not built and its comparisons are skipped, unless
``LOOPWATCH_REQUIRE_COMPILED=1`` (``make test`` sets it): then its absence is a failure.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.core import _kernels, _kernels_py
from loopwatch.core import _masking as masking
from loopwatch.core._fingerprint import _MUTATING_VERB, _POLL_COMMAND
from loopwatch.core._kernels_py import WORD_CODE
from loopwatch.core._masking import masked
from loopwatch.core.detectors import _base as base

REPO = Path(__file__).resolve().parents[1]

try:
    from loopwatch.core import _kernels_c
except ImportError:  # pragma: no cover - no compiler at install time
    _kernels_c = None  # type: ignore[assignment]

needs_compiled = pytest.mark.skipif(
    _kernels_c is None and not os.environ.get("LOOPWATCH_REQUIRE_COMPILED"),
    reason="the compiled kernels are not built (no C compiler)",
)


def compiled() -> ModuleType:
    assert _kernels_c is not None, "the compiled kernels are not built (LOOPWATCH_REQUIRE_COMPILED is set)"
    return _kernels_c


def both_ways(check: Callable[[ModuleType], None]) -> None:
    """``check(compiled kernels)`` with the processor's vector instructions (SSSE3, POPCNT, AVX2, AVX-512, where it has
    them), again without AVX-512 (what most processors run), then with the portable code alone (what a processor
    without any runs)."""
    c = compiled()
    try:
        check(c)
        c._vector_instructions(("ssse3", "popcnt", "avx2"))
        check(c)
        c._vector_instructions(False)
        check(c)
    finally:
        c._vector_instructions(True)


def _same(a: object, b: object) -> None:
    assert a == b


def outcome(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call returns, or the type of the error it raises (the two twins must agree on both)."""
    try:
        return "ok", func(*args)
    except Exception as error:
        return "error", type(error)


# Text that reaches the kernels' edge cases: error words in every case, "0 " and "no " before them, word
# characters around them, line ends, blanks, NULs, multi-byte and invalid UTF-8.
_PIECES = [
    "error", "ERROR", "Error", "fail", "FAILED", "0 ", "no ", "No ", "NO ", "x", "_", "9", " ", "\n", "\r\n", "\t",
    "\x0b", "\x0c", "\x1c", "\x00", "exception", "Traceback", "fatal", "denied", "not found", "no such", "cannot",
    "can't", "unable", "invalid", "refused", "timed out", "timeout", "abort", "panic", "missing", "unknown",
    "undefined", "unsupported", "not allowed", "not", "tim", "-", ".", "/", "=",
    "é", "İ", "Σ", "ß", "\u0130", "\ud800", "😀", "٣", "Ⅻ",
]  # fmt: skip
_piece_text = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
any_text = st.one_of(st.text(st.characters(exclude_categories=())), _piece_text)
any_bytes = st.one_of(st.binary(), any_text.map(lambda t: t.encode("utf-8", "surrogatepass")))


# -- the twins against their definitions ----------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(any_bytes)
def test_the_pure_error_lines_are_what_the_regular_expression_finds(data: bytes) -> None:
    assert _kernels_py.error_lines(data) == _kernels_py.ERROR_LINE.findall(data)


@settings(max_examples=400, deadline=None)
@given(any_bytes)
def test_the_pure_last_error_line_is_the_last_of_the_error_lines(data: bytes) -> None:
    lines = _kernels_py.error_lines(data)
    assert _kernels_py.last_error_line(data) == (lines[-1] if lines else None)
    assert _kernels.last_error_line(data) == (lines[-1] if lines else None)


def test_the_last_error_line_skips_words_joined_into_names_and_counts_of_zero() -> None:
    data = b"Error: first\nrun --no-fail-fast\n0 errors\nTimeout after 3s\nx_error y\nall done"
    assert _kernels_py.last_error_line(data) == b"Timeout after 3s"
    assert _kernels_py.last_error_line(b"ok\nno failures\n0 fail") is None
    assert _kernels_py.last_error_line(b"failfail-") == b"failfail-"  # the first "fail" counts, the second is joined


_numbers = st.lists(
    st.sampled_from([b"0", b"7", b"42", b"#", b"a", b" ", b"\n", b"\x00", b"\xff", b"9" * 20]), max_size=40
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(any_bytes, _numbers.map(b"".join)))
def test_the_pure_numbers_marked_are_what_the_regular_expression_gives(data: bytes) -> None:
    assert _kernels_py.numbers_marked(data) == _kernels_py.NUMBER.sub(b"#", data)


def test_numbers_marked_replace_each_number_with_one_mark() -> None:
    for data, expected in [
        (b"", b""), (b"no digits", b"no digits"), (b"7", b"#"), (b"123", b"#"), (b"#1", b"##"), (b"1#", b"##"),
        (b"12 of 345 passed in 0.52s", b"# of # passed in #.#s"), (b"x1y22z333", b"x#y#z#"),
    ]:  # fmt: skip
        assert _kernels_py.numbers_marked(data) == expected
        if _kernels_c is not None:
            assert _kernels_c.numbers_marked(data) == expected


def test_error_lines_know_a_count_of_zero_from_an_error() -> None:
    data = b"ran 12 tests\n0 errors, 0 failures\nno failure here\nERROR: boom\nxno error\n_0 fail\ncan't open"
    assert _kernels_py.error_lines(data) == [b"ERROR: boom", b"xno error", b"_0 fail", b"can't open"]


def test_a_word_joined_into_a_name_says_nothing_went_wrong() -> None:
    # flags, target triples, settings and paths echoed by a command or a build's progress are not errors
    data = (
        b"cargo test --no-fail-fast\n"
        b"CC_x86_64_unknown_linux_gnu=clang rustc --target=x86_64-unknown-linux-gnu\n"
        b"mvn -Dsurefire.failIfNoSpecifiedTests=false -Dtimeout=30 src/errors/mod.rs\n"
        b"error[E0433]: failed to resolve\n"
        b"the build-error and the real error\n"
    )
    expected = [b"error[E0433]: failed to resolve", b"the build-error and the real error"]
    assert _kernels_py.error_lines(data) == expected
    assert _kernels_py.ERROR_LINE.findall(data) == expected
    if _kernels_c is not None:
        assert _kernels_c.error_lines(data) == expected


# words that repeat, numbers among them, and two words with one CRC-32 ("plumless" and "buckeroo")
_word_text = st.lists(
    st.sampled_from(["plumless", "buckeroo", "1", "22", "007", "a", "b", "c", "x1", "é", "٣"]), max_size=30
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_text, _word_text), st.integers(0, 80))
def test_the_pure_argument_words_are_the_regular_expression_words(text: str, limit: int) -> None:
    words = _kernels_py.ALNUM_WORD.findall(text.lower())
    first = list(dict.fromkeys(zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in words))[:limit]
    # the pair: the words, and the words that are not ASCII digits only (one object when nothing is left out)
    names = [w for w in dict.fromkeys(words) if not (w.isascii() and w.isdigit())]
    named = list(dict.fromkeys(zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in names))[:limit]
    every, numberless = _kernels_py.alnum_word_pair(text, limit)
    assert list(array(WORD_CODE, every)) == sorted(first)
    assert list(array(WORD_CODE, numberless)) == sorted(named)
    assert (every is numberless) == (sorted(named) == sorted(first))


# -- compiled against pure ------------------------------------------------------------------------------------


@needs_compiled
@settings(max_examples=600, deadline=None)
@given(any_bytes)
def test_compiled_byte_kernels_match_the_pure_ones(data: bytes) -> None:
    def check(c: ModuleType) -> None:
        for name in _kernels_py.BYTE_KERNELS:
            assert getattr(c, name)(data) == getattr(_kernels_py, name)(data), name

    both_ways(check)


@needs_compiled
def test_compiled_kernels_match_the_pure_ones_on_long_inputs() -> None:
    """Past the lengths hypothesis draws: blanks dropped 16 and 64 bytes at a time (every alignment of every run of
    blanks), and argument words sorted with more values than the sort keeps on the stack."""
    c, rng = compiled(), random.Random(7)

    def blanks(c: ModuleType) -> None:
        for size in (15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 2_017, 4_096):
            data = bytes(rng.choice(b"aB \t\r\n\x0b\x0c\x00\xff[{@Z`") for _ in range(size))
            for start in range(65):
                assert c.blanks_dropped(data[start:]) == _kernels_py.blanks_dropped(data[start:]), (size, start)
                assert c.line_hashes(data[start:]) == _kernels_py.line_hashes(data[start:]), (size, start)
        for size in (40, 64, 200):
            assert c.blanks_dropped(b"x" * size) == b"x" * size

    both_ways(blanks)
    words = " ".join(f"w{rng.getrandbits(40):x} {n}" for n in range(700))
    for limit in (16, 17, 256, 257, 1_000):
        assert c.alnum_word_pair(words, limit) == _kernels_py.alnum_word_pair(words, limit), limit


_spaced_text = st.lists(
    st.sampled_from(["word", "é", "😀", "\ud800", " ", "  ", "\t", "\n", "\x1c", "\x85", "\xa0", "\u3000", "x"]),
    max_size=60,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(st.one_of(any_text, _spaced_text), st.integers(-5, 300))
def test_collapsed_is_the_words_joined_and_cut(text: str, limit: int) -> None:
    expected = " ".join(text.split())[:limit]
    assert _kernels_py.collapsed(text, limit) == expected
    if _kernels_c is not None:
        assert compiled().collapsed(text, limit) == expected


@needs_compiled
def test_collapsed_refuses_what_the_pure_twin_refuses() -> None:
    c = compiled()
    assert outcome(c.collapsed, b"a b", 3) == outcome(_kernels_py.collapsed, b"a b", 3) == ("error", TypeError)
    assert outcome(c.collapsed, "a b", "3")[0] == "error"
    assert c.collapsed("a  b " * 400, 1_000) == " ".join(("a  b " * 400).split())[:1_000]  # past the stack buffer


# commands with the poll words where a part starts, inside other words and cut short, and every blank there is
_POLL_PIECES = [
    *_kernels_py.POLL_WORDS, "sleep 5", "tail -f x", "gh run view", "ps aux", "steps", "https://", "pytest", "sle",
    "kubect", " ", "\t", "\n", ";", "&", "|", "(", ")", "-", "x", "\x1c", "\x85", "\xa0", "\u2003", "\u3000", "é",
    "😀", "\ud800",
]  # fmt: skip
_poll_text = st.one_of(any_text, st.lists(st.sampled_from(_POLL_PIECES), max_size=20).map("".join))


_CHANGE_PIECES = [
    *_kernels_py.CHANGE_WORDS, "sed -i s/a/b/ f", "git apply x.patch", "pip install x", "uv pip install", "cp a b",
    "python3 -m pip install", "apt-get install", "npm add x", "ls", "scp", "format", "git status", "sedan", "-i",
    " ", "\t", "\n", ";", "&", "|", "(", ")", "-", "x", "\x85", "\xa0", "\u3000", "é", "😀", "\ud800",
]  # fmt: skip
_change_text = st.one_of(any_text, st.lists(st.sampled_from(_CHANGE_PIECES), max_size=16).map("".join))
_PART_WORDS = {  # each kernel that looks for words where a part of a command starts: its definition, its commands
    "poll_word": (_kernels_py.POLL_WORD, _poll_text, _POLL_COMMAND),
    "change_word": (_kernels_py.CHANGE_WORD, _change_text, _MUTATING_VERB),
}


@pytest.mark.parametrize("name", sorted(_PART_WORDS))
@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_a_part_word_kernel_is_its_regular_expression(name: str, data: st.DataObject) -> None:
    definition, texts, _ = _PART_WORDS[name]
    text = data.draw(texts)
    expected = definition.search(text) is not None
    assert getattr(_kernels_py, name)(text) is expected
    if _kernels_c is not None:
        assert getattr(compiled(), name)(text) is expected


@pytest.mark.parametrize("name", sorted(_PART_WORDS))
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_every_command_its_expression_takes_holds_a_part_word(name: str, data: st.DataObject) -> None:
    """``is_poll`` and ``is_mutation`` ask the kernel first and the command's expression only when it says yes: every
    command the expression takes must hold one of the kernel's words where a part starts."""
    _, texts, command = _PART_WORDS[name]
    text = data.draw(texts)
    if command.search(text):
        assert getattr(_kernels_py, name)(text)


def test_poll_word_finds_the_words_where_a_part_of_a_command_starts() -> None:
    for text in ("sleep 5", "make; sleep 5", "a && wait", "x|tail -f log", "(watch ls)", "\u3000ps aux", "\x85gh"):
        assert _kernels.poll_word(text), text
    for text in ("", "pytest -x steps", "https://example.com", "make-sleep", "./ps", "\u200bps", "xcurl"):
        assert not _kernels.poll_word(text), text
    if _kernels_c is not None:
        assert outcome(compiled().poll_word, b"sleep") == ("error", TypeError)


@needs_compiled
@settings(max_examples=600, deadline=None)
@given(st.one_of(any_text, _word_text), st.integers(0, 100))
def test_compiled_argument_words_match_the_pure_ones(text: str, limit: int) -> None:
    pair, pure_pair = compiled().alnum_word_pair(text, limit), _kernels_py.alnum_word_pair(text, limit)
    assert pair == pure_pair
    assert (pair[0] is pair[1]) == (pure_pair[0] is pure_pair[1])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=80), st.lists(st.integers(0, 2**32 - 1), max_size=80))
def test_shared_words_counts_what_two_packed_sets_share(a: list[int], b: list[int]) -> None:
    packed_a, packed_b = array(WORD_CODE, a).tobytes(), array(WORD_CODE, b).tobytes()
    expected = (len(set(a) & set(b)), len(set(a)), len(set(b)))
    assert _kernels_py.shared_words(packed_a, packed_b) == expected
    if _kernels_c is not None:  # sorted or not, repeats or not: the same counts
        assert _kernels_c.shared_words(packed_a, packed_b) == expected
        cut = packed_a[1:]  # not a whole number of values, unless empty
        assert outcome(_kernels_c.shared_words, cut, packed_b) == outcome(_kernels_py.shared_words, cut, packed_b)


def _rest_by_definition(data: bytes, known: list[int]) -> int:
    """What :func:`rest_hash` stands for: the regular expression's words of the decoded, lowercased text, without
    the known ones, joined by spaces and hashed."""
    words = _kernels_py.ALNUM_WORD.findall(data.decode("utf-8", "replace").lower())
    rest = " ".join(w for w in words if zlib.crc32(w.encode("utf-8", "surrogatepass")) not in set(known))
    return zlib.crc32(rest.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(any_bytes, st.lists(st.integers(0, 2**32 - 1), max_size=40), st.integers(0, 40))
def test_rest_hash_hashes_the_words_beyond_the_known_ones(data: bytes, noise: list[int], taken: int) -> None:
    said = [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in _kernels_py.ALNUM_WORD.findall(
        data.decode("utf-8", "replace").lower())]  # fmt: skip
    known = said[:taken] + noise  # some of the text's own words (repeats and all), and others
    packed = array(WORD_CODE, known).tobytes()
    expected = _rest_by_definition(data, known)
    assert _kernels_py.rest_hash(data, packed) == expected
    if _kernels_c is not None:
        assert _kernels_c.rest_hash(data, packed) == expected
    if said and taken >= len(said):  # every word known: nothing said beyond them
        assert expected == zlib.crc32(b"")


def test_rest_hash_keeps_what_the_call_did_not_ask_for() -> None:
    asked = array(WORD_CODE, [zlib.crc32(b"echo"), zlib.crc32(b"step"), zlib.crc32(b"7")]).tobytes()
    rest_hash = _kernels.rest_hash
    assert rest_hash(b"Step 7", asked) == rest_hash(b"step   7\n", asked) == zlib.crc32(b"")
    assert rest_hash(b"step 7 done", asked) == rest_hash(b"STEP 7: Done.", asked) == zlib.crc32(b"done")
    assert rest_hash(b"step 8", asked) == zlib.crc32(b"8")  # another count is something else said
    assert rest_hash(b"done done", asked) == zlib.crc32(b"done done")  # repeats kept
    assert rest_hash("naïve Step".encode(), asked) == zlib.crc32("naïve".encode())


@settings(max_examples=300, deadline=None)
@given(any_bytes, st.sampled_from([64, 128, 1024, 4096, 3, 100, 8192]))
def test_line_bits_fold_the_line_hashes(data: bytes, bits: int) -> None:
    assert outcome(_kernels_py.line_bits, data, bits) == outcome(
        lambda d, b: _kernels_py.fold(_kernels_py.line_hashes(d), b), data, bits
    )
    if _kernels_c is not None:
        both_ways(lambda c: _same(outcome(c.line_bits, data, bits), outcome(_kernels_py.line_bits, data, bits)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=6), st.integers(0, 2**64 - 1), st.sampled_from([1, 3, 8, 16]))
def test_best_similarity_is_the_highest_jaccard_of_the_packed_sets(history: list[int], sketch: int, size: int) -> None:
    mask = (1 << (8 * size)) - 1
    sets = [h & mask for h in history]
    packed = b"".join(h.to_bytes(size, "big") for h in sets)
    bits = (sketch & mask).to_bytes(size, "big")

    def jaccard(a: int, b: int) -> float:
        return (a & b).bit_count() / (a | b).bit_count() if a | b else 0.0

    expected = max((jaccard(h, sketch & mask) for h in sets), default=None)
    assert _kernels_py.best_similarity(packed, bits) == expected
    if _kernels_c is not None:

        def check(c: ModuleType) -> None:
            assert c.best_similarity(packed, bits) == expected
            cut = packed[1:]  # not a whole number of sketches, unless empty or one byte each
            assert outcome(c.best_similarity, cut, bits) == outcome(_kernels_py.best_similarity, cut, bits)

        both_ways(check)


@settings(max_examples=300, deadline=None)
@given(any_bytes)
def test_the_pure_long_words_are_the_split_words_of_two_bytes_or_more(data: bytes) -> None:
    words = data.translate(_kernels_py.ASCII_LOWER).split()
    assert _kernels_py.long_word_hashes(data) == [zlib.crc32(word) for word in words if len(word) >= 2]


@settings(max_examples=300, deadline=None)
@given(any_bytes, st.integers(-2, 200), st.sampled_from([8, 64, 100, 512, 1024, 4096]))
def test_word_sketch_is_the_sketch_of_the_word_hashes(data: bytes, k: int, bits: int) -> None:
    expected = outcome(_kernels_py.bottom_k, _kernels_py.word_hashes(data), k, bits)
    assert outcome(_kernels_py.word_sketch, data, k, bits) == expected
    if _kernels_c is not None:
        assert outcome(_kernels_c.word_sketch, data, k, bits) == expected
    long_expected = outcome(_kernels_py.bottom_k, _kernels_py.long_word_hashes(data), k, bits)
    assert outcome(_kernels_py.long_word_sketch, data, k, bits) == long_expected
    if _kernels_c is not None:
        assert outcome(_kernels_c.long_word_sketch, data, k, bits) == long_expected


_hashes = st.one_of(
    st.lists(st.integers(0, 2**32 - 1), max_size=300),
    st.sets(st.integers(0, 2**64 - 1), max_size=50),
    st.frozensets(st.integers(0, 2**32 - 1), max_size=50),
    st.lists(st.one_of(st.integers(-(2**70), 2**70), st.booleans()), max_size=20),
)
_bits = st.one_of(st.sampled_from([64, 128, 256, 512, 1024, 2048, 4096]), st.integers(1, 5000))


@needs_compiled
@settings(max_examples=600, deadline=None)
@given(_hashes, st.integers(-3, 400), _bits)
def test_compiled_sketches_match_the_pure_ones(hashes: Any, k: int, bits: int) -> None:
    c = compiled()
    assert outcome(c.fold, hashes, bits) == outcome(_kernels_py.fold, hashes, bits)
    assert outcome(c.bottom_k, hashes, k, bits) == outcome(_kernels_py.bottom_k, hashes, k, bits)
    assert outcome(c.sketch_of, hashes, k, bits) == outcome(_kernels_py.sketch_of, hashes, k, bits)
    assert outcome(c.sketch_of, iter(list(hashes)), k, bits) == outcome(_kernels_py.sketch_of, hashes, k, bits)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=200), st.integers(-3, 250), _bits)
def test_fold_words_folds_the_first_packed_words(values: list[int], k: int, bits: int) -> None:
    packed = array(WORD_CODE, sorted(set(values))).tobytes()
    expected = outcome(_kernels_py.fold, sorted(set(values))[:k], bits) if k >= 0 else ("error", ValueError)
    assert outcome(_kernels_py.fold_words, packed, k, bits) == expected
    if _kernels_c is not None:
        assert outcome(_kernels_c.fold_words, packed, k, bits) == expected
        for bad in (packed + b"x", bytearray(packed), list(values), "text"):
            assert outcome(_kernels_c.fold_words, bad, k, bits) == outcome(_kernels_py.fold_words, bad, k, bits)
        for odd in (True, 2.0, "3", 2**80):
            want = outcome(_kernels_py.fold_words, packed, odd, 1024)
            assert outcome(_kernels_c.fold_words, packed, odd, 1024) == want


_QUOTY = st.lists(st.sampled_from([b'"', b"'", b"`", b"x", b"Y", b" ", b"\n", b"\t", b"no match for ", b"\xc3\xa9"]))


@settings(max_examples=400, deadline=None)
@given(_QUOTY.map(b"".join), st.sampled_from([64, 256, 1024, 3]))
def test_unquoted_line_bits_drop_each_lines_quoted_strings(data: bytes, bits: int) -> None:
    lines = [_kernels_py.QUOTED.sub(b"", line) for line in _kernels_py.lines_of(data)]
    definition = lambda d, b: _kernels_py.fold(frozenset(map(zlib.crc32, lines)) - {0}, b)  # noqa: E731
    assert outcome(_kernels_py.unquoted_line_bits, data, bits) == outcome(definition, data, bits)
    if _kernels_c is not None:
        both_ways(
            lambda c: _same(
                outcome(c.unquoted_line_bits, data, bits), outcome(_kernels_py.unquoted_line_bits, data, bits)
            )
        )


def test_a_short_searchs_quoted_words_do_not_tell_its_lines_apart() -> None:
    for kernels in (_kernels_py, *((_kernels_c,) if _kernels_c is not None else ())):
        x, y = b'No matches found for "x"', b'No matches found for "y y"\n'
        assert kernels.unquoted_line_bits(x, 256) == kernels.unquoted_line_bits(y, 256)
        assert kernels.line_bits(x, 256) != kernels.line_bits(y, 256)
        assert kernels.unquoted_line_bits(b"say 'it\n' twice", 256) == kernels.line_bits(b"say 'it\n' twice", 256)
        assert kernels.unquoted_line_bits(b'"all of it"', 256) == 0


@needs_compiled
def test_compiled_kernels_refuse_what_the_pure_ones_refuse() -> None:
    c = compiled()
    for name in _kernels_py.BYTE_KERNELS:
        for bad in ("text", None, 3):
            assert outcome(getattr(c, name), bad)[0] == "error"
    assert outcome(c.alnum_word_pair, b"bytes", 3) == ("error", TypeError)
    assert outcome(c.alnum_word_pair, "text", -1) == outcome(_kernels_py.alnum_word_pair, "text", -1)
    assert outcome(c.alnum_word_pair, "text")[0] == "error"
    for bad_pair in (("text", b""), (b"", None), (b"abc", b""), (b"", b"abcde")):
        assert outcome(c.shared_words, *bad_pair)[0] == outcome(_kernels_py.shared_words, *bad_pair)[0] == "error"
        assert outcome(c.shared_words, *bad_pair)[1] == outcome(_kernels_py.shared_words, *bad_pair)[1]
    for bad_bits in (("text", 64), (None, 64), (b"a", None), (b"a", "64")):
        assert outcome(c.line_bits, *bad_bits)[0] == outcome(_kernels_py.line_bits, *bad_bits)[0]
        assert outcome(c.unquoted_line_bits, *bad_bits)[0] == outcome(_kernels_py.unquoted_line_bits, *bad_bits)[0]
    assert outcome(c.line_bits, "text", 64)[0] == "error"
    for bad_pair in (("text", b""), (b"", "text"), (b"", b"abc"), (None, b""), (b"\xc3", b"abcde")):
        assert outcome(c.rest_hash, *bad_pair) == outcome(_kernels_py.rest_hash, *bad_pair)
        assert outcome(c.rest_hash, *bad_pair)[0] == "error"
    assert outcome(c.rest_hash, b"a")[0] == "error"
    for bad_pair in (("text", b"a"), (b"", None), (b"abc", b"ab"), (b"", b"")):
        assert outcome(c.best_similarity, *bad_pair) == outcome(_kernels_py.best_similarity, *bad_pair)
        assert outcome(c.best_similarity, *bad_pair)[0] == "error"
    for bad_hashes in ([1.5], ["a"], [None], 7):
        assert outcome(c.fold, bad_hashes, 1024)[0] == outcome(_kernels_py.fold, bad_hashes, 1024)[0] == "error"
        assert outcome(c.sketch_of, bad_hashes, 3, 1024)[0] == "error"


@needs_compiled
def test_compiled_kernels_match_the_pure_ones_on_huge_inputs() -> None:
    c = compiled()
    rng = random.Random(17)
    words = ["error", "0 fail", "Traceback", "x" * 5000, "naïve", "\x00", "\n", " ", "ok", "ΣΑΣ", "\ud800", "٣٤"]
    text = "".join(rng.choice(words) for _ in range(200_000))
    data = text.encode("utf-8", "surrogatepass")
    for name in _kernels_py.BYTE_KERNELS:
        assert getattr(c, name)(data) == getattr(_kernels_py, name)(data), name
    for limit in (0, 64, 10**9):
        assert c.alnum_word_pair(text, limit) == _kernels_py.alnum_word_pair(text, limit)
    assert c.line_bits(data, 4096) == _kernels_py.line_bits(data, 4096)
    assert c.unquoted_line_bits(data, 4096) == _kernels_py.unquoted_line_bits(data, 4096)
    known = _kernels_py.alnum_word_pair(text, 5)[0]
    ascii_data = data.decode("ascii", "replace").encode("ascii", "replace")
    for sample in (data, ascii_data):
        assert c.rest_hash(sample, known) == _kernels_py.rest_hash(sample, known)
    hashes = _kernels_py.word_hashes(data)
    assert c.sketch_of(hashes, 10**6, 4096) == _kernels_py.sketch_of(hashes, 10**6, 4096)


_VOLATILE = [
    "0", "1", "7", "12", "2024-01-02", "T", " ", ":", "-", ".", ",", "Z", "+", "s", "ms", "sec", "seconds", "min",
    "mins", "µs", "us", "ns", "se", "mi", "new", "src", "a", "f", "e", "x", "X", "0x", "deadbeef", "8f2a91", "pid",
    "PID", "Pid", "process ", "Process ", "=", "#", "bash:", "sh:", "zsh:", "dash:", " line ", "/tmp/", "/var/",
    "/var/folders/", "/private/var/", "/var/tmp/", "tmp", "TMP", "tmp.", "_", "\n", "'", ")", "]", "\t", "\x00",
    "é", "\xc2", "Q", "x" * 700, "9" * 11, "0X", "ABCDEF", "Tmp", "tMP", "h:", "µ", "2024-01-02T10:20:30",
    "Dload  Upload   Total   Spent    Left  Speed", "Dload", "k", "M", "--:--:--", "\r", "m", "u", "n", "i", "S",
    "\xb5",
]  # fmt: skip
_volatile_bytes = st.one_of(
    st.binary(),
    st.lists(st.sampled_from(_VOLATILE), max_size=60).map(lambda parts: "".join(parts).encode("utf-8")),
    st.lists(st.sampled_from(_VOLATILE), min_size=100, max_size=400).map(lambda parts: "".join(parts).encode()),
)


@needs_compiled
@settings(max_examples=1500, deadline=None)
@given(_volatile_bytes)
def test_compiled_masking_matches_the_pure_one(data: bytes) -> None:
    both_ways(lambda c: _same(c.masked_bytes(data), masking._masked_bytes_py(data)))


# Every kind of volatile part and every error word, with the bytes around them that decide (a letter or digit
# before or after, "0x", a date, a unit, a look-alike that is not one).
_EVERY_KIND = (
    b"at 2024-01-02T10:20:30.123+02:00 took 0.13s (300 ms, 7 \xc2\xb5s, 12 src, 3 seconds) id "
    b"123e4567-e89b-12d3-a456-426614174000 at 0x7ffee3b1 0XDEADBEEF 8f2a91c0 1700000000123 defaced abc123 "
    b"ABCDEF-ABCDEFAB-abcd-ABCD-abcd-abcdefabcdef pid=4242 PID 7 Process #9 bash: line 13008: x sh: 4: "
    b"/tmp/tmpab12cd34/out.txt tmp.Xy12Ab34 /var/folders/x /private/var/y TMP 9:05:00Z\n"
    b"Error: no errors, 0 failed, fail-fast, timeout=3, x_unknown, Traceback, can't, NOT FOUND, timed out\n"
    b"Dload  Upload   Total   Spent    Left  Speed\n100 14k 0 --:--:-- 0:00:01 26M\r\n\ndone\n"
)


@needs_compiled
def test_compiled_masking_error_lines_and_numbers_match_the_pure_ones_at_every_offset_and_length() -> None:
    # the compiled kernels read 8 bytes at a time, and masking's scan 64 (32 with each vector comparison): every part
    # must be found wherever it falls in those bytes, and wherever the text ends
    def check(c: ModuleType) -> None:
        for shift in range(66):
            data = b"x" * shift + _EVERY_KIND
            for end in range(len(data) + 1):
                assert c.masked_bytes(data[:end]) == masking._masked_bytes_py(data[:end]), (shift, end)
                if shift < 16:
                    assert c.numbers_marked(data[:end]) == _kernels_py.numbers_marked(data[:end]), (shift, end)
                if shift < 40:  # error_lines' filter reads 3 bytes from each of 32 positions a step
                    assert c.error_lines(data[:end]) == _kernels_py.error_lines(data[:end]), (shift, end)

    both_ways(check)


@needs_compiled
def test_compiled_error_lines_find_every_keyword_at_every_place_of_a_vector_step() -> None:
    # the filter rules out positions by a keyword's first 3 bytes, lowercased: each keyword, in any case, must get
    # through it wherever it starts (its bytes split across two steps, in the last bytes the portable code reads),
    # and words that only share a keyword's first bytes must not come out as errors
    keywords = ["error", "fail", "exception", "traceback", "fatal", "denied", "not found", "no such", "cannot"]
    keywords += ["can't", "unable", "invalid", "refused", "timed out", "timeout", "abort", "panic", "missing"]
    keywords += ["unknown", "undefined", "unsupported", "not allowed"]
    near = b"erratic fairy excited trance fatigue dentist note nos canal pancake unabated inverse refund timer abbot"
    near += b" misty unkempt undo unsure"

    def check(c: ModuleType) -> None:
        for keyword in keywords:
            for word in (keyword, keyword.upper(), keyword.title()):
                for at in range(70):
                    data = near[:at] + b" " + word.encode() + b" " + near
                    for end in (len(data), at + 1 + len(word)):
                        assert c.error_lines(data[:end]) == _kernels_py.error_lines(data[:end]), (word, at, end)
        assert c.error_lines(near * 3) == _kernels_py.error_lines(near * 3) == []

    both_ways(check)


@needs_compiled
def test_the_vector_instructions_can_be_turned_off_and_on_again() -> None:
    c = compiled()
    found = c._vector_instructions()
    assert set(found) == {"ssse3", "popcnt", "avx2", "avx512"}
    try:
        assert c._vector_instructions(False) == dict.fromkeys(found, False)
        assert c._vector_instructions(["avx2"]) == {**dict.fromkeys(found, False), "avx2": found["avx2"]}
        assert c._vector_instructions(("ssse3", "popcnt", "avx2")) == {**found, "avx512": False}
        with pytest.raises(TypeError, match="a bool or names"):
            c._vector_instructions("avx2")
    finally:
        assert c._vector_instructions(True) == found


@needs_compiled
def test_compiled_masking_removes_every_kind_of_volatile_part() -> None:
    data = (
        b"at 2024-01-02T10:20:30.123+02:00 took 0.13s (300 ms), id 123e4567-e89b-12d3-a456-426614174000 at "
        b"0x7ffee3b1, 8f2a91c0 1700000000123, pid=4242, bash: line 13008: x, /tmp/tmpab12cd34/out.txt: 12 steps"
    )
    expected = b"at  took  (), id  at ,  , , bash: x, : 12 steps"
    assert compiled().masked_bytes(data) == masking._masked_bytes_py(data) == expected


# -- the rules' helpers, with either implementation -------------------------------------------------------------


def test_the_helpers_the_rules_call_use_the_chosen_kernels() -> None:
    step = base.Step(0, "result", event=None, output="Error: x\nError: x\n\nok 12:00:01")  # type: ignore[arg-type]
    assert base.line_hashes(step) == _kernels.line_hashes(masked(step.output or ""))
    assert base.line_hashes(step) == frozenset({zlib.crc32(b"error:x"), zlib.crc32(b"ok")})
    assert base.sketch_of([3, 1, 2, 1], 2) == base.bits_text(base.bottom_k([3, 1, 2, 1], 2)) == base.bits_text(0b110)
    assert base.fold([1, 1025], 1024) == 0b10


# -- the corpus, and the choice of implementation ------------------------------------------------------------------


@needs_compiled
def test_compiled_and_pure_kernels_agree_on_a_sample_of_the_corpus() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "check_kernels.py"), "--runs", "12", *map(str, _corpus())],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 differences" in done.stdout and " 0 texts" not in done.stdout


def _corpus() -> list[Path]:
    files = sorted((REPO / "corpus").glob("*.jsonl.gz"))
    assert files
    return files


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env}, check=True, timeout=300
    )
    return done.stdout


def test_loopwatch_pure_python_forces_the_twins() -> None:
    code = "from loopwatch.core import _kernels as k, _kernels_py as p; print(k.COMPILED, k.bottom_k is p.bottom_k)"
    assert _run(code, LOOPWATCH_PURE_PYTHON="1") == "False True\n"
    assert _run(code, LOOPWATCH_PURE_PYTHON="0") == _run(code)


def test_the_compiled_kernels_are_used_when_built() -> None:
    if os.environ.get("LOOPWATCH_PURE_PYTHON", "") not in ("", "0"):
        assert not _kernels.COMPILED
    elif _kernels_c is not None:
        assert _kernels.COMPILED and _kernels.error_lines is _kernels_c.error_lines
    if os.environ.get("LOOPWATCH_REQUIRE_COMPILED"):
        assert _kernels_c is not None, "make test builds the compiled kernels: are a C compiler and Python.h there?"


def test_a_scan_finds_the_same_loops_with_either_implementation(tmp_path: Path) -> None:
    sample = tmp_path / "runs.jsonl.gz"
    with gzip.open(_corpus()[0], "rt", encoding="utf-8") as runs:
        head = [next(runs) for _ in range(25)]
    with gzip.open(sample, "wt", encoding="utf-8") as out:
        out.writelines(head)
    scan = [sys.executable, "-m", "loopwatch", "scan", str(sample), "--json", "--no-config"]
    clean = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
    forced = {**clean, "LOOPWATCH_PURE_PYTHON": "1"}
    pure = subprocess.run(scan, capture_output=True, text=True, env=forced, timeout=600, check=False)
    either = subprocess.run(scan, capture_output=True, text=True, env=clean, timeout=600, check=False)
    assert pure.returncode == either.returncode == 0, pure.stderr + either.stderr
    runs = [json.loads(line) for line in pure.stdout.splitlines()]
    assert len(runs) == 25 and sum(bool(run["detections"]) for run in runs) >= 3
    assert pure.stdout == either.stdout


# the markers, cut short, and what may surround them (a byte a character, past Latin-1, across 32-byte steps)
_MARKER_PIECES = [
    *_kernels_py.FAILURE_MARKERS, *(marker[:-1] for marker in _kernels_py.FAILURE_MARKERS), "Tra", "No ", "EXE", "(ex",
    "timed out", "x", " ", "\n", "é", "😀", "\ud800", "a" * 31, "b" * 33,
]  # fmt: skip
_marker_text = st.one_of(any_text, st.lists(st.sampled_from(_MARKER_PIECES), max_size=12).map("".join))


@settings(max_examples=800, deadline=None)
@given(text=_marker_text)
def test_failure_marked_is_any_marker_in_the_text(text: str) -> None:
    expected = any(marker in text for marker in _kernels_py.FAILURE_MARKERS)
    assert _kernels_py.failure_marked(text) is expected
    if _kernels_c is not None:
        both_ways(lambda c: _same(c.failure_marked(text), expected))


def test_failure_marked_finds_each_marker_wherever_it_starts() -> None:
    """Each marker at every offset of a 100-character text (through the vector steps and the portable tail), alone
    and cut short by its last character."""
    for marker in _kernels_py.FAILURE_MARKERS:
        for at in range(100):
            text = ("q" * at + marker + "q" * 100)[: max(100, at + len(marker))]
            cut = "q" * at + marker[:-1]
            assert _kernels.failure_marked(text), (marker, at)
            assert not _kernels.failure_marked(cut), (marker, at)
            if _kernels_c is not None:
                found = (text, cut)
                both_ways(lambda c, found=found: _same([c.failure_marked(t) for t in found], [True, False]))
    if _kernels_c is not None:
        assert outcome(compiled().failure_marked, b"Traceback (most recent call last)") == ("error", TypeError)


_ESCAPE_PIECES = [
    "\\", "u", "d", "D", "8", "9", "a", "f", "F", "g", "0", "\\ud83d", "\\uDC00", "\\u00e9", "x", "é", "😀",
]  # fmt: skip
_escape_text = st.one_of(any_text, st.lists(st.sampled_from(_ESCAPE_PIECES), max_size=16).map("".join))


@settings(max_examples=800, deadline=None)
@given(text=_escape_text)
def test_surrogate_escape_is_its_regular_expression(text: str) -> None:
    expected = _kernels_py.SURROGATE_ESCAPE.search(text) is not None
    assert _kernels_py.surrogate_escape(text) is expected
    if _kernels_c is not None:
        both_ways(lambda c: _same(c.surrogate_escape(text), expected))


def test_surrogate_escape_finds_an_escape_wherever_it_ends() -> None:
    """Each escape at every offset of up to 100 bytes (through the vector steps and the portable tail), and one with
    its fourth byte changed."""
    for escape in ("\\ud800", "\\uDFFF", "\\udc0a", "\\uD9"):
        for at in range(100):
            found = ("q" * at + escape + "q" * (at % 7), "q" * at + escape[:3] + "g" + "q" * (at % 7))
            assert [_kernels.surrogate_escape(t) for t in found] == [True, False], found
            if _kernels_c is not None:
                both_ways(lambda c, found=found: _same([c.surrogate_escape(t) for t in found], [True, False]))
    assert not _kernels.surrogate_escape('{"a": "\\u00e9 \\\\ \\n"}')
    if _kernels_c is not None:
        assert outcome(compiled().surrogate_escape, b"\\ud800") == ("error", TypeError)


# -- warm_up: no result, nothing changed -----------------------------------------------------------------------


@needs_compiled
def test_warm_up_follows_any_object_graph_without_changing_it() -> None:
    from loopwatch import ToolCall, ToolResult, preset
    from loopwatch.core._engine import Engine

    c = compiled()
    cycle: list[Any] = [1]
    cycle.append(cycle)
    wide = [[n] for n in range(2_000)]  # more objects than the 512 it asks for
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    for n in range(6):
        engine.observe(session, ToolCall("bash", {"command": f"pytest tests/test_{n % 2}.py"}))
        engine.observe(session, ToolResult(f"FAILED tests/test_{n % 2}.py::test_load - KeyError: 'id'", exit_code=1))
    before, references = engine.dump(session), sys.getrefcount(session)
    for obj in (cycle, wide, {"a": (1, "b", b"c")}, session, int, c, None, 3.5, "text"):
        for levels in (0, 1, 3, 50):
            assert c.warm_up(obj, levels) is None
    assert engine.dump(session) == before and sys.getrefcount(session) == references
    assert cycle[1] is cycle and [len(w) for w in wide] == [1] * 2_000
    with pytest.raises(TypeError):
        c.warm_up(session)
    with pytest.raises(TypeError):
        c.warm_up(session, "3")
    assert _kernels.warm_up is (c.warm_up if _kernels.COMPILED else None)
