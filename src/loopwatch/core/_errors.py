"""The error classes, defined in the core so that the core imports nothing else of loopwatch. Their public home is
:mod:`loopwatch.errors`, which draws the tree and re-exports them; each class says so (``__module__``), so a
traceback, a ``repr`` and a pickle name ``loopwatch.errors.ConfigError``, never this module."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EventError",
    "InputError",
    "LoopStopped",
    "LoopwatchError",
    "MissingExtraError",
    "OtherLayoutError",
    "StateError",
    "StoreError",
    "UnknownPresetError",
    "UnsupportedError",
]


TYPE_CHECKING = False
if TYPE_CHECKING:  # importing this module loads nothing else: a hook process imports it on every run
    from ._verdict import Verdict


class LoopwatchError(Exception):
    """Base class of every error raised by loopwatch."""


class EventError(LoopwatchError, ValueError):
    """An event (or its JSON form) is malformed: unknown type, missing field, wrong type."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message if field is None else f"{field}: {message}")


class ConfigError(LoopwatchError, ValueError):
    """A configuration value is invalid; ``field`` names the offending setting (or constructor parameter),
    ``path`` and ``line`` the file and line it was read from (when it came from a file), ``reason`` what is wrong:
    ``loopwatch.toml:4: ladders.repeat.nudge: ...``."""

    def __init__(
        self, message: str, *, field: str | None = None, path: str | None = None, line: int | None = None
    ) -> None:
        self.reason = message
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


class OtherLayoutError(StateError):
    """A session state packed for a store (``Engine.pack``) with other rules: by another policy, or by a loopwatch
    whose rules keep other fields (another release sharing the store)."""


class UnsupportedError(LoopwatchError):
    """An operation the guard cannot do where its sessions are kept: ``Guard.evict_idle`` with a store (or the
    service), whose sessions are shared with other processes that this guard cannot see using them; the store's
    ``ttl`` expires them instead."""


class MissingExtraError(LoopwatchError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"{module} is not installed: pip install 'loopwatch[{extra}]'")


class StoreError(LoopwatchError):
    """A store could not be reached or refused an operation (the guard's ``on_store_error`` decides); also
    :class:`loopwatch.stores.StoreError`. Here, so that a guard without a store never imports the stores."""


class LoopStopped(LoopwatchError):
    """The guard said ``stop`` and an adapter ended the run by raising this; each framework adapter raises its
    own subclass (which is also its framework's exception where the framework has one for ending a run).

    ``verdict`` is the stop verdict, ``status`` its status (``LOOP_DETECTED`` or a limit's own status, such as
    ``MAX_ITERATIONS``), ``session`` the loopwatch session (``None`` when the adapter has none). The message
    reads ``loopwatch: LOOP_DETECTED (repeat): <the verdict's reason>``.
    """

    verdict: Verdict
    status: str
    session: str | None

    def __init__(self, verdict: Verdict, session: str | None = None) -> None:
        super().__init__(self._stopped(verdict, session))

    def _stopped(self, verdict: Verdict, session: str | None) -> str:
        """Sets ``verdict``, ``status`` and ``session``; returns the message (for subclasses whose framework
        exception needs its own ``__init__`` call)."""
        from ._verdict import LOOP_DETECTED

        self.verdict = verdict
        self.session = session
        self.status = verdict.status or LOOP_DETECTED
        pattern = f" ({verdict.pattern})" if verdict.pattern else ""
        return f"loopwatch: {self.status}{pattern}: {verdict.reason or verdict.message or 'stopped'}"


for _error in (
    ConfigError,
    EventError,
    InputError,
    LoopStopped,
    LoopwatchError,
    MissingExtraError,
    OtherLayoutError,
    StateError,
    StoreError,
    UnknownPresetError,
    UnsupportedError,
):
    _error.__module__ = "loopwatch.errors"
