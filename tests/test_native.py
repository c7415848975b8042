"""The compiled step features (``loopwatch._native``): mypyc's modules run when they are built and current, their
source otherwise, with the same results either way.

``LOOPWATCH_REQUIRE_COMPILED=1`` (``make test`` sets it, after ``make kernels`` built them) makes their absence a
failure instead of a skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from loopwatch import _native

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "loopwatch"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
BUILT = all((PACKAGE.parent / (name.replace(".", "/") + SUFFIX)).exists() for name in _native.MODULES)

needs_build = pytest.mark.skipif(
    not BUILT and not os.environ.get("LOOPWATCH_REQUIRE_COMPILED"),
    reason="the compiled step features are not built here (make kernels builds them)",
)

WHERE = "import loopwatch._native as n, loopwatch.core._steps as s; print(n.compiled(), s.__file__.endswith('.py'))"


def _python(code: str, *, env: dict[str, str] | None = None, path: Path | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("LOOPWATCH_PURE_PYTHON", "PYTHONPATH")}
    if path is not None:
        base["PYTHONPATH"] = str(path)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**base, **(env or {})}, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@needs_build
def test_the_compiled_modules_are_in_use() -> None:
    assert _native.compiled(), "the compiled step features are not in use (LOOPWATCH_REQUIRE_COMPILED is set)"
    from loopwatch.core import _steps

    assert _steps.__file__ is not None and _steps.__file__.endswith(SUFFIX)
    assert _python(WHERE) == "True False\n"


@needs_build
def test_each_compiled_module_names_its_own_file() -> None:
    # _steps imports the others from the library they share: each still names its own file, as its spec does
    code = (
        "import importlib, os, sys, sysconfig, loopwatch, loopwatch.core._steps\n"
        "from loopwatch import _native\n"
        "root = os.path.dirname(loopwatch.__file__)\n"
        "for name in _native.MODULES:\n"
        "    m = importlib.import_module(name)\n"
        "    own = os.path.join(root, *name.split('.')[1:]) + sysconfig.get_config_var('EXT_SUFFIX')\n"
        "    assert m.__file__ == m.__spec__.origin == own and os.path.isfile(own), (name, m.__file__)\n"
        "print('ok')"
    )
    assert _python(code) == "ok\n"


def test_pure_python_runs_their_source() -> None:
    assert _python(WHERE, env={"LOOPWATCH_PURE_PYTHON": "1"}) == "False True\n"


def _checkout_copy(tmp_path: Path) -> Path:
    """A copy of the checkout's ``src`` (the package, beside a ``pyproject.toml`` as in the checkout)."""
    shutil.copytree(PACKAGE, tmp_path / "src" / "loopwatch", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path / "src"


@needs_build
def test_a_source_edited_since_the_build_runs_instead_all_of_them(tmp_path: Path) -> None:
    """A checkout edited after ``make kernels``: the compiled modules would run old code, so none of them runs."""
    checkout = _checkout_copy(tmp_path)
    assert _python(WHERE, path=checkout) == "True False\n"
    # any source counts, not only the compiled ones: mypyc compiles the constants a module imports into it
    edited = checkout / "loopwatch" / "core" / "detectors" / "_base.py"
    later = (checkout / "loopwatch" / "core" / f"_steps{SUFFIX}").stat().st_mtime + 10
    os.utime(edited, (later, later))
    assert _python(WHERE, path=checkout) == "False True\n"
    code = "import loopwatch._native as n, loopwatch.core.detectors._packed as p; print(p.__file__.endswith('.py'))"
    assert _python(code, path=checkout) == "True\n"


@needs_build
def test_an_installed_package_trusts_its_build_whatever_the_file_times(tmp_path: Path) -> None:
    """Outside a checkout nobody edits the sources, and an installer may write them in any order."""
    shutil.copytree(PACKAGE, tmp_path / "loopwatch", ignore=shutil.ignore_patterns("__pycache__"))
    later = (tmp_path / "loopwatch" / "core" / f"_steps{SUFFIX}").stat().st_mtime + 10
    os.utime(tmp_path / "loopwatch" / "core" / "_steps.py", (later, later))
    assert _python(WHERE, path=tmp_path) == "True False\n"


@needs_build
def test_without_their_library_the_source_runs(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "loopwatch", ignore=shutil.ignore_patterns("__pycache__"))
    for library in (tmp_path / "loopwatch" / "core").glob(f"_compiled__mypyc*{SUFFIX}"):
        library.unlink()
    assert _python(WHERE, path=tmp_path) == "False True\n"


@needs_build
def test_without_the_constructors_the_build_wrote_down_the_source_runs(tmp_path: Path) -> None:
    """A compiled rule's parameters and repr are read from what the build wrote down: without it, none runs."""
    shutil.copytree(PACKAGE, tmp_path / "loopwatch", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "loopwatch" / _native.CONSTRUCTORS).unlink()
    assert _python(WHERE, path=tmp_path) == "False True\n"


def test_a_zipped_package_imports_as_python_does(tmp_path: Path) -> None:
    """No file to run from (a zip on ``sys.path``): the finder leaves the import to the import system."""
    archive = tmp_path / "loopwatch.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in PACKAGE.rglob("*.py"):
            zipped.write(path, path.relative_to(PACKAGE.parent).as_posix())
    code = "import loopwatch._native as n, loopwatch.core._steps as s; print(n.compiled(), '.zip' in s.__file__)"
    assert _python(code, path=archive) == "False True\n"


def test_a_reload_keeps_one_finder_and_its_decision() -> None:
    code = (
        "import importlib, os, sys, loopwatch._native as n, loopwatch.core._canonical\n"
        "first = n.compiled(); os.environ['LOOPWATCH_PURE_PYTHON'] = '1'\n"
        "importlib.reload(n); importlib.reload(sys.modules['loopwatch'])\n"
        "import loopwatch.core._steps as s\n"
        "finders = [f for f in sys.meta_path if getattr(f, 'loopwatch_native', False)]\n"
        "print(len(finders), n.compiled() == first, s.__file__.endswith('.py') != first)"
    )
    assert _python(code) == "1 True True\n"


def test_use_source_before_any_of_them_is_imported() -> None:
    code = "import loopwatch._native as n; n.use_source(); " + WHERE
    assert _python(code) == "False True\n"


_LOWERCASED = (
    "from loopwatch.core import _fingerprint, _tools\n"
    "from loopwatch.core.detectors import _rephrase_text, _text\n"
    "import loopwatch._native as n\n"
    "greek = 'ΟΔΥΣΣΕΥΣ ΑΣ Σ ΣΑ x'\n"
    "print(n.compiled(), _text.word_bits(greek, 48), _rephrase_text.word_sketch(greek, 400, 48, 512),\n"
    "      sorted(_tools.search_query('ΑΣ', {'q': greek})), _tools.search_query_hashes('ΑΣ', {'q': greek}),\n"
    "      _fingerprint.normalized_args({'q': greek}))"
)


@needs_build
def test_compiled_or_not_text_is_lowercased_alike() -> None:
    # Unicode's one rule that looks at the neighbours (a capital sigma ending a word becomes "ς") is lost when mypyc
    # compiles str.lower() (before Python 3.13): the compiled modules call str.lower as a function instead
    compiled = _python(_LOWERCASED)
    source = _python(_LOWERCASED, env={"LOOPWATCH_PURE_PYTHON": "1"})
    assert compiled.startswith("True ") and source.startswith("False ")
    assert compiled.split(" ", 1)[1] == source.split(" ", 1)[1]
    assert "ας" in source and "ασ" not in source


_NUMBERS = """
import loopwatch
from loopwatch.config import config_from_mapping
from loopwatch.core import Engine
from loopwatch.core._events import Message, ToolCall
from loopwatch.core._judge import JudgeAnswer, LoopJudge
from loopwatch.core._verdict import ok
e = Engine(config_from_mapping({"limits": {"max_iterations": 1}}).policy())
print(e.observe(e.new_session(), ToolCall("bash", {"command": "ls"})).evidence)
e = Engine(loopwatch.preset("default-lexical"))
d = e.dump(e.new_session())
d["usage"].update(cost=0, first_ts=5, last_ts=7)
print(e.dump(e.load(d))["usage"])
r = next(x for x in e.policy.detectors if x.name == "rephrase")
j = r.dump_state(r.new_state())
j["channels"] = {"message": {"past": [], "n": 1, "start": 0, "idx": [0], "sim": 1}}
print(r.dump_state(r.load_state(j))["channels"]["message"]["sim"])
e = Engine(config_from_mapping({"detectors": {"failure_streak": {"similarity": 1}}}).policy())
print([repr(x) for x in e.policy.detectors if x.name == "failure_streak"])
answer = JudgeAnswer(True, 1, "r")
asked = dict(session="s", event=Message("assistant", "x"), suspicion="x")
print(e.judged(ok(3), answer, LoopJudge(lambda q: True), **asked).verdict.evidence["judge"])
d = e.dump(e.new_session())
d["detectors"][[x.name for x in e.policy.detectors].index("similar_text")]["history"] = [1]
try:
    e.load(d)
except Exception as exc:
    print(exc)
"""


@needs_build
def test_compiled_or_not_numbers_and_messages_come_out_alike() -> None:
    # compiled code reads a value it declares `float` as a C double: an int there comes out as a float (a limit's
    # evidence, a snapshot's usage, a rule's setting in its repr) unless the code says `float | int` or makes it one
    # float first; and a parameter it declares `str` is refused before the function's own check can explain why
    compiled = _python(_NUMBERS)
    source = _python(_NUMBERS, env={"LOOPWATCH_PURE_PYTHON": "1"})
    assert compiled == source
    assert "{'value': 1, 'limit': 1}" in source and "'first_ts': 5" in source and "similarity=1.0" in source
    assert "a sketch must be base64 text, not int" in source


@needs_build
def test_compiled_or_not_a_scan_says_the_same() -> None:
    assert _python(WHERE) == "True False\n"  # the first scan runs the compiled modules
    scan = [sys.executable, "-m", "loopwatch", "scan", "examples", "--json", "--no-config"]
    env = {k: v for k, v in os.environ.items() if k != "LOOPWATCH_PURE_PYTHON"}
    compiled = subprocess.run(scan, capture_output=True, text=True, cwd=ROOT, env=env, check=True, timeout=300)
    source = subprocess.run(
        scan,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "LOOPWATCH_PURE_PYTHON": "1"},
        check=True,
        timeout=300,
    )
    assert compiled.stdout == source.stdout and '"detections": [{' in compiled.stdout


def test_a_build_drops_compiled_modules_left_beside_a_source_no_longer_compiled(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("hatch_build_under_test", ROOT / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    hatch_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hatch_build)
    package = tmp_path / "loopwatch" / "core"
    package.mkdir(parents=True)
    for name in ("_engine.py", f"_engine{SUFFIX}", "_steps.py", f"_steps{SUFFIX}", f"_kernels_c{SUFFIX}"):
        (package / name).write_text("")
    hatch_build._drop_strays(tmp_path / "loopwatch", {package / f"_steps{SUFFIX}"}, SUFFIX)
    left = sorted(p.name for p in package.iterdir())
    assert left == sorted(["_engine.py", "_steps.py", f"_steps{SUFFIX}", f"_kernels_c{SUFFIX}"])
    assert hatch_build.core_modules() == list(_native.MODULES)


# -- the compiled rules' constructors, as their source writes them ------------------------------------------------

_DESCRIBE = (
    "import inspect, json, loopwatch._presets as p\n"
    "from loopwatch._config_rules import _type_hints, parameters_of\n"
    "from loopwatch._native import compiled\n"
    "out = {'compiled': compiled(), 'rules': {}}\n"
    "for name in p.PRESETS:\n"
    "    for d in p.preset(name).detectors:\n"
    "        kind = type(d)\n"
    "        params = {k: [str(v.kind), repr(v.default)] for k, v in parameters_of(kind).items()}\n"
    "        hints = {k: repr(v) for k, v in _type_hints(kind).items() if k != 'return'}\n"
    "        out['rules'][name + '/' + d.name] = [repr(d), params, hints, d == p.preset(name).detectors[0]]\n"
    "print(json.dumps(out))"
)


@needs_build
def test_compiled_rules_show_and_take_what_their_source_does() -> None:
    """A compiled rule keeps neither its constructor's annotations nor an instance dictionary: its ``repr`` (which
    audit records quote), the parameters a configuration may set and their types come from what the build wrote
    down from the source, and are those of the source."""
    import json

    compiled = json.loads(_python(_DESCRIBE))
    source = json.loads(_python(_DESCRIBE, env={"LOOPWATCH_PURE_PYTHON": "1"}))
    assert compiled["compiled"] and not source["compiled"]
    assert compiled["rules"] == source["rules"]
    assert any("Literal" in hint for _, _, hints, _ in source["rules"].values() for hint in hints.values())


def test_the_build_writes_down_each_compiled_rule_s_constructor() -> None:
    import json

    from loopwatch.core import _configured

    assert _native.CONSTRUCTORS.rsplit("/", 1)[-1] == _configured.TABLE_FILE  # where the build writes, it is read
    code = "import json; from loopwatch._native import constructors; print(json.dumps(constructors()))"
    table = json.loads(_python(code, env={"LOOPWATCH_PURE_PYTHON": "1"}))
    record = table["loopwatch.core.detectors._text.SimilarTextDetector"]
    assert record["params"][0] == ["metric", "Metric", "'jaccard'"]  # name, annotation, default: as written
    assert record["attributes"][:2] == ["metric", "threshold"]
    # a class attribute is not an instance's (its repr does not show it)
    assert "reset_on_user" not in table["loopwatch.core.detectors._error_retry.ErrorRetryDetector"]["attributes"]
    if BUILT:
        assert _configured._table() == table or not _native.compiled()


def test_a_constructor_the_build_cannot_write_down_is_refused() -> None:
    from loopwatch.core._configured import Configured, constructor_table

    class Positional(Configured):
        def __init__(self, n: int = 1) -> None:
            self.n = n

    class Computed(Configured):
        def __init__(self, *, items: frozenset[str] = frozenset({"a"})) -> None:
            self.items = items

    for kind, said in ((Positional, "keyword-only"), (Computed, "not a literal")):
        with pytest.raises(ValueError, match=said):
            constructor_table([kind])
