"""Typed errors. Every error loopwatch raises is a :class:`LoopwatchError`."""

from __future__ import annotations


class LoopwatchError(Exception):
    """Base class of every error raised by loopwatch."""


class EventError(LoopwatchError, ValueError):
    """An event (or its JSON form) is malformed: unknown type, missing field, wrong type."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message if field is None else f"{field}: {message}")


class ConfigError(LoopwatchError, ValueError):
    """A configuration value is invalid; ``field`` names the offending setting, ``path`` and ``line`` the file
    and line it was read from (when it came from a file): ``loopwatch.toml:4: ladders.repeat.nudge: ...``."""

    def __init__(
        self, message: str, *, field: str | None = None, path: str | None = None, line: int | None = None
    ) -> None:
        self.field = field
        self.path = path
        self.line = line
        text = message if field is None else f"{field}: {message}"
        if path is not None:
            text = f"{path}{'' if line is None else f':{line}'}: {text}"
        super().__init__(text)


class UnknownPresetError(ConfigError):
    """The named preset does not exist."""


class InputError(LoopwatchError):
    """A trace file could not be read; carries the file and line of the bad record."""

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        self.reason = message
        self.path = path
        self.line = line
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")


class StateError(LoopwatchError, ValueError):
    """A snapshot given to ``restore`` is not a valid loopwatch session state."""


class MissingExtraError(LoopwatchError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"{module} is not installed: pip install 'loopwatch[{extra}]'")
