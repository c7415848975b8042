"""Sinks that keep records in the process: a function called with each record, and a list."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ConfigError
from ..redact import Redactor
from ._common import make_redactor

logger = logging.getLogger("loopwatch")


class CallbackSink:
    """Call ``callback(record)`` with a redacted copy; its exceptions are counted and logged, never raised."""

    def __init__(self, callback: Callable[[dict[str, Any]], object], *, redact: bool | Redactor = True) -> None:
        if not callable(callback):
            raise ConfigError(f"must be callable, got {callback!r}", field="callback")
        self.callback = callback
        self._redactor = make_redactor(redact)
        self._lock = threading.Lock()
        self._errors = 0

    @property
    def errors(self) -> int:
        """How many times the callback raised."""
        return self._errors

    def emit(self, record: Mapping[str, Any]) -> None:
        try:
            self.callback(self._redactor(record))
        except Exception:
            with self._lock:
                self._errors += 1
            logger.warning("audit callback %s raised; record not delivered", _name_of(self.callback), exc_info=True)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"CallbackSink(callback={_name_of(self.callback)}, errors={self._errors})"


def _name_of(function: Callable[..., object]) -> str:
    return str(getattr(function, "__qualname__", None) or repr(function))


class MemorySink:
    """Keep (copies of) the records in :attr:`records`; not redacted unless ``redact=True``."""

    def __init__(self, *, redact: bool | Redactor = False) -> None:
        self.records: list[dict[str, Any]] = []
        self.closed = False
        self._redactor = make_redactor(redact)
        self._lock = threading.Lock()

    def emit(self, record: Mapping[str, Any]) -> None:
        copy = self._redactor(record)
        with self._lock:
            self.records.append(copy)

    def close(self) -> None:
        self.closed = True

    def clear(self) -> None:
        with self._lock:
            self.records.clear()

    def events(self) -> list[str]:
        """The ``event`` of each record, in order."""
        return [str(record.get("event")) for record in self.records]

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(list(self.records))

    def __repr__(self) -> str:
        return f"MemorySink(records={len(self.records)})"
