"""The HTML report (:mod:`loopwatch.cli._report`): its API, its escaping, its totals, and the page in a real browser.

The browser test opens the generated file in headless Chromium (driven by Playwright), takes a screenshot, checks
the expected elements are there and visible, clicks a run, and checks there were no console errors and no network
requests. The browser is found by tests/browser.py (skipped, saying why, where there is none and npm cannot fetch
one; a failure under ``LOOPWATCH_REQUIRE_BROWSER=1``, as in CI).
"""

from __future__ import annotations

import gc
import html
import itertools
import json
import os
import shutil
import struct
import tracemalloc
import weakref
import zlib
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from browser import CHROMIUM_ARGS, chromium
from loopwatch._presets import preset
from loopwatch._timeline import ACTION_COLOURS
from loopwatch.cli._report import HtmlReport, SweepPoint, middle_ellipsis, scan_with_runs
from loopwatch.cli._scan import RunReport, scan_runs
from loopwatch.cli._summary import model_of
from loopwatch.core._events import Event, Message, ToolCall, ToolResult, Usage
from loopwatch.core._verdict import Verdict
from loopwatch.readers import Run, read_runs

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Dialog, Error, Request

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
JAVA = CORPUS / "swe_agent_java.jsonl.gz"
EVIL = "<script>alert(1)</script>"
EVIL_TOOL = '<img src=x onerror="alert(2)">'
EVIL_OUTPUT = "</script><script>alert(3)</script> & <!-- done"


# -- helpers ------------------------------------------------------------------------------------------------------


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of <script> elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[tuple[dict[str, str], str]] = []
        self._script: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.tags.append((tag, attributes))
        if tag == "script":
            self._script = attributes

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts.append((self._script, data))
            self._script = None

    def by_class(self, name: str) -> list[dict[str, str]]:
        return [a for _, a in self.tags if name in a.get("class", "").split()]

    def by_id(self, name: str) -> dict[str, str] | None:
        return next((a for _, a in self.tags if a.get("id") == name), None)

    def data(self) -> dict[str, Any]:
        text = next(t for a, t in self.scripts if a.get("id") == "report-data")
        loaded: dict[str, Any] = json.loads(text)
        return loaded


def parse(page: str) -> _Elements:
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser


def looping_events(tool: str = "bash", reps: int = 8, output: str = "error: nope") -> list[Event]:
    """A few distinct calls, then the same failing call ``reps`` times."""
    events: list[Event] = [Message(role="user", text="fix the bug")]
    for k in range(3):
        events += [ToolCall(tool="ls", args={"path": f"dir{k}"}), ToolResult(tool="ls", output=f"file{k}")]
    for _ in range(reps):
        events += [
            ToolCall(tool=tool, args={"command": "make test"}),
            ToolResult(tool=tool, output=output, exit_code=1),
        ]
    return events


def clean_events(n: int) -> list[Event]:
    return [
        ToolCall(tool="read", args={"path": f"f{k}.py"}) if k % 2 == 0 else ToolResult(tool="read", output=f"text {k}")
        for k in range(n)
    ]


def scanned(runs: Sequence[Run]) -> list[tuple[Run, RunReport]]:
    return list(scan_with_runs(preset("default"), runs))


def verdict(index: int, action: str = "nudge", pattern: str = "repeat", start: int | None = None) -> Verdict:
    return Verdict(action=action, index=index, pattern=pattern, count=3, level=1, loop_start=start)  # type: ignore[arg-type]


def corpus_runs(n: int) -> list[Run]:
    if not JAVA.exists():
        pytest.skip(f"the shared corpus is not beside the repository ({CORPUS})")
    return list(itertools.islice(read_runs([str(JAVA)]), n))


# -- the API ------------------------------------------------------------------------------------------------------


def test_user_strings_are_escaped_everywhere() -> None:
    run = Run(id=EVIL, events=looping_events(tool=EVIL_TOOL, output=EVIL_OUTPUT), source=EVIL, meta={"model": EVIL})
    report = HtmlReport()
    for pair in scanned([run]):
        report.add(*pair)
    assert report.looping == 1
    report.add_sweep(EVIL, [(EVIL, 0.5, 0.1)])
    page = report.render(title=EVIL, preset=EVIL)
    for raw in (EVIL, EVIL_TOOL, "alert(3)</script>", "<!-- done", 'onerror="alert'):
        assert raw not in page
    assert html.escape(EVIL) in page
    assert page.count("<script") == 2  # the data block and the page's own script
    parsed = parse(page)
    data = parsed.data()
    assert data["runs"][0]["id"] == EVIL
    assert data["runs"][0]["source"] == EVIL
    labels = [s[3] for s in data["runs"][0]["steps"]]
    assert any(EVIL_TOOL in label for label in labels)
    assert any("alert(3)" in label for label in labels)
    rows = parsed.by_class("run-row")
    assert rows and rows[0]["data-id"] == EVIL  # attribute values come back intact


def test_totals() -> None:
    usage = [Usage(cost=0.5), Usage(cost=0.25), Usage(cost=1.0)]
    # a looping run: events 0..11, a loop over steps 2..6 (two verdicts) and another at 9; usage at 3, 7, 9
    looping_events_: list[Event] = [ToolCall(tool="t", args={"k": i}) for i in range(12)]
    looping_events_[3], looping_events_[7], looping_events_[9] = usage
    runs_and_reports = [
        (
            Run(id="a", events=looping_events_, source="src1", meta={"labels": {"meta": {"model": "m1"}}}),
            RunReport(
                id="a",
                events=12,
                verdicts=[
                    verdict(4, "nudge", "repeat", start=2),
                    verdict(6, "stop", "error_retry", start=3),
                    verdict(9, "nudge", "cycle", start=9),
                ],
            ),
        ),
        (
            Run(id="b", events=clean_events(5), source="src1", meta={"labels": {"meta": {"model": "m2"}}}),
            RunReport(id="b", events=5),
        ),
        (
            Run(id="c", events=clean_events(7), source="src2"),
            RunReport(id="c", events=7, verdicts=[verdict(5, "block", "repeat", start=1)]),
        ),
        (Run(id="d", events=[Usage(cost=2.0)], source=None), RunReport(id="d", events=1)),
    ]
    report = HtmlReport()
    for run, run_report in runs_and_reports:
        report.add(run, run_report)
    assert (report.runs, report.events, report.looping, report.stopped, report.verdicts) == (4, 25, 2, 1, 4)
    assert report.by_pattern == {"repeat": 2, "error_retry": 1, "cycle": 1}
    assert report.verdicts_by_pattern == {"repeat": 2, "error_retry": 1, "cycle": 1}
    assert report.by_action == {"stop": 1, "block": 1}
    assert report.source_runs == {"src1": 2, "src2": 1, "(unknown)": 1}
    assert report.source_loops == {"src1": 1, "src2": 1}
    assert report.model_runs == {"m1": 1, "m2": 1}
    assert report.model_loops == {"m1": 1}
    # run a: [2, 6] and [9, 9] -> 5 + 1 steps; run c: [1, 5] -> 5 steps
    assert report.turns == 11
    # cost inside loops: 0.5 (step 3) + 1.0 (step 9); 0.25 at step 7 is outside; 2.0 in a run without loops
    assert report.loop_cost == pytest.approx(1.5)
    assert report.cost == pytest.approx(3.75)
    kept = report.kept_runs()
    assert [v.id for v in kept] == ["a", "c"]  # a stop ranks above a block
    assert [(e.start, e.end, e.action, e.patterns) for e in kept[0].episodes] == [
        (2, 6, "stop", ["repeat", "error_retry"]),
        (9, 9, "nudge", ["cycle"]),
    ]
    parsed = parse(report.render(preset="default"))
    stats = {a["data-stat"] for a in parsed.by_class("card")}
    assert {"runs", "runs-with-loops", "runs-stopped", "steps-inside-loops", "cost-inside-loops"} <= stats
    assert parsed.by_id("chart-model") is not None
    assert {b["data-label"]: b["data-value"] for b in parsed.by_class("bar")}["repeat"] == "2"


def test_runs_without_verdicts_are_kept_up_to_max_clean() -> None:
    report = HtmlReport(max_clean=10)
    runs = [Run(id=f"clean{k}", events=clean_events(40), source="s") for k in range(30)]
    for run, run_report in scanned(runs):
        assert not run_report.verdicts
        report.add(run, run_report)
    assert report.runs == 30 and report.events == 1200 and report.looping == 0
    assert report.kept_runs() == []
    assert [v.id for v in report.clean_runs()] == [f"clean{k}" for k in range(10)]  # the first ones
    page = report.render()
    parsed = parse(page)
    assert len(parsed.by_class("timeline")) == 10
    assert {a["data-action"] for a in parsed.by_class("run-row")} == {"clean"}
    assert "10 of 30 runs without a loop are kept" in page
    data = parsed.data()
    assert all(run["action"] == "clean" and run["steps"] for run in data["runs"])


def test_memory_stays_flat_over_many_runs_without_loops() -> None:
    report = HtmlReport(max_clean=0)
    refs: list[weakref.ref[Run]] = []
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(3000):
            run = Run(id=f"run-{k:05d}", events=clean_events(60), source=f"source-{k % 3}")
            if k % 500 == 0:
                refs.append(weakref.ref(run))
            report.add(run, RunReport(id=run.id, events=len(run.events), source=run.source))
        del run
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert report.runs == 3000 and report.events == 180_000 and report.looping == 0
    assert all(ref() is None for ref in refs), "the report holds on to runs"
    assert kept < 100_000, f"{kept} bytes kept for 3,000 runs without loops"


def test_only_the_worst_runs_are_drawn() -> None:
    report = HtmlReport(max_runs=5, top=3)
    runs = []
    for k in range(23):
        reps = 3 + k % 7  # more repetitions: more verdicts, up to a stop
        runs.append(Run(id=f"run-{k:02d}", events=looping_events(reps=reps), source="s"))
    pairs = scanned(runs)
    for run, run_report in pairs:
        report.add(run, run_report)
    looping = [r for _, r in pairs if r.verdicts]
    assert report.looping == len(looping) > 5
    kept = report.kept_runs()
    assert len(kept) == 5
    expected = sorted(looping, key=lambda r: (-max(v.severity for v in r.verdicts), -len(r.verdicts), r.id))[:5]
    assert [v.id for v in kept] == [r.id for r in expected]
    parsed = parse(report.render())
    clean = len(pairs) - len(looping)
    assert len(parsed.by_class("timeline")) == 5 + clean
    assert len([r for r in parsed.by_class("run-row-t") if r["data-action"] != "clean"]) == 5
    note = parsed.by_id("cap-note")
    assert note is not None and note["data-drawn"] == "5" and note["data-looping"] == str(len(looping))


def test_a_long_run_keeps_only_the_steps_around_its_loops() -> None:
    events: list[Event] = clean_events(400) + looping_events(reps=8)[7:] + clean_events(200)
    run = Run(id="long", events=events)
    report = HtmlReport(max_steps=100, context=5)
    ((run, run_report),) = scanned([run])
    assert run_report.verdicts
    report.add(run, run_report)
    (view,) = report.kept_runs()
    assert view.partial
    lo = min(v.loop_start if v.loop_start is not None else v.index for v in run_report.verdicts) - 5
    hi = max(v.index for v in run_report.verdicts) + 5
    assert view.steps and all(lo <= s.record <= hi for s in view.steps)
    assert len(view.steps) < 60
    assert view.length == len(events)  # the axis still spans the whole run


def test_repeated_calls_are_highlighted() -> None:
    report = HtmlReport()
    for pair in scanned([Run(id="r", events=looping_events(reps=6))]):
        report.add(*pair)
    data = parse(report.render()).data()
    (run,) = data["runs"]
    steps = {s[0]: s for s in run["steps"]}
    assert run["verdicts"]
    for v in run["verdicts"]:
        assert v["hl"], v
        assert all(steps[p][1] == "call" and steps[p][2] == "bash" for p in v["hl"])
    assert run["episodes"] and run["episodes"][0]["start"] <= run["verdicts"][0]["index"]


def test_one_step_axis_for_verdicts_episodes_and_steps() -> None:
    # every record gave two events (a call and its result): the timeline, the verdicts and the episodes all count
    # the user's steps (records), never events
    events: list[Event] = []
    for k in range(6):
        events += [ToolCall(tool="t", args={"n": k % 2}), ToolResult(tool="t", output="same")]
    run = Run(id="x", events=events, indices=[k // 2 for k in range(12)])
    run_report = RunReport(id="x", events=12, verdicts=[verdict(4, "block", "cycle", start=1)])
    report = HtmlReport()
    report.add(run, run_report)
    parsed = parse(report.render())
    data = parsed.data()
    (run_data,) = data["runs"]
    assert run_data["length"] == 6  # six steps, twelve events
    (v,) = run_data["verdicts"]
    assert (v["index"], v["start"]) == (4, 1)
    (episode,) = run_data["episodes"]
    assert (episode["start"], episode["end"]) == (1, 4)
    assert [s[0] for s in run_data["steps"]] == [k // 2 for k in range(12)]
    (svg,) = parsed.by_class("timeline")
    assert svg["data-steps"] == "6"
    (mark,) = parsed.by_class("verdict-mark")
    unit = 1000 / 6
    assert float(mark["x"]) + float(mark["width"]) / 2 == pytest.approx(4.5 * unit, abs=0.01)  # step 4's slot
    (shade,) = parsed.by_class("episode")
    assert float(shade["x"]) == pytest.approx(1 * unit, abs=0.01)
    assert float(shade["width"]) == pytest.approx(4 * unit, abs=0.01)  # steps 1 to 4


def test_long_names_are_cut_in_the_middle_and_kept_whole_on_hover() -> None:
    name = "swe_agent_java/20240825_SWE-agent_doubao-pro-128k/fasterxml__jackson-databind-3621"
    shown = middle_ellipsis(name)
    assert len(shown) == 64 and "…" in shown
    assert shown.startswith("swe_agent_java/") and shown.endswith("jackson-databind-3621")
    report = HtmlReport()
    report.add(Run(id=name, events=looping_events()), RunReport(id=name, events=30, verdicts=[verdict(20)]))
    parsed = parse(report.render())
    (cell,) = [a for _, a in parsed.tags if "run-id" in a.get("class", "").split() and a.get("data-v")]
    assert cell["title"] == name and cell["data-v"] == name


def test_costs_carry_their_currency() -> None:
    events: list[Event] = [*looping_events(), Usage(cost=1.25)]
    report = HtmlReport(currency="EUR")
    report.add(Run(id="r", events=events), RunReport(id="r", events=len(events), verdicts=[verdict(20, start=10)]))
    page = report.render()
    assert "1.25 EUR in all" in page and "cost in loops (EUR)" in page
    assert parse(page).data()["currency"] == "EUR"


def test_full_text_is_kept_near_loops_and_cut() -> None:
    long_output = "x" * 5000
    events = looping_events(output=long_output)
    ((run, run_report),) = scanned([Run(id="r", events=events)])
    report = HtmlReport()
    report.add(run, run_report)
    data = parse(report.render()).data()
    texts = [s[5] for s in data["runs"][0]["steps"] if s[5]]
    assert texts, "no step keeps its text"
    assert any(t.startswith("x" * 2000) and "3,000 more characters" in t for t in texts)
    assert all(len(s[3]) <= 80 for s in data["runs"][0]["steps"])


def test_sweep_chart() -> None:
    report = HtmlReport()
    report.add_sweep(
        "repeat.threshold",
        [SweepPoint(3, 0.9, 0.2), (4, 0.8, 0.1), {"value": 5, "recall": 0.6, "false_alarms": 0.05}],
    )
    parsed = parse(report.render())
    (chart,) = [a for _, a in parsed.tags if "sweep" in a.get("class", "").split()]
    assert chart["data-param"] == "repeat.threshold"
    assert [p["data-value"] for p in parsed.by_class("sweep-point")] == ["3", "4", "5"]
    assert parsed.by_class("sweep-line")


def test_model_of() -> None:
    assert model_of({"model": "a"}) == "a"
    assert model_of({"labels": {"model": "b"}}) == "b"
    assert model_of({"labels": {"meta": {"model": "c"}}}) == "c"
    assert model_of({"labels": {"meta": "not a mapping"}}) is None
    assert model_of({}) is None


def test_scan_with_runs_pairs_each_report_with_its_run() -> None:
    runs = [Run(id=f"r{k}", events=looping_events(reps=k)) for k in range(5)]
    pairs = scanned(runs)
    assert [(run.id, report.id) for run, report in pairs] == [(f"r{k}", f"r{k}") for k in range(5)]
    assert [r.verdicts for _, r in pairs] == [r.verdicts for r in scan_runs(preset("default"), runs)]


def test_page_from_corpus_runs(tmp_path: Path) -> None:
    report = HtmlReport()
    runs = corpus_runs(60)
    for pair in scan_with_runs(preset("default"), runs):
        report.add(*pair)
    path = tmp_path / "report.html"
    report.write(path, preset="default")
    page = path.read_text(encoding="utf-8")
    parsed = parse(page)
    assert report.runs == 60 and report.looping > 0
    assert parsed.by_id("summary") is not None and parsed.by_id("detail") is not None
    assert len(parsed.by_class("timeline")) == report.looping + len(report.clean_runs())
    assert parsed.by_class("episode") and parsed.by_class("verdict-mark")
    assert {a["data-action"] for a in parsed.by_class("verdict-mark")} <= set(ACTION_COLOURS)
    assert parsed.by_id("chart-pattern") is not None and parsed.by_id("chart-source") is not None
    assert parsed.by_id("chart-model") is not None  # the corpus's labels name the model
    links = [v for _, a in parsed.tags for k, v in a.items() if k in ("src", "href", "xlink:href", "action")]
    assert all(v.startswith("data:") for v in links), links  # nothing to fetch
    data = parsed.data()
    assert all(len(s[3]) <= 80 for run in data["runs"] for s in run["steps"])


# -- the page in a real browser ---------------------------------------------------------------------------------


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG layout"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind_ = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind_ == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind_ == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind_ == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind_ == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3))
    return width, height, rows


def colour_count(rows: Sequence[bytes], hex_colour: str, tolerance: int = 12) -> int:
    target = bytes.fromhex(hex_colour.lstrip("#"))
    count = 0
    for row in rows:
        for i in range(0, len(row), 3):
            if all(abs(row[i + k] - target[k]) <= tolerance for k in range(3)):
                count += 1
    return count


def test_page_in_headless_chromium(tmp_path: Path) -> None:
    """Triage by clicking through the page: filters, search, sorting, clean runs, a run's panel with its full name,
    its steps and their full text."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    report = HtmlReport()
    long_text = "Traceback (most recent call last): " + "frame " * 250 + "END-OF-OUTPUT"
    runs = [
        *corpus_runs(40),
        Run(id=EVIL, events=looping_events(tool=EVIL_TOOL, output=EVIL_OUTPUT), source=EVIL),
        Run(id="wordy", events=looping_events(tool="pytest_runner", output=long_text), source="mine"),
    ]
    for pair in scan_with_runs(preset("default"), runs):
        report.add(*pair)
    report.add_sweep("repeat.threshold", [(2, 0.95, 0.3), (3, 0.85, 0.12), (4, 0.7, 0.04), (5, 0.6, 0.02)])
    page_path = tmp_path / "report.html"
    report.write(page_path, preset="default")
    url = page_path.resolve().as_uri()
    looping, clean = report.looping, len(report.clean_runs())
    assert looping >= 3 and clean >= 3

    console: list[str] = []
    requests: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def on_console(message: ConsoleMessage) -> None:
                if message.type in ("error", "warning"):
                    console.append(f"{message.type}: {message.text}")

            def on_dialog(dialog: Dialog) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss()

            def on_error(error: Error) -> None:
                console.append(f"page error: {error}")

            def on_request(request: Request) -> None:
                requests.append(request.url)

            page.on("console", on_console)
            page.on("pageerror", on_error)
            page.on("request", on_request)
            page.on("dialog", on_dialog)
            page.goto(url, wait_until="load")

            for selector in ("#summary", "#charts", "#chart-pattern svg", "#chart-source svg", "#legend", "#runs"):
                assert page.locator(selector).first.is_visible(), selector
            table_rows = page.locator("table.runs tbody tr:visible")
            timelines = page.locator(".run-row:visible svg.timeline")
            assert table_rows.count() == looping  # runs with loops first
            assert timelines.count() == looping
            assert page.locator("#f-count").text_content() == f"{looping} of {looping + clean} runs shown"
            box = timelines.first.bounding_box()
            assert box is not None and box["width"] > 500 and box["height"] >= 20
            assert page.locator("svg.timeline .episode").first.is_visible()
            assert page.locator("svg.timeline .verdict-mark").first.is_visible()
            assert page.locator("#sweeps .sweep-point").count() == 4
            assert page.locator("#detail").is_hidden()
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot))

            # a long run name: cut in the middle on the page, whole on hover and in the panel
            long_row = page.locator("table.runs tbody tr:visible td.run-id", has_text="…").first
            full = long_row.get_attribute("title")
            assert full is not None and len(full) > 64 and "…" in (long_row.text_content() or "")
            assert full.startswith((long_row.text_content() or "").split("…")[0])
            long_row.click()
            detail = page.locator("#detail")
            detail.wait_for(state="visible", timeout=5_000)
            assert page.locator("#detail-title").text_content() == full
            assert page.locator("#detail .episode-block").count() >= 1
            highlighted = page.locator("#detail tr.hl")
            assert highlighted.count() >= 2 and highlighted.first.is_visible()
            assert page.locator("#detail tr.at-verdict").count() >= 1
            clicked = tmp_path / "report-detail.png"
            page.screenshot(path=str(clicked))
            page.locator("#detail-close").click()
            assert detail.is_hidden()

            # a step's full text opens with a click
            page.locator('.run-row[data-id="wordy"]').click()
            details = page.locator("#detail details.text", has=page.locator("pre", has_text="END-OF-OUTPUT")).first
            pre = details.locator("pre")
            assert pre.is_hidden() and "Traceback" in (details.locator("summary").text_content() or "")
            details.locator("summary").click()
            assert pre.is_visible() and "END-OF-OUTPUT" in (pre.text_content() or "")
            page.locator("#detail-close").click()

            # search by tool, then by run id
            page.locator("#f-search").fill("pytest_runner")
            assert [r.get_attribute("data-id") for r in table_rows.all()] == ["wordy"]
            page.locator("#f-search").fill(EVIL[:12])
            assert [r.get_attribute("data-id") for r in table_rows.all()] == [EVIL]
            page.locator(f'.run-row[data-id="{EVIL.replace(chr(34), chr(92) + chr(34))}"]').click()
            assert page.locator("#detail-title").text_content() == EVIL
            assert page.locator("#detail td.lbl", has_text="alert(3)").count() >= 1  # shown as text
            page.locator("#detail-close").click()
            page.locator("#f-search").fill("")

            # filter by pattern, by source, by action; clean runs are reachable
            patterns = [o for o in page.locator("#f-pattern option").all_inner_texts() if o != "any pattern"]
            page.locator("#f-pattern").select_option(patterns[0])
            shown = table_rows.all()
            assert shown and all(patterns[0] in (r.get_attribute("data-patterns") or "").split() for r in shown)
            page.locator("#f-pattern").select_option("")
            page.locator("#f-source").select_option("mine")
            assert [r.get_attribute("data-id") for r in table_rows.all()] == ["wordy"]
            page.locator("#f-source").select_option("")
            page.locator("#f-show").select_option("clean")
            assert table_rows.count() == clean and timelines.count() == clean
            assert {r.get_attribute("data-action") for r in table_rows.all()} == {"clean"}
            table_rows.first.click()
            assert page.locator("#detail h3").first.text_content().startswith("No loop found")  # type: ignore[union-attr]
            assert page.locator("#detail tr.step-row").count() >= 1
            page.locator("#detail-close").click()
            page.locator("#f-show").select_option("")
            assert table_rows.count() == looping + clean

            # sort by steps, descending then ascending
            header = page.locator("table.runs th", has_text="steps").first
            header.click()
            steps = [int(r.locator("td").nth(3).get_attribute("data-v") or 0) for r in table_rows.all()]
            assert steps == sorted(steps, reverse=True) and header.get_attribute("aria-sort") == "descending"
            header.click()
            steps = [int(r.locator("td").nth(3).get_attribute("data-v") or 0) for r in table_rows.all()]
            assert steps == sorted(steps)
        finally:
            browser.close()

    assert console == [], console
    assert dialogs == [], "a script in the data ran"
    assert set(requests) == {url}, requests

    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 900)
    header_pixels = colour_count(rows[:40], "#1f2937")
    assert header_pixels > 1280 * 30, "the page header is not drawn"
    _, _, detail_rows = png_pixels(clicked.read_bytes())
    highlight = colour_count(detail_rows, "#ffe8cc", tolerance=4)
    assert highlight > 1000, "no highlighted step in the detail panel"
    keep = os.environ.get("LOOPWATCH_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")
        shutil.copy(clicked, Path(keep) / "report-detail.png")
