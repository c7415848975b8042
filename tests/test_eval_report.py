"""``loopwatch eval --html``: an evaluation report, not a scan report with another title. It has the metrics overall,
per source and per pattern, every missed episode and every false alarm listed (each a link to the run's steps at
that place), every labelled run (also those with a missed loop and no verdict), and the labelled spans drawn on each
timeline beside the verdicts. Checked in the page's HTML and by clicking through it in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM_ARGS, chromium
from loopwatch.cli import main
from test_report import parse

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

LABELS = [
    # the A-B-A-B agent: labelled stuck in a cycle, caught
    {
        "id": "examples/abab-agent",
        "verdict": "stuck",
        "episodes": [
            {"start": 0, "detectable_at": 10, "end": 20, "unit_len": 2, "pattern": "cycle", "reps": 5, "note": "A-B"}
        ],
        "confidence": "high",
        "note": "",
    },
    # the batch reader: labelled (for the test's sake) with a repeat nothing fires on: a missed episode
    {
        "id": "examples/batch-reader",
        "verdict": "recovered",
        "episodes": [
            {"start": 4, "detectable_at": 8, "end": 12, "unit_len": 1, "pattern": "repeat", "note": "reads again"}
        ],
    },
    # the repeated reply: labelled clean, and nudged: a false alarm
    {"id": "examples/repeated-reply", "verdict": "clean", "episodes": []},
    # the polling agent: clean, and nothing fires
    {"id": "examples/polling-agent", "verdict": "clean", "episodes": []},
]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eval")
    labels = folder / "labels.jsonl"
    labels.write_text("".join(json.dumps(label) + "\n" for label in LABELS), encoding="utf-8")
    out = folder / "eval.html"
    code = main(["eval", str(EXAMPLES), "--labels", str(labels), "--html", str(out), "--no-config"])
    assert code == 0
    return out


def _data(page: Path) -> tuple[Any, dict[str, Any]]:
    parsed = parse(page.read_text(encoding="utf-8"))
    return parsed, parsed.data()


def test_the_page_is_an_evaluation_report(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    parsed, _ = _data(page)
    assert "<title>loopwatch eval</title>" in text
    for section in ("quality", "metrics-overall", "metrics-pattern", "metrics-source", "missed", "alarms"):
        assert parsed.by_id(section) is not None, section
    assert "Missed episodes (1)" in text and "False alarms (1)" in text
    quality = text.split('id="quality"')[1].split("</section>")[0]
    assert "episode recall" in quality and "50.0%" in quality  # 1 of 2 episodes caught
    assert "false alarm rate (clean runs)" in quality and "1 of 2" in quality
    assert '<td class="">examples</td>' in quality  # per source (the ids' prefix)


def test_every_labelled_run_is_on_the_page_with_its_labelled_spans(page: Path) -> None:
    parsed, data = _data(page)
    runs = {run["id"]: run for run in data["runs"]}
    assert set(runs) == {label["id"] for label in LABELS}  # also the clean ones and the missed one
    assert runs["examples/batch-reader"]["verdicts"] == []
    assert runs["examples/batch-reader"]["labels"] == [
        {"start": 4, "end": 12, "detectable_at": 8, "pattern": "repeat", "caught": False, "note": "reads again"}
    ]
    assert runs["examples/abab-agent"]["labels"][0]["caught"] is True
    assert runs["examples/batch-reader"]["label_verdict"] == "recovered"
    spans = {(a["data-start"], a["data-end"], a["class"]) for a in parsed.by_class("label-span")}
    assert spans == {("0", "20", "label-span caught"), ("4", "12", "label-span missed")}
    rows = {a["data-id"]: a for a in parsed.by_class("run-row")}
    assert "missed" in rows["examples/batch-reader"]["data-flags"].split()
    assert "alarm" in rows["examples/repeated-reply"]["data-flags"].split()


def test_missed_episodes_and_false_alarms_link_to_their_runs(page: Path) -> None:
    parsed, data = _data(page)
    links = parsed.by_class("issue-link")
    assert len(links) == 2
    by_run = {data["runs"][int(a["data-run"])]["id"]: a for a in links}
    assert by_run["examples/batch-reader"]["data-step"] == "4"  # the missed episode's start
    repeated = next(r for r in data["runs"] if r["id"] == "examples/repeated-reply")
    assert by_run["examples/repeated-reply"]["data-step"] == str(repeated["verdicts"][0]["index"])


def test_clicking_through_the_evaluation_report(page: Path, tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            tab = browser.new_page(viewport={"width": 1300, "height": 900})
            tab.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            tab.on("pageerror", lambda e: problems.append(str(e)))
            tab.goto(page.resolve().as_uri(), wait_until="load")
            for selector in ("#quality", "#metrics-overall", "#metrics-source", "#missed", "#alarms", "#runs"):
                assert tab.locator(selector).first.is_visible(), selector
            rows = tab.locator("table.runs tbody tr:visible")
            assert rows.count() == 4  # every labelled run, clean ones too
            assert tab.locator("svg.timeline .label-span.missed").first.is_visible()

            tab.locator("#missed .issue-link").first.click()
            tab.locator("#detail").wait_for(state="visible", timeout=5_000)
            assert tab.locator("#detail-title").text_content() == "examples/batch-reader"
            block = tab.locator("#detail .episode-block").first
            assert (block.locator("h3").text_content() or "").startswith("Labelled loop 1: steps 4–12")
            assert block.locator(".label-chip.missed").is_visible()
            assert block.locator("tr.step-row").count() >= 9  # steps 4-12 and their context
            tab.locator("#detail-close").click()

            tab.locator("#alarms .issue-link").first.click()
            assert tab.locator("#detail-title").text_content() == "examples/repeated-reply"
            assert tab.locator("#detail .verdict-list .badge.nudge").first.is_visible()
            tab.locator("#detail-close").click()

            tab.locator("#f-show").select_option("missed")
            assert [r.get_attribute("data-id") for r in rows.all()] == ["examples/batch-reader"]
            tab.locator("#f-show").select_option("alarm")
            assert [r.get_attribute("data-id") for r in rows.all()] == ["examples/repeated-reply"]
            tab.screenshot(path=str(tmp_path / "eval.png"))
        finally:
            browser.close()
    assert problems == []
