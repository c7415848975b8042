"""What loopwatch knows about common agent tools: which arguments do not change what a call does, where a look-up
looks, and which commands of a multi-command tool only read.

A call's fingerprint leaves out arguments that describe or tune a call without changing what it does: Claude
Code's ``Bash(description=..., timeout=...)``, OpenHands' ``security_risk``, a ``thought`` or ``reasoning`` field
riding along with the real arguments, MCP's ``_meta``. Two calls that differ only there are the same call. The
tables below cover the tools of Claude Code, OpenHands, SWE-agent and MCP; a policy's per-tool settings
(:class:`loopwatch.core.ToolSettings`: ``ignore_keys``, ``keep_keys``) add to them or replace them.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ._kernels import alnum_word_pair, lower, shared_words
from ._kernels_py import WORD_CODE
from ._lazy_re import lazy_compile

__all__ = [
    "ANNOTATION_KEYS",
    "TOOL_IGNORED_KEYS",
    "batch_items",
    "command_segments",
    "ignored_keys",
    "moves",
    "moves_relatively",
    "query_hashes",
    "reads_only",
    "runs_code",
    "same_places",
    "same_query",
    "scope_overlaps",
    "search_query",
    "search_query_hashes",
    "search_scopes",
]

ANNOTATION_KEYS: Final = frozenset(
    {"thought", "thoughts", "reasoning", "explanation", "security_risk", "task_progress", "_meta"}
)
"""Keys that annotate a call in any tool (the model's reasoning, a risk rating, request metadata): left out of the
fingerprint whenever the call has other arguments (a ``think(thought=...)`` tool keeps its only argument)."""

TOOL_IGNORED_KEYS: Final[Mapping[str, frozenset[str]]] = {
    # Claude Code
    "Bash": frozenset({"description", "timeout", "run_in_background", "dangerouslyDisableSandbox"}),
    "BashOutput": frozenset(),
    "Task": frozenset({"description"}),
    # OpenHands (CodeAct)
    "execute_bash": frozenset({"timeout", "blocking"}),
    "execute_ipython_cell": frozenset({"include_extra"}),
    "str_replace_editor": frozenset({"impl_source"}),
    # common shell tools of other harnesses
    "bash": frozenset({"timeout", "description"}),
    "shell": frozenset({"timeout", "description", "workdir_description"}),
    "run_shell_command": frozenset({"description", "timeout"}),
    "run_terminal_cmd": frozenset({"explanation", "is_background"}),
}
"""Per tool: keys that tune or describe a call without changing what it does."""


def ignored_keys(tool: str, args: Mapping[str, Any]) -> frozenset[str]:
    """The keys of ``args`` a fingerprint of ``tool`` leaves out (see the module docstring)."""
    per_tool = TOOL_IGNORED_KEYS.get(tool)
    present = [key for key in args if key in ANNOTATION_KEYS or (per_tool is not None and key in per_tool)]
    if not present or len(present) == len(args):
        return frozenset()  # nothing to leave out, or nothing would be left: a call is never reduced to nothing
    return frozenset(present)


_READ_COMMANDS: Final = frozenset({"view", "read", "show", "list", "cat"})


_CODE_TOOLS: Final = frozenset(
    {
        "python", "python_execute", "execute_python", "run_python", "ipython", "execute_ipython_cell",
        "code_interpreter", "code_execution", "run_code", "execute_code", "jupyter", "notebook", "javascript", "node",
    }
)  # fmt: skip


def runs_code(tool: str) -> bool:
    """Does the tool run a piece of code it is given (a Python cell, a script)? What the code changes is unknown."""
    return lower(tool) in _CODE_TOOLS


_MOVES: Final = frozenset({"cd", "pushd", "popd"})


def moves(tool_key: str | None) -> bool:
    """Does the call change the current folder (``cd``, ``pushd``, ``popd``)? Its empty answer hides a new place."""
    return tool_key is not None and tool_key.rsplit(":", 1)[-1] in _MOVES


def moves_relatively(tool_key: str | None, command: str | None) -> bool:
    """A move relative to where the agent is (``cd ..``, ``cd -``, ``popd``): the same call, run again, goes
    somewhere else, so its repeats are not the same call with the same result."""
    if not moves(tool_key) or command is None:
        return False
    words = command.split()
    target = words[-1].strip("'\"") if len(words) > 1 else ""
    return target in ("", "-") or target == ".." or target.startswith("../") or words[0] == "popd"


def reads_only(tool: str, args: Mapping[str, Any]) -> bool:
    """Is this a read through a tool that can also change things (``str_replace_editor`` with ``command=view``)?"""
    command = args.get("command")
    return isinstance(command, str) and command in _READ_COMMANDS and "editor" in lower(tool)


# -- where a look-up looks ----------------------------------------------------------------------------------

_SCOPE_KEYS: Final = (
    "path", "file_path", "filepath", "file", "filename", "dir", "directory", "dir_path", "cwd", "folder", "url", "uri",
)  # fmt: skip
_SCOPE_RANK: Final = {key: rank for rank, key in enumerate(_SCOPE_KEYS)}
"""Each scope key's place in :data:`_SCOPE_KEYS` (the order a call's places are read in)."""
_EXTENSION: Final = lazy_compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}$")
_PATTERN_FIRST: Final = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "ack", "search_dir", "search_file", "find_file", "git"}
)
"""Programs whose first operand is what is looked for, and the rest where (``grep -rn foo src/``)."""
_PATHS_ONLY: Final = frozenset(
    {"find", "ls", "cat", "head", "tail", "less", "more", "wc", "stat", "file", "tree", "du", "open", "fd"}
)
"""Programs whose operands are all places (``find`` stops at its first expression)."""
_QUERY_ONLY: Final = frozenset({"which", "whereis", "type", "locate", "printenv", "env", "echo", "command"})
_CWD_BY_DEFAULT: Final = frozenset({"find", "find_file", "search_dir", "rg", "ag", "ack", "ls", "tree", "fd", "du"})
"""Programs that search the current folder when given no place."""
_RECURSIVE: Final = frozenset({"-r", "-R", "-rn", "-rni", "-rl", "-Rn", "-nr", "--recursive"})


def command_segments(command: str) -> list[str]:
    """The parts of a command line's first 300 characters between ``&&``, ``||``, ``;`` and line ends (``str.replace``
    is several times faster than a regular expression here)."""
    return command[:300].replace("&&", "\n").replace("||", "\n").replace(";", "\n").split("\n")


def search_scopes(tool: str, args: Mapping[str, Any], command: str | None = None) -> tuple[str, ...]:
    """Where a look-up looks: the paths (or URLs) it names, normalised (``./src/`` -> ``src``), at most four.

    For a shell command or a command-line tool (SWE-agent's ``find_file NAME DIR``), the operands that name places,
    by what the program is (``grep PATTERN PATH...``, ``find PATH... EXPR``, ``ls PATH...``); for an unknown
    program, the operands that look like paths (a ``/``, a file extension, ``.``, ``..``, ``~``). For other tools,
    the values of path-like keys (``path``, ``file_path``, ``url``...).
    """
    scopes: list[str] = []
    # the call's own keys that name places, in the order of _SCOPE_KEYS (a call has few keys: each looked up once)
    keys = [key for key in args if key in _SCOPE_RANK]
    if len(keys) > 1:
        keys.sort(key=_SCOPE_RANK.__getitem__)
    for key in keys:
        value = args[key]
        if isinstance(value, str) and value:
            scopes.append(value)
    if command:
        for segment in command_segments(command):
            scopes.extend(_operand_places(segment.split("|", 1)[0].split()))
    return tuple(dict.fromkeys([_normal_scope(scope) for scope in scopes[:8]]))[:4]


_TOKEN: Final = lazy_compile(r"[^\W_]+")


def search_query(
    tool: str, args: Mapping[str, Any], command: str | None = None, *, places: Iterable[str] | None = None
) -> frozenset[str]:
    """What a look-up looks for: the lowercased words of its arguments without the places it looks in, the program
    or tool name and option flags (``grep -rn "def foo" src/`` -> ``{"def", "foo"}``). ``places``: the call's
    :func:`search_scopes`, when already known."""
    text, names = _query_text(tool, args, command, places)
    return frozenset(_TOKEN.findall(lower(text))) - names


def search_query_hashes(
    tool: str, args: Mapping[str, Any], command: str | None = None, *, places: Iterable[str] | None = None
) -> list[int]:
    """``query_hashes(search_query(...))`` read in one kernel pass: :func:`~loopwatch.core._kernels.alnum_word_pair`
    splits, lowercases, hashes and sorts the same words at C speed (two words with one CRC-32 count once, where
    :func:`query_hashes` would list it twice)."""
    text, names = _query_text(tool, args, command, places)
    if not text:
        return []
    hashes = array(WORD_CODE, alnum_word_pair(text, len(text))[0])
    named = {zlib.crc32(name.encode("utf-8", "surrogatepass")) for name in names}
    if named.isdisjoint(hashes):
        return list(hashes[:_QUERY_WORDS])
    # a name among the words (a program named again), or a word whose CRC-32 is a name's: only a name that is one
    # of the words leaves them (rare: the words are read again here)
    words = frozenset(_TOKEN.findall(lower(text)))
    skipped = {zlib.crc32(name.encode("utf-8", "surrogatepass")) for name in names if name in words}
    return [value for value in hashes if value not in skipped][:_QUERY_WORDS]


def _query_text(
    tool: str, args: Mapping[str, Any], command: str | None, places: Iterable[str] | None
) -> tuple[str, set[str]]:
    """The text a look-up's query words are read from (not lowercased yet), and the names that are not query
    words (see :func:`search_query`)."""
    places = set(search_scopes(tool, args, command) if places is None else places)
    names = {lower(tool)}
    texts: list[str] = []
    if command:
        for segment in command_segments(command):
            words = segment.split()
            if words:
                names.add(lower(words[0].rsplit("/", 1)[-1]))
            texts.extend(w for w in words[1:] if not w.startswith("-") and _normal_scope(w.strip("'\"")) not in places)
    else:
        for key, value in args.items():
            if key not in _SCOPE_RANK and key not in ANNOTATION_KEYS and isinstance(value, (str, int, float)):
                texts.append(str(value)[:200])
    return " ".join(texts), names


_QUERY_WORDS: Final = 16
"""The query words a look-up keeps (the lowest hashes): what two look-ups are compared by."""


def query_hashes(words: frozenset[str], limit: int = _QUERY_WORDS) -> list[int]:
    """CRC-32s of (at most ``limit``) query words, sorted: a small JSON-able stand-in for the words themselves."""
    return sorted(zlib.crc32(word.encode("utf-8", "surrogatepass")) for word in words)[:limit]


def same_query(a: Sequence[int], b: Sequence[int], similarity: float = 0.5) -> bool:
    """Do two look-ups look for the same thing (their query words overlap by at least ``similarity``; two with no
    query words look for the same)?"""
    if not a or not b:
        return (not a and not b) or similarity <= 0.0  # nothing shared with a look-up that looks for something
    x, y = set(a), set(b)
    return len(x & y) / len(x | y) >= similarity


def same_words(a: bytes, b: bytes, similarity: float = 0.5) -> bool:
    """:func:`same_query` of two sets of word hashes packed 4 bytes each (as :func:`alnum_word_pair` packs them),
    counted by the kernel without making them integers."""
    if not a or not b:
        return (not a and not b) or similarity <= 0.0
    shared, mine, theirs = shared_words(a, b)
    return shared / (mine + theirs - shared) >= similarity


def same_places(places: Sequence[str], other_places: Sequence[str]) -> bool:
    """Do two look-ups look in the same place, or around or inside it (two that name no place look in the same
    one)?"""
    if not places or not other_places:
        return not places and not other_places
    for a in places:  # loops, not any() over a generator: this runs for each recent look-up at every call
        for b in other_places:
            if scope_overlaps(a, b):
                return True
    return False


def batch_items(places: list[str], query: list[int], other_places: list[str], other_query: list[int]) -> bool:
    """The same thing looked for in two distinct places (one file after another): items of a batch, not a retry."""
    if not places or not other_places or not same_query(query, other_query):
        return False
    return not any(scope_overlaps(a, b) for a in places for b in other_places)


def _operand_places(words: list[str]) -> list[str]:
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    if program == "git" and len(words) > 1 and words[1] == "grep":
        words, program = words[1:], "grep"
    operands: list[str] = []
    for word in words[1:]:
        word = word.strip("'\"")
        if not word:
            continue
        if word.startswith("-") or word in ("(", "!", "\\("):
            if program == "find":
                break  # find's expression starts: the rest are not places
            continue
        operands.append(word)
    if program in _QUERY_ONLY:
        return []
    if program in _PATTERN_FIRST:
        places = operands[1:]
    elif program in _PATHS_ONLY:
        places = operands
    else:
        return [w for w in operands if "/" in w or w in (".", "..", "~") or _EXTENSION.search(w)]
    if not places and (program in _CWD_BY_DEFAULT or (program == "grep" and _RECURSIVE & set(words))):
        places = ["."]  # a search with no place given searches where it runs
    return places


def _normal_scope(path: str) -> str:
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/") or ("/" if path.startswith("/") else ".")


def scope_overlaps(a: str, b: str) -> bool:
    """Does one of two search scopes contain the other (the same path, a folder and something inside it)?

    Absolute paths (``/``, ``~``) are compared with absolute ones; relative ones with relative ones, ``..`` holding
    the current folder and everything in it. An absolute and a relative path are not compared (``False``).
    """
    if not (a.startswith(b) or b.startswith(a)) and a[:1] != "." and b[:1] != ".":
        return False  # containment needs one path to start with the other, but for ".", "..", "../.." (cheap test)
    return a == b or _contains(a, b) or _contains(b, a)


def _contains(outer: str, inner: str) -> bool:
    if outer.startswith(("/", "~")) or inner.startswith(("/", "~")):
        if outer in ("/", "~"):
            return inner.startswith(outer)
        return inner.startswith(outer + "/")
    ups_outer, rest_outer = _split_ups(outer)
    ups_inner, rest_inner = _split_ups(inner)
    if ups_outer > ups_inner:
        return rest_outer == ""  # "..": the folder above holds the current one and everything in it
    if ups_outer < ups_inner:
        return False
    return rest_outer == "" or rest_inner == rest_outer or rest_inner.startswith(rest_outer + "/")


def _split_ups(path: str) -> tuple[int, str]:
    """(how many folders above the current one a relative path starts, the rest): ``../../x`` -> (2, "x")."""
    levels = 0
    while path == ".." or path.startswith("../"):
        levels += 1
        path = path[3:]
    return levels, "" if path == "." else path
