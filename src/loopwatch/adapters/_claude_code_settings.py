"""``loopwatch hook claude-code --install`` and ``--uninstall``: loopwatch's handlers in Claude Code's
``settings.json`` (which file, the command a handler runs, adding and removing them without touching anything
else in the file). Loaded by those options only: a hook run never needs it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Final

from ..core._lazy_re import lazy_compile
from ..errors import ConfigError, LoopwatchError
from ._claude_code_events import HOOK_EVENTS, TOOL_EVENTS
from .claude_code import HOOK_TIMEOUT, LOCAL_CODE, MODULE, RELAY_MODULE, SERVICE_PATH, _policy

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

_OURS: Final = lazy_compile(
    r"(?:^|[\s/\\\"'])loopwatch(?:\.exe)?[\"']?\s+hook\s+[\"']?claude-code(?:[\"'\s]|$)"
    r"|loopwatch\.adapters\.claude_code(?:_relay|_hook)?\b"
)


class SettingsError(LoopwatchError):
    """A ``settings.json`` that cannot be read or changed safely (it is left untouched)."""


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
