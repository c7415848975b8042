"""Tests of the corpus tools against small git repositories laid out like the real sources.

Part of ``make test``; also runs alone with ``python3 tests/test_corpus_tools.py`` (standard library only). Each
test builds a real git repository in a temporary directory (plain ``git`` commands), runs a converter's ``main``
on it exactly as from the command line, and checks the written trajectories step by step, the skip messages for
broken files and the summary counts.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1] / "tools" / "corpus"
sys.path.insert(0, str(HERE))

import check_corpus  # noqa: E402
import convert_autocoderover  # noqa: E402
import convert_repolaunch  # noqa: E402
import convert_swe_agent_py  # noqa: E402
import view_run  # noqa: E402
from corpus_common import repetition_signals, stratified_sample  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def make_repo(root: Path, files: dict[str, str]) -> str:
    """A git repository holding ``files``; returns the path of its git directory."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "fixture")
    return str(root / ".git")


def drop_blob(root: Path, rel: str) -> None:
    """Delete a committed file's object, as in a snapshot that lacks large blobs."""
    sha = git(root, "rev-parse", f"HEAD:{rel}").strip()
    (root / ".git" / "objects" / sha[:2] / sha[2:]).unlink()


def run_main(main: Any, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def read_records(path: str) -> dict[str, dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return {rec["id"]: rec for rec in map(json.loads, handle)}


def shape(steps: list[dict[str, Any]]) -> list[tuple[str, str | None, bool | None]]:
    return [(s["role"], s["tool"], s["is_error"]) for s in steps]


AI = "================================== Ai Message =================================="
HUMAN = "================================ Human Message ================================="


def stamp(n: int) -> str:
    return f"2026-04-30 03:{n // 60:02d}:{n % 60:02d},000 - "


SETUP_LOG = "\n".join(
    [
        stamp(0) + "Using language: rust",
        stamp(1) + "----------Start setup conversation----------",
        stamp(2),
        AI,
        "",
        "Thought: build first",
        "Action: <command>cargo build</command>",
        "",
        " -- <step_cost> input_tok: 10, output_tok: 2, cost_usd: 0.1 </step_cost>",
        "",
        stamp(3),
        HUMAN,
        "",
        "Observation:",
        "cargo build",
        "error: linking failed",
        stamp(3) + "twister - DEBUG - a timestamped line that belongs to the output",
        "",
        "root@x:/testbed $",
        "",
        "exit code: 101",
        "",
        stamp(4),
        AI,
        "",
        "I am not sure what to do next.",
        "",
        stamp(5),
        HUMAN,
        "",
        "Observation:",
        "Please using following format after `Action: ` to make a valid action choice:",
        stamp(6),
        AI,
        "",
        "Thought: the build is fine now",
        "Action: <stop></stop>",
        "",
        stamp(7) + "----------End setup conversation----------",
        stamp(8) + "----------Start verify conversation----------",
        stamp(9) + AI,
        "",
        "<command>cargo test</command>",
        "",
        stamp(10) + HUMAN,
        "",
        "Observation:",
        "cargo test",
        "test result: ok",
        "root@x:/testbed $",
        "",
        "exit code: 0",
        "",
        stamp(11) + AI,
        "",
        "<issue>None</issue>",
        "",
        stamp(12) + HUMAN,
        "",
        "Observation:",
        "",
        stamp(13) + "The setup is successful",
        stamp(14) + "----------End verify conversation----------",
        "",
    ]
)

ORGANIZE_LOG = "\n".join(
    [
        stamp(0) + "----------Start rebuild conversation----------",
        stamp(1),
        AI,
        "",
        "Thought: rebuild only",
        "Action: <submit>cargo build</submit>",
        "",
        stamp(2) + "Agent submitted commands: cargo build",
        stamp(3) + "Verification PASSED - LLM determined commands executed successfully",
        stamp(4) + "----------End rebuild organization conversation----------",
        stamp(5) + "----------Start test conversation----------",
        stamp(6),
        AI,
        "",
        "<submit><test_command>cargo test</test_command><print_command>cat r.log</print_command>"
        "<parser>parsing success</parser></submit>",
        "",
        stamp(7),
        HUMAN,
        "",
        "Observation:",
        "You have not yet provided a valid parser script. Please provide a valid parser script.",
        stamp(8),
        AI,
        "",
        "<python>def parser(log):\n    return {'a': 'pass'}</python>",
        "",
        stamp(9),
        HUMAN,
        "",
        "Observation:",
        "",
        "Below is the execution result of your Python script:",
        '{"a": "pass"}',
        stamp(10) + "!!! Exception: 'NoneType' object has no attribute 'send_command'",
        "",
    ]
)

BROKEN_LOG = "\n".join([stamp(0) + "Using language: rust", stamp(1), AI, "", "<command>ls</command>", ""])


def repolaunch_files() -> dict[str, str]:
    config = {"model_config": {"model": "azure/gpt-5.2-20251211"}, "os": "linux"}
    result = {"completed": True, "organize_completed": False, "exception": "boom"}
    return {
        "rust/config.json": json.dumps(config),
        "rust/playground/own__repo-1/setup.log": SETUP_LOG,
        "rust/playground/own__repo-1/organize.log": ORGANIZE_LOG,
        "rust/playground/own__repo-1/result.json": json.dumps(result),
        "rust/playground/own__repo-2/setup.log": BROKEN_LOG,
        "rust/playground/own__repo-3/setup.log": SETUP_LOG,
        "rust/playground/own__repo-3/result.json": '{"completed": tru',
        "rust/playground/own__repo-4/setup.log": SETUP_LOG.replace("cargo build", "cargo build --locked"),
    }


class RepoLaunchTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name) / "src"
        self.mirror = make_repo(root, repolaunch_files())
        drop_blob(root, "rust/playground/own__repo-4/setup.log")
        self.out = os.path.join(self.tmp.name, "rl.jsonl.gz")
        argv = ["--mirror", self.mirror, "--commit", "HEAD", "--out", self.out, "--sample", "0"]
        self.code, self.stdout, self.stderr = run_main(convert_repolaunch.main, argv)
        self.records = read_records(self.out)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_setup_log_maps_calls_results_complaints_and_conversations(self) -> None:
        steps = self.records["repolaunch/rust/own__repo-1/setup"]["steps"]
        self.assertEqual(
            shape(steps),
            [
                ("system", None, None),
                ("assistant", "command", None),
                ("tool", "command", True),
                ("assistant", None, None),
                ("user", None, True),
                ("assistant", "stop", None),
                ("system", None, None),
                ("assistant", "command", None),
                ("tool", "command", False),
                ("assistant", "issue", None),
                ("tool", "issue", None),
            ],
        )
        self.assertEqual(steps[0]["text"], "Start setup conversation")
        self.assertIs(steps[0]["new_context"], True)  # a fresh agent context: loop tracking starts afresh there
        self.assertEqual(steps[1]["args"], {"command": "cargo build"})
        self.assertEqual(steps[1]["text"], "Thought: build first")  # no action element, no cost footer
        self.assertIn("twister - DEBUG", steps[2]["text"])  # a timestamped output line stays in the output
        self.assertTrue(steps[2]["text"].endswith("exit code: 101"))
        self.assertEqual(steps[9]["args"], {"issue": "None"})

    def test_organize_log_submit_results_and_harness_exception(self) -> None:
        rec = self.records["repolaunch/rust/own__repo-1/organize"]
        steps = rec["steps"]
        self.assertEqual(
            shape(steps),
            [
                ("system", None, None),
                ("assistant", "submit", None),
                ("tool", "submit", False),
                ("system", None, None),
                ("assistant", "submit", None),
                ("tool", "submit", True),
                ("assistant", "python", None),
                ("tool", "python", False),
                ("system", None, None),
            ],
        )
        self.assertEqual(steps[1]["args"], {"command": "cargo build"})
        self.assertTrue(steps[2]["text"].startswith("Verification PASSED"))
        self.assertEqual(
            steps[4]["args"], {"test_command": "cargo test", "print_command": "cat r.log", "parser": "parsing success"}
        )
        self.assertTrue(steps[8]["text"].startswith("!!! Exception"))
        self.assertEqual(rec["labels"]["outcome"]["organize_completed"], False)
        meta = rec["labels"]["meta"]
        self.assertEqual((meta["phase"], meta["model"], meta["stratum"]), ("organize", "gpt-5.2-20251211", "uniform"))

    def test_broken_and_missing_logs_are_skipped_with_the_file_named(self) -> None:
        self.assertNotIn("repolaunch/rust/own__repo-2/setup", self.records)
        self.assertNotIn("repolaunch/rust/own__repo-4/setup", self.records)
        self.assertIn("skip: rust/playground/own__repo-2/setup.log:2: ai message before any conversation", self.stderr)
        self.assertIn("skip: rust/playground/own__repo-4/setup.log: the blob is missing from the mirror", self.stderr)
        self.assertIn("3 runs converted, 2 skipped", self.stdout)

    def test_malformed_result_json_leaves_the_outcome_unknown(self) -> None:
        outcome = self.records["repolaunch/rust/own__repo-3/setup"]["labels"]["outcome"]
        self.assertEqual((outcome["completed"], outcome["result_json"]), (None, "malformed"))
        self.assertIn("rust/playground/own__repo-3/result.json:1: malformed JSON", self.stderr)

    def test_output_passes_the_schema_check(self) -> None:
        code, out, _ = run_main(check_corpus.main, [self.out])
        self.assertEqual(code, 0, out)
        self.assertIn("all records pass", out)


def acr_thread() -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a software developer."},
        {"role": "user", "content": "<issue>Widget breaks</issue>"},
        {"role": "user", "content": "Based on the files, classes, methods, code statements ... search APIs"},
        {"role": "assistant", "content": "I will search for A and m."},
        {
            "role": "user",
            "content": 'Result of search_class("A"):\nFound 1 classes with name A.\n\n'
            'Result of search_method("m"):\nCould not find method m in the codebase.\n\n',
        },
        {"role": "user", "content": "Let's analyze collected context first"},
        {"role": "assistant", "content": "A looks relevant."},
        {"role": "user", "content": "Based on your analysis, answer below questions: ..."},
        {"role": "assistant", "content": "bug locations: A.m"},
        {"role": "user", "content": "The buggy locations is not precise. You may need to check ..."},
        {"role": "assistant", "content": "I cannot say more."},
        {"role": "user", "content": "The search API calls seem not valid. Please check the arguments ..."},
        {"role": "assistant", "content": "bug locations: A.run"},
        {"role": "user", "content": "Here are the code in buggy locations:\nFound 1 methods with name run in class A."},
        {"role": "user", "content": "Write a patch for the issue, based on the retrieved context."},
        {"role": "assistant", "content": "# modification 1\n<file>a.py</file>"},
        {"role": "user", "content": "Your edit could not be applied to the program. No match. Please try again."},
        {"role": "assistant", "content": "# modification 1\n<file>a.py</file> (again)"},
        {"role": "user", "content": "Extracted a patch. Since validation is disabled, ..."},
    ]


def acr_files() -> dict[str, str]:
    run_dir = "results/acr-run-1/applicable_patch/pkg__pkg-1_2024-04-04_15-19-06"
    bad_dir = "results/acr-run-1/raw_patch_but_unmatched/pkg__pkg-2_2024-04-04_16-00-00"
    lookup_fail = {"func_name": "search_method", "arguments": {"method_name": "A.m"}, "call_ok": False}
    lookup_ok = {"func_name": "search_method_in_class", "arguments": {"method_name": "run", "class_name": "A"}}
    layers = [
        [
            {"func_name": "search_class", "arguments": {"class_name": "A"}, "call_ok": True},
            {"func_name": "search_method", "arguments": {"method_name": "m"}, "call_ok": False},
        ],
        [lookup_fail],
        [],
        [{**lookup_ok, "call_ok": True}],
        [{"func_name": "write_patch", "arguments": {}, "call_ok": True}],
    ]

    def proxy(answer: dict[str, Any]) -> str:
        return json.dumps([[{"role": "assistant", "content": json.dumps(answer)}]])

    files = {
        f"{run_dir}/debug_agent_write_patch_1.json": json.dumps(acr_thread()[:17]),
        f"{run_dir}/debug_agent_write_patch_2.json": json.dumps(acr_thread()),
        f"{run_dir}/tool_call_layers.json": json.dumps(layers),
        f"{run_dir}/agent_proxy_1.json": proxy({"API_calls": [], "bug_locations": [{"class": "A", "method": "m"}]}),
        f"{run_dir}/agent_proxy_3.json": proxy({"API_calls": [], "bug_locations": [{"class": "A", "method": "run"}]}),
        f"{run_dir}/problem_statement.txt": "Widget breaks\nwhen clicked twice",
        f"{run_dir}/cost.json": json.dumps({"model": "gpt-4-0125-preview", "commit": "abc"}),
        f"{bad_dir}/debug_agent_write_patch_1.json": '[{"role": "system",\n "content": ',
    }
    for run in convert_autocoderover.RUNS:
        report = {"resolved": ["pkg__pkg-1"] if run == "acr-run-1" else [], "generated": [], "applied": []}
        files[f"results/{run}/new_eval_results/report.json"] = json.dumps(report)
    return files


class AutoCodeRoverTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.mirror = make_repo(Path(self.tmp.name) / "src", acr_files())
        self.out = os.path.join(self.tmp.name, "acr.jsonl.gz")
        argv = ["--mirror", self.mirror, "--commit", "HEAD", "--out", self.out, "--sample", "0"]
        self.code, self.stdout, self.stderr = run_main(convert_autocoderover.main, argv)
        self.records = read_records(self.out)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_rounds_calls_bug_locations_and_patch_feedback(self) -> None:
        rec = self.records["autocoderover/acr-run-1/pkg__pkg-1"]
        steps = rec["steps"]
        self.assertEqual(
            shape(steps),
            [
                ("assistant", "search_class", None),
                ("tool", "search_class", False),
                ("assistant", "search_method", None),
                ("tool", "search_method", True),
                ("user", None, None),
                ("assistant", None, None),
                ("user", None, None),
                ("assistant", "bug_locations", None),
                ("tool", "bug_locations", True),
                ("assistant", None, None),
                ("user", None, True),
                ("assistant", "bug_locations", None),
                ("tool", "bug_locations", False),
                ("user", None, None),
                ("assistant", None, None),
                ("user", None, True),
                ("assistant", None, None),
                ("user", None, None),
            ],
        )
        self.assertEqual(steps[0]["text"], "I will search for A and m.")  # the reply goes with the first call
        self.assertEqual(steps[2]["text"], "")
        self.assertEqual(steps[1]["text"], "Found 1 classes with name A.")
        self.assertEqual(steps[3]["text"], "Could not find method m in the codebase.")
        self.assertEqual(steps[2]["args"], {"method_name": "m"})
        self.assertEqual(steps[7]["args"], {"bug_locations": [{"class": "A", "method": "m"}]})
        self.assertEqual(steps[8]["harness_calls"][0]["arguments"], {"method_name": "A.m"})
        outcome, meta = rec["labels"]["outcome"], rec["labels"]["meta"]
        self.assertTrue(outcome["resolved"])
        self.assertEqual(
            (meta["rounds"], meta["patch_tries"], meta["thread_file"]), (4, 2, "debug_agent_write_patch_2.json")
        )
        self.assertEqual(rec["task"], "Widget breaks when clicked twice")

    def test_malformed_thread_is_skipped_with_file_and_line(self) -> None:
        self.assertIn(
            "skip: results/acr-run-1/raw_patch_but_unmatched/pkg__pkg-2_2024-04-04_16-00-00/"
            "debug_agent_write_patch_1.json:2: malformed JSON",
            self.stderr,
        )
        self.assertIn("1 runs converted, 1 skipped", self.stdout)


def swe_files() -> dict[str, str]:
    traj = {
        "environment": "swe_main",
        "trajectory": [
            {"action": "open a.py\n", "observation": "[File: a.py (3 lines total)]", "thought": "look"},
            {
                "action": "edit 1:1\nx = (\nend_of_edit\n",
                "observation": "Your proposed edit has introduced new syntax error(s).",
                "thought": "fix",
            },
            {"action": "python t.py\n", "observation": "ok\nTraceback (most recent call last):\n", "thought": "run"},
            {"action": "exit_cost", "observation": "Exited (autosubmitted)", "thought": "Exit due to cost limit"},
        ],
        "history": [
            {"role": "system", "content": "SETTING"},
            {"role": "user", "content": "ISSUE:\nBad thing\nhappens\n\nINSTRUCTIONS:\n..."},
        ],
        "info": {"exit_status": "submitted (exit_cost)", "model_stats": {"instance_cost": 2.0}},
    }
    files = {
        f"{convert_swe_agent_py.BASE}/cost_2_1/pkg__pkg-1.traj": json.dumps(traj),
        f"{convert_swe_agent_py.BASE}/cost_2_1/pkg__pkg-2.traj": '{"trajectory": [\n{"action": ',
    }
    for run in convert_swe_agent_py.RUNS:
        files[f"{convert_swe_agent_py.BASE}/{run}/final_report.json"] = json.dumps({"resolved": []})
        preds = [{"instance_id": "pkg__pkg-1", "model_patch": "", "model_name_or_path": "gpt4"}]
        files[f"{convert_swe_agent_py.BASE}/{run}/all_preds.json"] = json.dumps(preds)
    return files


class SweAgentTest(unittest.TestCase):
    def test_traj_mapping_exit_cost_and_skip(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            mirror = make_repo(Path(tmp) / "src", swe_files())
            out = os.path.join(tmp, "swe.jsonl.gz")
            argv = ["--mirror", mirror, "--commit", "HEAD", "--out", out, "--sample", "0"]
            _code, stdout, stderr = run_main(convert_swe_agent_py.main, argv)
            records = read_records(out)
        rec = records["swe_agent_py/cost_2_1/pkg__pkg-1"]
        steps = rec["steps"]
        self.assertEqual(
            shape(steps),
            [
                ("assistant", "open", None),
                ("tool", "open", None),
                ("assistant", "edit", None),
                ("tool", "edit", True),
                ("assistant", "python", None),
                ("tool", "python", True),
            ],
        )
        self.assertEqual(steps[2]["args"], {"command": "edit 1:1\nx = (\nend_of_edit"})
        self.assertEqual(steps[2]["text"], "fix")
        outcome = rec["labels"]["outcome"]
        self.assertEqual(
            (outcome["exit_action"], outcome["hit_cost_limit"], outcome["empty_patch"]), ("exit_cost", True, True)
        )
        self.assertEqual(rec["task"], "Bad thing happens")
        self.assertIn(f"skip: {convert_swe_agent_py.BASE}/cost_2_1/pkg__pkg-2.traj:2: malformed JSON", stderr)
        self.assertIn("1 runs converted, 1 skipped", stdout)


def call(tool: str, arg: str) -> dict[str, Any]:
    return {"role": "assistant", "text": "", "tool": tool, "args": {"command": arg}, "is_error": None}


def result(tool: str, text: str, is_error: bool | None = None) -> dict[str, Any]:
    return {"role": "tool", "text": text, "tool": tool, "args": None, "is_error": is_error}


class HeuristicAndSamplingTest(unittest.TestCase):
    def test_each_signal(self) -> None:
        repeat = [s for _ in range(3) for s in (call("ls", "x"), result("ls", "a"))]
        self.assertEqual(repetition_signals(repeat)["signals"], ["consecutive"])
        abab = [s for i in range(4) for s in (call("a" if i % 2 else "b", "x"), result("t", str(i)))]
        self.assertEqual(repetition_signals(abab)["signals"], ["alternation"])
        failing = [s for i in range(3) for s in (call("make", "x"), result("make", "boom", True), call("ls", str(i)))]
        self.assertEqual(repetition_signals(failing)["signals"], ["failing_retry"])
        varied_errors = [
            s for i in range(3) for s in (call("make", "x"), result("make", str(i), True), call("ls", str(i)))
        ]
        self.assertEqual(repetition_signals(varied_errors)["signals"], [])
        same_output = [
            s for i in range(5) for s in (call("pytest", "x"), result("pytest", "1 failed"), call("edit", str(i)))
        ]
        self.assertEqual(repetition_signals(same_output)["signals"], ["same_output"])
        clean = [s for i in range(6) for s in (call("cat", str(i)), result("cat", str(i)))]
        self.assertEqual(repetition_signals(clean)["signals"], [])

    def test_sample_caps_the_signal_stratum_and_is_seeded(self) -> None:
        flags = {f"run{i:03d}": i < 40 for i in range(300)}
        first = stratified_sample(flags, 60, seed=7)
        self.assertEqual(first.n_signal_taken, 20)  # a third of 60
        self.assertEqual(first.n_uniform_taken, 40)
        self.assertEqual(sum(1 for k in first.chosen if flags[k]), 20)
        self.assertEqual(stratified_sample(flags, 60, seed=7).chosen, first.chosen)
        self.assertNotEqual(stratified_sample(flags, 60, seed=8).chosen, first.chosen)
        few = stratified_sample({f"r{i}": i < 5 for i in range(100)}, 60, seed=7)
        self.assertEqual((few.n_signal_taken, few.n_uniform_taken), (5, 55))


class ViewerAndCheckerTest(unittest.TestCase):
    def test_step_line(self) -> None:
        line = view_run.step_line(3, {**call("ls", "a\nb"), "text": "why"}, 0)
        self.assertEqual(line, "   3  assistant ls                     -    a⏎b  ‖ why")
        line = view_run.step_line(4, result("ls", "x" * 50, True), 10)
        self.assertEqual(line, "   4  tool      ls                     err  xxxxxxxxx…")

    def test_checker_rejects_a_result_without_its_call_and_duplicate_ids(self) -> None:
        good = {
            "id": "s/1",
            "source": "s",
            "task": "t",
            "steps": [call("ls", "a"), result("ls", "b")],
            "labels": {"outcome": {}, "meta": {"stratum": "uniform"}},
        }
        orphan = {**good, "id": "s/2", "steps": [result("ls", "b")]}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.jsonl")
            with open(path, "w", encoding="utf-8") as handle:
                for rec in (good, orphan, good):
                    handle.write(json.dumps(rec) + "\n")
            code, out, _ = run_main(check_corpus.main, [path])
        self.assertEqual(code, 1)
        self.assertIn("s/2: step 0: tool step does not follow a call", out)
        self.assertIn("s/1: duplicate id", out)


if __name__ == "__main__":
    unittest.main()
