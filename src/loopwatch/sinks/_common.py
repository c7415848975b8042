"""What every sink shares: the :class:`Sink` protocol, the error a sink that must not lose a record raises, and
the redactor each sink copies its records through."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, LoopwatchError
from ..redact import Redactor


class AuditWriteError(LoopwatchError):
    """An audit record could not be written (disk full, read-only file system, closed sink...)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message if path is None else f"{path}: {message}")


@runtime_checkable
class Sink(Protocol):
    """Receives audit records."""

    def emit(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def make_redactor(redact: bool | Redactor) -> Redactor:
    if isinstance(redact, Redactor):
        return redact
    if not isinstance(redact, bool):
        raise ConfigError(f"must be a bool or a Redactor, got {redact!r}", field="redact")
    return Redactor(enabled=redact)


def redact_repr(redactor: Redactor) -> str:
    """``True``/``False`` for the default configuration, the whole redactor otherwise."""
    default = Redactor(enabled=redactor.enabled)
    if (redactor.extra_keys, redactor.max_depth, redactor.max_string) == (
        (),
        default.max_depth,
        default.max_string,
    ):
        return repr(redactor.enabled)
    return repr(redactor)
