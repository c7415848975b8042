"""The text kernels the rules use: compiled when the optional C module was built, else their pure-Python twins.

Both give the same results bit for bit (see :mod:`loopwatch.core._kernels_py`), so which one runs changes only the
speed. ``LOOPWATCH_PURE_PYTHON=1`` in the environment (read once, at import) forces the pure-Python twins.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import _kernels_py

__all__ = [
    "COMPILED",
    "alnum_word_pair",
    "bottom_k",
    "change_word",
    "collapsed",
    "error_lines",
    "failure_marked",
    "fold",
    "fold_words",
    "last_error_line",
    "line_hashes",
    "long_word_hashes",
    "long_word_sketch",
    "lower",
    "masked_bytes",
    "numbers_marked",
    "poll_word",
    "rest_hash",
    "shared_words",
    "sketch_of",
    "surrogate_escape",
    "unquoted_line_bits",
    "warm_up",
    "word_hashes",
    "word_sketch",
]


def pure_forced() -> bool:
    """Does the environment ask for the pure-Python kernels (``LOOPWATCH_PURE_PYTHON`` set, and not ``0``)?"""
    return os.environ.get("LOOPWATCH_PURE_PYTHON", "") not in ("", "0")


if TYPE_CHECKING:
    _impl = _kernels_py
else:
    _impl = _kernels_py
    if not pure_forced():
        with contextlib.suppress(ImportError):  # not built (no compiler at install time, or a pure-Python wheel)
            from . import _kernels_c as _impl

COMPILED: bool = _impl is not _kernels_py
"""True when the compiled kernels are in use."""

lower: Callable[[str], str] = str.lower
"""``str.lower``, called as a function: the modules mypyc compiles lowercase text with it, never with
``text.lower()``, which mypyc (before Python 3.13) compiles into a mapping of one character at a time, without
Unicode's one rule that looks at a character's neighbours (a capital sigma that ends a word becomes ``ς``, not
``σ``): ``"ΟΔΥΣΣΕΥΣ".lower()`` would differ between the compiled build and the source, and so would the hashes and
sketches made from it."""

error_lines = _impl.error_lines
word_hashes = _impl.word_hashes
line_hashes = _impl.line_hashes
line_bits = _impl.line_bits
unquoted_line_bits = _impl.unquoted_line_bits
numbers_marked = _impl.numbers_marked
poll_word = _impl.poll_word
change_word = _impl.change_word
failure_marked = _impl.failure_marked
surrogate_escape = _impl.surrogate_escape
collapsed = _impl.collapsed
blanks_dropped = _impl.blanks_dropped
alnum_word_pair = _impl.alnum_word_pair
long_word_hashes = _impl.long_word_hashes
long_word_sketch = _impl.long_word_sketch
shared_words = _impl.shared_words
rest_hash = _impl.rest_hash
best_similarity = _impl.best_similarity
fold = _impl.fold
fold_words = _impl.fold_words
bottom_k = _impl.bottom_k
sketch_of = _impl.sketch_of
word_sketch = _impl.word_sketch
last_error_line = _impl.last_error_line

masked_bytes: Callable[[bytes], bytes] | None = getattr(_impl, "masked_bytes", None)
"""The compiled twin of :func:`loopwatch.core._masking._masked_bytes_py` (the volatile parts of a text removed), or
``None`` with the pure-Python kernels (:mod:`loopwatch.core._masking` then uses its own; it imports this module, so the
pure twin cannot live in :mod:`loopwatch.core._kernels_py`)."""

warm_up: Callable[[object, int], None] | None = getattr(_impl, "warm_up", None)
"""With the compiled kernels, a function that asks the processor to bring an object and the objects it refers to,
``levels`` references deep (at most 512 objects), into its cache, and returns ``None``: the guard calls it for a
session's state when an event comes for another session than the last, before the event's features are computed
(see :meth:`loopwatch._session_backend.InProcessSessions.evaluate`). ``None`` with the pure-Python kernels: Python
cannot ask, and there is nothing to compute, so it has no twin."""
