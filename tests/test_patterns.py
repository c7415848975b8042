"""Patterns declared in one place (loopwatch.core.Pattern, loopwatch.core.REGISTRY): each rule declares the patterns it
reports, and the presets, the message templates, the configuration and the engine read that registry. A misspelt
pattern, ladder setting or rung setting in a preset, a policy or a configuration file is a ConfigError naming the
valid choices, and every ladder setting (``restrike`` and rungs with their own messages included) can be written in a
configuration file."""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import loopwatch.core.detectors as detectors
from loopwatch import Guard, Ladder, Message, Messages, Policy, Rung, ToolCall, ToolResult, preset
from loopwatch._presets import PRESETS
from loopwatch.config import PATTERNS, load_config
from loopwatch.core._patterns import REGISTRY, STOP_MESSAGE, Pattern, Registry
from loopwatch.core._policy import ToolSettings
from loopwatch.core.detectors import Detector, Finding, Step, repeat
from loopwatch.core.detectors._base import State
from loopwatch.errors import ConfigError, LoopwatchError

RULES = [
    value
    for name in detectors.__all__
    if inspect.isclass(value := getattr(detectors, name)) and issubclass(value, Detector) and value is not Detector
]
SOURCES = sorted(Path(detectors.__file__).parent.glob("*.py"))


# -- the rules declare what they report -----------------------------------------------------------------------------


def test_every_rule_declares_its_patterns_and_the_registry_holds_those_declarations() -> None:
    assert len(RULES) >= 17
    for rule in RULES:
        assert rule.patterns, rule
        for pattern in rule.patterns:
            assert isinstance(pattern, Pattern), (rule, pattern)
            assert REGISTRY.get(pattern.name) is pattern
            assert rule.__name__ in REGISTRY.reported_by(pattern.name)
    declared = {p.name for rule in RULES for p in rule.patterns}
    ours = {name for name in REGISTRY.escalated() if REGISTRY.reported_by(name) != ("_SlowAnswerDetector",)}
    assert declared == ours  # every pattern of loopwatch's rules has a default ladder, and only they do
    assert set(PATTERNS) == declared | {"limit", "judged_loop", "store_error"}


def test_the_registry_holds_every_built_in_pattern_before_any_rule_is_imported() -> None:
    # a fresh interpreter that reads the registry first: what it lists never depends on which rules were imported
    import subprocess
    import sys

    code = (
        "import sys; from loopwatch.core import REGISTRY; "
        "assert 'loopwatch.core.detectors._repeat' not in sys.modules; "
        "print(','.join(REGISTRY.names()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    listed = done.stdout.strip().split(",")
    assert set(listed) == {p.name for rule in RULES for p in rule.patterns} | {"limit", "judged_loop", "store_error"}
    assert listed[0] == "repeat" and listed[-3:] == ["judged_loop", "limit", "store_error"]  # in declaration order


def test_a_store_outage_s_refusal_is_a_declared_pattern_with_a_message_of_its_own() -> None:
    from loopwatch.core._audit import store_error_block

    assert REGISTRY.get("store_error").ladder is None  # never escalated: ladders.store_error is refused
    with pytest.raises(ConfigError, match="not escalated by a ladder"):
        REGISTRY.get("store_error", escalated=True)
    default = store_error_block(Messages(), "redis down")
    assert (default.action, default.pattern, default.level) == ("block", "store_error", 1)
    assert (
        default.message == default.reason == "loop guard unavailable (redis down); calls are refused until it is back"
    )
    ours = Messages({"store_error": {1: "Tool calls are paused: {reason}"}})
    assert store_error_block(ours, "redis down").message == f"Tool calls are paused: {default.reason}"


def _reported(cls: ast.ClassDef) -> Iterator[tuple[str, set[str] | None, int]]:
    """Each pattern a rule class's ``Finding(...)`` calls report, with the fact names of the call (``None``: not a
    literal dict). ``pattern=<a parameter>`` is followed to the string literals the class passes for it."""
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    for method in methods.values():
        for call in ast.walk(method):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Finding"):
                continue
            keywords = {kw.arg: kw.value for kw in call.keywords}
            facts = keywords.get("facts")
            keys = None
            if isinstance(facts, ast.Dict):
                keys = {str(k.value) for k in facts.keys if isinstance(k, ast.Constant)}
            value = keywords["pattern"]
            if isinstance(value, ast.Constant):
                yield str(value.value), keys, call.lineno
                continue
            assert isinstance(value, ast.Name), f"line {call.lineno}: pattern= must be a literal or a parameter"
            params = [a.arg for a in method.args.args][1:]  # without self
            assert value.id in params, f"line {call.lineno}: pattern={value.id} is not a parameter of {method.name}"
            position = params.index(value.id)
            passed = 0
            for caller in ast.walk(cls):
                if not (
                    isinstance(caller, ast.Call)
                    and isinstance(caller.func, ast.Attribute)
                    and caller.func.attr == method.name
                ):
                    continue
                given = {kw.arg: kw.value for kw in caller.keywords}.get(value.id)
                if given is None and position < len(caller.args):
                    given = caller.args[position]
                assert isinstance(given, ast.Constant), f"line {caller.lineno}: a pattern that is not a literal"
                passed += 1
                yield str(given.value), keys, caller.lineno
            assert passed, f"{method.name} is never called"


def test_every_pattern_a_rule_reports_is_one_it_declares_with_evidence_its_findings_carry() -> None:
    """Read from the source of every rule: each ``Finding(pattern=...)`` names a pattern its class declares (so a
    typo there fails here, not silently in production), and each declared evidence key is a fact some finding of
    that pattern carries."""
    by_name = {rule.__name__: rule for rule in RULES}
    facts: dict[str, set[str]] = {}
    seen = set()
    for source in SOURCES:
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for cls in (node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in by_name):
            declared = {p.name for p in by_name[cls.name].patterns}
            for name, keys, line in _reported(cls):
                assert name in declared, f"{source.name}:{line}: {cls.name} reports {name!r}, declares {declared}"
                seen.add(cls.name)
                facts.setdefault(name, set()).update(keys or ())
    assert seen == set(by_name)  # every rule's findings were found
    for pattern in (p for rule in RULES for p in rule.patterns):
        assert set(pattern.evidence) <= facts.get(pattern.name, set()), pattern


def test_the_source_reader_catches_a_pattern_the_class_does_not_declare() -> None:
    tree = ast.parse(
        "class X:\n"
        "    def observe(self, state, step):\n"
        "        return self._f(step, 'repaet')\n"
        "    def _f(self, step, pattern):\n"
        "        return Finding(pattern=pattern, count=1, key='k', loop_start=None, reason='r', facts={'tool': 1})\n"
    )
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    assert [(name, keys) for name, keys, _ in _reported(cls)] == [("repaet", {"tool"})]


# -- presets and messages read the registry ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_only_name_registered_patterns_their_rules_report(name: str) -> None:
    policy = preset(name)
    reported = {p.name for d in policy.detectors for p in d.patterns}
    assert set(policy.ladders) <= reported, name
    assert set(policy.ladders) <= set(REGISTRY.escalated())
    assert set(policy.messages.table) <= set(REGISTRY.names())


def test_the_default_preset_escalates_by_the_ladders_its_rules_declare() -> None:
    policy = preset("default-lexical")
    declared = {p.name: p.ladder for d in policy.detectors for p in d.patterns}
    assert dict(policy.ladders) == declared
    assert policy.ladders["cycle"] == Ladder.of(nudge=3, block=5, stop=7)


def test_the_default_templates_are_the_declared_ones() -> None:
    messages = Messages()
    for pattern in REGISTRY:
        assert messages.template(pattern.name, 1, "nudge") == pattern.message
    assert messages.template("cycle", 3, "stop") == STOP_MESSAGE
    assert messages.template("cycle", 2, "block").startswith("Refused: this call continues a cycle")


def test_a_policy_with_a_misspelt_pattern_is_a_config_error_naming_the_patterns() -> None:
    with pytest.raises(ConfigError) as info:
        Policy("mine", (repeat(),), {"repaet": Ladder.of(nudge=3)})
    assert isinstance(info.value, LoopwatchError) and info.value.field == "ladders.repaet"
    text = str(info.value)
    assert "unknown pattern 'repaet'; did you mean 'repeat'?" in text
    assert "'polling'" in text and "'error_retry'" in text and "'limit'" not in text
    with pytest.raises(ConfigError, match="not escalated by a ladder"):
        preset("default").replace(ladders={"limit": Ladder.of(nudge=1)})
    with pytest.raises(ConfigError, match="expected a Ladder"):
        Policy("mine", (repeat(),), {"repeat": {"nudge": 3}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError) as tool:
        ToolSettings(ladders={"cycel": Ladder.of(nudge=2)})
    assert tool.value.field == "ladders.cycel" and "did you mean 'cycle'?" in str(tool.value)


def test_messages_for_a_misspelt_pattern_or_level_are_config_errors() -> None:
    with pytest.raises(ConfigError) as info:
        Messages({"eror_retry": "x"})
    assert info.value.field == "messages.eror_retry" and "did you mean 'error_retry'?" in str(info.value)
    with pytest.raises(ConfigError, match="'nudge', 'block', 'stop'"):
        Messages({"error_retry": {"blok": "x"}})
    assert Messages({"judged_loop": "{reason}!"}).template("judged_loop", 1, "nudge") == "{reason}!"


# -- the registry ------------------------------------------------------------------------------------------------------


def test_a_pattern_declared_twice_otherwise_is_refused_and_the_same_declaration_is_shared() -> None:
    registry = Registry()
    first = registry.register(Pattern("slow", "a", ladder=Ladder.of(nudge=2)), by="A")
    assert registry.register(Pattern("slow", "a", ladder=Ladder.of(nudge=2)), by="B") is first
    assert registry.reported_by("slow") == ("A", "B")
    with pytest.raises(ConfigError, match="already declared otherwise"):
        registry.register(Pattern("slow", "b", ladder=Ladder.of(nudge=2)), by="C")
    assert registry.declare(["slow"], by="D") == (first,)
    with pytest.raises(ConfigError, match="unknown pattern 'slwo'; did you mean 'slow'"):
        registry.declare(["slwo"], by="E")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "Bad Name"}, "name"),
        ({"message": None}, "message"),
        ({"ladder": {"nudge": 3}}, "ladder"),
        ({"specificity": -1}, "specificity"),
        ({"evidence": ("tool", "tool")}, "evidence"),
        ({"evidence": ("indices",)}, "evidence"),
    ],
)
def test_a_malformed_declaration_is_a_config_error(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Pattern(**{"name": "ok", "message": "m", **kwargs})
    assert info.value.field == field


_SLOW = Pattern(
    "test_slow_answer",
    "{tool} took {count} turns to answer",
    ladder=Ladder.of(nudge=2, block=3),
    block_message="Refused: {tool} again",
    specificity=9,
    evidence=("tool", "where"),
)


class _SlowAnswerDetector(Detector):
    """A rule of one's own: every call of the same tool is one more (test only)."""

    name = "slow_answer"
    kinds = frozenset({"call"})
    patterns: ClassVar[tuple[Pattern, ...]] = (_SLOW,)

    def new_state(self) -> State:
        return {"n": 0}

    def observe(self, state: State, step: Step) -> Finding | None:
        state["n"] += 1
        facts = {"tool": step.tool, "where": "here", "hidden": "not evidence"}
        return Finding("test_slow_answer", state["n"], "k", 0, "slow", facts=facts, blockable=True, hard=True)


def test_a_rule_of_ones_own_declares_its_pattern_and_the_engine_reads_the_declaration() -> None:
    assert REGISTRY.get("test_slow_answer") is _SLOW
    policy = Policy("mine", (_SlowAnswerDetector(),), {"test_slow_answer": _SLOW.ladder or Ladder(())})
    guard = Guard(policy=policy, clock=None)
    verdicts = [guard.observe("s", ToolCall("probe", {"n": i})) for i in range(3)]
    assert [v.action for v in verdicts] == ["ok", "nudge", "block"]
    assert verdicts[1].message == "probe took 2 turns to answer"
    assert verdicts[2].message == "Refused: probe again"
    assert {k: v for k, v in verdicts[1].evidence.items() if k != "args"} == {
        "indices": [],
        "tool": "probe",
        "where": "here",
    }  # the declared facts, in their order; "hidden" is not evidence


def test_a_rule_naming_an_undeclared_pattern_fails_when_it_is_defined() -> None:
    with pytest.raises(ConfigError) as info:

        class _Typo(Detector):  # pragma: no cover - never instantiated
            patterns: ClassVar[tuple[Pattern, ...]] = ("repeet",)  # type: ignore[assignment]

            def new_state(self) -> State:
                return {}

            def observe(self, state: State, step: Step) -> Finding | None:
                return None

    assert "unknown pattern 'repeet'; did you mean 'repeat'?" in str(info.value)
    assert "_Typo" in (info.value.field or "")


# -- configuration files -----------------------------------------------------------------------------------------------


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "loopwatch.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_misspelt_ladder_key_in_a_config_file_names_the_valid_keys(tmp_path: Path) -> None:
    path = _config(tmp_path, "[ladders.cycle]\nnudge = 3\nrestrik = 10\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.field == "ladders.cycle.restrik" and info.value.line == 3
    text = str(info.value)
    assert "unknown ladder setting 'restrik'; did you mean 'restrike'?" in text
    for key in ("nudge", "block", "stop", "rungs", "renotify", "metric", "restrike"):
        assert f"'{key}'" in text


@pytest.mark.parametrize(
    ("toml", "field", "expected"),
    [
        ("[ladders.cycel]\nnudge = 3\n", "ladders.cycel", "did you mean 'cycle'?"),
        ("[ladders.limit]\nnudge = 3\n", "ladders.limit", "not escalated by a ladder"),
        ("[tools.x.ladders.polling]\nnudge = 3\nrestrike = 'soon'\n", "tools.x.ladders.polling.restrike", "integer"),
        ("hard_evidence = false\n[ladders.cycle]\nrestrike = 0\nnudge = 1\n", "ladders.cycle.restrike", "positive"),
        ("[ladders.cycle]\nrungs = [{ at = 2 }]\n", "ladders.cycle.rungs.0.action", "needs 'action'"),
        ("[ladders.cycle]\nrungs = [{ at = 2, action = 'halt' }]\n", "ladders.cycle.rungs.0.action", "'stop'"),
        ("[ladders.cycle]\nrungs = [{ at = 2, action = 'nudge', mesage = 'x' }]\n", "ladders.cycle.rungs.0.mesage",
         "did you mean 'message'?"),
        ("[ladders.cycle]\nrungs = { at = 2 }\n", "ladders.cycle.rungs", "an array of rung tables"),
        ("[ladders.cycle]\nnudge = 2\nrungs = [{ at = 3, action = 'stop' }]\n", "ladders.cycle.nudge", "leave out"),
        ("[ladders.cycle]\nrungs = [{ at = 3, action = 'stop' }, { at = 2, action = 'stop' }]\n",
         "ladders.cycle.rungs", "strictly increase"),
        ("[ladders.cycle]\nrungs = [{ at = 3, action = 'stop', partial = 'yes' }]\n",
         "ladders.cycle.rungs.0.partial", "boolean"),
        ("[messages.cycle]\nblok = 'x'\n", "messages.cycle.blok", "'block'"),
        ("[messages.cylce]\n1 = 'x'\n", "messages.cylce", "did you mean 'cycle'?"),
    ],
)  # fmt: skip
def test_a_typo_or_a_wrong_type_in_a_config_file_is_a_config_error(
    tmp_path: Path, toml: str, field: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_config(tmp_path, toml))
    assert info.value.field == field
    assert expected in str(info.value)


def test_restrike_that_hard_evidence_would_ignore_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_config(tmp_path, "[ladders.similar_text]\nnudge = 3\nrestrike = 15\n"))  # default: hard evidence
    assert info.value.field == "ladders.similar_text.restrike" and "hard_evidence = false" in str(info.value)
    with pytest.raises(ConfigError, match="hard_evidence = false"):
        preset("default").replace(ladders={"cycle": Ladder.of(nudge=3, restrike=10)})


def _two_text_loops(guard: Guard) -> list[str]:
    looping = "I will check the configuration file and then update the settings accordingly now."
    other = "I will check the configuration file and then update the settings accordingly later today."
    actions: list[str] = [guard.observe("s", Message("assistant", f"{looping} Attempt {i}.")).action for i in range(4)]
    guard.observe("s", Message("assistant", "Something entirely different about deployment windows and DNS."))
    actions += [guard.observe("s", Message("assistant", f"{other} Try {i}.")).action for i in range(5)]
    return actions


def test_restrike_written_in_a_config_file_stops_a_second_loop_on_a_real_guard(tmp_path: Path) -> None:
    ladder = "hard_evidence = false\n[ladders.similar_text]\nnudge = 3\nstop = 8\n"
    plain = load_config(_config(tmp_path, ladder)).policy()
    assert "stop" not in _two_text_loops(Guard(policy=plain, clock=None))
    policy = load_config(_config(tmp_path, ladder + "restrike = 15\n")).policy()
    assert policy.ladders["similar_text"] == Ladder.of(nudge=3, stop=8, restrike=15)
    guard = Guard(policy=policy, clock=None)
    actions = _two_text_loops(guard)
    assert "nudge" in actions[:4] and "stop" not in actions[:5] and "stop" in actions[5:]
    stopped = guard.observe("s", Message("assistant", "anything"))
    assert stopped.action == "stop" and "the warning did not help" in (stopped.reason or "")


def test_rungs_with_their_own_messages_written_in_a_config_file_reach_the_model(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        'preset = "call-cycles"\n[ladders.cycle]\nmetric = "detections"\nrenotify = true\nrungs = [\n'
        '  { at = 1, action = "nudge", message = "first: {count}" },\n'
        '  { at = 2, action = "stop", message = "done", status = "GIVE_UP", partial = true },\n]\n',
    )
    guard = Guard(policy=load_config(path).policy(), clock=None)
    verdicts = []
    for _ in range(3):
        verdicts.append(guard.observe("s", ToolCall("ls", {"path": "."})))
        guard.observe("s", ToolResult("a b c"))
    fired = [v for v in verdicts if not v.ok]
    assert [(v.action, v.message) for v in fired] == [("nudge", "first: 2"), ("stop", "done")]
    assert fired[1].status == "GIVE_UP" and fired[1].partial


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    return str(value)


def _ladder_table(ladder: Ladder) -> str:
    """``ladder`` as a ``[ladders.X]`` table body, every rung with all its settings."""
    lines = [f"renotify = {_toml_value(ladder.renotify)}", f"metric = {_toml_value(ladder.metric)}"]
    if ladder.restrike is not None:
        lines.append(f"restrike = {ladder.restrike}")
    rungs = []
    for rung in ladder.rungs:
        fields: dict[str, Any] = {"at": rung.at, "action": rung.action, "partial": rung.partial}
        texts = {"message": rung.message, "reason": rung.reason, "status": rung.status}
        fields.update({k: v for k, v in texts.items() if v is not None})
        rungs.append("{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in fields.items()) + " }")
    lines.append("rungs = [\n  " + ",\n  ".join(rungs) + ",\n]" if rungs else "rungs = []")
    return "\n".join(lines)


@pytest.mark.parametrize("name", [*PRESETS, "restrike"])
def test_every_ladder_of_every_preset_can_be_written_in_a_config_file(tmp_path: Path, name: str) -> None:
    """Each preset's ladders (rungs with their own messages, reasons, statuses and partial stops, renotify, the
    per-detection metric) and a ladder with restrike, written out as TOML, load back as the same ladders."""
    if name == "restrike":
        base, ladders = "jaccard-turns", {"similar_text": Ladder.of(nudge=3, stop=8, renotify=True, restrike=15)}
    else:
        base, ladders = name, dict(preset(name).ladders)
    text = f'preset = "{base}"\n' + "".join(f"\n[ladders.{p}]\n{_ladder_table(lad)}\n" for p, lad in ladders.items())
    loaded = load_config(_config(tmp_path, text)).policy()
    assert dict(loaded.ladders) == {**preset(base).ladders, **ladders}


def test_the_short_form_and_the_rungs_form_give_the_same_ladder(tmp_path: Path) -> None:
    short = load_config(_config(tmp_path, "[ladders.cycle]\nnudge = [2, 3]\nblock = 5\nstop = 9\n")).policy()
    rungs = "{ at = 2, action = 'nudge' }, { at = 3, action = 'nudge' }, { at = 5, action = 'block' }"
    long = load_config(_config(tmp_path, f"[ladders.cycle]\nrungs = [{rungs}, {{ at = 9, action = 'stop' }}]\n"))
    assert short.ladders["cycle"] == long.policy().ladders["cycle"]
    assert short.ladders["cycle"] == Ladder((Rung(2, "nudge"), Rung(3, "nudge"), Rung(5, "block"), Rung(9, "stop")))


def test_the_ladder_examples_of_the_configuration_page_load(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    blocks = page.split("```toml\n")[1:]
    assert len(blocks) >= 4
    policies = [load_config(_config(tmp_path, block.split("```", 1)[0])).policy() for block in blocks]
    assert any(p.ladders["similar_text"].restrike == 15 for p in policies)
    assert any(p.name == "call-cycles" and p.ladders["cycle"].rungs[2].status == "LOOP_DETECTED" for p in policies)


def test_a_rule_of_ones_own_that_cannot_judge_is_refused_by_the_policy_holding_it() -> None:
    class _NoObserve(Detector):
        name = "no_observe"

        def new_state(self) -> State:
            return {}

    with pytest.raises(TypeError, match="_NoObserve cannot judge events: it does not define observe"):
        Guard(policy=Policy("mine", (_NoObserve(),), {}), clock=None)  # type: ignore[abstract]


def test_each_rule_is_an_instance_of_its_own_class_only() -> None:
    """(Compiled classes sharing one ``abc`` cache would each be taken for the others once one was asked about.)"""
    from loopwatch.core.detectors import RepeatDetector, RephraseDetector

    rules = preset("default-lexical").detectors
    assert all(isinstance(d, Detector) for d in rules)
    assert [type(d).__name__ for d in rules if isinstance(d, RephraseDetector)] == ["RephraseDetector"]
    assert [type(d).__name__ for d in rules if isinstance(d, RepeatDetector)] == ["RepeatDetector"]
