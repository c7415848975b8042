"""Readers and ``loopwatch scan`` on malformed input: every bad record is a typed, counted skip naming the file
and line, whatever the record holds; the command line ends with exit status 0 or 2, never a traceback.

Records are generated from the formats' own schemas (docs/formats.md, sections 1 and 2: each field given a value of
any JSON type, or left out), and whole files are corrupted copies of the real samples of every format
(``trace_corruption.py``; ``benchmarks/fuzz_scan.py`` runs ten thousand of them)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwatch._presets import preset
from loopwatch.cli import main
from loopwatch.cli._scan import scan_runs
from loopwatch.errors import InputError
from loopwatch.readers import read_runs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_corruption import HOSTILE, canonical_seeds, corrupt, corrupt_text, sample_files

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- records from the formats' schemas -----------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=30),
        st.sampled_from(["tool_call", "tool_result", "message", "assistant", "user", "tool", "bash", ""]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)

EVENT_FIELDS = {
    "tool_call": ["session", "worker", "ts", "tool", "args", "id", "thought"],
    "tool_result": ["session", "worker", "ts", "tool", "output", "is_error", "exit_code", "id"],
    "message": ["session", "worker", "ts", "role", "text"],
    "text_delta": ["session", "worker", "ts", "text"],
    "usage": ["session", "worker", "ts", "cost", "input_tokens", "output_tokens"],
    "reset": ["session", "worker", "ts"],
}


@st.composite
def event_records(draw: st.DrawFn) -> dict[str, Any]:
    """An event record (docs/formats.md, section 1): a type, and each of its fields either well-formed, of any
    other JSON type, or absent."""
    kind = draw(st.sampled_from(sorted(EVENT_FIELDS)))
    good: dict[str, Any] = {
        "session": "s1", "worker": "w1", "ts": 1.5, "tool": "bash", "args": {"command": "ls"}, "id": "c1",
        "thought": "why", "output": "out", "is_error": False, "exit_code": 1, "role": "assistant", "text": "hi",
        "cost": 0.1, "input_tokens": 3, "output_tokens": 4,
    }  # fmt: skip
    record: dict[str, Any] = {"type": kind}
    for name in EVENT_FIELDS[kind]:
        choice = draw(st.sampled_from(["good", "good", "other", "absent"]))
        if choice == "good":
            record[name] = good[name]
        elif choice == "other":
            record[name] = draw(json_values)
    return record


@st.composite
def trajectory_records(draw: st.DrawFn) -> Any:
    """A trajectory (docs/formats.md, section 2) whose fields and steps may hold any JSON value."""
    steps = draw(
        st.lists(
            st.one_of(
                st.fixed_dictionaries(
                    {"role": st.sampled_from(["assistant", "tool", "user", "system"]), "text": json_values},
                    optional={"tool": json_values, "args": json_values, "is_error": json_values, "agent": json_values},
                ),
                json_values,
            ),
            max_size=8,
        )
    )
    record = {"id": draw(st.one_of(st.text(max_size=10), json_values)), "steps": steps}
    if draw(st.booleans()):
        record["labels"] = draw(json_values)
    if draw(st.booleans()):
        record["source"] = draw(json_values)
    return record if draw(st.integers(0, 9)) else draw(json_values)


def _read_and_scan(path: Path) -> tuple[int, list[InputError]]:
    errors: list[InputError] = []
    runs = list(read_runs([str(path)], on_error=errors.append))
    reports = list(scan_runs(preset("default-lexical"), runs, errors.append))
    return len(reports), errors


@SETTINGS
@given(st.lists(event_records(), min_size=1, max_size=12))
def test_any_event_stream_is_read_or_reported_line_by_line(tmp_path_factory: Any, records: list[Any]) -> None:
    path = tmp_path_factory.mktemp("events") / "events.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    _, errors = _read_and_scan(path)
    assert len(errors) <= 1  # a bad record ends the file
    for error in errors:
        assert error.path == str(path) and error.line is not None and 1 <= error.line <= len(records)


@SETTINGS
@given(st.lists(trajectory_records(), min_size=1, max_size=4))
def test_any_trajectory_file_is_read_or_reported_line_by_line(tmp_path_factory: Any, records: list[Any]) -> None:
    path = tmp_path_factory.mktemp("trajectories") / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    runs, errors = _read_and_scan(path)
    for error in errors:
        assert isinstance(error, InputError) and error.path == str(path)
    assert runs <= len(records)


# -- whole files, corrupted ----------------------------------------------------------------------------------------


def _cli(path: Path) -> tuple[int, str, str]:
    """``loopwatch scan PATH --json`` in this process, its standard output as strict as a pipe's."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["scan", str(path), "--json", "--no-progress"])
        out.flush()
    return code, out.buffer.getvalue().decode(), err.getvalue()  # type: ignore[attr-defined]


SOURCES = sample_files()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SOURCES) - 1), st.randoms(use_true_random=False))
def test_corrupted_samples_of_every_format_end_in_0_or_2(tmp_path_factory: Any, which: int, rng: Any) -> None:
    name, data = corrupt(SOURCES[which], rng)
    path = tmp_path_factory.mktemp("corrupt") / name
    path.write_bytes(data)
    code, out, err = _cli(path)  # anything escaping main fails this test
    assert code in (0, 2)
    if code == 2:
        assert err.startswith(f"loopwatch: {path}") and "Traceback" not in err
    for line in out.splitlines():
        assert set(json.loads(line)) == {"id", "events", "detections"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(canonical_seeds())), st.randoms(use_true_random=False))
def test_corrupted_files_of_loopwatchs_own_formats_end_in_0_or_2(tmp_path_factory: Any, seed: str, rng: Any) -> None:
    name, data = corrupt_text(seed, canonical_seeds()[seed], rng)
    path = tmp_path_factory.mktemp("corrupt") / name
    path.write_bytes(data)
    assert _cli(path)[0] in (0, 2)


@pytest.mark.parametrize("hostile", [h for h in HOSTILE if isinstance(h, str) and h.startswith("\x00")])
def test_each_kind_of_unreadable_json_names_the_file_and_line(tmp_path: Path, hostile: str) -> None:
    """Numbers with more digits than Python reads, nesting deeper than the parser goes, NaN, escaped lone
    surrogates: before, the first two ended ``loopwatch scan`` with a traceback, the last one when printing."""
    from trace_corruption import _RAW

    raw = _RAW[json.dumps(hostile)]
    good = json.dumps({"type": "message", "session": "s", "role": "user", "text": "hello"})
    path = tmp_path / "events.jsonl"
    path.write_text(f'{good}\n{{"type": "message", "session": "s", "role": "user", "text": {raw}}}\n')
    code, out, err = _cli(path)
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert err.startswith(f"loopwatch: {path}:2: ")
    json.loads(out.splitlines()[0])


def test_escaped_lone_surrogates_are_read_as_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "tool_call", "session": "run-\\ud800", "tool": "cat", "args": {"p": "\\udfff"}}\n')
    runs = list(read_runs([str(path)]))
    assert runs[0].id == "run-\ufffd" and runs[0].events[0].args == {"p": "\ufffd"}  # type: ignore[union-attr]


def test_a_gzip_stream_cut_short_is_a_read_error_with_its_line(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"type": "message", "role": "user", "text": f"m{i}"}) + "\n" for i in range(2_000))
    path = tmp_path / "events.jsonl.gz"
    path.write_bytes(gzip.compress(lines.encode())[:-40])
    code, _, err = _cli(path)
    assert code == 2 and "read error" in err and f"{path}:" in err
