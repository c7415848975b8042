"""loopwatch as an HTTP service: a guard for agents in any language (``pip install 'loopwatch[server]'``).

    loopwatch serve --store redis://127.0.0.1:6379/0 --workers 2 --token-file tokens.txt

The service judges the events of many sessions and answers each with its verdict (``POST
/v1/sessions/{id}/events``); it reads, resets, snapshots and restores sessions, lists sessions and swarms, serves a
live dashboard at ``/dashboard/``, Prometheus metrics at ``/metrics``, its OpenAPI document at
``/v1/openapi.json``, and the Claude Code ``http`` hook at ``/loopwatch/claude-code``. Sessions live in the
configured store, so workers and replicas sharing a Redis/Valkey store share every session.
"""

from __future__ import annotations

from typing import Final

from ..core._errors import MissingExtraError
from ._settings import ServiceSettings, Tokens

__all__ = ["ServiceSettings", "Tokens", "create_app", "serve"]

_EXTRA_MODULES: Final = frozenset({"starlette", "uvicorn", "prometheus_client"})
"""What the ``server`` extra installs for the service (its ``redis`` is the stores')."""


def __getattr__(name: str) -> object:
    try:
        if name == "create_app":
            from ._app import create_app

            return create_app
        if name == "serve":
            from ._run import serve

            return serve
    except ModuleNotFoundError as exc:  # the extra is missing: say which (another missing module is a bug to see)
        top = (exc.name or "").partition(".")[0]
        if top in _EXTRA_MODULES:
            raise MissingExtraError(top, "server") from exc
        raise
    raise AttributeError(name)
