"""Corrupted trace files, made from real samples of every format loopwatch reads: for the fault tests and
``benchmarks/fuzz_scan.py``.

A corruption keeps a file recognisable (so the reader of its format gets deep into it) and breaks it the ways
files break: a value of the wrong type where the format says what goes (a number for a text, a list for an
object, ``null``), numbers too large for a float or for ``str()``, nesting deeper than any parser goes, text
that cannot be encoded (escaped lone surrogates), keys removed, and bytes damaged (a cut, flipped bytes, bytes
that are not UTF-8, a damaged gzip stream).

    for path, seed in corrupted_files(directory, count=100, seed=1): ...
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS.parent.parent / "shared" / "corpus"
if not CORPUS.is_dir():  # a work tree beside the main one: ../shared is one level further up
    CORPUS = TESTS.parent.parent.parent / "shared" / "corpus"

# Placeholders written into the JSON and replaced in its text afterwards (json cannot write these values).
_HUGE_INT = "\x00HUGE_INT\x00"
_DEEP = "\x00DEEP\x00"
_NAN = "\x00NAN\x00"
_SURROGATE = "\x00SURROGATE\x00"
_RAW = {
    json.dumps(_HUGE_INT): "9" * 5_000,  # more digits than int() takes from text (4,300)
    json.dumps(_DEEP): "[" * 100_000 + "]" * 100_000,  # deeper than any recursive parser goes
    json.dumps(_NAN): "NaN",
    json.dumps(_SURROGATE): '"\\ud800 lone \\udfff"',
}

HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    2**70,
    1e308,
    -1e-308,
    "",
    "x",
    "\u2028\u0000\ufffe",
    "y" * 70_000,
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {"c": {}}}},
    [None, 1, "two"],
    {"type": 5, "role": [], "content": {}},
    _HUGE_INT,
    _DEEP,
    _NAN,
    _SURROGATE,
]


def sample_files() -> list[Path]:
    """The real samples corruptions start from: the format fixtures in tests/data and the corpus samples."""
    found = sorted(p for p in (TESTS / "data" / "formats").rglob("*") if p.is_file())
    if (CORPUS / "samples").is_dir():
        found += sorted(p for p in (CORPUS / "samples").rglob("*") if p.is_file() and p.suffix != ".md")
    return found


def canonical_seeds() -> dict[str, str]:
    """Files of loopwatch's own formats (docs/formats.md, sections 1 and 2): an event stream and trajectories."""
    events = [
        {"type": "tool_call", "session": "s1", "ts": 1.0, "tool": "bash", "args": {"command": "cd srcc"}, "id": "c1"},
        {"type": "tool_result", "session": "s1", "tool": "bash", "output": "No such file", "is_error": True},
        {"type": "message", "session": "s1", "role": "assistant", "text": "Trying again."},
        {"type": "text_delta", "session": "s2", "text": "Hel"},
        {"type": "usage", "session": "s2", "cost": 0.01, "input_tokens": 12, "output_tokens": 3},
        {"type": "reset", "session": "s2"},
    ] * 3
    steps = [
        {"role": "assistant", "text": "DISCUSSION", "tool": "cd", "args": {"command": "cd fastxml/"}, "is_error": None},
        {"role": "tool", "text": "No such file or directory", "tool": "cd", "args": None, "is_error": True},
        {"role": "user", "text": "continue"},
    ] * 4
    trajectory = {"id": "run-1", "source": "swe_agent_java", "steps": steps, "labels": {"outcome": {"resolved": False}}}
    return {
        "events.jsonl": "\n".join(json.dumps(e) for e in events) + "\n",
        "trajectories.jsonl": json.dumps(trajectory) + "\n" + json.dumps({**trajectory, "id": "run-2"}) + "\n",
    }


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nodes(item, (*path, i))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return None if new is _DELETE else new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if new is _DELETE and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = None if new is _DELETE else new
    return value


_DELETE = object()


def _documents(text: str) -> tuple[list[Any], bool] | None:
    """The file's JSON values, and whether it is JSONL (one per line); None when it is not JSON."""
    try:
        return [json.loads(text)], False
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()], True
    except ValueError:
        return None


def _dump(documents: list[Any], lines: bool) -> str:
    text = "\n".join(json.dumps(d) for d in documents) + "\n" if lines else json.dumps(documents[0], indent=1)
    for placeholder, raw in _RAW.items():
        text = text.replace(placeholder, raw)
    return text


def mutate_values(text: str, rng: random.Random, count: int) -> str | None:
    """``count`` values of the file replaced by hostile ones (or removed); None when the file is not JSON."""
    parsed = _documents(text)
    if parsed is None:
        return None
    documents, lines = parsed
    for _ in range(count):
        i = rng.randrange(len(documents))
        nodes = list(_nodes(documents[i]))
        target = rng.choice(nodes[1:] if len(nodes) > 1 else nodes)
        hostile = _DELETE if rng.random() < 0.15 else rng.choice(HOSTILE)
        documents[i] = _replace(
            documents[i], target, json.loads(json.dumps(hostile)) if hostile is not _DELETE else hostile
        )
    return _dump(documents, lines)


def damage_bytes(data: bytes, rng: random.Random) -> bytes:
    """The file's bytes broken: cut, bytes flipped, bytes that are not UTF-8 inserted, lines doubled."""
    kind = rng.randrange(5)
    if kind == 0 and data:
        return data[: rng.randrange(len(data))]
    if kind == 1 and data:
        out = bytearray(data)
        for _ in range(rng.randrange(1, 20)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        at = rng.randrange(len(data) + 1)
        return (
            data[:at]
            + rng.choice([b"\xff\xfe\xc3(", b"\x00\x00", b"\xed\xa0\x80", b"\r\r\n", b"\xef\xbb\xbf"])
            + data[at:]
        )
    if kind == 3:
        lines = data.splitlines(keepends=True)
        rng.shuffle(lines)
        return b"".join(lines * 2)
    packed = gzip.compress(data)
    return packed[: max(10, len(packed) - rng.randrange(1, 50))]  # a gzip stream cut short


def corrupt(source: Path, rng: random.Random) -> tuple[str, bytes]:
    """A corrupted copy of ``source``: (file name, bytes)."""
    return corrupt_text(source.name, _read(source).decode("utf-8", "replace"), rng)


def corrupt_text(name: str, text: str, rng: random.Random) -> tuple[str, bytes]:
    if rng.random() < 0.65:
        mutated = mutate_values(text, rng, rng.choice([1, 1, 2, 3, 8]))
        if mutated is not None:
            data = mutated.encode("utf-8", "surrogatepass")
            return name, gzip.compress(data) if rng.random() < 0.1 else data
    return name, damage_bytes(text.encode("utf-8", "surrogatepass"), rng)


def corrupted_files(directory: Path, count: int, seed: int = 0) -> Iterator[Path]:
    """``count`` corrupted files written into ``directory`` (each in a folder of its own, keeping its name,
    which some formats are recognised by)."""
    rng = random.Random(seed)
    sources = sample_files()
    seeds = canonical_seeds()
    for n in range(count):
        if rng.random() < 0.2:
            name = rng.choice(sorted(seeds))
            name, data = corrupt_text(name, seeds[name], rng)
        else:
            name, data = corrupt(rng.choice(sources), rng)
        folder = directory / f"{n:05d}"
        os.makedirs(folder, exist_ok=True)
        path = folder / name
        path.write_bytes(data)
        yield path
