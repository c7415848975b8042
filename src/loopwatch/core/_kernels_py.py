"""The text kernels in pure Python: what the rules hash and sketch texts with.

Each function has a compiled twin in ``_kernels_c.c`` that gives the same result bit for bit (checked against each
other with hypothesis and on the corpus), so fingerprints and sketches stored by a guard with the compiled kernels
are read by one without them, and the other way round. :mod:`loopwatch.core._kernels` picks one of the two.
"""

from __future__ import annotations

import binascii
import re
import zlib
from array import array
from bisect import insort
from collections.abc import Iterable
from itertools import chain, compress, filterfalse, islice
from operator import not_
from typing import Final

__all__ = [
    "CHANGE_WORD", "CHANGE_WORDS", "ERROR_LINE", "FAILURE_MARKERS", "NUMBER", "QUOTED", "SURROGATE_ESCAPE",
    "alnum_word_pair", "bottom_k", "change_word", "collapsed", "error_lines", "failure_marked", "fold", "fold_words",
    "last_error_line", "line_hashes", "lines_of", "long_word_hashes", "long_word_sketch", "numbers_marked",
    "poll_word", "rest_hash", "shared_words", "sketch_of", "surrogate_escape", "unquoted_line_bits", "word_hashes",
    "word_sketch",
]  # fmt: skip

WORD_CODE: Final = "I" if array("I").itemsize == 4 else "L"
"""The array type code of an unsigned 32-bit integer (a CRC-32): how :func:`alnum_word_pair` packs them."""

ASCII_LOWER: Final = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
"""A ``bytes.translate`` table that lowercases ASCII letters (what ``bytes.lower`` does)."""

# -- error lines ---------------------------------------------------------------------------------------------

ERROR_LINE: Final = re.compile(
    rb"^.*(?<![-_./])(?:(?<!\b0 )(?<!\bno )(?:error|fail)|exception|traceback|fatal|denied|not found|no such|cannot|"
    rb"can't|unable|invalid|refused|timed out|timeout|abort|panic|missing|unknown|undefined|unsupported|not allowed)"
    rb"(?![-_=]).*$",
    re.I | re.M,
)
"""What :func:`error_lines` finds, as a regular expression (``ERROR_LINE.findall(data)``): the definition, and
what the tests compare both kernels with. Scanning with it costs ~0.3 us per byte; :func:`error_lines` finds the
same lines with one ``bytes.find`` pass per word.

A word joined into a name does not say something went wrong: one right after ``-``, ``_``, ``.`` or ``/`` or right
before ``-``, ``_`` or ``=`` is part of a flag, an identifier, a path or a setting (``--no-fail-fast``,
``x86_64-unknown-linux-gnu``, ``-Dsurefire.failIfNoSpecifiedTests``, ``timeout=30``), which an echoed command or a
build's progress line is full of."""

_ERROR_WORDS: Final = (
    b"exception", b"traceback", b"fatal", b"denied", b"not found", b"no such", b"cannot", b"can't", b"unable",
    b"invalid", b"refused", b"timed out", b"timeout", b"abort", b"panic", b"missing", b"unknown", b"undefined",
    b"unsupported", b"not allowed",
)  # fmt: skip
_GUARDED_WORDS: Final = (b"error", b"fail")
"""Words that do not count right after the word ``0`` or ``no`` (``0 errors``, ``no failures``)."""
_JOINED_BEFORE: Final = frozenset(b"-_./")
_JOINED_AFTER: Final = frozenset(b"-_=")
"""Bytes that join a word into a name (a flag, an identifier, a path, a setting), before it and after it."""
_WORD_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _negated(lower: bytes, at: int) -> bool:
    """Is the word at ``at`` right after a whole word ``0`` or ``no`` and a space (``lower`` lowercased)?"""
    if at >= 2 and lower[at - 2 : at] == b"0 " and (at == 2 or lower[at - 3] not in _WORD_BYTES):
        return True
    return at >= 3 and lower[at - 3 : at] == b"no " and (at == 3 or lower[at - 4] not in _WORD_BYTES)


def _discounted(lower: bytes, at: int, after: int, guarded: bool) -> bool:
    """Does the error word at ``lower[at:after]`` not count: joined into a name (a flag, an identifier, a path, a
    setting), or (``guarded``: ``error``, ``fail``) right after a whole word ``0`` or ``no``?"""
    return (
        (guarded and _negated(lower, at))
        or (at > 0 and lower[at - 1] in _JOINED_BEFORE)
        or (after < len(lower) and lower[after] in _JOINED_AFTER)
    )


def error_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` that say something went wrong (an error, a failure, a missing file, a refused
    connection...; ``0 errors`` and ``no failures`` do not), in order: ``ERROR_LINE.findall(data)``."""
    lower = data.translate(ASCII_LOWER)
    starts: set[int] = set()
    for word in _ERROR_WORDS + _GUARDED_WORDS:
        guarded = word in _GUARDED_WORDS
        at = lower.find(word)
        while at >= 0:
            after = at + len(word)
            if _discounted(lower, at, after, guarded):
                at = lower.find(word, at + 1)
                continue
            starts.add(lower.rfind(b"\n", 0, at) + 1)
            end = lower.find(b"\n", at)
            if end < 0:
                break
            at = lower.find(word, end)
    lines = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        lines.append(data[start:] if end < 0 else data[start:end])
    return lines


_LIKELIEST_LAST: Final = _GUARDED_WORDS + _ERROR_WORDS
"""The words in the order :func:`last_error_line` looks for them: ``error`` and ``fail`` first, the words a last
error line holds most often (one of the two is in 58% of the last error lines of the corpus's failed outputs)."""


def last_error_line(data: bytes) -> bytes | None:
    """The last of :func:`error_lines` (``None`` when there is none), found from the end: each word is looked for
    backwards, and only after the last error line found so far, so the text is read about once per word (an error
    excerpt quotes that one line). Any order of the words finds the same line; with the likeliest first, the others
    mostly read only the few bytes after it (10.1 -> 7.5 us on the corpus's failed outputs' last 2,000 characters)."""
    lower = data.translate(ASCII_LOWER)
    best = -1  # where the last error line found so far starts
    for word in _LIKELIEST_LAST:
        guarded = word in _GUARDED_WORDS
        at = lower.rfind(word, best + 1)
        while at >= 0:
            after = at + len(word)
            if _discounted(lower, at, after, guarded):
                at = lower.rfind(word, best + 1, after - 1)  # the next one back, overlapping or not
                continue
            best = lower.rfind(b"\n", 0, at) + 1
            break
    if best < 0:
        return None
    end = data.find(b"\n", best)
    return data[best:] if end < 0 else data[best:end]


# -- words and lines -----------------------------------------------------------------------------------------


def word_hashes(data: bytes) -> list[int]:
    """CRC-32s of the ASCII-lowercased words of ``data`` (split at ASCII whitespace, as ``bytes.split()``), in
    order, repeats kept."""
    return list(map(zlib.crc32, data.translate(ASCII_LOWER).split()))


def long_word_hashes(data: bytes) -> list[int]:
    """CRC-32s of the ASCII-lowercased words of ``data`` of two bytes or more (split as ``bytes.split()``), in order,
    repeats kept."""
    return [zlib.crc32(word) for word in data.translate(ASCII_LOWER).split() if len(word) > 1]


LINE_BYTES: Final = 2_000
"""Bytes of a (masked) output whose lines are hashed: where a result says what it says."""
_BLANKS: Final = b" \t\r\x0b\x0c"


def lines_of(masked_text: bytes) -> list[bytes]:
    """The lines of the first 2,000 bytes of a masked text, lowercased (ASCII) and without blanks."""
    return masked_text[:LINE_BYTES].translate(ASCII_LOWER, _BLANKS).split(b"\n")


def line_hashes(masked_text: bytes) -> frozenset[int]:
    """CRC-32s of the distinct lines of :func:`lines_of`, the empty line's (0) left out."""
    return frozenset(_line_crcs(lines_of(masked_text)))


def _line_crcs(lines: list[bytes]) -> list[int]:
    """The CRC-32s of ``lines``, repeats kept, without the empty lines' (never hashed) and any other 0 (a line with
    text can have that CRC: the kernel leaves every 0 out)."""
    hashes = list(map(zlib.crc32, filter(None, lines)))
    return list(filter(None, hashes)) if 0 in hashes else hashes


NUMBER: Final = re.compile(rb"[0-9]+")
"""What :func:`numbers_marked` replaces, as a regular expression (``NUMBER.sub(b"#", data)``): the definition, and
what the tests compare both kernels with (scanning with it costs ~20 ns per byte)."""
_DIGITS_TO_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")


def numbers_marked(data: bytes) -> bytes:
    """``data`` with each run of ASCII digits replaced by one ``#`` (``NUMBER.sub(b"#", data)``), at C speed: with its
    digits turned into ``0``, the text splits at ``0`` into what lies between its numbers."""
    parts = data.translate(_DIGITS_TO_ZERO).split(b"0")
    if len(parts) == 1:
        return data
    between = list(filter(None, parts))
    if not between:  # nothing but digits
        return b"#"
    return (b"" if parts[0] else b"#") + b"#".join(between) + (b"" if parts[-1] else b"#")


# -- poll words ----------------------------------------------------------------------------------------------

POLL_WORDS: Final = ("sleep", "wait", "watch", "tail", "gh", "kubectl", "docker", "squeue", "qstat", "ps", "curl")
"""The words a command that waits or checks a status holds where a part of it starts (what
:func:`loopwatch.core._fingerprint.is_poll` looks for first: ``timeout 5 tail -f`` holds ``tail``)."""
POLL_WORD: Final = re.compile(r"(?:^|[\s;&|(])(?:" + "|".join(POLL_WORDS) + ")")
"""What :func:`poll_word` finds, as a regular expression (``POLL_WORD.search(text) is not None``): the definition,
and what the tests compare both kernels with."""


def poll_word(text: str) -> bool:
    """Does one of :data:`POLL_WORDS` begin ``text``, or follow a blank, ``;``, ``&``, ``|`` or ``(`` in it? Substring
    tests first (each costs less than the regular expression): most texts hold none of the words anywhere."""
    for word in POLL_WORDS:  # a plain loop: cheaper than any() over a generator for these few words
        if word in text:
            return POLL_WORD.search(text) is not None
    return False


CHANGE_WORDS: Final = (
    "sed", "perl", "tee", "patch", "mv", "cp", "rm", "mkdir", "touch", "chmod", "ln", "git", "pip", "uv", "npm", "yarn",
    "pnpm", "apt", "brew", "conda", "cargo", "python", "create", "edit", "insert", "str_replace", "apply_patch",
    "truncate", "dd",
)  # fmt: skip
"""The words a command that changes something starts with where a part of it starts: every match of
:data:`loopwatch.core._fingerprint._MUTATING_VERB` begins with one (``sed -i``, ``git apply``, ``pip install``...)."""
CHANGE_WORD: Final = re.compile(r"(?:^|[\s;&|(])(?:" + "|".join(CHANGE_WORDS) + ")")
"""What :func:`change_word` finds, as a regular expression: the definition, and the pure twin itself (substring tests
first would not rule out much: ``cp``, ``rm`` and ``ln`` are in many words)."""


def change_word(text: str) -> bool:
    """Does one of :data:`CHANGE_WORDS` begin ``text``, or follow a blank, ``;``, ``&``, ``|`` or ``(`` in it?"""
    return CHANGE_WORD.search(text) is not None


FAILURE_MARKERS: Final = (
    "Traceback (most recent call last)", "command not found", "No such file or directory", "Permission denied",
    "syntax error", "unexpected EOF", "Exception in thread", "Segmentation fault (core dumped)",
    "Your proposed edit has introduced new syntax error", "(execution failed)",
    "EXECUTION TIMED OUT", "timed out and has been killed",  # SWE-agent's and mini-swe-agent's time-out notices
)  # fmt: skip
"""Text that marks a failure wherever it shows in a result's ends (what :func:`failure_marked` looks for)."""


def failure_marked(text: str) -> bool:
    """Does one of :data:`FAILURE_MARKERS` occur in ``text``? (The compiled twin looks for all of them in one pass.)"""
    for marker in FAILURE_MARKERS:  # noqa: SIM110 (a loop costs less than any() over a generator)
        if marker in text:
            return True
    return False


SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
"""The escape of a UTF-16 surrogate in JSON text (``\\ud83d``): what :func:`surrogate_escape` finds; a line
without one cannot decode to a lone surrogate."""


def surrogate_escape(text: str) -> bool:
    """Does ``text`` hold :data:`SURROGATE_ESCAPE`? (The compiled twin checks only the backslashes.)"""
    return SURROGATE_ESCAPE.search(text) is not None


# -- whitespace collapsed ------------------------------------------------------------------------------------


def collapsed(text: str, limit: int) -> str:
    """``" ".join(text.split())[:limit]``, splitting only the head of ``text`` when that is enough.

    Collapsing the whitespace of a prefix of a text gives a prefix of the collapsed text (a word cut at the
    end is a prefix of the whole word), so when the head's collapsed form is ``limit`` long it is the answer.
    """
    if limit <= 0:
        return " ".join(text.split())[:limit]
    edge = limit + limit // 4
    head = " ".join(text[:edge].split())
    if len(head) >= limit or len(text) <= edge:
        return head[:limit]
    return " ".join(text.split())[:limit]


BYTE_KERNELS: Final = (
    "error_lines", "last_error_line", "word_hashes", "long_word_hashes", "line_hashes", "numbers_marked",
    "blanks_dropped",
)  # fmt: skip
"""The kernels that take one ``bytes`` argument (what the tests, the corpus check and the fuzzer call alike)."""

BLANKS: Final = b" \t\r\n\x0b\x0c"
"""The bytes :func:`blanks_dropped` drops (those ``bytes.split()`` splits at)."""


def blanks_dropped(data: bytes) -> bytes:
    """``data`` without its blanks (:data:`BLANKS`)."""
    return data.translate(None, BLANKS)


ALNUM_WORD: Final = re.compile(r"[^\W_]+")
"""What a word is to :func:`alnum_word_pair`: a run of Unicode letters and digits (``str.isalnum``; ``_``
separates words). The definition, which the tests compare both kernels with."""
_ASCII_WORDS: Final = bytes(
    (c | 32 if 65 <= c <= 90 else c) if 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 else 32 for c in range(256)
)
"""ASCII letters lowercased and digits kept, everything else a space: what :data:`ALNUM_WORD` finds in ASCII text."""


def _alnum_words(text: str) -> dict[bytes, None]:
    """The distinct words (:data:`ALNUM_WORD`) of ``text.lower()``, UTF-8 encoded, in their order."""
    if text.isascii():
        return dict.fromkeys(text.encode("ascii").translate(_ASCII_WORDS).split())
    found = dict.fromkeys(ALNUM_WORD.findall(text.lower()))  # distinct words have distinct encodings
    return dict.fromkeys(word.encode("utf-8", "surrogatepass") for word in found)


def _first_hashes(words: list[bytes], head: list[int], limit: int) -> list[int]:
    """CRC-32s of the first ``limit`` distinct ``words`` (distinct words, in their order), distinct and sorted;
    ``head`` holds those of the first ``limit`` words, hashed by the caller. The others are hashed only when two of
    those share a hash."""
    distinct = set(head)
    if len(distinct) < limit < len(words):  # two words with one hash: read on
        return sorted(islice(dict.fromkeys(chain(head, map(zlib.crc32, words[len(head) :]))), limit))
    return sorted(distinct)


def alnum_word_pair(text: str, limit: int) -> tuple[bytes, bytes]:
    """CRC-32s (of the UTF-8 bytes) of the first ``limit`` distinct words (:data:`ALNUM_WORD`) of ``text.lower()``,
    sorted and packed 4 bytes each in the machine's order (what ``array("I")`` holds): how rules keep a call's words;
    and, from the same split, those of the first ``limit`` distinct words not made of ASCII digits only. One bytes
    object twice when the two are equal.

    ASCII text is split at C speed (a translation table instead of the regular expression: the same words); words
    are deduplicated before they are hashed, and only as many are hashed and sorted as the limits need: the second
    set is the first with the numbers' hashes taken out and as many words after the first ``limit`` put in (when no
    two of those words share a hash; else :func:`_exact_word_pair` reads on)."""
    if limit < 0:
        raise ValueError("limit must be >= 0")
    words = list(_alnum_words(text))
    head = words[:limit]
    order = list(map(zlib.crc32, head))
    distinct = set(order)
    if len(distinct) < len(order):
        return _exact_word_pair(words, order, limit)
    order.sort()
    packed = array(WORD_CODE, order).tobytes()
    numbers = list(filter(bytes.isdigit, head))  # bytes.isdigit(): ASCII digits only
    if not numbers:
        return packed, packed
    for number in map(zlib.crc32, numbers):
        order.remove(number)
    for name in map(zlib.crc32, islice(filterfalse(bytes.isdigit, islice(words, limit, None)), len(numbers))):
        if name in distinct:
            return _exact_word_pair(words, list(map(zlib.crc32, head)), limit)
        distinct.add(name)
        insort(order, name)
    return packed, array(WORD_CODE, order).tobytes()


def _exact_word_pair(words: list[bytes], hashes: list[int], limit: int) -> tuple[bytes, bytes]:
    """:func:`alnum_word_pair` of the distinct ``words`` (``hashes``: those of the first ``limit``) when some of
    them share a hash: each set made word by word."""
    packed = array(WORD_CODE, _first_hashes(words, hashes, limit)).tobytes()
    numbers = list(map(bytes.isdigit, words))
    if True not in numbers:
        return packed, packed
    kept = list(map(not_, numbers))
    names = list(compress(words, kept))
    named = list(compress(hashes, kept))  # the first names' hashes, already made
    named += map(zlib.crc32, names[len(named) : limit])
    rest = array(WORD_CODE, _first_hashes(names, named, limit)).tobytes()
    return (packed, packed) if rest == packed else (packed, rest)


def shared_words(a: bytes, b: bytes) -> tuple[int, int, int]:
    """Two sets of word hashes packed 4 bytes each (:func:`alnum_word_pair`): how many values they share, and how
    many distinct values each holds."""
    x, y = _packed_set("shared_words", "a", a), _packed_set("shared_words", "b", b)
    return len(x & y), len(x), len(y)


def _packed_set(name: str, which: str, packed: bytes) -> set[int]:
    """The values of word hashes packed 4 bytes each, as a set; a ``TypeError`` or ``ValueError`` naming ``which``
    argument of ``name`` when ``packed`` is not that."""
    return set(_packed_words(name, which, packed))


def _packed_words(name: str, which: str, packed: bytes) -> array[int]:
    """The values of word hashes packed 4 bytes each, in order (see :func:`_packed_set`)."""
    if not isinstance(packed, bytes):
        raise TypeError(f"{name}() expects bytes for {which}, not {type(packed).__name__}")
    if len(packed) % 4:
        raise ValueError(f"{name}(): {which} is not a whole number of 4-byte values")
    return array(WORD_CODE, packed)


def rest_hash(data: bytes, known: bytes) -> int:
    """The CRC-32 of the words (:data:`ALNUM_WORD`) of ``data`` decoded as UTF-8 (undecodable bytes replaced) and
    lowercased, without those whose hash is among ``known`` (word hashes packed 4 bytes each, as
    :func:`alnum_word_pair` packs them), joined by single spaces and UTF-8 encoded: what a text says beyond the
    words it was asked with.

    ASCII text is split at C speed (a translation table instead of the regular expression: the same words)."""
    if not isinstance(data, bytes):
        raise TypeError(f"rest_hash() expects bytes for data, not {type(data).__name__}")
    asked = _packed_set("rest_hash", "known", known)
    crc32 = zlib.crc32
    if data.isascii():
        return crc32(b" ".join([word for word in data.translate(_ASCII_WORDS).split() if crc32(word) not in asked]))
    words = ALNUM_WORD.findall(data.decode("utf-8", "replace").lower())
    rest = " ".join([w for w in words if crc32(w.encode("utf-8", "surrogatepass")) not in asked])
    return crc32(rest.encode("utf-8", "surrogatepass"))


# -- sketches ------------------------------------------------------------------------------------------------


def best_similarity(history: bytes, sketch: bytes) -> float | None:
    """The highest Jaccard similarity of the folded set ``sketch`` (big-endian bytes) to each of the sets packed one
    after another in ``history`` (each as long as ``sketch``): ``|a & b| / |a | b|``, 0.0 for two empty sets;
    ``None`` when ``history`` is empty."""
    for which, packed in (("history", history), ("sketch", sketch)):
        if not isinstance(packed, bytes):
            raise TypeError(f"best_similarity() expects bytes for {which}, not {type(packed).__name__}")
    size = len(sketch)
    if not size or len(history) % size:
        raise ValueError("best_similarity(): history is not a whole number of sketches as long as the one given")
    bits = int.from_bytes(sketch, "big")
    best: float | None = None
    for at in range(0, len(history), size):
        other = int.from_bytes(history[at : at + size], "big")
        union = (other | bits).bit_count()
        similarity = (other & bits).bit_count() / union if union else 0.0
        if best is None or similarity > best:
            best = similarity
    return best


def fold(hashes: Iterable[int], bits: int) -> int:
    """The set of ``hashes`` folded into ``bits`` bits (a power of two), as an integer: bit ``h % bits`` set for
    each hash ``h``. For a power of two up to 1,024 bits (the rules' sizes), each bit's power of two is looked up in a
    table made once per size (~100 KB for 1,024): a shift makes a new integer per hash (0.75x the time for 64)."""
    value, mask = 0, bits - 1
    powers = _POWERS.get(bits)
    if powers is None and 0 < bits <= 1_024 and not bits & mask:  # a power of two a rule uses
        powers = _POWERS[bits] = [1 << i for i in range(bits)]
    if powers is None:
        for h in hashes:
            value |= 1 << (h & mask)
        return value
    for h in hashes:
        value |= powers[h & mask]
    return value


_POWERS: dict[int, list[int]] = {}


def fold_words(words: bytes, k: int, bits: int) -> int:
    """The first ``k`` word hashes packed 4 bytes each (as :func:`alnum_word_pair` packs them, sorted: its bottom-k)
    folded into ``bits`` bits (see :func:`fold`)."""
    values = _packed_words("fold_words", "words", words)
    if k < 0:
        raise ValueError("fold_words(): k must be >= 0")
    return fold(values[:k], bits)


def bottom_k(hashes: Iterable[int], k: int, bits: int) -> int:
    """The k smallest distinct ``hashes`` folded into ``bits`` bits (see :func:`fold`)."""
    distinct = hashes if isinstance(hashes, (set, frozenset)) else set(hashes)
    if len(distinct) <= k:  # all of them: no order to find (the fold is one whatever the order)
        return fold(distinct, bits)
    return fold(sorted(distinct)[:k], bits)


def sketch_of(hashes: Iterable[int], k: int, bits: int) -> str:
    """:func:`bottom_k` as JSON-able base64 text of its ``bits // 8`` big-endian bytes."""
    value = bottom_k(hashes, k, bits)
    return binascii.b2a_base64(value.to_bytes(bits // 8, "big"), newline=False).decode("ascii")


def line_bits(data: bytes, bits: int) -> int:
    """``fold(line_hashes(data), bits)``: the lines' CRCs folded into ``bits`` bits."""
    return fold(_line_crcs(lines_of(data)), bits)  # (a repeated line folded again: no set is made)


QUOTED: Final = re.compile(rb'"[^"\n]*"|\'[^\'\n]*\'|`[^`\n]*`')
"""A quoted string closed on its line: what :func:`unquoted_line_bits` drops from each line (the definition)."""


def unquoted_line_bits(data: bytes, bits: int) -> int:
    """:func:`line_bits` of the lines with their quoted strings (:data:`QUOTED`) dropped, after their blanks: the
    CRCs of the distinct ``QUOTED.sub(b"", line)`` of :func:`lines_of`, the empty line's left out, folded."""
    lines = lines_of(data)
    if b'"' in data or b"'" in data or b"`" in data:
        lines = [QUOTED.sub(b"", line) if b'"' in line or b"'" in line or b"`" in line else line for line in lines]
    return fold(_line_crcs(lines), bits)


def word_sketch(data: bytes, k: int, bits: int) -> int:
    """``bottom_k(word_hashes(data), k, bits)``: the sketch of a text's words."""
    if not isinstance(data, bytes):  # (a str without words would give 0, where the compiled kernel refuses it)
        raise TypeError(f"word_sketch() expects bytes, not {type(data).__name__}")
    return bottom_k(word_hashes(data), k, bits)


def long_word_sketch(data: bytes, k: int, bits: int) -> int:
    """``bottom_k(long_word_hashes(data), k, bits)``: the sketch of a text's words of two bytes or more."""
    if not isinstance(data, bytes):
        raise TypeError(f"long_word_sketch() expects bytes, not {type(data).__name__}")
    return bottom_k(long_word_hashes(data), k, bits)
