"""How the chanting tracker reads a reply's lines: what kind each line is (prose, blank, markdown, code, a
divider), and runs of whole lines taken in one step (plain prose and blank lines, code, markup without a letter or
a digit). See :mod:`loopwatch.core._chanting` for the algorithm."""

from __future__ import annotations

import re

from ._lazy_re import lazy_compile

# Line kinds.
_UNDECIDED, _PROSE, _BLANK, _MARKUP, _LIST, _FENCE, _CODE, _DIVIDER = range(8)
_COUNTED = (_MARKUP, _LIST)  # kinds the line tracker counts
_ELIGIBLE = (_PROSE, _BLANK)  # kinds whose text is chanting content
_WS = " \t\r\f\v"  # indentation characters

_HEAD_CAP = 256  # a line start still undecided after this many chars is decided from them

_DIVIDER_ONLY = lazy_compile(r"[\s\-=_*~+#.·•…\u2500-\u257f]*\Z")
_DIGITS_PREFIX = lazy_compile(r"\d{1,9}[.)]?\Z")
_LIST_MARKER = lazy_compile(r"(?:[-*+•]|\d{1,9}[.)])[ \t]+")
_HEADING = lazy_compile(r"#{1,6}[ \t]")

# Fast path that agrees with _classify: whole lines that are blank or start like prose (a number alone on its
# line, such as "1." or "42", is prose too). The first line start that is neither ends them: found in one
# search at C speed, however many short lines come before it.
_NOT_PLAIN = lazy_compile(
    r"^(?![ \t\r\f\v]{0,255}"  # indentation, then a newline (blank) or what starts prose, else not plain
    r"(?:\n|[^\s\d\-=_*~+#.·•…\u2500-\u257f|>`]|`[^`\n]|`{1,2}\n|\d{1,9}[^\d.)\n]|\d{1,9}[.)]?\n))",
    re.MULTILINE,
)


# Whole lines that change nothing but where the text is: markdown lines without a letter or a digit (table
# rows, quotes, headings, list items: never counted) and dividers. A run of them is skipped in one match.
_INERT_LINES = lazy_compile(
    r"(?:[ \t\r\f\v]{0,255}(?!~~~)"  # (a ~~~ line is a code fence)
    r"(?:(?:[|>]|#{1,6}[ \t]|[-*+•][ \t]+)(?:[^\w\n]|_)*"  # markup without a letter or digit
    r"|(?:[^\S\n \t\r\f\v]|[\-=_*~+#.·•…\u2500-\u257f])(?:[^\S\n]|[\-=_*~+#.·•…\u2500-\u257f])*)"  # a divider
    r"\n)+"
)


# ---------------------------------------------------------------------- line classification


def _classify(head: str, complete: bool, fence: str) -> tuple[int, int]:
    """Kind of a line from its first characters, and where a list item's text starts.

    ``head`` is the line so far (without its newline), ``complete`` says the newline was seen, ``fence``
    is the open code fence character ("" outside code). ``_UNDECIDED`` asks for more characters. A line
    still undecided after ``_HEAD_CAP`` characters is decided from those alone, so the answer never
    depends on how the line was split.
    """
    if len(head) >= _HEAD_CAP:
        head, complete = head[:_HEAD_CAP], False
    s = head.lstrip(_WS)
    more = not complete and len(head) < _HEAD_CAP
    if fence:
        if s.startswith(fence * 3):
            return _FENCE, 0
        return (_UNDECIDED if more and (fence * 3).startswith(s) else _CODE), 0
    if not s:
        return (_UNDECIDED if more else _BLANK if complete else _PROSE), 0
    if s.startswith(("```", "~~~")):
        return _FENCE, 0
    if s[0] in "|>":
        return _MARKUP, 0
    return _classify_rest(head, s, more)


def _classify_rest(head: str, s: str, more: bool) -> tuple[int, int]:
    """:func:`_classify` for a line that is not a fence, table row, quote or blank line."""
    divider = _DIVIDER_ONLY.match(s) is not None
    if divider or s in ("`", "``") or _DIGITS_PREFIX.match(s):
        if more:
            return _UNDECIDED, 0
        return (_DIVIDER if divider else _PROSE), 0
    marker = _LIST_MARKER.match(s)
    if marker:
        return _LIST, len(head) - len(s) + marker.end()
    return (_MARKUP if _HEADING.match(s) else _PROSE), 0


def _plain_lines(text: str, pos: int) -> tuple[int, bool]:
    """End of the whole prose/blank lines starting at ``pos``, and whether one of them is prose."""
    end = text.rfind("\n", pos) + 1  # whole lines only: none when no newline follows (a line still streaming)
    if end <= pos:
        return pos, False
    # searched up to the last newline (what a line start's lookahead reads stays inside its own line)
    stop = _NOT_PLAIN.search(text, pos, end)
    if stop is not None:
        end = stop.start()
        if end <= pos:
            return pos, False
    return end, not text[pos:end].isspace()  # a blank line is whitespace only, a prose line is not


def _code_lines(text: str, pos: int, fence: str) -> int:
    """End of the whole lines starting at ``pos`` that stay inside the open code block."""
    marker = fence * 3
    j = text.find(marker, pos)
    while j >= 0:  # the first marker that starts a line (after indentation) closes the block
        nl = text.rfind("\n", pos, j)
        start = pos if nl < 0 else nl + 1
        if j - start <= _HEAD_CAP - 3 and not text[start:j].strip(_WS):
            return start
        j = text.find(marker, j + 1)
    nl = text.rfind("\n", pos)
    return pos if nl < 0 else nl + 1
