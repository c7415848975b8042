"""Similarity scores: seed 000's Jaccard, seed 004's JavaScript Jaccard, seed 002's fuzzy ratio."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.core import _similarity as similarity
from loopwatch.core._similarity import (
    HAVE_RAPIDFUZZ,
    fuzz_ratio,
    fuzz_ratio_at_least,
    fuzz_ratio_py,
    jaccard_sets,
    jaccard_tokens,
    jaccard_ws,
)

rapidfuzz = pytest.importorskip("rapidfuzz")
from rapidfuzz import fuzz  # noqa: E402

SEED_002_A = "Let me check the database for user information..."
SEED_002_B = "Checking the database for user information..."


# ---------------------------------------------------------------------- seed 000: Jaccard tokens


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        ("check current price and make trade decision", 4 / 8),
        ("check price and decide trade action", 5 / 6),
        ("check price and decide on trade", 5 / 6),
        ("check price and decide trade", 1.0),
    ],
)
def test_jaccard_tokens_seed_000_worked_examples(other: str, expected: float) -> None:
    assert jaccard_tokens("check price and decide trade", other) == pytest.approx(expected)


def test_jaccard_tokens_seed_000_first_example_is_exactly_half() -> None:
    a, b = "check price and decide trade", "check current price and make trade decision"
    assert jaccard_tokens(a, b) == 0.5


@pytest.mark.parametrize(("a", "b"), [("", ""), ("", "check price"), ("check price", ""), ("   ", "check")])
def test_jaccard_tokens_empty_or_blank_is_zero(a: str, b: str) -> None:
    assert jaccard_tokens(a, b) == 0.0


def test_jaccard_tokens_lowercases_and_splits_on_any_whitespace() -> None:
    assert jaccard_tokens("Check\tPRICE\nnow", "check price now") == 1.0


def test_jaccard_sets_on_precomputed_sets() -> None:
    assert jaccard_sets(frozenset({"a", "b", "c"}), {"b", "c", "d"}) == 2 / 4
    assert jaccard_sets(frozenset(), {"a"}) == 0.0
    assert jaccard_sets({"a"}, set()) == 0.0


@given(st.text(max_size=60), st.text(max_size=60))
def test_jaccard_tokens_matches_the_seed_formula(a: str, b: str) -> None:
    ta, tb = set(a.lower().split()), set(b.lower().split())
    expected = 0.0 if not a or not b or not ta or not tb else len(ta & tb) / len(ta | tb)
    assert jaccard_tokens(a, b) == pytest.approx(expected)
    assert jaccard_tokens(a, b) == jaccard_tokens(b, a)


# ---------------------------------------------------------------------- seed 004: JavaScript split


def test_jaccard_ws_is_case_sensitive() -> None:
    assert jaccard_ws("Read file.ts", "read file.ts") == pytest.approx(1 / 3)


def test_jaccard_ws_keeps_javascript_empty_tokens() -> None:
    # " a".split(/\s+/) is ["", "a"] in JavaScript, so the sets are {"", "a"} and {"a"}.
    assert jaccard_ws(" a", "a") == 0.5
    assert jaccard_ws("a ", " a") == 1.0  # both {"", "a"}
    assert jaccard_ws("", "") == 1.0  # "".split(/\s+/) is [""]
    assert jaccard_ws("", "a") == 0.0
    assert jaccard_ws(" ", "") == 1.0  # ["", ""] -> {""}


def test_jaccard_ws_uses_javascript_whitespace_not_pythons() -> None:
    # U+FEFF is whitespace in JavaScript regexps but not for str.split; U+001C is the reverse.
    assert jaccard_ws("a\ufeffb", "a b") == 1.0
    assert jaccard_ws("a\x1cb", "a b") == 0.0
    assert jaccard_ws("a\u00a0\u3000b", "a b") == 1.0


def test_jaccard_ws_seed_004_threshold_example() -> None:
    a = "edit file.ts old_string foo new_string bar"
    b = "edit file.ts old_string foo new_string baz"
    assert jaccard_ws(a, b) == pytest.approx(5 / 7)
    assert jaccard_ws(a, b) < 0.75


# ---------------------------------------------------------------------- seed 002: fuzzy ratio


def test_seed_002_example_is_not_091() -> None:
    py, best = fuzz_ratio_py(SEED_002_A, SEED_002_B), fuzz_ratio(SEED_002_A, SEED_002_B)
    assert py == pytest.approx(fuzz.ratio(SEED_002_A, SEED_002_B) / 100, abs=1e-12)
    assert py == pytest.approx(best, abs=1e-12)
    assert py == pytest.approx(82 / 94)  # 49 + 45 chars, LCS 41: not the 0.91 the seed claims
    assert py < 0.9


def test_fuzz_ratio_edge_cases_match_rapidfuzz() -> None:
    assert fuzz.ratio("", "") == 100.0
    assert fuzz_ratio_py("", "") == 1.0
    assert fuzz_ratio("", "") == 1.0
    assert fuzz_ratio_py("abc", "") == 0.0
    assert fuzz_ratio_py("abc", "abc") == 1.0
    assert fuzz_ratio_py("abc", "xyz") == 0.0


def test_rapidfuzz_is_used_when_installed() -> None:
    assert HAVE_RAPIDFUZZ


def test_pure_python_fallback_without_rapidfuzz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(similarity, "_rf_ratio", None)
    assert similarity.fuzz_ratio(SEED_002_A, SEED_002_B) == fuzz_ratio_py(SEED_002_A, SEED_002_B)
    assert similarity.fuzz_ratio_at_least(SEED_002_A, SEED_002_B, 0.87) is True
    assert similarity.fuzz_ratio_at_least(SEED_002_A, SEED_002_B, 0.88) is False


def test_fuzz_ratio_at_least_short_circuits_on_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(a: str, b: str) -> float:
        raise AssertionError("should not be computed")

    monkeypatch.setattr(similarity, "_rf_ratio", None)
    monkeypatch.setattr(similarity, "fuzz_ratio_py", boom)
    # 2 * 3 / (3 + 30) = 0.18 < 0.5: ruled out by the lengths alone.
    assert similarity.fuzz_ratio_at_least("abc", "x" * 30, 0.5) is False
    assert similarity.fuzz_ratio_at_least("abc", "x" * 30, 0.0) is True


@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.8, 82 / 94, 0.9, 1.0])
def test_fuzz_ratio_at_least_agrees_with_the_score(threshold: float) -> None:
    expected = fuzz_ratio(SEED_002_A, SEED_002_B) >= threshold
    assert fuzz_ratio_at_least(SEED_002_A, SEED_002_B, threshold) is expected


_ALPHABET = st.sampled_from("ab cdé\u00e9\U0001f600\n日本")
_TEXT = st.text(alphabet=_ALPHABET, max_size=300) | st.text(max_size=300)


@settings(max_examples=300)
@given(_TEXT, _TEXT)
def test_fuzz_ratio_py_equals_rapidfuzz(a: str, b: str) -> None:
    expected = fuzz.ratio(a, b) / 100
    assert fuzz_ratio_py(a, b) == pytest.approx(expected, abs=1e-9)
    assert fuzz_ratio_py(a, b) == pytest.approx(fuzz_ratio_py(b, a), abs=1e-12)
    assert fuzz_ratio(a, b) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=200)
@given(_TEXT, _TEXT, st.floats(min_value=0.0, max_value=1.0))
def test_fuzz_ratio_at_least_is_the_comparison(a: str, b: str, threshold: float) -> None:
    assert fuzz_ratio_at_least(a, b, threshold) is (fuzz_ratio(a, b) >= threshold)


@given(st.text(min_size=1, max_size=50))
def test_fuzz_ratio_py_long_common_affixes(core: str) -> None:
    a, b = "prefix " * 20 + core + " suffix" * 20, "prefix " * 20 + core[::-1] + " suffix" * 20
    assert fuzz_ratio_py(a, b) == pytest.approx(fuzz.ratio(a, b) / 100, abs=1e-9)
