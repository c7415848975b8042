"""Fingerprints: what makes two tool calls "the same call" and two results "the same outcome".

Calls: the tool name plus canonical arguments (keys sorted at every depth, array order kept, call ids
never included), optionally projected per tool (ignored keys, or only primary keys) and normalised the
ways the designs the presets reproduce describe (see :mod:`loopwatch._presets`). Outcomes: the output with
volatile parts removed, plus ``is_error`` and ``exit_code``. All functions are pure and bounded in time and memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from functools import partial
from typing import Any, Final

from . import _kernels
from ._canonical import canonical_json, digest, digest_bytes, digest_parts, flat_payload, fold_string, shortened
from ._lazy_re import lazy_compile
from ._masking import masked
from ._tools import command_segments, reads_only

# -- calls --------------------------------------------------------------------------------------------

PRIMARY_KEYS: Final = (
    "path", "file_path", "command", "pattern", "query", "url", "content", "filename", "offset", "limit",
)  # fmt: skip
"""The ``doom-loop`` design's primary argument keys: the structural fingerprint keeps only these."""

SHELL_TOOLS: Final = frozenset(
    {
        "bash", "shell", "sh", "zsh", "execute", "execute_bash", "execute_command", "exec", "run",
        "run_command", "run_shell_command", "run_terminal_cmd", "terminal", "cmd", "powershell",
        "computer_terminal", "code_execution", "python_execute", "local_shell", "container.exec",
    }
)  # fmt: skip
"""Tools that run anything: each program they run is treated as its own tool."""

_COMMAND_KEYS: Final = ("command", "cmd", "script", "code", "input", "commands")
_SUBCOMMAND_PROGRAMS: Final = frozenset(
    {
        "git", "npm", "yarn", "pnpm", "npx", "uv", "poetry", "pipenv", "pip", "pip3", "go", "cargo",
        "mvn", "gradle", "./gradlew", "./mvnw", "make", "docker", "kubectl", "gh", "python", "python3",
        "node", "dotnet", "bundle", "rake", "pytest", "conda", "apt", "apt-get", "brew", "java", "javac",
    }
)  # fmt: skip
_PREFIX_WORDS: Final = frozenset({"sudo", "time", "nohup", "env", "exec", "timeout", "nice", "stdbuf"})
_SETUP_WORDS: Final = frozenset(
    {"cd", "export", "source", ".", "set", "pushd", "popd", "rm", "mkdir", "echo", "true", "unset", "ulimit", "clear"}
)
"""Steps that prepare the work of a command line with several steps (``rm -rf build && cmake ..``): not the work."""
_FILE_READ: Final = lazy_compile(r"^\s*(cat|head|tail)((?:\s+-{1,2}[\w=-]+(?:\s+\d+)?)*)\s+(\S+)\s*$")
_ASSIGNMENT: Final = lazy_compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def is_shell_tool(tool: str) -> bool:
    """True for tools that run arbitrary commands (``bash``, ``shell``, ``execute``...)."""
    return bool(name_traits(tool) & _SHELL_NAME)


def command_of(args: Mapping[Any, Any]) -> str | None:
    """The command string of a shell-like call, if it has one."""
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def program_of(command: str) -> str:
    """The program a shell command runs, with its subcommand for multi-command programs.

    ``cd repo && python -m pytest -x`` -> ``python:-m pytest``... simplified to ``python:pytest``;
    ``FOO=1 sudo git status`` -> ``git:status``; ``cat a | grep b`` -> ``cat``.
    """
    segments = command_segments(command)
    several: bool | None = None  # more than one non-blank segment? (counted only when it matters)
    for segment in segments:
        words = _words(segment.split("|", 1)[0])
        while words and (
            words[0] in _PREFIX_WORDS or words[0].isdigit() or ("=" in words[0] and _ASSIGNMENT.match(words[0]))
        ):
            words = words[1:]
        if not words:
            continue
        if words[0] in _SETUP_WORDS:
            # `cd X` / `export X=...` / `source ...` before other work set up; they are not the work
            if several is None:
                several = sum(1 for other in segments if other.strip()) > 1
            if several:
                continue
        return _name_with_subcommand(words)
    return ""


def _words(text: str) -> list[str]:
    """The first words of a shell segment, quotes dropped (enough to name the program, and fast)."""
    return [word.strip("'\"") for word in text.split(None, 8)[:8]]


def _name_with_subcommand(words: list[str]) -> str:
    program = words[0].rsplit("/", 1)[-1] if not words[0].startswith("./") else words[0]
    if program not in _SUBCOMMAND_PROGRAMS:
        return program
    rest = words[1:]
    while rest and rest[0] in ("-m", "-c", "run", "exec", "x") and len(rest) > 1:
        if rest[0] == "-c":
            return f"{program}:-c"
        rest = rest[1:]
    for word in rest:
        if not word.startswith("-"):
            return f"{program}:{word.rsplit('/', 1)[-1][:64]}"
    return program


def _runs_commands(tool: str, args: Mapping[Any, Any]) -> bool:
    """A tool whose one argument is a command line runs whatever it is given (a harness's ``command`` or ``run``
    action): each program it runs is a tool of its own, as for ``bash``."""
    return (
        len(args) == 1
        and isinstance(args.get("command", args.get("cmd")), str)
        and " " in str(args.get("command", args.get("cmd"))).strip()
    )


def first_word(command: str) -> str:
    """``command.split(None, 1)[0]`` (``""`` for a blank command), without copying the rest of a long command."""
    head = command[:80].split(None, 1)
    if len(head) == 2 or len(command) <= 80:
        return head[0] if head else ""
    words = command.split(None, 1)  # a first word longer than the head, or blanks all through it
    return words[0] if words else ""


def tool_key(tool: str, args: Mapping[Any, Any], *, command: str | None = None) -> str:
    """Which "tool" a call really uses: the tool name, or ``tool:program`` for shell-like tools.

    Agents whose "tool" is the first word of a shell command (SWE-agent's ``cd``, ``python``...) are
    treated the same way when the command runs something else (``cd repo && mvn test`` -> ``cd:mvn:test``).
    """
    command = command if command is not None else command_of(args)
    if not command:
        return tool
    if not is_shell_tool(tool) and first_word(command) != tool and not _runs_commands(tool, args):
        return tool
    program = program_of(command)
    if not program or program == tool:
        return tool
    return f"{tool}:{program}"


def project(
    args: Mapping[Any, Any], *, ignore_keys: Collection[str] = (), keep_keys: Collection[str] | None = None
) -> Mapping[str, Any]:
    """The arguments a fingerprint sees: without ``ignore_keys``; only ``keep_keys`` when given."""
    if keep_keys is not None:
        return {k: v for k, v in args.items() if k in keep_keys}
    if ignore_keys and any(k in args for k in ignore_keys):
        return {k: v for k, v in args.items() if k not in ignore_keys}
    return args


def call_fingerprint(
    tool: str,
    args: Mapping[Any, Any],
    *,
    ignore_keys: Collection[str] = (),
    keep_keys: Collection[str] | None = None,
) -> str:
    """Exact fingerprint: tool name + canonical (projected) arguments. Call ids are never included."""
    payload, _ = call_payload(project(args, ignore_keys=ignore_keys, keep_keys=keep_keys))
    return payload_fingerprint(tool, payload)


def call_payload(args: Mapping[Any, Any]) -> tuple[bytes, str | None]:
    """(what a call fingerprint hashes, the canonical JSON when it had to be built).

    Flat arguments (short strings, numbers, booleans) are encoded by :func:`~loopwatch.core._canonical.flat_payload`
    without building JSON; anything else is its canonical JSON. The same arguments always take the
    same route, so equal arguments always give equal payloads.
    """
    payload = flat_payload(args)
    if payload is not None:
        return payload, None
    canonical = canonical_json(args)
    return canonical.encode("utf-8", "surrogatepass"), canonical


def payload_fingerprint(tool: str, payload: bytes) -> str:
    """The exact call fingerprint of a tool name and its arguments' :func:`call_payload`."""
    return digest_parts(tool.encode("utf-8", "surrogatepass"), b"\x00", payload)


def canonical_fingerprint(tool: str, canonical_args: str) -> str:
    """A fingerprint of a tool name and canonical JSON arguments (seed presets hash serialised forms)."""
    return digest(tool + "\x00" + canonical_args)


_NO_DIGITS: Final = str.maketrans("", "", "0123456789")


def loose_fingerprint(tool: str, payload: bytes) -> str:
    """Fingerprint that ignores every digit in the arguments (the same edit at other line numbers)."""
    return payload_fingerprint(tool.translate(_NO_DIGITS), payload.translate(None, b"0123456789"))


def bash_file_read(command: str) -> str | None:
    """The ``doom-loop`` design: ``cat|head|tail [opts] X`` -> ``X``; ``None`` for pipes, redirects or chains."""
    if any(c in command for c in "|>;&<`$("):
        return None
    match = _FILE_READ.match(command)
    return match.group(3) if match else None


def primary_fingerprint(tool: str, args: Mapping[Any, Any]) -> str:
    """The ``doom-loop`` design's structural fingerprint: primary keys only (all arguments when the call has none of
    them, as the ``doom-loop`` design's ``computeToolFingerprint`` does), ``bash:file_read:X`` for plain reads."""
    if is_shell_tool(tool):
        command = command_of(args)
        target = bash_file_read(command) if command else None
        if target is not None:
            return f"bash:file_read:{target}"
    primary = {k: args[k] for k in PRIMARY_KEYS if k in args}
    return f"{tool}:{canonical_json(primary or args)}"


def exact_serialized(tool: str, args: Mapping[Any, Any]) -> str:
    """The ``doom-loop`` design's exact fingerprint: tool name + identical serialised arguments."""
    return f"{tool}:{canonical_json(args)}"


# -- the behavioral design's normalisation -----------------------------------------------------------------

_UUID: Final = lazy_compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIMESTAMP: Final = lazy_compile(
    r"\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?|\b\d{10}(?:\d{3})?\b"
)
_NUMERIC_ID: Final = lazy_compile(r"\b\d+\b")
# A path is matched from the start of its word only (the look-behind): tried at every character of a long
# word without a slash, the segments would be scanned to its end again each time (quadratic; 256 hex strings
# of 4 KB took seconds). Replacements are the same as without it: a word that has a path has one from its start.
_PATH: Final = lazy_compile(r"(?<![\w.~/-])(?:[\w.~-]*/)+([\w.-]+)")


_TIMESTAMP_DIGITS: Final = lazy_compile(r"\b\d{10}(?:\d{3})?\b")  # _TIMESTAMP where there is no "-"


def _normalize_text(value: str) -> str:
    text = _kernels.lower(value)
    text = _PATH.sub(r"\1", text)
    if "-" in text:  # UUIDs and dates have dashes: without one, only a 10- or 13-digit epoch can match
        text = _UUID.sub("", text)
        text = _TIMESTAMP.sub("", text)
    else:
        text = _TIMESTAMP_DIGITS.sub("", text)
    return _NUMERIC_ID.sub("", text)


class _Written(Exception):
    """The first characters of the normalised arguments are written: the rest is never looked at."""


def _write(value: Any, depth: int, parts: list[str], room: list[int]) -> None:
    """Append the JSON of ``value`` normalised (keys sorted, compact) to ``parts``; :class:`_Written` as soon
    as ``room`` characters are there. Strings, and the containers past 16 levels, as the ``behavioral`` design says."""
    if isinstance(value, str):
        _put(json.dumps(_normalize_text(fold_string(value, 4_096)), ensure_ascii=False), parts, room)
    elif depth > 16 or value is None:
        _put("null", parts, room)
    elif isinstance(value, Mapping):
        items = {str(k): v for k, v in value.items()}
        _put("{", parts, room)
        for n, key in enumerate(sorted(items)):
            _put(("," if n else "") + json.dumps(key, ensure_ascii=False) + ":", parts, room)
            _write(items[key], depth + 1, parts, room)
        _put("}", parts, room)
    elif isinstance(value, (list, tuple)):
        _put("[", parts, room)
        for n, item in enumerate(value[:256]):
            if n:
                _put(",", parts, room)
            _write(item, depth + 1, parts, room)
        _put("]", parts, room)
    elif isinstance(value, bool):
        _put("true" if value else "false", parts, room)
    elif isinstance(value, (int, float)):
        _put("null", parts, room)  # numeric ids removed
    else:
        _put(json.dumps(_normalize_text(repr(value)), ensure_ascii=False), parts, room)


def _put(text: str, parts: list[str], room: list[int]) -> None:
    parts.append(text)
    room[0] -= len(text)
    if room[0] <= 0:
        raise _Written


def normalized_args(args: Mapping[Any, Any]) -> str:
    """Arguments normalised as the ``behavioral`` design does: lowercase, paths to basenames, UUIDs/timestamps/numeric
    ids removed, keys sorted, 200 chars.

    Written as that design's JSON is, key by key in sorted order, and only until 200 characters are there: the
    values after them are never normalised (hundreds of long strings cost what the first few cost)."""
    parts: list[str] = []
    try:
        _write(dict(args), 0, parts, [200])
    except _Written:
        pass
    except Exception:  # arguments no normalisation can walk (a broken __repr__, endless nesting)
        return _normalize_text(canonical_json(args))[:200]
    return "".join(parts)[:200]


# -- outcomes -----------------------------------------------------------------------------------------


# Only what changes from run to run whatever the agent does is masked (see loopwatch.core._masking): timestamps,
# durations, UUIDs, long hex ids, addresses, PIDs, shell line numbers, temp paths. Counters, dates, prices and
# short ids are content: "1/10 replicas ready" then "2/10" is progress.
def outcome_bytes(output: str, masked_output: bytes | None = None) -> bytes:
    """The output as compared for progress: volatile parts removed, blanks dropped (``masked_output``: the
    output's :func:`~loopwatch.core._masking.masked` bytes, when already computed)."""
    return _kernels.blanks_dropped(masked(output) if masked_output is None else masked_output)


ASCII_LOWER: Final = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
"""A ``bytes.translate`` table that lowercases ASCII letters (what ``bytes.lower`` does), so that dropping bytes
and lowercasing take one pass."""


def outcome_fingerprint(output: str, is_error: bool | None = None, exit_code: int | None = None) -> str:
    """Fingerprint of a tool result: masked output + ``is_error`` + ``exit_code``."""
    return outcome_fingerprints(output, is_error, exit_code)[0]


def outcome_fingerprints(
    output: str,
    is_error: bool | None = None,
    exit_code: int | None = None,
    *,
    error: bool = False,
    masked_output: bytes | None = None,
) -> tuple[str, str | None]:
    """(:func:`outcome_fingerprint`, :func:`error_signature` when ``error``) from one masking pass."""
    text = digest_bytes(outcome_bytes(output, masked_output))
    flag = "e" if is_error else ("o" if is_error is False else "?")
    outcome = digest(f"{flag}{exit_code if exit_code is not None else ''}\x00{text}")
    return outcome, (text if error else None)


def error_signature(output: str, masked_output: bytes | None = None) -> str:
    """Fingerprint of an error message, whatever its volatile parts (shell line numbers, ids, timestamps) or
    spacing."""
    return digest_bytes(outcome_bytes(output, masked_output))


def preview(value: Any, limit: int = 160) -> str:
    """A short one-line rendering of a value for messages and audit records."""
    text = value if isinstance(value, str) else canonical_json(value)
    return shortened(" ".join(text[: 4 * limit].split()), limit)


# -- what a call does ---------------------------------------------------------------------------------

_MUTATING_TOOLS: Final = lazy_compile(
    r"edit|write|create|insert|replace|patch|apply|update|delete|remove|rename|move|append|save|set_|put|"
    r"post|submit|commit|install|str_replace|modify|book|cancel|send|upload",
    re.I,
)
_MUTATING_VERB: Final = lazy_compile(
    r"(?:^|[\s;&|(])(?:sed\s+(?:-\w+\s+)*-i|perl\s+-\w*i|tee|patch|mv|cp|rm|mkdir|touch|chmod|ln|"
    r"git\s+(?:apply|checkout|commit|add|reset|stash|restore|am|cherry-pick|rebase|merge)|"
    r"(?:pip3?|uv\s+pip|npm|yarn|pnpm|apt-get|apt|brew|conda|cargo)\s+(?:install|add|remove|uninstall)|"
    r"python3?\s+-m\s+pip\s+install|create|edit|insert|str_replace|apply_patch|truncate|dd)\b"
)
"""A command that changes something by what it runs."""
_REDIRECT: Final = lazy_compile(r"(?<![0-9&>])>{1,2}\s*(?!/dev/null)[^\s&>|]")
"""Output written to a file (not a file descriptor, not ``/dev/null``); a heredoc (``<<``) writes one too."""


_SEARCH_TOOLS: Final = lazy_compile(
    r"^(?:find|find_\w+|search|search_\w+|\w+_search|grep|rg|ag|ack|glob|list|list_\w+|ls|locate|which|whereis|"
    r"lookup|lookup_\w+|query|query_\w+|get_\w+|fetch_\w+|read\w*|open\w*|cat|view\w*|show_\w+|describe_\w+|"
    r"echo|printenv|env|pwd|type|head|tail|less|more|file|stat|du|df)$",
    re.I,
)
_SEARCH_PROGRAMS: Final = frozenset(
    {"find", "grep", "egrep", "rg", "ag", "ack", "ls", "locate", "which", "whereis", "fd", "tree", "cat", "head",
     "tail", "env", "printenv", "type", "command", "git:grep", "git:log", "git:status", "git:ls-files", "sed", "awk",
     "wc", "echo", "pwd", "file", "stat", "du", "df"}
)  # fmt: skip


def is_mutation(tool: str, args: Mapping[Any, Any], *, command: str | None = None) -> bool:
    """Does this call (probably) change something: edit a file, install, write, submit?"""
    if reads_only(tool, args):  # an editor's view command
        return False
    command = command if command is not None else command_of(args)
    if command is not None and not _is_command_line(tool, args):
        command = None  # a script or a piece of code handed to a tool is not a command line: its name tells
    traits = name_traits(tool)
    if command is not None and (traits & _SHELL_NAME or not traits & _MUTATING_NAME):
        # the verb and a heredoc's target are at the start, a trailing redirect at the end
        text = command if len(command) <= 700 else command[:500] + "\n" + command[-200:]
        # three searches, each cheap test first, cost less than one expression of the three alternatives; every
        # match of the verb's starts with a change word where a part of the command starts, which the compiled
        # kernel rules out for most commands in one pass (its pure twin is an expression as costly as the one it spares)
        return (
            ("<" in text and "<<" in text)  # one character first: found with memchr, two ~30x slower
            or (">" in text and _REDIRECT.search(text) is not None)
            or ((not _kernels.COMPILED or _kernels.change_word(text)) and _MUTATING_VERB.search(text) is not None)
        )
    return bool(traits & _MUTATING_NAME)


def _is_command_line(tool: str, args: Mapping[Any, Any]) -> bool:
    """Is the command a call carries a shell command line (a shell tool's, a ``command``/``cmd`` argument) rather
    than code (``code``, ``script``, ``input`` of a tool that runs Python, a notebook cell...)?"""
    return is_shell_tool(tool) or isinstance(args.get("command"), str) or isinstance(args.get("cmd"), str)


_POLL_COMMAND: Final = lazy_compile(
    r"(?:^|[\s;&|(])(?:sleep\s+\d|wait\b|watch\b|tail\s+-[fF]|timeout\s+\d+\s+tail|"
    r"gh\s+(?:run|pr\s+checks)\s+(?:view|watch|list)|gh\s+pr\s+checks|kubectl\s+(?:get|rollout\s+status|wait)|"
    r"docker\s+(?:ps|logs)|squeue|qstat|ps\s+(?:aux|-)|curl\b[^\n]*/(?:status|health|progress|jobs?/))"
)
_POLL_TOOLS: Final = lazy_compile(r"poll|status|progress|wait|output|check_run|job_state", re.I)


def is_poll(tool: str, command: str | None) -> bool:
    """Is this call a wait or a status check (polling a job, tailing a log)? Repeating it is expected."""
    if command is not None and (is_shell_tool(tool) or first_word(command) == tool):
        head = command[:400]
        # every match of the expression starts with a poll word where a part of the command starts: a command
        # without one (most) is ruled out in one pass of the kernel
        return _kernels.poll_word(head) and bool(_POLL_COMMAND.search(head))
    return bool(name_traits(tool) & _POLL_NAME)


def is_search(
    tool: str,
    key: str | None,
    args: Mapping[Any, Any],
    *,
    command: str | None = None,
    changes: Callable[[], bool] | None = None,
) -> bool:
    """Is this call a read-only look-up (find, grep, ls, read a file, a web search...)?

    ``changes`` says whether the call changes something when that is already known (default:
    :func:`is_mutation`); it is asked only for calls that look like a look-up.
    """
    command = command if command is not None else command_of(args)
    if changes is None:
        changes = partial(is_mutation, tool, args, command=command)
    if key and key.startswith(f"{tool}:"):  # a program run through a shell, or a tool that runs command lines
        program = key[len(tool) + 1 :]
        return program in _SEARCH_PROGRAMS and not changes()
    if name_traits(tool) & _SEARCH_NAME:
        return not changes() if command else True
    return reads_only(tool, args)


# -- what a tool's name says, a bit each: SHELL_TOOLS, _MUTATING_TOOLS, _POLL_TOOLS, _SEARCH_TOOLS -----------------

_SHELL_NAME: Final = 1
_MUTATING_NAME: Final = 2
_POLL_NAME: Final = 4
_SEARCH_NAME: Final = 8
_NAMES: Final[dict[str, int]] = {}
"""The traits of the tool names seen lately (three expressions and a set a call, ~1.5 us, read once per name)."""
_NAMES_KEPT: Final = 1_024
"""The most names :data:`_NAMES` keeps (it starts over when full; threads adding at once may pass it by a few)."""
_NAME_CHARS: Final = 128
"""The longest name kept (tool names are short; at most ~0.5 MB kept whatever names an agent makes up)."""


def name_traits(tool: str) -> int:
    """What the name of ``tool`` alone says, as bits (:data:`_SHELL_NAME`, :data:`_MUTATING_NAME`,
    :data:`_POLL_NAME`, :data:`_SEARCH_NAME`); read once per name. Only a plain string of at most
    :data:`_NAME_CHARS` characters is kept; a longer one, or a ``str`` subclass with comparisons of its own, is read
    each time."""
    kept = type(tool) is str and len(tool) <= _NAME_CHARS
    traits = _NAMES.get(tool) if kept else None
    if traits is None:
        traits = (
            (_SHELL_NAME if _kernels.lower(tool) in SHELL_TOOLS else 0)
            | (_MUTATING_NAME if _MUTATING_TOOLS.search(tool) else 0)
            | (_POLL_NAME if _POLL_TOOLS.search(tool) else 0)
            | (_SEARCH_NAME if _SEARCH_TOOLS.match(tool) else 0)
        )
        if kept:
            if len(_NAMES) >= _NAMES_KEPT:
                _NAMES.clear()
            _NAMES[tool] = traits
    return traits
