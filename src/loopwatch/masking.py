"""Masking of volatile text with regular expressions (a policy's ``precise_outcomes``).

:func:`mask_volatile` replaces timestamps, dates, UUIDs, hex ids and addresses, PIDs, durations, temporary
paths, shell line numbers (``bash: line 13008:``) and generated temp-file names with placeholders. Counters
and other numbers are kept: a poll whose progress counter moves is making progress. (The default outcome
fingerprint drops digits and hex letters at C speed instead: see :func:`loopwatch.fingerprint.outcome_bytes`.)
"""

from __future__ import annotations

import re
from typing import Final

from ._lazy_re import lazy_compile

_VOLATILE: Final = lazy_compile(
    r"""
    (?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)
  | (?P<ts>\d{4}-\d{2}-\d{2}(?:[T\ ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?)
  | (?P<time>\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b)
  | (?P<addr>\b0x[0-9a-fA-F]+\b)
  | (?P<hex>\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b)
  | (?P<shline>\b(?:bash|sh|zsh|line)\b:?\ line\ \d+)
  | (?P<pid>\b(?:pid|PID|Pid|process)[\ =:#]+\d+)
  | (?P<dur>\b\d+(?:\.\d+)?\ ?(?:ms|µs|us|ns|s|sec|secs|seconds|m|min|mins|minutes|h)\b)
  | (?P<tmp>(?:/tmp|/var/folders|/private/var|/var/tmp)/[^\s'":,)\]]+)
  | (?P<tmpname>\btmp[_\-]?[A-Za-z0-9_]{6,}\b)
    """,
    re.VERBOSE,
)


# The regex costs about 25 ns per character on a slow core: only the head and tail of an output (where
# timestamps, durations, ids and shell prefixes live) go through it; the middle has its digits dropped.
_HEAD: Final = 2_048
_TAIL: Final = 1_024
_DIGITS: Final = str.maketrans("", "", "0123456789")


def _placeholder(match: re.Match[str]) -> str:
    return "<" + (match.lastgroup or "v") + ">"


def mask_volatile(text: str) -> str:
    """``text`` with timestamps, ids, PIDs, durations, temp paths and shell line numbers masked.

    Texts longer than 3 KiB keep their first 2 KiB and last 1 KiB exactly masked; the middle has its
    digits removed (its words still count), which keeps the cost bounded and linear at C speed.
    """
    if len(text) <= _HEAD + _TAIL:
        return _VOLATILE.sub(_placeholder, text)
    head = _VOLATILE.sub(_placeholder, text[:_HEAD])
    tail = _VOLATILE.sub(_placeholder, text[-_TAIL:])
    return f"{head}\n…{text[_HEAD:-_TAIL].translate(_DIGITS)}…\n{tail}"
