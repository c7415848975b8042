"""Claude Code command hooks: ``loopwatch hook claude-code`` (or ``python -m loopwatch.adapters.claude_code``).

    loopwatch hook claude-code --install [--project | --user | --local] [--store URL] [--preset NAME] [--config FILE]
                               [--idle-exit SECONDS | --in-process]
    loopwatch hook claude-code --uninstall [--project | --user | --local]
    loopwatch hook claude-code --status | --stop                                   # the local hook server
    loopwatch hook claude-code [--store URL] [--preset NAME] [--config FILE] [--fail-closed]   # judge one event here
    loopwatch hook claude-code --serve [--port N]; --install --http URL | --relay URL        # one process for all

Claude Code starts the hook once per event, with the event's JSON on stdin; the hook judges it with a
:class:`~loopwatch.guard.Guard` whose sessions live in a SQLite file, so the verdicts of one session build up
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

from .._lazy_re import lazy_compile
from ..errors import ConfigError, LoopwatchError
from ..events import Event, Message, ToolCall, ToolResult
from ..verdict import Verdict

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from ..guard import Guard
    from ..policy import Policy

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

HOOK_EVENTS: Final = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop")
"""The events ``--install`` registers (and the only ones the hook judges)."""

TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
DEFAULT_TTL: Final = 7 * 24 * 3600
"""Seconds a session's state outlives its last event in the default store."""
HOOK_TIMEOUT: Final = 10
"""Seconds Claude Code gives one hook run before it cancels it (and goes ahead): written by ``--install``."""
LOCK_WAIT: Final = 2.0
"""Seconds one hook run waits in all for another process's lock on the session store (a busy SQLite file)
before it fails open (or closed, with ``--fail-closed``): well under :data:`HOOK_TIMEOUT`."""
MAX_TEXT: Final = 9_500
"""Characters of a message given to Claude Code (it moves anything over 10,000 to a file)."""
MODULE: Final = "loopwatch.adapters.claude_code"
RELAY_MODULE: Final = "loopwatch.adapters.claude_code_relay"
LOCAL_CODE: Final = "import sys; from loopwatch.adapters.claude_code_hook import main; sys.exit(main())"
"""What ``--install`` has Python run by default (``PYTHON -c CODE``): events handed to the user's local hook server."""
SERVICE_PATH: Final = "/loopwatch/claude-code"
"""The path of the hook service (``--serve``; :mod:`loopwatch.adapters.claude_code_server`)."""

_EXIT_CODE: Final = lazy_compile(r"\s*Exit code (-?\d+)")
_OURS: Final = lazy_compile(
    r"(?:^|[\s/\\\"'])loopwatch(?:\.exe)?[\"']?\s+hook\s+[\"']?claude-code(?:[\"'\s]|$)"
    r"|loopwatch\.adapters\.claude_code(?:_relay|_hook)?\b"
)
# fields of a tool response that change on every run while the result does not
_VOLATILE: Final = frozenset(
    {
        "durationMs",
        "duration_ms",
        "durationSeconds",
        "totalDurationMs",
        "totalTokens",
        "totalToolUseCount",
        "usage",
        "agentId",
        "resolvedModel",
        "modelsUsed",
        "bashEditDiff",
    }
)
_VALUED: Final = ("--store", "--preset", "--config")
HOOK_PRESET: Final = "default-lexical"
"""The hook's preset unless ``--preset`` says otherwise: ``default`` without the embedding model."""


class HookInputError(LoopwatchError, ValueError):
    """The hook's stdin is not a Claude Code hook event loopwatch can judge."""


class SettingsError(LoopwatchError):
    """A ``settings.json`` that cannot be read or changed safely (it is left untouched)."""


# -- hook input -> events ---------------------------------------------------------------------------------


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _blocks_text(blocks: list[Any]) -> str | None:
    """The text of a list of content blocks (``[{"type": "text", "text": ...}]``), None when it is not one."""
    parts = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            return None
    return "\n".join(parts)


def response_text(response: object) -> tuple[str, bool]:
    """A ``tool_response`` as the text the guard compares, and whether it reports a failure."""
    if response is None:
        return "", False
    if isinstance(response, str):
        return response, False
    if isinstance(response, list):
        text = _blocks_text(response)
        return (text if text is not None else _text(response)), False
    if not isinstance(response, Mapping):
        return _text(response), False
    failed = response.get("is_error") is True or response.get("isError") is True or response.get("interrupted") is True
    if "stdout" in response or "stderr" in response:  # Bash, PowerShell
        out, err = response.get("stdout"), response.get("stderr")
        out = out if isinstance(out, str) else ("" if out is None else _text(out))
        err = err if isinstance(err, str) else ("" if err is None else _text(err))
        return (f"{out}\n{err}" if out and err else out or err), failed
    content = response.get("content")
    if isinstance(content, list):  # MCP tools, the Agent tool
        text = _blocks_text(content)
        if text is not None:
            return text, failed
    file = response.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("content"), str):  # Read
        return file["content"], failed
    return _text({k: v for k, v in response.items() if k not in _VOLATILE}), failed


def _opt_str(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def _tool(payload: Mapping[str, Any]) -> str:
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise HookInputError(f"{payload.get('hook_event_name')} without a tool_name")
    return tool


def session_of(payload: Mapping[str, Any]) -> str:
    """The guard's session of a hook event: ``session_id``, or ``session_id/agent-AGENT_ID`` in a subagent."""
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise HookInputError("no session_id in the hook input")
    agent = _opt_str(payload, "agent_id")
    return f"{session}/agent-{agent}" if agent else session


def event_of(payload: Mapping[str, Any]) -> Event | None:
    """The event a hook input stands for (None: nothing to judge); :class:`HookInputError` when malformed."""
    name = payload.get("hook_event_name")
    if name == "PreToolUse":
        args = payload.get("tool_input")
        if args is None:
            args = {}
        elif not isinstance(args, Mapping):
            args = {"input": args}
        return ToolCall(_tool(payload), args, id=_opt_str(payload, "tool_use_id"))
    if name == "PostToolUse":
        output, failed = response_text(payload.get("tool_response"))
        return ToolResult(output, tool=_tool(payload), is_error=failed, id=_opt_str(payload, "tool_use_id"))
    if name == "PostToolUseFailure":
        error = payload.get("error")
        failure = "" if error is None else _text(error)
        code = _EXIT_CODE.match(failure)
        return ToolResult(
            failure,
            tool=_tool(payload),
            is_error=True,
            exit_code=int(code.group(1)) if code else None,
            id=_opt_str(payload, "tool_use_id"),
        )
    if name == "UserPromptSubmit":
        prompt = payload.get("prompt")
        return Message("user", prompt if isinstance(prompt, str) else "")
    if name == "Stop":
        last = payload.get("last_assistant_message")
        return Message("assistant", last) if isinstance(last, str) and last.strip() else None
    return None


# -- verdicts -> hook output ------------------------------------------------------------------------------


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def stop_reason(verdict: Verdict) -> str:
    """``loopwatch: STATUS (PATTERN): REASON``, what the user reads when loopwatch stops Claude."""
    pattern = f" ({verdict.pattern})" if verdict.pattern else ""
    return _clip(f"loopwatch: {verdict.status or 'LOOP_DETECTED'}{pattern}: {verdict.reason or verdict.message or ''}")


def _deny(reason: str) -> dict[str, Any]:
    return {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": _clip(reason)}


def response_for(hook_event: str, verdict: Verdict) -> dict[str, Any] | None:
    """The hook's JSON output for ``verdict`` on ``hook_event`` (None: print nothing)."""
    if verdict.action == "ok":
        return None
    message = verdict.message or verdict.reason or f"loopwatch: {verdict.pattern or 'loop'} detected"
    if verdict.action == "stop":
        out: dict[str, Any] = {"continue": False, "stopReason": stop_reason(verdict)}
        if hook_event == "PreToolUse":
            out["hookSpecificOutput"] = _deny(message)
        return out
    if verdict.action == "block" and hook_event == "PreToolUse":
        return {"hookSpecificOutput": _deny(message)}
    if hook_event == "Stop":  # additionalContext (or decision: block) would keep Claude going
        return {"systemMessage": _clip(f"loopwatch: {message}")}
    return {"hookSpecificOutput": {"hookEventName": hook_event, "additionalContext": _clip(message)}}


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
    from ..stored import DamagedStateError

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
    from ..policy_spec import PolicySpec

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
    from ..guard import Guard
    from ..stored import use_orjson
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


# -- settings.json ----------------------------------------------------------------------------------------


def settings_path(scope: str = "project") -> Path:
    """``.claude/settings.json`` of the current directory (``project``), of ``$HOME`` (``user``), or
    ``.claude/settings.local.json`` of the current directory (``local``)."""
    from pathlib import Path

    if scope == "user":
        return Path(os.path.expanduser("~")) / ".claude" / "settings.json"
    if scope == "local":
        return Path.cwd() / ".claude" / "settings.local.json"
    if scope == "project":
        return Path.cwd() / ".claude" / "settings.json"
    raise ConfigError(f"unknown settings scope {scope!r} (project, user or local)", field="scope")


def hook_command(
    *,
    store: str | None = None,
    preset: str | None = None,
    config: str | None = None,
    fail_closed: bool = False,
    no_config: bool = False,
    relay: str | None = None,
    in_process: bool = False,
    idle_exit: int | None = None,
) -> str:
    """The shell command Claude Code runs, with the options given: ``PYTHON -c 'import sys; from
    loopwatch.adapters.claude_code_hook import main; sys.exit(main())'`` (events handed to the user's local hook
    server, started when none runs; ``idle_exit``: its idle time).
    With ``in_process``, every event judged in the hook's own process: the ``loopwatch`` script next to this
    interpreter when there is one, else ``PYTHON -m loopwatch.adapters.claude_code``. With ``relay`` (a hook
    service's URL), ``PYTHON -m loopwatch.adapters.claude_code_relay URL`` (the options: for when it is down)."""
    import shlex
    import shutil
    import sysconfig

    folders = [sysconfig.get_path("scripts"), os.path.dirname(os.path.abspath(sys.executable))]
    script = shutil.which("loopwatch", path=os.pathsep.join(f for f in folders if f))
    if relay:  # the relay's start-up is a bare interpreter's: no console script wrapper
        parts = [os.path.abspath(sys.executable), "-m", RELAY_MODULE, relay]
    elif not in_process:  # a bare interpreter's start-up: no console script wrapper, nor -m's runpy
        parts = [os.path.abspath(sys.executable), "-c", LOCAL_CODE]
        if idle_exit is not None:
            parts += ["--idle-exit", str(idle_exit)]
    elif script:
        parts = [os.path.abspath(script), "hook", "claude-code"]
    else:
        parts = [os.path.abspath(sys.executable), "-m", MODULE]
    if store:
        parts += ["--store", store]
    if preset:
        parts += ["--preset", preset]
    if config:
        parts += ["--config", os.path.abspath(config)]
    if no_config:
        parts.append("--no-config")
    if fail_closed:
        parts.append("--fail-closed")
    return " ".join(shlex.quote(part) for part in parts)


def is_loopwatch_hook(handler: object) -> bool:
    """Is this hook handler one that ``--install`` wrote (a command running loopwatch's Claude Code hook, or an
    ``http`` handler posting to the hook service's path)?"""
    if not isinstance(handler, Mapping):
        return False
    if handler.get("type") == "http":  # --install --http: the service's own path
        url = handler.get("url")
        return isinstance(url, str) and url.split("?", 1)[0].endswith(SERVICE_PATH)
    if handler.get("type", "command") != "command":
        return False
    command = handler.get("command")
    return isinstance(command, str) and _OURS.search(command) is not None


def _strip(hooks: dict[str, Any]) -> int:
    """Remove loopwatch's handlers from a ``hooks`` object in place (and the groups and events they leave
    empty); how many were removed. Entries of unknown shape are left alone."""
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        emptied = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not is_loopwatch_hook(h)]
            removed += len(handlers) - len(kept)
            if kept or len(kept) == len(handlers):
                group["hooks"] = kept
                kept_groups.append(group)
            else:
                emptied = True
        if emptied and not kept_groups:
            del hooks[event]
        else:
            hooks[event] = kept_groups
    return removed


def install_hooks(settings: Mapping[str, Any], command: str | None = None, *, url: str | None = None) -> dict[str, Any]:
    """A copy of ``settings`` with loopwatch's hook on each of :data:`HOOK_EVENTS` (replacing any earlier one):
    a ``command`` handler, or with ``url`` an ``http`` handler posting to the hook service."""
    if (command is None) == (url is None):
        raise ConfigError("give a command or a url, not both", field="command")
    data: dict[str, Any] = json.loads(json.dumps(settings))
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError(f"'hooks' is a {type(hooks).__name__}, not an object")
    for event in HOOK_EVENTS:
        if event in hooks and not isinstance(hooks[event], list):
            raise SettingsError(f"'hooks.{event}' is a {type(hooks[event]).__name__}, not a list")
    _strip(hooks)
    for event in HOOK_EVENTS:
        handler: dict[str, Any] = (
            {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
            if url is None
            else {"type": "http", "url": url, "timeout": HOOK_TIMEOUT}
        )
        group: dict[str, Any] = {"matcher": "*", "hooks": [handler]} if event in TOOL_EVENTS else {"hooks": [handler]}
        hooks.setdefault(event, []).append(group)
    return data


def uninstall_hooks(settings: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of ``settings`` without loopwatch's hooks, and how many handlers were removed."""
    data: dict[str, Any] = json.loads(json.dumps(settings))
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data, 0
    removed = _strip(hooks)
    if removed and not hooks:
        del data["hooks"]
    return data, removed


def _load_settings(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); fix it first, it was left untouched") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"{path} holds a JSON {type(data).__name__}, not an object; it was left untouched")
    return data


def _save_settings(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` with an indent of 2, atomically (through the link when the file is a symbolic link)."""
    import shutil

    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.loopwatch-{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if target.exists():
            shutil.copymode(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _settings_command(args: argparse.Namespace, stdout: IO[str]) -> int:
    try:
        path = settings_path(args.scope or "project")
        settings = _load_settings(path)
        if args.install:
            if args.store:
                from ..stores import store_from_url

                store_from_url(args.store).close()  # a bad URL fails now, not on every hook run
            _policy(args.preset, args.config, args.no_config)  # the same for a bad preset or configuration
            service = args.http or args.relay
            if service and not service.split("?", 1)[0].endswith(SERVICE_PATH):
                raise SettingsError(f"the hook service's URL ends with {SERVICE_PATH}, not {service!r}")
            if args.http:
                command = args.http
                changed = install_hooks(settings, url=args.http)
            else:
                command = hook_command(
                    store=args.store,
                    preset=args.preset,
                    config=args.config,
                    fail_closed=args.fail_closed,
                    no_config=args.no_config,
                    relay=args.relay,
                    in_process=args.in_process,
                    idle_exit=args.idle_exit,
                )
                changed = install_hooks(settings, command)
            if changed == settings:
                print(f"loopwatch hooks already installed in {path}", file=stdout)
            else:
                _save_settings(path, changed)
                print(f"loopwatch hooks installed in {path} ({', '.join(HOOK_EVENTS)})", file=stdout)
            print(f"{'url' if args.http else 'command'}: {command}", file=stdout)
            return 0
        changed, removed = uninstall_hooks(settings)
        if removed:
            _save_settings(path, changed)
            print(f"removed {removed} loopwatch hook(s) from {path}", file=stdout)
        else:
            print(f"no loopwatch hooks in {path}", file=stdout)
        return 0
    except Exception as exc:  # SettingsError, ConfigError, OSError: one clear line
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2


# -- command line -----------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    import argparse

    from .._cli_options import add_policy_options, add_store_option

    parser = argparse.ArgumentParser(
        prog="loopwatch hook",
        description="Claude Code hook: judge one hook event read on stdin, or install the hooks in settings.json.",
    )
    parser.add_argument("target", nargs="?", default="claude-code", choices=("claude-code",), help="the agent")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--install", action="store_true", help="add loopwatch's hooks to a settings.json")
    action.add_argument("--uninstall", action="store_true", help="remove loopwatch's hooks from a settings.json")
    action.add_argument("--serve", action="store_true", help="run the hook as a local HTTP service (http hooks)")
    action.add_argument("--status", action="store_true", help="show the local hook servers the hook started")
    action.add_argument("--stop", action="store_true", help="stop the local hook servers (the hook starts them again)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--project", dest="scope", action="store_const", const="project", help="./.claude/settings.json (default)"
    )
    scope.add_argument("--user", dest="scope", action="store_const", const="user", help="~/.claude/settings.json")
    scope.add_argument(
        "--local", dest="scope", action="store_const", const="local", help="./.claude/settings.local.json"
    )
    add_store_option(parser, help="session store (default: $LOOPWATCH_STORE, else a SQLite file in the cache)")
    add_policy_options(parser, default_preset=HOOK_PRESET)
    parser.add_argument("--fail-closed", action="store_true", help="deny tool calls when the guard cannot judge")
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="HOST", help="--serve: the address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=7349, metavar="PORT", help="--serve: the port (default 7349)")
    service = parser.add_mutually_exclusive_group()
    service.add_argument("--http", metavar="URL", help="--install: http handlers posting to a --serve service")
    service.add_argument(
        "--relay",
        metavar="URL",
        help="--install: command hooks that hand each event to a --serve service (judged in the hook's own process "
        "when the service is down)",
    )
    service.add_argument(
        "--in-process",
        action="store_true",
        help="--install: command hooks that judge every event in their own process (no local hook server)",
    )
    parser.add_argument(
        "--idle-exit",
        type=_seconds,
        metavar="SECONDS",
        help="--install: the local hook server exits after this long without an event (default 1800)",
    )
    return parser


def _seconds(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of seconds, at least 1, not {text!r}")
    return int(text)


def _serve(args: argparse.Namespace) -> int:
    from .claude_code_server import serve

    try:
        guard = _guard(args.store, args.preset, args.config, args.fail_closed, args.no_config)
    except Exception as exc:  # a bad store, preset or configuration: one clear line
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    return serve(guard, args.host, args.port, fail_closed=args.fail_closed)


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
        try:
            args = _parser().parse_args(args_list)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
            if "--install" in args_list or "--uninstall" in args_list or code == 0:
                return code
            _note("bad hook arguments (see above); nothing judged")
            return 0  # a hook's exit 2 would block the tool call
        if args.install or args.uninstall:
            return _settings_command(args, out)
        if args.serve:
            return _serve(args)
        if args.status or args.stop:
            from .claude_code_daemon import _status_command

            return _status_command(out, stop=args.stop)
        options = {
            "store": args.store,
            "preset": args.preset,
            "config": args.config,
            "fail_closed": args.fail_closed,
            "no_config": args.no_config,
        }
    return run_hook(stdin if stdin is not None else sys.stdin, out, **options)


if __name__ == "__main__":
    sys.exit(main())
