"""A Redis store's URL: the server, loopwatch's own options (``prefix``, ``ttl``, ``timeout``) and the ones passed
to redis-py; and redis-py itself, imported on first use."""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError, MissingExtraError
from ._options import refuse_unknown_options

DEFAULT_PREFIX: Final = "loopwatch"
DEFAULT_TIMEOUT: Final = 1.0

_SCHEMES: Final = {"redis": "redis", "rediss": "rediss", "valkey": "redis", "valkeys": "rediss"}
_OWN_OPTIONS: Final = ("prefix", "ttl", "timeout")
_CLIENT_OPTIONS: Final = (
    "client_name",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_cert_reqs",
    "ssl_certfile",
    "ssl_check_hostname",
    "ssl_keyfile",
)


@dataclass(frozen=True)
class Config:
    client_url: str  # what redis-py is given: redis:// or rediss://, without loopwatch's options
    where: str  # the server for messages, without the password
    prefix: str
    ttl: float | None
    timeout: float


def _positive(options: dict[str, str], name: str) -> float | None:
    raw = options.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={raw!r} in the store URL must be a positive number of seconds", field="store")
    return value


def parse_url(url: str, options: dict[str, str]) -> Config:
    if not isinstance(url, str):
        kind = type(url).__name__
        raise ConfigError(f"a Redis store's URL is a text (redis://host:6379/0), not {kind}", field="store")
    texts = isinstance(options, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in options.items())
    if not texts:
        raise ConfigError(f"options must map option names to texts, got {options!r}", field="store")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"bad Redis URL {redact_url(url)!r}: {exc}", field="store") from None
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ConfigError(
            f"not a Redis URL: {redact_url(url)!r} (redis://, rediss://, valkey://, valkeys://)", field="store"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(options)
    refuse_unknown_options(query, (*_OWN_OPTIONS, *_CLIENT_OPTIONS), "the Redis URL")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ConfigError(f"the database in a Redis URL is a number (redis://host:6379/0), not {db!r}", field="store")
    prefix = query.get("prefix", DEFAULT_PREFIX)
    if not prefix or "{" in prefix or "}" in prefix:
        raise ConfigError(f"prefix={prefix!r} in the store URL must be non-empty, without braces", field="store")
    passed = urlencode({k: v for k, v in query.items() if k in _CLIENT_OPTIONS})
    client_url = urlunsplit((scheme, parts.netloc, f"/{int(db or 0)}", passed, ""))
    host = parts.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    where = f"{parts.scheme.lower()}://{host}:{port or 6379}/{int(db or 0)}"
    return Config(client_url, where, prefix, _positive(query, "ttl"), _positive(query, "timeout") or DEFAULT_TIMEOUT)


def redact_url(url: str) -> str:
    """``url`` without its password (for messages and ``repr``)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparsable URL>"


def import_redis(module: str) -> Any:
    """A module of redis-py (imported on first use: the core needs no third-party package)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError("redis", "redis") from None


def client_options(timeout: float, retry: Any) -> dict[str, Any]:
    """redis-py client settings of both twins: fail fast, never retry (a resent write could land twice)."""
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
        "health_check_interval": 0,
        "decode_responses": True,
        "protocol": 2,
    }
