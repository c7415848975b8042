"""``loopwatch serve``: run the service under uvicorn, with one or several worker processes."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

from .._cli_options import add_audit_option, add_policy_options, add_store_option
from .._policy_spec import PolicySpec, config_path
from ..errors import ConfigError, LoopwatchError, MissingExtraError
from ._settings import DEFAULT_PORT, SETTINGS_ENV, ServiceSettings, Tokens, is_loopback

__all__ = ["main", "parser", "serve"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loopwatch serve",
        description="Run loopwatch as an HTTP service: a JSON API, a live dashboard, Prometheus metrics.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to listen on (default 127.0.0.1; another needs a token)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="PORT",
        help=f"port (default {DEFAULT_PORT}; 0: any free port)",
    )
    p.add_argument(
        "--workers", type=int, default=1, metavar="N", help="worker processes (several need a sqlite/redis store)"
    )
    add_store_option(p, default="memory://", help="memory:// (default), sqlite:///x.db, redis://...")
    add_policy_options(p)
    p.add_argument("--fail-closed", action="store_true", help="store down: refuse tool calls (default: allow)")
    p.add_argument("--token-file", default=None, metavar="FILE", help="bearer tokens, one 'name token' per line")
    p.add_argument("--max-body", type=int, default=1_048_576, metavar="BYTES", help="largest body (default 1 MiB)")
    p.add_argument("--max-batch", type=int, default=1_000, metavar="N", help="most events in one batch (default 1000)")
    p.add_argument("--rate", type=float, default=0.0, metavar="N", help="requests/s per token and worker (0: no limit)")
    p.add_argument(
        "--burst", type=int, default=0, metavar="N", help="requests allowed at once above --rate (default: 1)"
    )
    p.add_argument("--cors", action="append", default=[], metavar="ORIGIN", help="an origin browsers may call from")
    p.add_argument("--no-dashboard", action="store_true", help="no dashboard (and no board kept in memory)")
    add_audit_option(p)
    p.add_argument("--log-level", default="warning", metavar="LEVEL", help="uvicorn's log level (default warning)")
    return p


def _settings_from(args: argparse.Namespace) -> ServiceSettings:
    return ServiceSettings(
        host=args.host,
        port=args.port,
        workers=args.workers,
        store=args.store,
        preset=args.preset,
        config=config_path(args.config, args.no_config),
        fail_closed=args.fail_closed,
        token_file=args.token_file,
        max_body=args.max_body,
        max_batch=args.max_batch,
        rate=args.rate,
        burst=args.burst,
        cors=tuple(args.cors),
        dashboard=not args.no_dashboard,
        audit=args.audit,
    )


def _check(settings: ServiceSettings, tokens: Tokens) -> None:
    """Refuse settings that would be unsafe or wrong: an address beyond loopback without a token, several
    workers each with its own memory."""
    if not tokens and not is_loopback(settings.host):
        raise ConfigError(
            f"listening on {settings.host} (beyond this machine) needs a bearer token: --token-file FILE or "
            "$LOOPWATCH_TOKENS",
            field="host",
        )
    if settings.workers > 1 and settings.store.strip().lower().startswith("memory"):
        raise ConfigError(
            "several workers share sessions only through a store: --store sqlite:///... or redis://...", field="workers"
        )
    if "*" in settings.cors and tokens:
        raise ConfigError(
            "--cors '*' would let any web page use the tokens' API from a browser; name the origins", field="cors"
        )


def serve(settings: ServiceSettings, *, log_level: str = "warning") -> int:
    """Run the service until interrupted."""
    try:
        import uvicorn

        from . import _app  # noqa: F401 (the server extra is installed)
    except ImportError as exc:
        raise MissingExtraError(exc.name or "starlette", "server") from exc
    tokens = Tokens.load(settings.token_file)
    _check(settings, tokens)
    PolicySpec(settings.preset, settings.config).build()  # a bad preset or config fails here, not in each worker
    os.environ[SETTINGS_ENV] = settings.to_env()
    made = None
    if settings.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        made = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="loopwatch-metrics-")
    where = f"http://{settings.host}:{settings.port}"
    auth = f"{len(tokens)} token(s)" if tokens else "no token (loopback only)"
    print(
        f"loopwatch: serving on {where} ({settings.workers} worker(s), store {settings.store}, {auth}); "
        f"dashboard at {where}/dashboard/",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(
            "loopwatch.server._app:app_from_env",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=5,
        )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    return 0


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        return serve(_settings_from(args), log_level=args.log_level)
    except (LoopwatchError, OSError) as exc:
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
