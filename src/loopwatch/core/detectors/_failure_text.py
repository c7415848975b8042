"""What a failed result says: its error lines, an excerpt to quote, a sketch of its words to compare failures
with, and the same with its numbers marked (a count that moved is not the same failure)."""

from __future__ import annotations

import re
import zlib
from typing import Final

from .._fingerprint import preview
from .._kernels import error_lines, last_error_line, numbers_marked, word_sketch
from ._base import (
    SKETCH_BITS,
    Step,
    bits_similarity,
    bits_text,
    bottom_k,
    masked_of,
)

_CUT_NOTE: Final = re.compile(
    r"^\W*(?:\[?truncated|<response clipped>|output truncated|\(truncated|\[output clipped)", re.I
)
"""A line that only says the output was cut (``...[truncated 8460 chars]``): it says nothing about the error."""


def error_excerpt(output: str, limit: int = 200) -> str:
    """The most telling line of an error output: the last line of its last 2,000 characters that says something
    went wrong (:func:`~loopwatch.core._kernels_py.error_lines`, the lines a failure is compared by), else the last
    non-empty line that is not a note that the output was cut."""
    tail = output[-2_000:]
    found = last_error_line(tail.encode("utf-8", "surrogatepass"))
    if found is not None:
        return preview(found.decode("utf-8", "replace").strip(), limit)
    last = None
    for raw in reversed(tail.splitlines()):
        line = raw.strip()
        if line and not _CUT_NOTE.match(line):
            last = line
            break
    return preview(last or output, limit)


def excerpt_of(step: Step) -> str:
    """:func:`error_excerpt` of a result step's output, computed once per step."""
    cached = step.excerpt
    if cached is None:
        cached = step.excerpt = error_excerpt(step.output or "")
    return str(cached)


_TRUNCATED: Final = re.compile(
    rb"\[truncated|<response clipped>|output truncated|\.\.\. ?\(truncated|\[output clipped", re.I
)
_TRUNCATED_WORDS: Final = (b"truncated", b"clipped")
"""A word every match of :data:`_TRUNCATED` holds (lowercased): text without one is ruled out before the expression
runs (it tries each position in turn: ~2.5 us for 400 bytes of the corpus's outputs, lowering them and looking for
the two words ~0.7 us)."""
_ERROR_LINES: Final = 12
"""Error lines a sketch is made of (the last ones: where a run says what finally went wrong)."""


def error_bits(masked_output: bytes, limit: int = 32) -> int:
    """A small sketch of an error, as a folded set of 1,024 bits: the smallest hashes of the distinct words of its
    (masked) error lines.

    The lines that say something went wrong (an error, a failure, a missing file...) are what two failures must
    share to be the same failure, not the boilerplate around them (a build tool's banner, the echoed command):
    the last few such lines of the first and last 4 KB are read. An output without such a line is read whole (its
    first and last 800 bytes). The words are split and deduplicated at C speed.
    """
    text = masked_output if len(masked_output) <= 8_192 else masked_output[:4_096] + b"\n" + masked_output[-4_096:]
    lines = error_lines(text)
    if lines:
        return word_sketch(b"\n".join(lines[-_ERROR_LINES:])[:1_600], limit, SKETCH_BITS)
    if _says_cut(text[-400:]) or _says_cut(text[:400]):
        # cut before it said what went wrong: only the very same output is known to be the same failure
        return bottom_k([zlib.crc32(masked_output)], limit)
    text = text if len(text) <= 1_600 else text[:800] + b"\n" + text[-800:]
    return word_sketch(text, limit, SKETCH_BITS)


def _says_cut(part: bytes) -> bool:
    """Does ``part`` say the output was cut (:data:`_TRUNCATED`)?"""
    lowered = part.lower()  # ASCII letters only, as the expression's re.I does for bytes
    return any(word in lowered for word in _TRUNCATED_WORDS) and _TRUNCATED.search(part) is not None


def error_words(masked_output: bytes, limit: int = 32) -> str:
    """:func:`error_bits` as base64 text (how snapshots hold it)."""
    return bits_text(error_bits(masked_output, limit))


def error_bits_of(step: Step) -> int:
    """:func:`error_bits` of a step's masked output (a message's text), computed once per step."""
    cached = step.error_bits
    if cached is None:
        cached = step.error_bits = error_bits(masked_of(step))
    return int(cached)


def _numberless(masked_output: bytes) -> int:
    """A hash of a masked output with every number replaced by one placeholder: equal for two outputs that differ
    only in their counts (read where errors are: the whole lines of the first and last 800 bytes)."""
    text = masked_output
    if len(text) > 1_600:  # whole lines only, so that a count one digit longer does not shift the window
        head, tail = text[:800], text[-800:]
        text = head[: head.rfind(b"\n") + 1 or None] + b"\n" + tail[tail.find(b"\n") + 1 :]
    return zlib.crc32(numbers_marked(text))  # each run of digits one "#", at C speed when compiled


def _jaccard(a: int, b: int) -> float:
    """The similarity of two error sketches (:func:`error_bits`); 1.0 when they are the same."""
    return 1.0 if a == b else bits_similarity(a, b)
