"""Equality and hashing by constructor parameters, shared by detectors and limits (their ``repr`` differ)."""

from __future__ import annotations

from typing import Any


class Configured:
    """A rule whose identity is its type and its public attributes (its thresholds)."""

    def _params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configured) and type(self) is type(other) and self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))
