"""Claude Code command hooks: ``loopwatch hook claude-code`` (or ``python -m loopwatch.adapters.claude_code``).

    loopwatch hook claude-code --install [--project | --user | --local] [--store URL] [--preset NAME] [--config FILE]
                               [--idle-exit SECONDS | --in-process]
    loopwatch hook claude-code --uninstall [--project | --user | --local]
    loopwatch hook claude-code --status | --stop                                   # the local hook server
    loopwatch hook claude-code [--store URL] [--preset NAME] [--config FILE] [--fail-closed]   # judge one event here
    loopwatch hook claude-code --serve [--port N]; --install --http URL | --relay URL        # one process for all

Claude Code starts the hook once per event, with the event's JSON on stdin; the hook judges it with a
:class:`~loopwatch._guard.Guard` whose sessions live in a SQLite file, so the verdicts of one session build up
across processes (concurrent hooks of parallel tool calls never lose an update: the store's compare-and-set).

Events (``hook_event_name``) and what the guard sees:

- ``PreToolUse``: ``ToolCall(tool_name, tool_input, id=tool_use_id)``;
- ``PostToolUse``: ``ToolResult(output, tool=tool_name, id=tool_use_id)``; ``output`` is ``tool_response`` as
  text: a string as is; Bash's ``{stdout, stderr, ...}`` as stdout then stderr; content blocks (MCP tools, the
  ``Agent`` tool) as their text; ``Read``'s ``file.content``; anything else as compact JSON without the fields
  that change on every run (``durationMs``, token counts...). ``is_error`` when the response says ``is_error``
  / ``isError``, or ``interrupted`` (a Bash command killed by its timeout);
- ``PostToolUseFailure``: ``ToolResult(error, is_error=True, exit_code=N)`` (``N`` from a first line
  ``Exit code N``, which Bash failures carry);
- ``UserPromptSubmit``: ``Message("user", prompt)``. When the session was stopped, it is reset first: a stop
  ends the looping turn, and the next prompt you type starts the loop counters afresh (limits keep counting);
- ``Stop``: ``Message("assistant", last_assistant_message)`` (nothing when the turn ended without text).

Sessions: ``session_id``; inside a subagent (``agent_id`` present), ``SESSION/agent-AGENT_ID``, as
``--format claude-code`` names sidechains, so a subagent's calls never mix with its parent's. The main session
and its subagents form a swarm named ``SESSION``: the same call repeated across them gets the swarm nudge.

Verdicts become the hook's JSON on stdout (always exit 0; no output for ``ok``):

- ``nudge`` on ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure``, ``UserPromptSubmit``:
  ``{"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": MESSAGE}}``: Claude reads it next
  to the tool result (next to the prompt). A ``block`` on an event whose action already happened (a result,
  a prompt) is delivered the same way;
- ``nudge`` (or ``block``) on ``Stop``: ``{"systemMessage": "loopwatch: MESSAGE"}``, shown to the user only:
  ``additionalContext`` or ``decision: "block"`` on ``Stop`` would make Claude go on, the opposite of a nudge;
- ``block`` on ``PreToolUse``: ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
  "deny", "permissionDecisionReason": MESSAGE}}``: the call does not run and Claude reads the reason;
- ``stop``: ``{"continue": false, "stopReason": "loopwatch: STATUS (PATTERN): REASON"}`` (e.g. ``loopwatch:
  LOOP_DETECTED (repeat): Bash called 8 times in a row with the same arguments and no new result``), plus the
  deny above on ``PreToolUse``. Claude Code stops; the reason is shown to the user.

``allow`` is never returned: loopwatch only takes calls away, your permission rules and prompts still apply.

Failing open: malformed input, a store that cannot be opened or written, a bad ``--config``, any internal
error: a note on stderr (Claude Code's debug log), no output, exit 0; the event goes ahead unjudged. With
``--fail-closed``, tool calls are denied instead while the guard cannot judge them (other events still go
ahead: refusing a prompt or a tool result helps nobody).

State: ``--store URL``, else ``$LOOPWATCH_STORE``, else ``sqlite:///CACHE/loopwatch/claude-code.db?ttl=604800``
(``CACHE``: ``$XDG_CACHE_HOME``, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows, else
``~/.cache``); sessions expire 7 days after their last event, and expired rows are deleted on each prompt.
Policy: ``--preset NAME`` (default ``default-lexical``: ``default`` without the embedding model, which a
process per event cannot afford to load), ``--config FILE`` (a ``loopwatch.toml`` or ``pyproject.toml``).

``--install`` writes one entry per event into ``.claude/settings.json`` of the current directory
(``--project``, the default), ``~/.claude/settings.json`` (``--user``) or ``.claude/settings.local.json``
(``--local``, not committed): ``{"matcher": "*", "hooks": [{"type": "command", "command": CMD, "timeout":
10}]}`` appended to each event's list (no matcher for ``UserPromptSubmit`` and ``Stop``). Everything else in
the file is kept; installing again replaces loopwatch's entries (no duplicates). ``--uninstall`` removes
exactly the handlers whose command runs ``loopwatch hook claude-code`` or ``loopwatch.adapters.claude_code``.
``CMD`` is ``PYTHON -c 'import sys; from loopwatch.adapters.claude_code_hook import main; sys.exit(main())'``
(:mod:`loopwatch.adapters.claude_code_hook`: each event handed to the user's local hook server, which that command
starts when none runs, judged by this module's :func:`answer`); with ``--in-process``, the ``loopwatch`` script
next to the running interpreter (else ``PYTHON -m loopwatch.adapters.claude_code``), judging every event in its own
process; with ``--store``, ``--preset``, ``--config`` and ``--fail-closed`` when given. ``--status`` and ``--stop``
show and stop the local hook server.

``--serve`` runs the hook as a local HTTP service instead (:mod:`loopwatch.adapters.claude_code_server`), for
Claude Code's ``http`` handlers: ``--install --http URL`` writes them.

Speed: judging here, every event starts a Python process that loads the rules, so this module imports only what
judging needs (``argparse``, ``pathlib`` and the settings code load for ``--install`` only); the installed command's
local hook server avoids most of it. ``benchmarks/bench_hook.py`` measures both.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, Final

from ._claude_code_events import (
    HOOK_EVENTS,
    HookInputError,
    _deny,
    event_of,
    response_for,
    response_text,
    session_of,
    stop_reason,
)
from ._claude_code_events import MAX_TEXT as MAX_TEXT
from ._claude_code_events import TOOL_EVENTS as TOOL_EVENTS

if TYPE_CHECKING:
    from .._guard import Guard
    from ..core._policy import Policy
    from ._claude_code_settings import (
        SettingsError,
        hook_command,
        install_hooks,
        is_loopwatch_hook,
        settings_path,
        uninstall_hooks,
    )

__all__ = [
    "HOOK_EVENTS",
    "HookInputError",
    "SettingsError",
    "answer",
    "decode_input",
    "default_store_path",
    "event_of",
    "handle",
    "hook_command",
    "install_hooks",
    "is_loopwatch_hook",
    "main",
    "response_for",
    "response_text",
    "run_hook",
    "session_of",
    "settings_path",
    "stop_reason",
    "uninstall_hooks",
]

DEFAULT_TTL: Final = 7 * 24 * 3600
"""Seconds a session's state outlives its last event in the default store."""
HOOK_TIMEOUT: Final = 10
"""Seconds Claude Code gives one hook run before it cancels it (and goes ahead): written by ``--install``."""
LOCK_WAIT: Final = 2.0
"""Seconds one hook run waits in all for another process's lock on the session store (a busy SQLite file)
before it fails open (or closed, with ``--fail-closed``): well under :data:`HOOK_TIMEOUT`."""
MODULE: Final = "loopwatch.adapters.claude_code"
RELAY_MODULE: Final = "loopwatch.adapters.claude_code_relay"
LOCAL_CODE: Final = "import sys; from loopwatch.adapters.claude_code_hook import main; sys.exit(main())"
"""What ``--install`` has Python run by default (``PYTHON -c CODE``): events handed to the user's local hook server."""
SERVICE_PATH: Final = "/loopwatch/claude-code"
"""The path of the hook service (``--serve``; :mod:`loopwatch.adapters.claude_code_server`)."""
_VALUED: Final = ("--store", "--preset", "--config")
HOOK_PRESET: Final = "default-lexical"
"""The hook's preset unless ``--preset`` says otherwise: ``default`` without the embedding model."""
_SETTINGS: Final = frozenset(
    {"SettingsError", "hook_command", "install_hooks", "is_loopwatch_hook", "settings_path", "uninstall_hooks"}
)
"""The names of the ``settings.json`` code (:mod:`._claude_code_settings`), loaded on first use: a hook run
never needs them."""


def __getattr__(name: str) -> Any:
    """The ``settings.json`` names on first use."""
    if name in _SETTINGS:
        from . import _claude_code_settings

        value = getattr(_claude_code_settings, name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- judging one hook event -------------------------------------------------------------------------------


def handle(guard: Guard, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """Judge one hook input with ``guard``: the hook's JSON output, or None for no output."""
    name = payload.get("hook_event_name")
    if name not in HOOK_EVENTS:
        return None
    session = session_of(payload)
    event = event_of(payload)
    if event is None:
        return None
    if name == "UserPromptSubmit" and _stopped(guard, session):
        guard.reset(session)  # the person is back: a stopped session starts afresh with their prompt
    verdict = guard.observe(session, event, swarm=str(payload["session_id"]))
    return response_for(str(name), verdict)


def _stopped(guard: Guard, session: str) -> bool:
    """Was the session stopped? (A stored state that cannot be read is left to ``observe``, which follows
    the guard's ``on_store_error``.)"""
    from .._stored import DamagedStateError

    try:
        return guard.snapshot(session)["state"].get("stopped") is not None
    except DamagedStateError:
        return False


# -- the guard --------------------------------------------------------------------------------------------


def default_store_path(environ: Mapping[str, str] | None = None) -> str:
    """``CACHE/loopwatch/claude-code.db``, ``CACHE`` being the user's cache directory (as ``environ``, default
    this process's environment, says)."""
    from .claude_code_hook import _cache_dir

    return os.path.join(_cache_dir(environ), "claude-code.db")


def _policy(preset: str | None, config: str | None, no_config: bool = False) -> Policy:
    from .._policy_spec import PolicySpec

    # the project's own loopwatch.toml / [tool.loopwatch], if any; without one, the preset: a hook is a new
    # process per event, and loading an embedding model in each would cost a second, so the default here
    # compares rephrased intents by their words (--preset default to use the model anyway)
    return PolicySpec.found(preset, config, no_config, default=HOOK_PRESET).build()


def _guard(
    store: str | None,
    preset: str | None,
    config: str | None,
    fail_closed: bool,
    no_config: bool = False,
    *,
    environ: Mapping[str, str] | None = None,
) -> Guard:
    from .._guard import Guard
    from .._stored import use_orjson
    from ..stores import Store, store_from_url

    use_orjson(False)  # one event per process: importing orjson would cost more than it saves
    policy = _policy(preset, config, no_config)
    url = store or (os.environ if environ is None else environ).get("LOOPWATCH_STORE") or None
    backend: Store
    if url:
        backend = store_from_url(url)
    else:
        from ..stores.sqlite import SqliteStore

        path = default_store_path(environ)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        backend = SqliteStore(path, ttl=DEFAULT_TTL)
    return Guard(policy=policy, store=backend, on_store_error="block" if fail_closed else "allow", max_sessions=64)


def _note(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed: nothing more to do
        print(f"loopwatch hook: {message}", file=sys.stderr)


def decode_input(raw: str | bytes) -> dict[str, Any] | None:
    """A hook input from its JSON text, or ``None`` (with a note on stderr) when it is not one."""
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        _note(f"the input is not a Claude Code hook event ({exc}); nothing judged")
        return None
    except RecursionError:  # nested deeper than the JSON parser goes: no hook event looks like that
        _note("the input is not a Claude Code hook event (nested too deeply); nothing judged")
        return None
    if not isinstance(payload, dict):
        _note(f"the input is JSON {type(payload).__name__}, not a hook event object; nothing judged")
        return None
    return payload


def answer(
    payload: Mapping[str, Any], guard: Callable[[], Guard], *, fail_closed: bool = False
) -> dict[str, Any] | None:
    """The hook output for one input, judged by the guard ``guard()`` gives (built here, so that a store that
    cannot be opened fails like any other error): open, or closed for tool calls with ``fail_closed``."""
    built = None
    deadline: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    try:
        built = guard()
        if built.store is not None:  # every wait for a busy store of this run together: at most LOCK_WAIT
            deadline = built.store.deadline(LOCK_WAIT)
        with deadline:
            return handle(built, payload)
    except HookInputError as exc:
        _note(f"{exc}; nothing judged")
        return None
    except Exception as exc:  # a hook must never break Claude Code: fail open (or closed, for tool calls)
        _note(f"could not judge the {payload.get('hook_event_name')} event: {exc}")
        if not (fail_closed and payload.get("hook_event_name") == "PreToolUse"):
            return None
        refused = f"The loop guard could not judge this call ({exc}), so it was refused."
        return {"hookSpecificOutput": _deny(refused)}
    finally:
        if built is not None and payload.get("hook_event_name") == "UserPromptSubmit":
            with deadline:
                _expire(built)


def run_hook(
    stdin: IO[str],
    stdout: IO[str],
    *,
    store: str | None = None,
    preset: str | None = None,
    config: str | None = None,
    fail_closed: bool = False,
    no_config: bool = False,
) -> int:
    """Read one hook input from ``stdin``, write the hook's output to ``stdout``; always 0 (Claude Code goes on)."""
    buffer = getattr(stdin, "buffer", None)
    try:
        raw: str | bytes = buffer.read() if buffer is not None else stdin.read()
    except (ValueError, OSError) as exc:
        _note(f"the input is not a Claude Code hook event ({exc}); nothing judged")
        return 0
    payload = decode_input(raw)
    if payload is None:
        return 0
    response = answer(payload, lambda: _guard(store, preset, config, fail_closed, no_config), fail_closed=fail_closed)
    if response is not None:
        stdout.write(json.dumps(response, ensure_ascii=True) + "\n")
        stdout.flush()
    return 0


def _expire(guard: Guard) -> None:
    """Delete expired sessions (once per prompt: cheap, and the file stays small)."""
    try:
        if guard.store is not None:
            guard.store.expire()
    except Exception as exc:
        _note(f"could not delete expired sessions: {exc}")


# -- command line -----------------------------------------------------------------------------------------


def _seconds(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of seconds, at least 1, not {text!r}")
    return int(text)


def _hook_options(argv: list[str]) -> dict[str, Any] | None:
    """The options of a hook run (what Claude Code runs) without argparse's import; None for anything else."""
    options: dict[str, Any] = {"store": None, "preset": None, "config": None, "fail_closed": False, "no_config": False}
    rest = argv[1:] if argv[:1] == ["claude-code"] else argv
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, value = arg.partition("=")
        if arg == "--fail-closed":
            options["fail_closed"] = True
        elif arg == "--no-config":
            options["no_config"] = True
        elif name in _VALUED and eq:
            options[name[2:]] = value
        elif arg in _VALUED and i + 1 < len(rest):
            options[arg[2:]] = rest[i + 1]
            i += 1
        else:
            return None
        i += 1
    return options


def main(argv: list[str] | None = None, *, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """``loopwatch hook claude-code ...`` (``argv``: the arguments after ``hook``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    out = stdout if stdout is not None else sys.stdout
    options = _hook_options(args_list)
    if options is None:
        from ._claude_code_cli import parsed_command

        command = parsed_command(args_list, out)
        if isinstance(command, int):
            return command
        options = command
    return run_hook(stdin if stdin is not None else sys.stdin, out, **options)


if __name__ == "__main__":
    sys.exit(main())
