"""loopwatch as an HTTP service: a guard for agents in any language (``pip install 'loopwatch[server]'``).

    loopwatch serve --store redis://127.0.0.1:6379/0 --workers 2 --token-file tokens.txt

The service judges the events of many sessions and answers each with its verdict (``POST
/v1/sessions/{id}/events``); it reads, resets, snapshots and restores sessions, lists sessions and swarms, serves a
live dashboard at ``/dashboard/``, Prometheus metrics at ``/metrics``, its OpenAPI document at
``/v1/openapi.json``, and the Claude Code ``http`` hook at ``/loopwatch/claude-code``. Sessions live in the
configured store, so workers and replicas sharing a Redis/Valkey store share every session.
"""

from __future__ import annotations

from ._settings import ServiceSettings, Tokens

__all__ = ["ServiceSettings", "Tokens", "create_app", "serve"]


def __getattr__(name: str) -> object:
    if name == "create_app":
        from ._app import create_app

        return create_app
    if name == "serve":
        from ._run import serve

        return serve
    raise AttributeError(name)
