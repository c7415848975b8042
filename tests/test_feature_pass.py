"""The shortcuts of the per-event feature pass give what the plain definitions give (hypothesis)."""

from __future__ import annotations

import dataclasses
import re
import zlib
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import Guard, Message, ToolCall, ToolResult, _native, _session_backend, preset
from loopwatch.core import _tools
from loopwatch.core._engine import Engine
from loopwatch.core._kernels import alnum_word_pair, error_lines
from loopwatch.core._kernels_py import ERROR_LINE as _ERROR_LINE
from loopwatch.core._kernels_py import WORD_CODE
from loopwatch.core.detectors import _base as base
from loopwatch.core.detectors import _failure_text, _progress
from loopwatch.core.detectors._feedback import FENCED_CODE, _attempt_words, fenced_code
from loopwatch.core.detectors._state import flat_get

SETTINGS = settings(max_examples=400, deadline=None)

_WORD = re.compile(r"[^\W_]+")


def _word_hashes_by_regex(text: str, limit: int) -> list[int]:
    """The definition: every word found by the regular expression, hashed, first ``limit`` distinct hashes."""
    hashes = dict.fromkeys(zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in _WORD.findall(text.lower()))
    return list(hashes)[:limit]


_WORDY = st.text(st.sampled_from([*"abXY09_ -.\n\tÉßİı½²٣ǅ", "\ud800"]), max_size=80)


@SETTINGS
@given(_WORDY, st.sampled_from([1, 2, 3, 64]))
def test_argument_words_are_the_regex_words(text: str, limit: int) -> None:
    assert _word_set(text, limit) == frozenset(_word_hashes_by_regex(text, limit))


def test_argument_words_read_on_past_a_collision() -> None:
    # "plumless" and "buckeroo" have the same CRC-32: the limit counts distinct hashes, not distinct words
    assert zlib.crc32(b"plumless") == zlib.crc32(b"buckeroo")
    text = "plumless buckeroo third"
    assert _word_hashes_by_regex(text, 2) == [zlib.crc32(b"plumless"), zlib.crc32(b"third")]
    assert _word_set(text, 2) == frozenset(_word_hashes_by_regex(text, 2))


def _word_set(text: str, limit: int) -> frozenset[int]:
    """The word hashes :func:`alnum_word_pair` packs for ``text`` (its first half: every word, numbers included)."""
    return frozenset(array(WORD_CODE, alnum_word_pair(text, limit)[0]))


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


_CUT_PARTS = st.sampled_from(
    [b"[", b"<", b"(", b"...", b".. ", b" ", b"\n", b"truncated", b"TRUNCATED", b"Truncated", b"clipped", b"CLIPPED",
     b"response ", b"Response ", b"output ", b"OUTPUT ", b">", b"]", b"x", b"\xc3\xa9", b"trunc", b"clip"]
)  # fmt: skip


@SETTINGS
@given(st.lists(_CUT_PARTS, max_size=20).map(b"".join))
def test_a_note_that_the_output_was_cut_is_what_the_regular_expression_finds(text: bytes) -> None:
    assert _failure_text._says_cut(text) == (_failure_text._TRUNCATED.search(text) is not None)


_QUERY_PARTS = st.sampled_from(
    ["grep", "-rn", "find", ".", "src/", "./src", "'def", "load'", "Load", "x_y", "42", "\u00e9t\u00e9", "\u0130",
     "&&", "|", ";", " ", "cd", "/repo", "a.py", "name", "-name", "--type=f", "f", "\u0663", "FOO-bar"]
)  # fmt: skip


@SETTINGS
@given(st.lists(_QUERY_PARTS, max_size=16).map(" ".join), st.sampled_from(["bash", "grep", "Search", "find_file"]))
def test_the_query_hashes_are_those_of_the_query_words(text: str, tool: str) -> None:
    # as a command, and as the arguments of a tool that takes no command
    for command, args in ((text, {"command": text}), (None, {"pattern": text, "path": "src", "limit": 5})):
        expected = _tools.query_hashes(_tools.search_query(tool, args, command))
        assert _tools.search_query_hashes(tool, args, command) == expected


_SCOPE_PARTS = st.sampled_from([".", "..", "../", "./", "/", "~", "~/", "src", "src/", "a", "a.py", "x/", "", "s"])


@SETTINGS
@given(st.lists(_SCOPE_PARTS, max_size=5).map("".join), st.lists(_SCOPE_PARTS, max_size=5).map("".join))
def test_scopes_overlap_as_the_containment_rules_say(a: str, b: str) -> None:
    # the shortcut (no path starts with the other, none starts with a dot: apart) against the rules themselves
    assert _tools.scope_overlaps(a, b) == (a == b or _tools._contains(a, b) or _tools._contains(b, a))


@SETTINGS
@given(st.lists(st.integers(0, 9), max_size=6), st.lists(st.integers(0, 9), max_size=6), st.sampled_from([0.0, 0.5]))
def test_two_queries_are_the_same_by_their_words_overlap(a: list[int], b: list[int], similarity: float) -> None:
    union = set(a) | set(b)
    expected = len(set(a) & set(b)) / len(union) >= similarity if union else True
    assert _tools.same_query(a, b, similarity) == expected
    # the same, of two sets of word hashes packed as alnum_word_pair packs them (the kernel counts them)
    packed = [array(WORD_CODE, sorted(set(values))).tobytes() for values in (a, b)]
    assert _tools.same_words(*packed, similarity) == expected


_ARG_KEYS = st.sampled_from(["path", "file", "url", "cwd", "dir", "uri", "query", "pattern", "mode", "folder"])
_ARG_VALUES = st.one_of(st.sampled_from(["src/a.py", "./src", "", "..", "https://x.org/a", "tests"]), st.integers())


@SETTINGS
@given(st.dictionaries(_ARG_KEYS, _ARG_VALUES, max_size=8))
def test_the_places_a_tool_call_names_are_read_in_the_scope_keys_order(args: dict[str, Any]) -> None:
    named = [value for key in _tools._SCOPE_KEYS if isinstance(value := args.get(key), str) and value]
    expected = tuple(dict.fromkeys(_tools._normal_scope(place) for place in named[:8]))[:4]
    assert _tools.search_scopes("read_file", args) == expected


_OUTPUT_PARTS = st.sampled_from(
    [" ", "\n", "No matches found", "no such file", "FOUND 0", "0 results", "[]", "{}", "None", "NULL", "x",
     "grep: a: No such file", "Nothing found", "not found", "\u212a", "\u017f", "n", "f", "g", "[", "{", "0", "done"]
)  # fmt: skip


@SETTINGS
@given(st.lists(_OUTPUT_PARTS, max_size=8).map("".join))
def test_an_output_that_found_nothing_is_what_the_expression_says(output: str) -> None:
    head = output[:300].strip()[:200]
    assert _progress.fruitless_output(output) == (not head or bool(_progress._NO_RESULT.match(head)))


def test_only_a_name_among_the_query_words_leaves_them() -> None:
    # "vwsupvrrvtrr" has the CRC-32 of "grep": a word, not the program's name, so it stays; "grep" named again goes
    assert zlib.crc32(b"vwsupvrrvtrr") == zlib.crc32(b"grep")
    for command in ("grep vwsupvrrvtrr src/", "grep -rn grep src/", "grep grep vwsupvrrvtrr x"):
        expected = _tools.query_hashes(_tools.search_query("bash", {}, command))
        assert _tools.search_query_hashes("bash", {}, command) == expected, command
    assert _tools.search_query_hashes("bash", {}, "grep vwsupvrrvtrr src/") == [zlib.crc32(b"grep")]


_FENCE_PARTS = st.sampled_from(["`", "``", "```", "````", "```py", "x = 1", "say", "\n", " ", "~~~"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_FENCE_PARTS, max_size=14).map("".join))
def test_fenced_code_is_what_the_regular_expression_finds(text: str) -> None:
    assert fenced_code(text) == FENCED_CODE.findall(text)


def test_a_replys_code_words_are_its_blocks_words() -> None:
    reply = "Let me fix it:\n```python\nprint(total_count)\n```\nand run:\n```\npython fix.py\n```\nThen check."
    step = base.Step(0, "message", Message(role="assistant", text=reply), None, role="assistant", text=reply)
    words = _attempt_words(step)
    assert words is not None
    expected = {zlib.crc32(w) for w in (b"print", b"total", b"count", b"python", b"fix", b"py")}
    assert frozenset(array(WORD_CODE, words)) == expected  # the prose ("fix it", "run", "check") is not the attempt
    assert list(array(WORD_CODE, words)) == sorted(expected)
    prose = base.Step(1, "message", Message(role="assistant", text="no code"), None, role="assistant", text="no code")
    assert _attempt_words(prose) is None


# -- each feature computed once per event, whichever rules read it ------------------------------------------


FROM_SOURCE = pytest.mark.skipif(
    _native.compiled(),
    reason="counts calls by patching a compiled module, which its compiled callers do not see: `make unit` runs this"
    " file again from the source (LOOPWATCH_PURE_PYTHON=1)",
)


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count the calls of ``module.name`` (the function the per-step features call)."""
    calls: list[int] = []
    original = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@FROM_SOURCE
def test_a_call_is_read_once_for_its_words_scopes_and_query(monkeypatch: pytest.MonkeyPatch) -> None:
    words = _counting(monkeypatch, base._kernels, "alnum_word_pair")
    scopes = _counting(monkeypatch, _tools, "search_scopes")
    monkeypatch.setattr(base, "search_scopes", _tools.search_scopes)  # the counted one, wherever it is called from
    query = _counting(monkeypatch, base, "search_query_hashes")
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    engine.observe(session, ToolCall("bash", {"command": "grep -rn 'def load' src/"}, thought="Look for the loader."))
    # error_retry, feedback_repeat, rerun and similar_text keep the words; no_progress and failure_streak the search
    # (where it looks found once: what it looks for is the rest of its words)
    assert (len(words), len(scopes), len(query)) == (1, 1, 1)
    states = dict(zip((d.name for d in engine.policy.detectors), session.detectors, strict=True))
    places, query_words, _ = states["no_progress"].current
    assert "src" in places
    assert flat_get(states["failure_streak"].items, 0) == (places, query_words)
    # the call's words are one bytes object, shared by the rules that keep them (error_retry keeps them numbers
    # aside: the same object when the call names no number)
    assert states["error_retry"].action("bash:grep") is states["feedback_repeat"].attempt


@FROM_SOURCE
def test_a_call_several_rules_report_is_quoted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    encoded = _counting(monkeypatch, base, "canonical_json")
    call = ToolCall("bash", {"command": "cat config/settings.yaml", "description": "read the settings"})
    quoted, messages = [], []
    for n in range(6):  # repeat, revisit and cycle each quote the call as they report it
        before = len(encoded)
        verdict = engine.observe(session, dataclasses.replace(call, id=str(n)))
        quoted.append(len(encoded) - before)
        messages.append(verdict.message or "")
        engine.observe(session, ToolResult("port: 8080\nhost: localhost", id=str(n)))
    assert any("cat config/settings.yaml" in message for message in messages)
    # the label (`bash({"command": ...})`) is made at most once per call, however many rules quote it
    assert max(quoted) == 1 and sum(quoted) >= 3, quoted  # (before: 3 a call, one per rule)


@FROM_SOURCE
def test_a_label_is_kept_by_its_limit_and_cut_from_one_head(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopwatch.core._canonical import canonical_json
    from loopwatch.core._fingerprint import preview
    from loopwatch.core._steps import step_of

    def defined(step: base.Step, limit: int) -> str:  # what each limit's own cut gives
        edge = 4 * limit
        head = {k: v[:edge] if type(v) is str else v for k, v in step.projected.items()}  # type: ignore[union-attr]
        return f"bash({preview(canonical_json(head)[:edge], limit)})"

    engine = Engine(preset("default-lexical"))
    args = {"command": "python run.py --seed 7 " + "x" * 900, "cwd": "/work", "n": 3, "verbose": True}
    step = step_of(engine.new_session(), ToolCall("bash", args), 0, engine._projected)
    encoded = _counting(monkeypatch, base, "canonical_json")
    labels = {limit: base.call_label(step, limit) for limit in (120, 60, 30, 120, 200, 200)}
    # one head, its strings cut at 240 (twice the first label): 120, 60 and 30 are cut from it, and 200 too (the head,
    # whitespace collapsed, is longer than 200 characters, so the longer JSON's label starts with the same 199)
    assert len(encoded) == 1
    for limit, label in labels.items():
        assert label == defined(step, limit)
        assert base.call_label(step, limit) is label  # kept, not made again
    assert len(encoded) == 1
    assert len({labels[120], labels[60], labels[30], labels[200]}) == 4
    # the shorter label first (the cycle rule's): its head is cut at 120; the label of 120 needs a longer one
    again = step_of(engine.new_session(), ToolCall("bash", args), 0, engine._projected)
    assert [base.call_label(again, limit) for limit in (60, 120)] == [labels[60], labels[120]]
    assert len(encoded) == 3
    # a head that cut nothing serves every label
    short = step_of(engine.new_session(), ToolCall("bash", {"command": "ls -la"}), 0, engine._projected)
    assert [base.call_label(short, limit) for limit in (30, 200)] == [defined(short, 30), defined(short, 200)]
    assert len(encoded) == 4
    # blanks that collapse: the head cut at twice the label's length says too little, the one at four times is read
    blank = {"command": " " * 300 + "x" * 300}
    spaced = step_of(engine.new_session(), ToolCall("bash", blank), 0, engine._projected)
    assert base.call_label(spaced, 120) == defined(spaced, 120) == "bash(" + preview(canonical_json(blank), 120) + ")"
    assert len(encoded) == 6


@FROM_SOURCE
def test_a_failure_and_a_reply_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sketches = _counting(monkeypatch, _failure_text, "error_bits")
    signatures = _counting(monkeypatch, base, "error_signature")
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    engine.observe(session, ToolCall("bash", {"command": "python run.py"}, id="1"))
    engine.observe(session, ToolResult("Traceback (most recent call last):\nKeyError: 'x'", id="1", is_error=True))
    assert len(sketches) == 1  # error_retry and failure_streak compare the same error words
    engine.observe(session, Message("user", "Please always provide EXACTLY ONE action."))
    assert len(signatures) == 1  # the engine (is the reply new?) and feedback_repeat (the same complaint?)
    assert len(sketches) == 2


@FROM_SOURCE
def test_a_sessions_state_is_warmed_up_when_an_event_of_another_session_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the compiled kernels' warm_up is asked for (the same session's state again is still in the cache)
    warmed: list[tuple[object, int]] = []
    monkeypatch.setattr(_session_backend, "warm_up", lambda state, levels: warmed.append((state, levels)))
    guard = Guard("default-lexical", clock=None)
    for name in ("a", "a", "b", "b", "b", "a"):
        guard.observe(name, ToolCall("bash", {"command": "ls src"}))
    held = guard.backend._sessions  # type: ignore[attr-defined]
    assert warmed == [(held["a"], 3), (held["b"], 3), (held["a"], 3)]


@FROM_SOURCE
def test_only_the_strongest_answer_to_a_step_is_made_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopwatch.core import _engine

    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    judged: list[Any] = []
    made: list[int] = []
    chosen: list[Any] = []
    judge, verdict_of, run = Engine._judge, Engine._verdict, Engine._run_detectors

    def answered(self: Engine, session: Any, step: Any, *args: Any) -> Any:
        answer = judge(self, session, step, *args)
        if answer is not None:
            judged.append((step, answer))
        return answer

    def made_once(self: Engine, *args: Any) -> Any:
        made.append(1)
        return verdict_of(self, *args)

    def rules_verdict(self: Engine, *args: Any) -> Any:
        chosen.append(run(self, *args))
        return chosen[-1]

    monkeypatch.setattr(Engine, "_judge", answered)
    monkeypatch.setattr(Engine, "_verdict", made_once)
    monkeypatch.setattr(Engine, "_run_detectors", rules_verdict)
    call = ToolCall("bash", {"command": "python -m pytest tests/test_api.py -x"}, thought="Run the failing test again.")
    error = "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'timeout'"
    several = 0
    for n in range(8):
        for event in (dataclasses.replace(call, id=str(n)), ToolResult(error, id=str(n), is_error=True)):
            judged.clear()
            made.clear()
            chosen.clear()
            engine.observe(session, event)
            if not chosen:  # stopped: the rules are not asked again
                break
            got = chosen[0]  # the rules' verdict (before refusals and limits)
            several += len(judged) > 1
            assert len(made) == (0 if got is None else 1)  # one verdict made, for the strongest answer
            # the verdict the rules' answers would have given, each made a verdict and the strongest kept
            strongest = None
            for step, answer in judged:
                made_of = verdict_of(engine, step, answer.finding, answer.decision, answer.detector, answer.nudges)
                strongest = _engine._stronger(strongest, made_of)
            assert got == strongest
    assert several >= 3  # steps where two or more rules reported and were answered
