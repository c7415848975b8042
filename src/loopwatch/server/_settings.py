"""The service's settings, and the bearer tokens it accepts.

Settings travel to uvicorn's worker processes as JSON in an environment variable (each worker builds its own
app from them); tokens never do: each worker reads them itself from the token file or the environment.
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..core._checked import integer_at_least
from ..errors import ConfigError

__all__ = ["SETTINGS_ENV", "TOKENS_ENV", "ServiceSettings", "Tokens", "is_loopback"]

SETTINGS_ENV: Final = "LOOPWATCH_SERVE_SETTINGS"
TOKENS_ENV: Final = "LOOPWATCH_TOKENS"
"""Tokens in the environment: ``name=token`` pairs separated by commas or new lines (a bare token is named
``default``)."""
DEFAULT_PORT: Final = 7350


@dataclass(frozen=True)
class ServiceSettings:
    """What ``loopwatch serve`` runs with (every field has a command-line option of the same name).

    ``store``: where sessions live (``memory://`` for one process, ``sqlite:///...``, ``redis://...`` for several
    workers or replicas). ``fail_closed``: when the store fails, tool calls are refused (``block``) instead of
    allowed. ``token_file``: a file of ``name token`` lines. ``max_body``: bytes of one request body;
    ``max_batch``: events in one batch; ``rate``/``burst``: requests per second allowed per token (0: no
    limit) and the burst above it; ``cors``: origins allowed to call the API from a browser (none by
    default). ``dashboard``: serve the live dashboard at ``/dashboard/``. ``relay``: with a Redis store, share the
    dashboard's feed between workers and replicas. ``audit``: a JSONL file of audit records (each names the
    calling token as ``client``).
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int = 1
    store: str = "memory://"
    preset: str | None = None
    config: str | None = None
    fail_closed: bool = False
    token_file: str | None = None
    max_body: int = 1_048_576
    max_batch: int = 1_000
    rate: float = 0.0
    burst: int = 0
    cors: tuple[str, ...] = ()
    dashboard: bool = True
    max_sessions: int = 100_000
    relay: bool = True
    audit: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_body", "max_batch", "workers", "max_sessions"):
            integer_at_least(getattr(self, name), 1, name)
        integer_at_least(self.burst, 0, "burst")
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < math.inf:
            raise ConfigError(f"must be a number of requests a second >= 0 (0: no limit), got {rate!r}", field="rate")
        if integer_at_least(self.port, 0, "port") > 65_535:
            raise ConfigError(f"must be a port number from 0 to 65535, got {self.port!r}", field="port")

    def to_env(self) -> str:
        data = dataclasses.asdict(self)
        data["cors"] = list(self.cors)
        return json.dumps(data)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceSettings:
        raw = (environ if environ is not None else os.environ).get(SETTINGS_ENV)
        if not raw:
            return cls()
        data = json.loads(raw)
        data["cors"] = tuple(data.get("cors") or ())
        return cls(**data)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Tokens:
    """Named bearer tokens. :meth:`identify` compares a presented token with every known one in constant time
    (no early exit, so the time taken says nothing about which token came close)."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._pairs: list[tuple[str, bytes]] = []
        for name, token in pairs:
            if len(token) < 16:
                raise ConfigError(f"token {name!r} is shorter than 16 characters", field="tokens")
            self._pairs.append((name, token.encode("utf-8")))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"Tokens({[name for name, _ in self._pairs]!r})"

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._pairs]

    def identify(self, presented: str | None) -> str | None:
        """The name of the token ``presented`` (an ``Authorization`` header's value or the bare token), else None."""
        if not presented:
            return None
        scheme, _, value = presented.partition(" ")
        token = (value.strip() if scheme.lower() == "bearer" else presented.strip()).encode("utf-8", "replace")
        found: str | None = None
        for name, known in self._pairs:
            if hmac.compare_digest(token, known) and found is None:
                found = name
        return found

    @classmethod
    def load(cls, token_file: str | None = None, environ: Mapping[str, str] | None = None) -> Tokens:
        """Tokens from ``token_file`` (``name token`` per line, ``#`` comments) and ``$LOOPWATCH_TOKENS``."""
        pairs: list[tuple[str, str]] = []
        if token_file:
            try:
                text = Path(token_file).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read {token_file}: {exc.strerror}", field="token_file") from exc
            for number, line in enumerate(text.splitlines(), 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) != 2:
                    raise ConfigError(f"{token_file}:{number}: expected 'name token'", field="token_file")
                pairs.append((parts[0], parts[1]))
        env = (environ if environ is not None else os.environ).get(TOKENS_ENV, "")
        for item in env.replace("\n", ",").split(","):
            item = item.strip()
            if item:
                name, sep, token = item.partition("=")
                pairs.append((name.strip(), token.strip()) if sep else ("default", item))
        names = [name for name, _ in pairs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"token names must be unique: {', '.join(duplicates)}", field="tokens")
        return cls(pairs)

    def to_json(self) -> Any:
        return self.names
