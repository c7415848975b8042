"""Canonical JSON and fingerprints: what makes two calls the same call and two results the same outcome."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import Guard, ToolCall, ToolResult
from loopwatch.core._canonical import MAX_DEPTH, canonical_json
from loopwatch.core._fingerprint import (
    PRIMARY_KEYS,
    bash_file_read,
    call_fingerprint,
    call_payload,
    error_signature,
    is_mutation,
    loose_fingerprint,
    normalized_args,
    outcome_fingerprint,
    primary_fingerprint,
    project,
    tool_key,
)
from loopwatch.core._kernels import word_hashes
from loopwatch.core._masking import masked, volatile_spans
from loopwatch.core.detectors._base import sketch_of

# -- canonical JSON ---------------------------------------------------------------------------------------


def test_keys_sorted_at_every_depth() -> None:
    value = {"b": {"z": 1, "y": [{"d": 1, "c": {"f": 0, "e": 0}}]}, "a": 0}
    assert canonical_json(value) == '{"a":0,"b":{"y":[{"c":{"e":0,"f":0},"d":1}],"z":1}}'


def test_key_order_never_matters_at_any_depth() -> None:
    one = {"path": "a.py", "opts": {"x": 1, "y": {"p": [1, {"k": 1, "j": 2}], "q": None}}}
    two = {"opts": {"y": {"q": None, "p": [1, {"j": 2, "k": 1}]}, "x": 1}, "path": "a.py"}
    assert canonical_json(one) == canonical_json(two)
    assert call_fingerprint("edit", one) == call_fingerprint("edit", two)
    wide_one = {f"k{i}": i for i in range(100)}  # beyond the fast path's key count
    wide_two = dict(reversed(list(wide_one.items())))
    assert call_fingerprint("t", wide_one) == call_fingerprint("t", wide_two)


def test_array_order_is_kept() -> None:
    assert canonical_json({"a": [3, 1, 2]}) == '{"a":[3,1,2]}'
    assert call_fingerprint("t", {"a": [1, 2]}) != call_fingerprint("t", {"a": [2, 1]})
    assert call_fingerprint("t", {"a": [{"x": 1}, {"y": 1}]}) != call_fingerprint("t", {"a": [{"y": 1}, {"x": 1}]})


def test_tool_name_and_values_are_part_of_the_call_fingerprint() -> None:
    assert call_fingerprint("read", {"path": "a"}) != call_fingerprint("write", {"path": "a"})
    assert call_fingerprint("read", {"path": "a"}) != call_fingerprint("read", {"path": "b"})
    assert call_fingerprint("read", {"path": "a"}) != call_fingerprint("read", {"file": "a"})
    assert call_fingerprint("read", {"n": 1}) != call_fingerprint("read", {"n": "1"})
    assert call_fingerprint("ab", {}) != call_fingerprint("a", {"b": None})


def test_call_fingerprint_takes_no_call_id() -> None:
    # the fingerprint is a function of the tool and its arguments only
    assert call_fingerprint("read", {"path": "a"}) == call_fingerprint("read", {"path": "a"})
    guard = Guard()
    verdicts = []
    for i in range(3):
        verdicts.append(guard.observe("s", ToolCall("read_file", {"path": "a.py"}, id=f"call_{i}")))
        guard.observe("s", ToolResult("same text", id=f"call_{i}"))
    assert [v.action for v in verdicts] == ["ok", "ok", "nudge"]
    assert verdicts[-1].pattern == "repeat"
    assert verdicts[-1].count == 3


def test_ignore_keys_projection() -> None:
    a = {"path": "x.py", "task_progress": "step 1", "note": "n"}
    b = {"path": "x.py", "task_progress": "step 2 of many", "note": "n"}
    assert call_fingerprint("t", a) != call_fingerprint("t", b)
    assert call_fingerprint("t", a, ignore_keys=["task_progress"]) == call_fingerprint(
        "t", b, ignore_keys=["task_progress"]
    )
    c = {"path": "y.py", "task_progress": "step 1", "note": "n"}
    assert call_fingerprint("t", a, ignore_keys=["task_progress"]) != call_fingerprint(
        "t", c, ignore_keys=["task_progress"]
    )
    assert project(a, ignore_keys=["task_progress"]) == {"path": "x.py", "note": "n"}
    assert project(a, ignore_keys=["absent"]) == a


def test_keep_keys_projection() -> None:
    a = {"path": "x.py", "offset": 0, "timeout": 30}
    b = {"path": "x.py", "offset": 0, "timeout": 60}
    assert call_fingerprint("t", a, keep_keys=["path", "offset"]) == call_fingerprint(
        "t", b, keep_keys=["path", "offset"]
    )
    assert call_fingerprint("t", a, keep_keys=["path", "timeout"]) != call_fingerprint(
        "t", b, keep_keys=["path", "timeout"]
    )
    assert project(a, keep_keys=["path"]) == {"path": "x.py"}
    assert project(a, keep_keys=[]) == {}
    # keep_keys wins over ignore_keys
    assert project(a, ignore_keys=["path"], keep_keys=["path"]) == {"path": "x.py"}


def test_task_progress_is_ignored_by_the_default_policy() -> None:
    guard = Guard()
    verdicts = []
    for i in range(3):
        args = {"path": "a.py", "task_progress": f"- [x] step {i}\n- [ ] checked {'again ' * i}"}
        verdicts.append(guard.observe("s", ToolCall("read_file", args)))
        guard.observe("s", ToolResult("the same content", tool="read_file"))
    assert [v.action for v in verdicts] == ["ok", "ok", "nudge"]
    assert verdicts[-1].pattern == "repeat"
    # control: the same calls differing in a real argument are different calls
    other = Guard()
    actions = []
    for i in range(3):
        args = {"path": f"{'abc'[i]}.py", "task_progress": "- [ ] step"}
        actions.append(other.observe("s", ToolCall("read_file", args)).action)
        other.observe("s", ToolResult("the same content", tool="read_file"))
    assert actions == ["ok", "ok", "ok"]


# -- seed 003: primary keys and plain file reads -------------------------------------------------------


def test_seed003_primary_keys() -> None:
    assert PRIMARY_KEYS == (
        "path", "file_path", "command", "pattern", "query", "url", "content", "filename", "offset", "limit",
    )  # fmt: skip
    a = primary_fingerprint("read", {"path": "a.ts", "encoding": "utf8", "verbose": True})
    b = primary_fingerprint("read", {"path": "a.ts", "encoding": "latin1"})
    c = primary_fingerprint("read", {"path": "b.ts", "encoding": "utf8"})
    assert a == b
    assert a != c
    assert primary_fingerprint("read", {"path": "a", "limit": 10}) != primary_fingerprint(
        "read", {"path": "a", "limit": 20}
    )
    assert primary_fingerprint("read", {"path": "a"}) != primary_fingerprint("grep", {"path": "a"})


@pytest.mark.parametrize(
    ("command", "target"),
    [
        ("cat foo.ts", "foo.ts"),
        ("head foo.ts", "foo.ts"),
        ("tail foo.ts", "foo.ts"),
        ("head -n 20 src/foo.ts", "src/foo.ts"),
        ("tail -f log.txt", "log.txt"),
        ("head -20 a.py", "a.py"),
        ("  cat   /etc/hosts  ", "/etc/hosts"),
    ],
)
def test_bash_file_read(command: str, target: str) -> None:
    assert bash_file_read(command) == target
    assert primary_fingerprint("bash", {"command": command}) == f"bash:file_read:{target}"


@pytest.mark.parametrize(
    "command",
    [
        "cat foo.ts | grep x",
        "cat foo.ts > bar.ts",
        "cat foo.ts >> bar.ts",
        "cat foo.ts; ls",
        "cat foo.ts && ls",
        "cat $(ls)",
        "cat a.ts b.ts",
        "less foo.ts",
        "cat",
    ],
)
def test_bash_file_read_not_for_complex_commands(command: str) -> None:
    assert bash_file_read(command) is None
    assert not primary_fingerprint("bash", {"command": command}).startswith("bash:file_read:")


def test_plain_reads_of_one_file_share_the_structural_fingerprint() -> None:
    fps = {primary_fingerprint("bash", {"command": c}) for c in ("cat foo.ts", "head foo.ts", "tail -n 5 foo.ts")}
    assert fps == {"bash:file_read:foo.ts"}
    assert primary_fingerprint("bash", {"command": "cat bar.ts"}) != "bash:file_read:foo.ts"


# -- seed 004 normalisation ----------------------------------------------------------------------------


def test_seed004_lowercases_values() -> None:
    assert normalized_args({"q": "Find THE Thing"}) == '{"q":"find the thing"}'


def test_seed004_paths_to_basenames() -> None:
    assert normalized_args({"path": "/a/b/file.ts"}) == '{"path":"file.ts"}'
    assert normalized_args({"path": "/a/b/file.ts"}) == normalized_args({"path": "/x/y/z/File.TS"})
    assert normalized_args({"path": "/a/b/file.ts"}) != normalized_args({"path": "/a/b/other.ts"})


def test_seed004_removes_uuids_timestamps_numeric_ids() -> None:
    one = {
        "job": "123e4567-e89b-12d3-a456-426614174000",
        "at": "2024-05-01T10:20:30Z",
        "id": 12345,
        "q": "order 42 status",
    }
    two = {
        "job": "9F8B2C1D-0A1B-4C3D-8E9F-112233445566",
        "at": "2025-12-31T23:59:59Z",
        "id": 99,
        "q": "order 7 status",
    }
    assert normalized_args(one) == normalized_args(two)
    text = normalized_args(one)
    for gone in ("123e4567", "2024", "12345", "42"):
        assert gone not in text
    assert "order" in text and "status" in text


def test_seed004_sorts_keys_and_truncates() -> None:
    assert normalized_args({"b": "x", "a": "y"}) == '{"a":"y","b":"x"}'
    assert normalized_args({"b": "x", "a": "y"}) == normalized_args({"a": "y", "b": "x"})
    long = normalized_args({"text": "word " * 500})
    assert len(long) == 200
    assert long.startswith('{"text":"word word')


def test_seed004_never_raises_on_odd_values() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for args in ({"b": b"\xff"}, {"s": {1, 2}}, {"n": math.nan}, {1: "x"}, cyclic):
        text = normalized_args(args)
        assert isinstance(text, str) and len(text) <= 200
        assert normalized_args(args) == text


# -- tool keys -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "command", "key"),
    [
        ("bash", "cd x && python -m pytest", "bash:python:pytest"),
        ("bash", "cd /repo && python -m pytest -x tests/test_a.py", "bash:python:pytest"),
        ("bash", "git status", "bash:git:status"),
        ("bash", "git diff", "bash:git:diff"),
        ("bash", "FOO=1 sudo git status", "bash:git:status"),
        ("bash", "npm run test", "bash:npm:test"),
        ("bash", "ls -la", "bash:ls"),
        ("bash", "cat a.txt | grep b", "bash:cat"),
        ("bash", "cd srcc", "bash:cd"),
        ("execute_bash", "git log --oneline", "execute_bash:git:log"),
        ("cd", "cd repo && mvn test", "cd:mvn:test"),
    ],
)
def test_tool_key_for_shell_tools(tool: str, command: str, key: str) -> None:
    assert tool_key(tool, {"command": command}) == key


def test_git_status_and_git_diff_are_different_tools() -> None:
    assert tool_key("bash", {"command": "git status"}) != tool_key("bash", {"command": "git diff"})
    assert tool_key("bash", {"command": "git status"}) == tool_key("bash", {"command": "git status --short"})


def test_non_shell_tools_keep_their_name() -> None:
    assert tool_key("read_file", {"path": "a.py"}) == "read_file"
    assert tool_key("str_replace_editor", {"command": "view", "path": "a.py"}) == "str_replace_editor"
    assert tool_key("web_search", {"query": "git status"}) == "web_search"
    assert tool_key("bash", {}) == "bash"


# -- outcomes ----------------------------------------------------------------------------------------------

_CURL_HEADER = (
    "curl -L -o /tmp/a.tar.gz https://example.org/a.tar.gz\n"
    "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
    "                                 Dload  Upload   Total   Spent    Left  Speed\n"
)
SAME_OUTCOMES = [
    ("timestamps", "2024-05-01T10:20:30Z build started", "2025-12-31T23:59:59Z build started"),
    ("times", "[10:20:30] worker ready", "[23:01:59] worker ready"),
    (
        "uuids",
        "created job 123e4567-e89b-12d3-a456-426614174000",
        "created job 9f8b2c1d-0a1b-4c3d-8e9f-112233445566",
    ),
    ("hex ids", "commit 3f2a9c1d pushed to origin", "commit 8b7e6d50 pushed to origin"),
    ("addresses", "<Worker object at 0x7f3a2b1c9d80>", "<Worker object at 0x10e4f5a60>"),
    ("pids", "started server pid 4312", "started server pid 99817"),
    (
        "shell line numbers",
        "bash: line 13008: cd: srcc: No such file or directory",
        "bash: line 13023: cd: srcc: No such file or directory",
    ),
    (
        "curl's progress meter",
        _CURL_HEADER + "  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0\n"
        "100  5714k    0  5714k    0     0  2959k      0 --:--:--  0:00:01 --:--:-- 5451k\n\n$ exit code: 0",
        _CURL_HEADER
        + "100  5714k    0  5714k    0     0  4644k      0 --:--:--  0:00:01 --:--:-- 8484k\n\n$ exit code: 0",
    ),
]


@pytest.mark.parametrize(("what", "one", "two"), SAME_OUTCOMES, ids=[s[0] for s in SAME_OUTCOMES])
def test_volatile_parts_do_not_change_the_outcome(what: str, one: str, two: str) -> None:
    assert outcome_fingerprint(one) == outcome_fingerprint(two)
    assert outcome_fingerprint(one, True, 1) == outcome_fingerprint(two, True, 1)
    assert error_signature(one) == error_signature(two)


DIFFERENT_OUTCOMES = [
    ("permission denied", "connection refused"),
    ("tests passed", "tests failing"),
    ("compiling module alpha", "compiling module gamma"),
    ("No such file or directory", "Is a directory"),
    ("", "output"),
]


@pytest.mark.parametrize(("one", "two"), DIFFERENT_OUTCOMES)
def test_different_words_give_different_outcomes(one: str, two: str) -> None:
    assert outcome_fingerprint(one) != outcome_fingerprint(two)


@pytest.mark.parametrize(
    ("one", "two"),
    [("compiling module a", "compiling module b"), ("cannot read bad.py", "cannot read dead.py")],
)
def test_words_made_of_hex_letters_still_count(one: str, two: str) -> None:
    assert outcome_fingerprint(one) != outcome_fingerprint(two)


def test_is_error_and_exit_code_are_part_of_the_outcome() -> None:
    output = "done"
    flags = {outcome_fingerprint(output, flag) for flag in (None, True, False)}
    assert len(flags) == 3
    codes = {outcome_fingerprint(output, None, code) for code in (None, 0, 1, 2, 12, -9)}
    assert len(codes) == 6
    assert outcome_fingerprint(output, True, 1) == outcome_fingerprint(output, True, 1)


# -- arguments that are not nice JSON ----------------------------------------------------------------------


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    def __str__(self) -> str:
        raise RuntimeError("no str either")


def _deep(levels: int, leaf: Any = "leaf") -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": leaf}
    for _ in range(levels):
        value = {"k": value}
    return value


def _deep_list(levels: int) -> list[Any]:
    value: list[Any] = ["leaf"]
    for _ in range(levels):
        value = [value]
    return value


def _cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"path": "a.py"}
    value["self"] = value
    value["list"] = [value, 1]
    return value


def _odd_args() -> list[tuple[str, Any]]:
    nested: frozenset[Any] = frozenset()
    for i in range(2_000):
        nested = frozenset({nested, i})
    return [
        ("broken repr", {"obj": BrokenRepr()}),
        ("bytes", {"data": b"\x00\xff binary \x80"}),
        ("bytearray", {"data": bytearray(b"abc")}),
        ("set", {"tags": {"b", "a", "c"}}),
        ("frozenset of tuples", {"pairs": frozenset({(1, 2), (3, 4)})}),
        ("nan", {"x": math.nan}),
        ("inf", {"x": [math.inf, -math.inf]}),
        ("non-string keys", {1: "one", (2, 3): "tuple", None: "none", 4.5: "float", False: "bool"}),
        ("object value", {"obj": object.__new__(BrokenRepr)}),
        ("lone surrogate", {"text": "bad \ud800 text", "\udfff": 1}),
        ("huge int", {"n": 10**5000}),
        ("deeply nested sets", {"s": nested}),
        ("deep dict", _deep(10_000)),
        ("deep list", {"x": _deep_list(10_000)}),
        ("cyclic", _cyclic()),
        ("wide list", {"items": list(range(200_000))}),
        ("wide dict", {"m": {f"key{i}": i for i in range(50_000)}}),
    ]


@pytest.mark.parametrize(("what", "args"), _odd_args(), ids=[a[0] for a in _odd_args()])
def test_odd_arguments_fingerprint_without_raising_and_deterministically(what: str, args: Any) -> None:
    first = call_fingerprint("tool", args)
    assert call_fingerprint("tool", args) == first
    assert canonical_json(args) == canonical_json(args)
    # bounded output whatever the input
    assert len(canonical_json(args)) < 2_000_000
    json.loads(canonical_json(args).encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    # and the other fingerprints too
    assert primary_fingerprint("tool", args) == primary_fingerprint("tool", args)
    assert tool_key("bash", args) == tool_key("bash", args)


@pytest.mark.parametrize(
    ("what", "args"),
    [
        pytest.param(
            what,
            args,
            id=what,
        )
        for what, args in _odd_args()
    ],
)
def test_odd_arguments_seed004_normalisation_never_raises(what: str, args: Any) -> None:
    text = normalized_args(args)
    assert normalized_args(args) == text
    assert len(text) <= 200


def test_odd_arguments_still_tell_different_values_apart() -> None:
    assert call_fingerprint("t", {"b": b"abc"}) != call_fingerprint("t", {"b": b"abd"})
    assert call_fingerprint("t", {"s": {1, 2, 3}}) == call_fingerprint("t", {"s": {3, 2, 1}})
    assert call_fingerprint("t", {"s": {1, 2, 3}}) != call_fingerprint("t", {"s": {1, 2, 4}})
    assert call_fingerprint("t", {1: "x"}) == call_fingerprint("t", {1: "x"})
    assert call_fingerprint("t", {"n": 10**5000}) != call_fingerprint("t", {"n": 10**5000 + 1})
    assert call_fingerprint("t", {"n": 10**5000}) != call_fingerprint("t", {"n": -(10**5000)})
    # equal deep structures built separately are the same call; a difference near the top is seen
    assert call_fingerprint("t", _deep(10_000)) == call_fingerprint("t", _deep(10_000))
    assert call_fingerprint("t", {"a": 1, "x": _deep(10_000)}) != call_fingerprint("t", {"a": 2, "x": _deep(10_000)})
    # nesting beyond the depth limit is summarised, so (by design) only the top MAX_DEPTH levels count
    assert MAX_DEPTH < 100
    assert call_fingerprint("t", _deep(200, "a")) == call_fingerprint("t", _deep(200, "b"))


def test_huge_string_argument() -> None:
    big = "x" * 100_000_000  # 100 MB
    first = call_fingerprint("write_file", {"path": "a.txt", "content": big})
    assert call_fingerprint("write_file", {"path": "a.txt", "content": big}) == first
    assert len(canonical_json({"content": big})) < 100_000
    other = big[:-1] + "y"
    assert call_fingerprint("write_file", {"path": "a.txt", "content": other}) != first
    shorter = big[:-1]
    assert call_fingerprint("write_file", {"path": "a.txt", "content": shorter}) != first
    del big, other, shorter


def test_huge_output_outcome() -> None:
    big = "line of build output\n" * 5_000_000  # about 100 MB
    first = outcome_fingerprint(big, False, 0)
    assert outcome_fingerprint(big, False, 0) == first
    assert outcome_fingerprint(big + "FAILED", False, 0) != first
    assert error_signature(big) == error_signature(big)
    del big


def test_outcome_of_text_with_lone_surrogates() -> None:
    text = "bad \ud800 bytes \udcff"
    assert outcome_fingerprint(text) == outcome_fingerprint(text)
    assert outcome_fingerprint(text) != outcome_fingerprint("bad bytes")
    assert error_signature(text) == error_signature(text)


def test_recursion_limit_is_untouched() -> None:
    before = sys.getrecursionlimit()
    call_fingerprint("t", _deep(10_000))
    assert sys.getrecursionlimit() == before


# -- masking (only what is volatile) ------------------------------------------------------------------------


@pytest.mark.parametrize(("what", "one", "two"), SAME_OUTCOMES, ids=[s[0] for s in SAME_OUTCOMES])
def test_masked_hides_volatile_parts(what: str, one: str, two: str) -> None:
    assert masked(one) == masked(two)


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("compiling module a", "compiling module b"),
        ("cannot read bad.py", "cannot read dead.py"),
        ("1/10 replicas ready", "2/10 replicas ready"),  # a moving counter is progress
        ("building 10%", "building 20%"),
        ("no flights on 2024-05-15", "no flights on 2024-05-16"),  # a date is content
        ("total: $123.40", "total: $123.50"),  # a price is content
        ("order #W1234567 shipped", "order #W7654321 shipped"),  # a short id is content
        ("calculate(12*3) = 36", "calculate(15*3) = 45"),
        ("===== 2 failed, 40 passed in 1.23s =====", "===== 1 failed, 41 passed in 1.23s ====="),
        ("pid found in 3 files", "pid found in 4 files"),
        # after curl's meter, what the transfer printed is content
        (
            _CURL_HEADER + "  0  0 --:--:--\ncurl: (22) error: 404",
            _CURL_HEADER + "  0  0 --:--:--\ncurl: (22) error: 403",
        ),
    ],
)
def test_masked_keeps_content_digits(one: str, two: str) -> None:
    assert masked(one) != masked(two)
    assert outcome_fingerprint(one) != outcome_fingerprint(two)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bash: line 13008: cd: srcc: No such file or directory", b"bash: cd: srcc: No such file or directory"),
        ("/bin/sh: 3: java: not found", b"/bin/sh: java: not found"),
        ("took 1.5s then 300ms, 12 seconds, 5 students, 10 minimum", b"took  then , , 5 students, 10 minimum"),
        ("wrote /tmp/tmpab12cd34/out.txt", b"wrote "),
        ("ran tmp_code_1f43c3d4.py", b"ran tmp_code_.py"),
        ("saved to tmpk2x9q0ab, done", b"saved to , done"),
        ("===== 2 failed, 40 passed in 1.23s =====", b"===== 2 failed, 40 passed in  ====="),
        ("2024-05-01T10:20:30.123+02:00 start", b" start"),
        ("at 2024-05-01 10:20:30, on 2024-05-01", b"at , on 2024-05-01"),
        ("epoch 1700000000123 then 1234567", b"epoch  then 1234567"),
        ("defaced facade 0xdeadbeef", b"defaced facade "),
        ("elapsed 12\u00b5s", b"elapsed "),
        ("Left  Speed\n100  14  0 --:--:--    26\n\nroot$", b"Left  Speed\n100  14  0 --:--:--    26\n\nroot$"),
        (
            "Dload  Upload   Total   Spent    Left  Speed\n 0 --:--:-- 15k\r 100 14\ndone",
            b"Dload  Upload   Total   Spent    Left  Speeddone",
        ),
        ("", b""),
    ],
)
def test_masked_removes_exactly_the_volatile_parts(text: str, expected: bytes) -> None:
    assert masked(text) == expected


def test_volatile_spans_name_their_kind() -> None:
    text = b"[10:20:30] pid 42 job 123e4567-e89b-12d3-a456-426614174000 at 0x7f3a2b1c in 3ms, /tmp/x.log"
    assert [kind for _, _, kind in volatile_spans(text)] == ["time", "pid", "uuid", "address", "duration", "tmp"]


def test_masked_on_long_texts_is_bounded_and_still_compares() -> None:
    middle_one = "log line at 2024-05-01T10:20:30Z ok\n" * 500
    middle_two = "log line at 2025-12-31T23:59:59Z ok\n" * 500
    head, tail = "started pid 123\n", "done in 35s\n" * 200  # process ids are looked for at the ends
    one = masked(head + middle_one + tail)
    two = masked(head.replace("123", "987") + middle_two + tail.replace("35s", "77s"))
    assert one == two
    assert masked(head + middle_one.replace("ok", "FAILED") + tail) != one
    huge = "commit 3f2a9c1d ok\n" * 100_000  # longer than the masking limit: folded, still compared
    assert masked(huge) == masked(huge.replace("3f2a9c1d", "8b7e6d50"))
    assert len(masked(huge)) < 70_000


def test_masked_keeps_lone_surrogates() -> None:
    assert masked("bad \ud800 name") == "bad \ud800 name".encode("utf-8", "surrogatepass")


def test_fingerprints_and_sketches_keep_their_values_across_releases() -> None:
    """Fingerprints and sketches live on in stores and snapshots: a faster way of computing them must give
    the same values. (Outcome fingerprints and word sketches changed once, when digits became content: a
    stored streak in flight at an upgrade starts over at its next result.)"""
    args = {"command": "cd /repo && python -m pytest tests/test_x.py -x -q", "timeout": 120}
    assert call_fingerprint("bash", args) == "89c9d43a255b02ff"
    assert loose_fingerprint("bash", call_payload(args)[0]) == "3902a368e8de42f7"
    nested = {"path": "src/a.py", "edits": [{"old": "x = 1", "new": "x = 2"}], "dry": False}
    assert call_fingerprint("edit_file", nested) == "b99aae848973619c"
    output = "Traceback (most recent call last):\n  File \"/tmp/x_1f3a.py\", line 3\nKeyError: 'a'\n"
    assert outcome_fingerprint(output, True, 1) == "8e388b2b1eb2499e"
    assert error_signature("bash: line 13008: foo: command not found") == "6e43dcd3196122e9"
    sketch = sketch_of(word_hashes(masked("The parser reads the Config file before the loader runs")), 8)
    assert sketch == (
        "AAAAAAAAAAAAAAAAAAAAABAIAAAAAAAAAAAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAEAAAAAAEAAAAAAAABA"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    )


# what a command line that changes something was, as one expression; is_mutation runs its three alternatives apart
_ONE_EXPRESSION = re.compile(
    r"(?:^|[\s;&|(])(?:sed\s+(?:-\w+\s+)*-i|perl\s+-\w*i|tee|patch|mv|cp|rm|mkdir|touch|chmod|ln|"
    r"git\s+(?:apply|checkout|commit|add|reset|stash|restore|am|cherry-pick|rebase|merge)|"
    r"(?:pip3?|uv\s+pip|npm|yarn|pnpm|apt-get|apt|brew|conda|cargo)\s+(?:install|add|remove|uninstall)|"
    r"python3?\s+-m\s+pip\s+install|create|edit|insert|str_replace|apply_patch|truncate|dd)\b"
    r"|(?<![0-9&>])>{1,2}\s*(?!/dev/null)[^\s&>|]|<<"
)
_COMMAND_PIECES = [
    "sed -i s/a/b/ f", "perl -pi", "tee", "mv a b", "rm", "git add .", "pip install x", "uv pip install",
    "python3 -m pip install", "cat", "ls", "echo hi", "> out", ">> log", "2>&1", "&> x", "> /dev/null", ">/dev/nullx",
    "<<EOF", "<", "|", ";", "&&", "(", " ", "\t", "\n", "x", "-i", "1", "é", "dd", "add", "edit", "editor",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_COMMAND_PIECES), max_size=12).map("".join))
def test_a_command_changes_something_as_the_one_expression_says(command: str) -> None:
    assert is_mutation("bash", {"command": command}) == bool(_ONE_EXPRESSION.search(command))


_TOOL_PIECES = [
    "bash", "BASH", "shell", "run", "edit", "write", "Str_Replace", "poll", "status", "wait", "search", "find_",
    "read", "list", "get_", "view", "ls", "_", "x", "-", "é", "Σ", "file", "job", "output",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_TOOL_PIECES), max_size=4).map("".join))
def test_what_a_tool_name_says_is_read_once_and_as_its_definitions_say(tool: str) -> None:
    """A name's traits are kept (a call asks them each time): kept or read afresh, what the definitions say."""
    from loopwatch.core import _fingerprint as fp

    expected = (
        (fp._SHELL_NAME if tool.lower() in fp.SHELL_TOOLS else 0)
        | (fp._MUTATING_NAME if fp._MUTATING_TOOLS.search(tool) else 0)
        | (fp._POLL_NAME if fp._POLL_TOOLS.search(tool) else 0)
        | (fp._SEARCH_NAME if fp._SEARCH_TOOLS.match(tool) else 0)
    )
    assert fp.name_traits(tool) == expected  # read, or kept by an earlier example
    assert fp._NAMES[tool] == expected  # kept
    fp._NAMES.pop(tool)
    assert fp.name_traits(tool) == expected  # read afresh
    # each question reads its own bit: without a command line, the name alone answers
    assert fp.is_shell_tool(tool) == (tool.lower() in fp.SHELL_TOOLS)
    assert is_mutation(tool, {"text": "x"}) == bool(fp._MUTATING_TOOLS.search(tool))
    assert fp.is_poll(tool, None) == bool(fp._POLL_TOOLS.search(tool))
    assert fp.is_search(tool, None, {"text": "x"}) == bool(fp._SEARCH_TOOLS.match(tool))


def test_the_tool_names_kept_are_bounded() -> None:
    """An agent that makes up a new tool name at every call does not grow the names kept without end."""
    from loopwatch.core import _fingerprint as fp

    for n in range(3 * fp._NAMES_KEPT):
        fp.name_traits(f"made_up_tool_{n}")
        assert f"made_up_tool_{n}" in fp._NAMES
        assert len(fp._NAMES) <= fp._NAMES_KEPT
    assert fp.name_traits("edit_file") & fp._MUTATING_NAME
    long_name = "edit_" + "x" * fp._NAME_CHARS
    assert fp.name_traits(long_name) & fp._MUTATING_NAME and long_name not in fp._NAMES  # read, not kept
    fp._NAMES["seeded_tool"] = fp._POLL_NAME  # what is kept is what is answered
    assert fp.name_traits("seeded_tool") == fp._POLL_NAME and fp.is_poll("seeded_tool", None)
    fp._NAMES.pop("seeded_tool")

    class Same(str):  # a subclass equal to every string: read for what it holds, never kept nor matched
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash("edit_file")

    assert fp.name_traits(Same("notes")) == 0 and fp.name_traits(Same("bash")) & fp._SHELL_NAME
    assert is_mutation("write_notes", {"text": "x"}) and not is_mutation("notes", {"text": "x"})


@pytest.mark.parametrize("size", [0, 1, 127, 128, 129, 2_047, 2_048, 2_049, 100_000])
def test_the_digests_are_64_bit_blake2b(size: int) -> None:
    """A copy of one empty hasher per digest: the same digests as a new ``blake2b(digest_size=8)`` each time, so
    fingerprints stored before read the same."""
    from hashlib import blake2b

    from loopwatch.core._canonical import digest, digest_bytes, digest_parts

    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert digest_bytes(data) == blake2b(data, digest_size=8).hexdigest()
    assert digest_parts(data, b"\x00", data) == blake2b(data + b"\x00" + data, digest_size=8).hexdigest()
    text = data.decode("latin-1") + "\ud800"
    assert digest(text) == blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    assert digest_bytes(b"") == "e4a6a0577479b2b4"  # the same value every process, every release


_FLAT_VALUES = st.one_of(
    st.text(max_size=20), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none()
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _FLAT_VALUES, max_size=6))
def test_flat_arguments_are_the_json_of_the_sorted_keys(args: dict[str, object]) -> None:
    # the encoder made once gives what json.dumps gives (surrogates and other oddities: the general path's answer)
    try:
        expected = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return
    assert canonical_json(args) == expected
