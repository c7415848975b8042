"""Small pieces the framework adapters share (standard library only)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from ..errors import ConfigError
from ..guard import Guard
from ..policy import Policy


def as_text(value: object) -> str:
    """A tool's output as text: strings as they are, anything else as sorted JSON (or its ``str``)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def guard_of(guard: Guard | None, preset: str | Policy | None) -> Guard:
    """The adapter's guard: ``guard`` as given, else a new one with ``preset`` (not both): a
    :class:`~loopwatch.remote.ServiceGuard` asking the loopwatch service at ``$LOOPWATCH_SERVICE_URL`` when that
    is set (the one setting that moves adapters onto the service), else an in-memory guard."""
    if guard is not None and preset is not None:
        raise ConfigError("give either guard or preset, not both", field="preset")
    return guard if guard is not None else default_guard(preset)


def default_guard(preset: str | Policy | None) -> Guard:
    """A new guard with ``preset``: a :class:`~loopwatch.remote.ServiceGuard` when ``$LOOPWATCH_SERVICE_URL`` is
    set, else an in-memory :class:`~loopwatch.guard.Guard`."""
    from ..remote import service_guard_from_env

    return service_guard_from_env(preset) or Guard(preset)


class GuardedAdapter:
    """What adapters with a fixed session share: ``guard`` (else a new one with ``preset``), ``session`` (a
    string or ``None``) and ``swarm``, checked and kept as attributes of the same names."""

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        preset: str | Policy | None = None,
        session: str | None = None,
        swarm: str | None = None,
    ) -> None:
        if session is not None and not isinstance(session, str):
            raise ConfigError("must be a string", field="session")
        self.guard = guard_of(guard, preset)
        self.session = session
        self.swarm = swarm


@contextlib.contextmanager
def session_scope(var: ContextVar[str | None], name: str | None, prefix: str) -> Iterator[str]:
    """Sets ``var`` to session ``name`` (a fresh ``<prefix>-<hex>`` when not given) inside the block; yields it."""
    session = name or f"{prefix}-{uuid.uuid4().hex[:12]}"
    token = var.set(session)
    try:
        yield session
    finally:
        var.reset(token)
