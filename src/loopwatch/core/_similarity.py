"""Text similarity scores used by the text detectors.

* :func:`jaccard_tokens` / :func:`jaccard_sets`: word-set overlap exactly as the ``jaccard-turns`` design computes it
  (lower-cased whitespace tokens, 0.0 for an empty side).
* :func:`jaccard_ws`: the ``behavioral`` design's JavaScript ``jaccardSimilarity`` (``new Set(s.split(/\\s+/))``),
  case-sensitive and with JavaScript's empty-token quirks.
* :func:`fuzz_ratio`: ``rapidfuzz.fuzz.ratio(a, b) / 100`` (the ``ralph`` design), the normalized Indel similarity
  ``1 - (len(a) + len(b) - 2 * LCS) / (len(a) + len(b))``. rapidfuzz is used when it is installed;
  otherwise :func:`fuzz_ratio_py`, a pure-Python bit-parallel twin that gives the same scores.

Everything here is pure: no I/O, no clock, no global state besides the optional rapidfuzz import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Hashable, Set
from typing import Any

from ._lazy_re import lazy_compile

__all__ = [
    "HAVE_RAPIDFUZZ",
    "fuzz_ratio",
    "fuzz_ratio_at_least",
    "fuzz_ratio_py",
    "jaccard_sets",
    "jaccard_tokens",
    "jaccard_ws",
]


_UNLOADED: Any = object()
_rf_ratio: Any = _UNLOADED
"""rapidfuzz's C ``fuzz.ratio``, imported on first use (a short-lived hook process never pays for it)."""


def _ratio() -> Callable[..., float] | None:
    """rapidfuzz's ``fuzz.ratio`` when installed, else None (imported once, when first needed)."""
    global _rf_ratio
    if _rf_ratio is _UNLOADED:
        try:
            from rapidfuzz.fuzz import ratio
        except ImportError:  # pragma: no cover - exercised only without rapidfuzz
            _rf_ratio = None
        else:
            _rf_ratio = ratio
    loaded: Callable[..., float] | None = _rf_ratio
    return loaded


HAVE_RAPIDFUZZ: bool = importlib.util.find_spec("rapidfuzz") is not None
"""True when ``rapidfuzz`` is installed and :func:`fuzz_ratio` uses it."""

# JavaScript's ``\s`` (ECMAScript WhiteSpace + LineTerminator). It differs from Python's ``\s``: it
# includes U+FEFF and excludes U+001C..U+001F and U+0085.
_JS_WS = lazy_compile("[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


def jaccard_sets(a: Set[Hashable], b: Set[Hashable]) -> float:
    """``|a ∩ b| / |a ∪ b|`` on precomputed token sets; 0.0 when either set is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def jaccard_tokens(a: str, b: str) -> float:
    """The ``jaccard-turns`` design's ``_text_similarity``: Jaccard overlap of lower-cased whitespace tokens.

    0.0 when either string is empty or has no tokens (whitespace only).
    """
    if not a or not b:
        return 0.0
    return jaccard_sets(set(a.lower().split()), set(b.lower().split()))


def _js_split_ws(s: str) -> set[str]:
    """``new Set(s.split(/\\s+/))``: keeps ``""`` for leading/trailing whitespace and for ``""``."""
    return set(_JS_WS.split(s))


def jaccard_ws(a: str, b: str) -> float:
    """The ``behavioral`` design's ``jaccardSimilarity(a, b)`` reproduced exactly.

    Tokens come from JavaScript's ``s.split(/\\s+/)``: no lower-casing, and the empty string is a token
    when ``s`` starts or ends with whitespace (``" a".split(/\\s+/)`` is ``["", "a"]``) or is empty
    (``"".split(/\\s+/)`` is ``[""]``). So ``jaccard_ws("", "") == 1.0`` and
    ``jaccard_ws(" a", "a") == 0.5``, as in JavaScript. Because a JavaScript split never returns an empty
    array, the union is never empty; the 0/0 case that JavaScript would turn into ``NaN`` cannot happen,
    and is defined defensively as 1.0 for identical strings and 0.0 otherwise.
    """
    set_a, set_b = _js_split_ws(a), _js_split_ws(b)
    union = len(set_a | set_b)
    if union == 0:  # pragma: no cover - unreachable with JavaScript split semantics (see docstring)
        return 1.0 if a == b else 0.0
    return len(set_a & set_b) / union


def _affix_len(a: str, b: str) -> tuple[int, int]:
    """Lengths of the common prefix and of the common suffix (not overlapping the prefix)."""
    n = min(len(a), len(b))
    pre = 0
    while pre < n and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    return pre, suf


def _lcs_bitparallel(a: str, b: str) -> int:
    """Length of the longest common subsequence (Hyyrö / Allison-Dix bit-vector algorithm).

    One Python big-int step per character of the shorter string; each step costs O(len(longer) / 64).
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    bit = 1
    for ch in a:
        masks[ch] = masks.get(ch, 0) | bit
        bit <<= 1
    full = bit - 1
    v = full
    get = masks.get
    for ch in b:
        u = v & get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _indel_similarity(a: str, b: str) -> float:
    """Normalized Indel similarity in [0, 1], computed the way rapidfuzz does."""
    lensum = len(a) + len(b)
    if lensum == 0:
        return 1.0
    pre, suf = _affix_len(a, b)
    lcs = pre + suf + _lcs_bitparallel(a[pre : len(a) - suf], b[pre : len(b) - suf])
    dist = lensum - 2 * lcs
    return 1.0 - dist / lensum


def fuzz_ratio_py(a: str, b: str) -> float:
    """Pure-Python ``rapidfuzz.fuzz.ratio(a, b) / 100``: ``1 - indel_distance / (len(a) + len(b))``.

    Two empty strings score 1.0 (as rapidfuzz does); one empty string against a non-empty one scores 0.0.
    """
    return _indel_similarity(a, b) * 100 / 100


def fuzz_ratio(a: str, b: str) -> float:
    """``rapidfuzz.fuzz.ratio(a, b) / 100`` in [0, 1]; the pure-Python twin when rapidfuzz is missing."""
    ratio = _ratio()
    if ratio is not None:
        return float(ratio(a, b)) / 100
    return fuzz_ratio_py(a, b)


def _length_bound(a: str, b: str) -> float:
    """Upper bound of :func:`fuzz_ratio` from the lengths alone: ``2 * min / (len(a) + len(b))``."""
    lensum = len(a) + len(b)
    return 1.0 if lensum == 0 else 2 * min(len(a), len(b)) / lensum


def fuzz_ratio_at_least(a: str, b: str, threshold: float) -> bool:
    """``fuzz_ratio(a, b) >= threshold``, skipping the computation when the lengths alone rule it out."""
    if threshold <= 0.0:
        return True
    if _length_bound(a, b) < threshold:
        return False
    ratio = _ratio()
    if ratio is not None:
        # The cutoff lets rapidfuzz stop early; it is lowered a hair so that rounding in its own
        # cutoff conversion can never reject a score the plain comparison below would accept.
        score = float(ratio(a, b, score_cutoff=max(0.0, threshold * 100 - 1e-6))) / 100
        return score >= threshold
    return fuzz_ratio_py(a, b) >= threshold
