"""A store URL's query options checked against those its store takes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import ConfigError


def refuse_unknown_options(options: Iterable[str], known: Sequence[str], where: str) -> None:
    """A :class:`ConfigError` (field ``store``) naming the ``options`` not in ``known`` (a misspelled ``ttl``), if
    any; ``where``: the URL as the message shows it (``'sqlite:///a.db?tll=5'``, ``the Redis URL``)."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        names, choices = ", ".join(unknown), ", ".join(known)
        raise ConfigError(f"unknown option(s) {names} in {where} (known: {choices})", field="store")
