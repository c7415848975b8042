"""What the default preset promises users who leave it on: a stop only on hard evidence, and none of the
behaviours users complain about in other detectors (polling with moving counters, batch work over distinct
items, two-pass batches, productive turns) ever flagged."""

from __future__ import annotations

import json

import pytest

from loopwatch import Guard, Message, TextDelta, ToolCall, ToolResult, Verdict, preset
from loopwatch.config import Config
from loopwatch.core import Engine
from loopwatch.core._events import Event
from loopwatch.core._fingerprint import is_mutation, is_search
from loopwatch.errors import ConfigError


def _run(events: list[Event], guard: Guard | None = None, *, enforce: bool = False) -> list[Verdict]:
    """Observe ``events``; with ``enforce``, as a harness that honours a block: a refused call's result never comes."""
    guard = guard or Guard(clock=None)
    verdicts: list[Verdict] = []
    for event in events:
        if enforce and isinstance(event, ToolResult) and verdicts and verdicts[-1].action == "block":
            continue
        verdicts.append(guard.observe("s", event))
    return verdicts


def _actions(verdicts: list[Verdict]) -> set[str]:
    return {v.action for v in verdicts}


def _call(tool: str, args: dict[str, object], output: str, n: int, *, is_error: bool | None = None) -> list[Event]:
    return [ToolCall(tool, args, id=f"c{n}"), ToolResult(output, id=f"c{n}", is_error=is_error)]


# -- a stop needs hard evidence --------------------------------------------------------------------------------


def test_the_same_call_with_the_same_result_is_nudged_blocked_then_stopped_with_its_evidence() -> None:
    events: list[Event] = []
    for n in range(10):
        events += _call("bash", {"command": "cat config.yml"}, "error: config.yml: permission denied", n)
    verdicts = _run(events)
    stop = next(v for v in verdicts if v.action == "stop")
    nudges = [v for v in verdicts if v.action == "nudge"]
    assert nudges and nudges[0].index < stop.index  # warned first
    assert stop.evidence["repeated"]["count"] == stop.count and stop.evidence["repeated"]["hard"] is True
    assert "cat config.yml" in stop.evidence["unit"]
    ignored = [n["index"] for n in stop.evidence["ignored_nudges"]]
    assert ignored and set(ignored) <= {v.index for v in nudges}  # nudges the model was shown, for this loop
    assert "went unheeded" in (stop.reason or "")
    json.dumps(stop.to_json())  # the evidence is JSON, for audit records


def test_similar_text_rewording_and_chanting_only_ever_nudge() -> None:
    events: list[Event] = []
    for n in range(30):
        events.append(Message("assistant", f"I will look into the failing test and fix it right away, step {n}."))
    chant = "The deployment failed because the configuration file is missing a required key. " * 40
    events.append(Message("assistant", chant))
    verdicts = _run(events, Guard(preset="default-lexical", clock=None))
    assert "nudge" in _actions(verdicts)
    assert _actions(verdicts) <= {"ok", "nudge"}


def test_an_error_retried_after_changes_that_worked_is_never_blocked_or_stopped() -> None:
    """Edit, rerun, another edit, rerun... with the same failure each time: the no_effect rule may nudge once,
    the run is never refused or stopped (such runs sometimes end with a correct patch)."""
    events: list[Event] = []
    for n in range(15):
        events += _call(
            "str_replace_editor",
            {"command": "str_replace", "path": "src/app.py", "old_str": f"x = {n}", "new_str": f"x = {n + 1}"},
            "The file src/app.py has been edited.",
            2 * n,
        )
        events += _call(
            "bash",
            {"command": "python -m pytest tests/test_app.py -q"},
            "FAILED tests/test_app.py::test_x - assert 1 == 2\n1 failed in 0.12s",
            2 * n + 1,
            is_error=True,
        )
    verdicts = _run(events)
    assert _actions(verdicts) <= {"ok", "nudge"}
    assert [v.pattern for v in verdicts if v.pattern == "no_effect"] == ["no_effect"]  # one nudge, no more


def test_the_very_same_edit_again_and_again_is_still_a_loop() -> None:
    edit = {"command": "edit 1:1\nimport json\nend_of_edit"}
    events: list[Event] = []
    for n in range(9):
        events += _call("edit", edit, f"[File: a.py ({10 + n} lines total)]\n1:import json", n)
    assert "block" in _actions(_run(events))  # refused: the very same change again
    assert "stop" in _actions(_run(events, enforce=True))  # and stopped when the refusals are ignored


# -- what counts as the same ----------------------------------------------------------------------------------


def test_polling_with_moving_progress_counters_is_never_flagged() -> None:
    events: list[Event] = []
    for n in range(12):
        events += _call("bash", {"command": "kubectl rollout status deploy/web"}, f"{n}/12 replicas ready", n)
    assert _actions(_run(events)) == {"ok"}


def test_a_failing_build_whose_remaining_work_shrinks_is_not_a_retry() -> None:
    # a build that times out each time, with fewer targets left each time: the count is content, and it moved
    events: list[Event] = []
    for n, left in enumerate([4190, 3338, 2705, 2193, 1515, 864, 356]):
        output = f"[0/{left}] Building CXX object src/Field.cpp.o\nninja: build stopped: interrupted\nexit code: 124"
        events += _call("bash", {"command": "cmake --build build --parallel 1"}, output, n, is_error=True)
    verdicts = _run(events)
    assert "error_retry" not in {v.pattern for v in verdicts}
    assert _actions(verdicts) <= {"ok", "nudge"}  # a long failing streak may still be pointed out, once


def test_the_same_failure_with_only_a_shell_line_number_changing_is_a_retry() -> None:
    events: list[Event] = []
    for n in range(4):
        output = f"bash: line {4312 + 15 * n}: cd: srcc: No such file or directory"
        events += _call("bash", {"command": "cd srcc && python -m pytest"}, output, n, is_error=True)
    assert "nudge" in _actions(_run(events))


def test_the_same_words_before_each_page_of_a_file_are_not_a_loop() -> None:
    # a templated thought, while each call brings back a page not seen before: work in progress
    thought = "We have not found the method yet. Let's scroll further down to find the method."
    events: list[Event] = []
    for n in range(8):
        page = "\n".join(f"{100 * n + k}:    value_{n}_{k} = compute({k})" for k in range(20))
        events += [ToolCall("scroll_down", {}, id=f"c{n}", thought=thought), ToolResult(page, id=f"c{n}")]
    assert _actions(_run(events)) == {"ok"}


def test_the_same_words_while_nothing_new_comes_back_are_nudged() -> None:
    thought = "The script still runs without errors. I will clean up the file and run the script again to check."
    events: list[Event] = []
    for n in range(4):
        body = "import json\n" * (2 + n % 2)  # an edit undone and redone: what the editor answers differs each time
        events += [ToolCall("edit", {"command": f"edit 1:{n + 1}\n{body}end_of_edit"}, id=f"e{n}", thought=thought)]
        events += [ToolResult(f"[File: a.py ({40 + 7 * n} lines total)]\n1:import json", id=f"e{n}")]
        events += [ToolCall("bash", {"command": "python a.py"}, id=f"r{n}", thought=thought)]
        events += [ToolResult("Deserialization successful, no errors.", id=f"r{n}")]
    verdicts = _run(events)
    assert "similar_text" in {v.pattern for v in verdicts if v.action == "nudge"}
    assert _actions(verdicts) <= {"ok", "nudge"}


def test_an_echo_of_the_call_is_not_news() -> None:
    # padding steps: the output only says back what the call said, so the counter in it is nothing learned
    thought = "Continue the step count until the required number of steps is reached."
    events: list[Event] = []
    for n in range(6):
        events += [ToolCall("bash", {"command": f"echo step{n}"}, id=f"c{n}", thought=thought)]
        events += [ToolResult(f"step{n}", id=f"c{n}")]
    assert "similar_text" in {v.pattern for v in _run(events) if v.action == "nudge"}


def test_a_reasoning_template_around_other_commands_is_not_a_repeated_turn() -> None:
    # a harness that writes every turn's reasoning as the same template: the commands are what differs
    template = "<Action: Command>\n</Action: Command>"
    packages = ["gfortran", "libopenblas0", "libgdal-dev", "libproj-dev", "libqt5svg5-dev", "qt5keychain-dev"]
    events: list[Event] = []
    for n, package in enumerate(packages):
        events += [ToolCall("command", {"command": f"apt-get install -y {package}"}, id=f"c{n}", thought=template)]
        events += [ToolResult("Reading package lists... Done", id=f"c{n}")]
    assert "similar_text" not in {v.pattern for v in _run(events)}
    # the same template around the same command, whatever its counter, is the same turn
    events = []
    for n in range(5):
        events += [ToolCall("command", {"command": f'echo "step {n}"'}, id=f"c{n}", thought=template)]
        events += [ToolResult(f"step {n}", id=f"c{n}")]
    nudges = [v for v in _run(events) if v.pattern == "similar_text"]
    assert nudges and nudges[0].action == "nudge" and nudges[0].index == 8  # the first result was news


def test_turns_with_their_actions_need_word_sketches() -> None:
    from loopwatch.core.detectors import similar_text

    assert similar_text(sketch=48, actions=True).actions
    for kwargs in ({"metric": "fuzz", "sketch": 48}, {"metric": "jaccard"}):
        with pytest.raises(ConfigError, match="actions"):
            similar_text(actions=True, **kwargs)  # type: ignore[arg-type]


def test_the_same_look_up_answering_the_same_with_other_look_ups_between_is_a_circuit() -> None:
    events: list[Event] = []
    for n in range(3):
        events += _call("bash", {"command": "cat reports/unit.trx"}, "<TestRun id='1'>3 failed</TestRun>", 3 * n)
        events += _call("bash", {"command": "ls -l reports"}, "unit.trx", 3 * n + 1)
        events += _call("bash", {"command": f"grep -n fail{n} src/a.py"}, f"{n}: fail{n}()", 3 * n + 2)
    verdicts = _run(events)
    assert [v.pattern for v in verdicts if v.action != "ok"] == ["revisit"]  # once, as it is made the third time
    nudge = next(v for v in verdicts if v.action == "nudge")
    assert nudge.index == 12 and "cat reports/unit.trx" in (nudge.message or "")  # the third call, as it is made


def test_narrower_look_ups_in_what_a_search_found_are_work() -> None:
    # the class found, then one method after another looked for in it: each a new look-up, whatever they find
    events = _call("search_class", {"class_name": "Poly"}, "Found 1 classes with name Poly: class Poly(Expr): ...", 0)
    for n, method in enumerate(("latex", "__str__", "pretty", "_repr_latex_", "_print_Poly"), start=1):
        args: dict[str, object] = {"method_name": method, "class_name": "Poly"}
        missing = f"Could not find method {method} in class Poly."
        events += _call("search_method_in_class", args, missing, n, is_error=True)
    assert _actions(_run(events)) == {"ok"}


def test_a_broader_look_up_again_and_again_finding_nothing_is_not_work() -> None:
    events = _call("search_code", {"code_str": "Poly latex"}, "Found 2 snippets containing `Poly latex`: ...", 0)
    for n in range(1, 5):
        events += _call("search_code", {"code_str": f"Poly {'' if n % 2 else ' '}"}, "Could not find code Poly.", n)
    assert "no_progress" in {v.pattern for v in _run(events)}


def test_a_look_up_again_after_a_change_is_not_a_revisit() -> None:
    events: list[Event] = []
    for n in range(4):
        events += _call("bash", {"command": "cat src/a.py"}, "x = 1\n", 2 * n)
        events += _call("bash", {"command": f"sed -i 's/y{n}/z{n}/' src/b.py"}, "", 2 * n + 1)
    assert _actions(_run(events)) == {"ok"}


def test_the_very_same_change_again_with_only_look_ups_between_is_a_circuit() -> None:
    events: list[Event] = []
    for n in range(3):
        events += _call("bash", {"command": "sed -i 's/to_sttring/to_string/' src/builder.rs"}, "", 2 * n)
        events += _call("bash", {"command": f"grep -n to_s{'t' * (n + 1)}ring src/builder.rs"}, f"{n}: ok", 2 * n + 1)
    verdicts = _run(events)
    assert [(v.index, v.pattern) for v in verdicts if v.action != "ok"] == [(8, "revisit")]


def test_the_same_call_again_right_after_a_circuit_is_still_the_circuit() -> None:
    # the same edit, a look at the file, then the same edit twice in a row, answering the same each time: the repeat
    # rule sees a streak of two, yet the call has now been made three times with nothing changed in between
    edit = {"command": 'perl -0pi -e \'s/("context"\\n/$1\\t"os"\\n/\' test/suite_test.go'}
    events = _call("bash", edit, "", 0)
    events += _call("bash", {"command": "sed -n '12,40p' test/suite_test.go"}, 'import (\n\t"context"\n', 1)
    events += _call("bash", edit, "", 2) + _call("bash", edit, "", 3)
    verdicts = _run(events)
    assert [(v.index, v.action, v.pattern) for v in verdicts if v.action != "ok"] == [(6, "nudge", "revisit")]


def test_a_test_run_again_after_reading_files_is_nudged_only_the_third_time_it_answers_the_same() -> None:
    events: list[Event] = []
    for n in range(3):
        events += _call("bash", {"command": "python -m pytest tests/test_a.py -q"}, "1 failed, 4 passed", 2 * n)
        events += _call("bash", {"command": f"cat src/part{n}.py"}, f"def part{n}(): ...", 2 * n + 1)
    verdicts = _run(events)
    assert [(v.index, v.action, v.pattern) for v in verdicts if v.action != "ok"] == [(8, "nudge", "revisit")]


def test_the_same_failing_edit_at_other_line_numbers_is_the_same_retry() -> None:
    events: list[Event] = []
    for n, (start, end) in enumerate([(169, 171), (169, 172), (170, 172)]):
        edit = {"command": f"edit {start}:{end}\n    except (TypeError, ValueError):\n        return None\nend_of_edit"}
        events += _call("edit", edit, "E999 IndentationError: unexpected unindent", n, is_error=True)
    verdicts = _run(events)
    assert [v.action for v in verdicts if v.pattern == "error_retry"] == ["nudge"]  # the third failure
    assert verdicts[-1].pattern == "error_retry"


def test_a_failing_command_tried_with_another_flag_or_target_each_time_is_not_a_retry() -> None:
    # another crate, another flag: the agent acts on what it saw; only a long streak of such variants is pointed out
    commands = [
        "cargo test --profile ci -p datafusion-common --lib -- --format json",
        "cargo test --profile ci -p datafusion-common --lib -- --list --format json",
        "cargo test --profile ci -p datafusion-macros --lib -- --list --format json",
        "cargo test --profile ci -p datafusion-expr --lib -- --list --format json",
    ]
    events: list[Event] = []
    for n, command in enumerate(commands):
        events += _call("bash", {"command": command}, "**Exited due to timeout**\nexit code: 124", n, is_error=True)
    assert "error_retry" not in {v.pattern for v in _run(events)}


def test_failures_that_share_a_build_tools_banner_but_not_their_error_lines_are_different_failures() -> None:
    banner = "[INFO] Scanning for projects...\n[INFO] Reactor Build Order:\n" + "[INFO] module-x\n" * 30
    errors = [
        "[ERROR] Tests run: 5, Failures: 1 in TimescaleDBContainerTest: Could not find a valid Docker environment",
        "[ERROR] Failed to execute goal karaf-maven-plugin:verify: feature openhab-binding-x missing a bundle",
        "[ERROR] Failed to execute goal surefire:test on project core: There are test failures in LoggerTest",
    ]
    events: list[Event] = []
    for n, error in enumerate(errors):
        command = "./mvnw test -DskipChecks" + " -Dgroups='!integration'" * (n > 0) + " -Dverify.skip" * (n > 1)
        events += _call("bash", {"command": command}, banner + error, n, is_error=True)
    assert "error_retry" not in {v.pattern for v in _run(events)}


@pytest.mark.parametrize(
    ("tool", "make_args"),
    [
        ("calculate", lambda n: {"expression": f"{12 + n}*3"}),
        ("search_flights", lambda n: {"origin": "JFK", "destination": "LAX", "date": f"2024-05-{10 + n:02d}"}),
    ],
)
def test_calls_differing_in_a_number_are_different_calls(tool: str, make_args: object) -> None:
    assert callable(make_args)
    events: list[Event] = []
    for n in range(8):
        events += _call(tool, make_args(n), f"result {n}" if tool == "calculate" else "No flights found.", n)
    assert _actions(_run(events)) == {"ok"}


def test_batch_writes_to_distinct_paths_with_the_same_content_are_work() -> None:
    events: list[Event] = []
    for n in range(10):
        events += _call("write_file", {"path": f"src/module_{n}/__init__.py", "content": ""}, "File written.", n)
    assert _actions(_run(events)) == {"ok"}


def test_reading_distinct_files_with_the_same_content_or_nothing_found_is_work() -> None:
    events: list[Event] = []
    for n in range(10):
        events += _call("read_file", {"path": f"config/env_{n}.yml"}, "# empty config\n", 2 * n)
        events += _call("bash", {"command": f'grep -n "TODO" src/part_{n}.py'}, "", 2 * n + 1)
    assert _actions(_run(events)) == {"ok"}


def test_a_two_pass_batch_is_work() -> None:
    events: list[Event] = []
    for n, path in enumerate(["a.py", "b.py", "c.py", "d.py"] * 2):
        events += _call("bash", {"command": f"python -m black {path}"}, f"reformatted {path}\nAll done! 1 file", n)
    assert _actions(_run(events)) == {"ok"}


def test_productive_successful_turns_are_never_flagged() -> None:
    events: list[Event] = [Message("user", "Add type hints to the utils module and run the tests.")]
    for n in range(20):
        events += _call(
            "read_file", {"path": f"src/utils/part_{n}.py"}, f"def helper_{n}(x):\n    return x * {n}\n", 3 * n
        )
        events += _call(
            "edit_file",
            {"path": f"src/utils/part_{n}.py", "old": f"def helper_{n}(x):", "new": f"def helper_{n}(x: int) -> int:"},
            "Edited.",
            3 * n + 1,
        )
        events += _call("bash", {"command": "pytest -q"}, f"{40 + n} passed in 1.{n}s", 3 * n + 2)
        events.append(Message("assistant", f"Annotated helper_{n}; the suite still passes ({40 + n} tests)."))
    assert _actions(_run(events)) == {"ok"}


def test_arguments_that_do_not_change_what_a_call_does_are_not_compared() -> None:
    events: list[Event] = []
    for n in range(6):
        args = {"command": "npm test", "description": f"Run the tests (attempt {n})", "timeout": 1000 * n}
        events += _call("Bash", args, "FAIL src/app.test.js\nTests: 1 failed", n)
    assert "block" in _actions(_run(events))  # Claude Code's description and timeout aside, the same call
    events = []
    for n in range(6):
        args = {"command": "ls /tmp/out", "security_risk": ["LOW", "MEDIUM"][n % 2]}
        events += _call("execute_bash", args, "ls: cannot access '/tmp/out': No such file or directory", n)
    assert "block" in _actions(_run(events))  # OpenHands' security_risk aside, the same call


def test_an_editor_view_is_a_read_not_a_change() -> None:
    view = {"command": "view", "path": "/repo/app.py"}
    assert not is_mutation("str_replace_editor", view) and is_search("str_replace_editor", None, view)
    assert is_mutation("str_replace_editor", {"command": "str_replace", "path": "/repo/app.py"})


def test_other_agents_turns_do_not_reset_loop_tracking() -> None:
    """In a group chat the other agents' turns are often recorded as user messages with their names."""
    events: list[Event] = []
    for n in range(8):
        events += _call("web_search", {"query": "survivor winners birthdates"}, "No results found.", n)
        events.append(Message("user", f"Expert {n % 3}: please keep looking.", worker=f"Expert_{n % 3}"))
    assert "nudge" in _actions(_run(events))
    human: list[Event] = []
    for n in range(8):
        human += _call("web_search", {"query": "survivor winners birthdates"}, "No results found.", n)
        human.append(Message("user", f"Try again with another idea, number {n}."))  # a person's new prompt each time
    assert _actions(_run(human)) == {"ok"}


# -- chanting ------------------------------------------------------------------------------------------------


CHUNK = "The build failed again because the cache directory was not writable. "


def _chanting_guard() -> Guard:
    """``default-lexical`` with the chanting rule it retired brought back, as a configuration file does."""
    return Guard(
        policy=Config(preset="default-lexical", detectors={"chanting": {"enabled": True}}).policy(), clock=None
    )


def test_chanting_left_the_default_and_a_configuration_brings_it_back() -> None:
    text = "Here is what happened. " + CHUNK * 8
    assert "chanting" not in {d.name for d in preset("default").detectors}
    assert _actions(_run([Message("assistant", text)], Guard(preset="default-lexical", clock=None))) == {"ok"}
    assert [v.pattern for v in _run([Message("assistant", text)], _chanting_guard())] == ["chanting"]
    with pytest.raises(ConfigError, match="enabled = true"):
        Config(preset="default", detectors={"chanting": {"threshold": 6}}).policy()


def test_a_snapshot_taken_while_the_default_held_chanting_still_loads() -> None:
    engine = Engine(preset("default-lexical"))
    session = engine.new_session()
    engine.observe(session, ToolCall("bash", {"command": "ls"}))
    data = json.loads(json.dumps(engine.dump(session)))
    old = dict(
        data,
        detectors=[*data["detectors"][:7], {"tracker": None, "start": None, "done": False}, *data["detectors"][7:]],
    )
    assert engine.dump(engine.load(old)) == data  # the retired rule's state is dropped, the others read as they were
    older = dict(old, detectors=old["detectors"][:-1])  # and before the last rule was added: it starts afresh
    assert engine.dump(engine.load(older))["detectors"][-1] == data["detectors"][-1]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_chanted_prose_chunk_is_flagged_by_its_fifth_repetition(streamed: bool) -> None:
    def verdicts(copies: int) -> list[Verdict]:
        text = "Here is what happened. " + CHUNK * copies + "I will look into it."
        if streamed:
            events: list[Event] = [TextDelta(text[i : i + 17]) for i in range(0, len(text), 17)]
            events.append(Message("user", "ok"))  # the next event ends the streamed message
        else:
            events = [Message("assistant", text)]
        return _run(events, _chanting_guard())

    assert not [v for v in verdicts(4) if v.pattern == "chanting"]
    assert [v.pattern for v in verdicts(5) if v.pattern == "chanting"] == ["chanting"]


def test_code_blocks_tables_and_lists_do_not_chant() -> None:
    table = "| name | value |\n|---|---|\n" + "| retries | 3 |\n" * 3 + "".join(f"| row {i} | x |\n" for i in range(8))
    code = (
        "```python\n" + "print('The build failed again because the cache directory was not writable.')\n" * 8 + "```\n"
    )
    items = "".join(f"- Checked the cache directory permissions on host number {i} again.\n" for i in range(8))
    verdicts = _run([Message("assistant", table + code + items)], _chanting_guard())
    assert _actions(verdicts) == {"ok"}


def test_the_default_declares_hard_evidence_and_the_seed_presets_keep_theirs() -> None:
    assert preset("default").hard_evidence and preset("default-lexical").hard_evidence
    for name in ("jaccard-turns", "call-cycles", "ralph", "doom-loop", "behavioral"):
        assert not preset(name).hard_evidence
