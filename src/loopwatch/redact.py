"""Redaction of secrets in audit records before they leave the process.

:func:`redact` returns a bounded, JSON-safe deep copy of a value in which

* the values of dict keys that look secret (``api_key``, ``Authorization``, ``x-auth-token``...) are
  replaced by ``"[REDACTED]"``; keys naming token *counts* (``max_tokens``, ``input_tokens``...) are
  kept as long as their value is not a string;
* strings that contain well-known credentials (OpenAI, Anthropic, GitHub, Slack, AWS and Google keys,
  JWTs, ``Bearer`` tokens, PEM private keys, ``password=...`` pairs, URL passwords) have just the
  secret part replaced, so ``curl -H 'Authorization: Bearer abc.def' ...`` stays readable;
* containers deeper than ``max_depth`` become ``"[TRUNCATED]"``, reference cycles become ``"[CYCLE]"``,
  strings longer than ``max_string`` are clipped with a marker, non-finite floats become strings and
  any other object becomes its ``repr`` clipped to 200 characters.

Redaction is best effort: it catches the common shapes of credentials, not every secret.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .errors import ConfigError

__all__ = [
    "CYCLE",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_STRING",
    "REDACTED",
    "REPR_LIMIT",
    "SECRET_KEY_WORDS",
    "TRUNCATED",
    "Redactor",
    "redact",
]

REDACTED: Final = "[REDACTED]"
TRUNCATED: Final = "[TRUNCATED]"
CYCLE: Final = "[CYCLE]"
DEFAULT_MAX_DEPTH: Final = 20
DEFAULT_MAX_STRING: Final = 10_000
REPR_LIMIT: Final = 200

#: Substrings that make a key secret (compared without case, ``-`` or ``_``).
SECRET_KEY_WORDS: Final[tuple[str, ...]] = (
    "token",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "authorization",
    "auth",
    "cookie",
    "session_key",
    "credential",
    "client_secret",
    "bearer",
)

# Words that contain a secret word but are harmless: "author" (not "authorize"), "tokenizer".
_HARMLESS_WORDS = re.compile(r"author(?!i[sz])|tokeni[sz](?:ers?|ations?|ed|es|e|ing)?")
_NUMBER = re.compile(r"\s*-?\d+(?:\.\d+)?\s*")

_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,30}://)([^\s:/?#@'\"]{0,200}):([^\s/?#@'\"]+)@")
_COOKIE_HEADER = re.compile(r"(?i)(?<![A-Za-z0-9_-])((?:set-)?cookie[ \t]*:[ \t]*)(?!\[REDACTED)([^\s'\"][^\r\n'\"]*)")
_PAIR_NAME = re.compile(r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})[\"']?[ \t]{0,8}[:=][ \t]{0,8}")
_PAIR_VALUE = re.compile(
    r"(?:(?i:bearer|basic|token|digest)[ \t]+)?"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\r\n]{1,4096})(?P=q)"
    r"|(?P<val>(?!(?i:(?:bearer|basic|token|digest)[ \t]+)?\[REDACTED)[^\s&\"',;]+))"
)
_BEARER = re.compile(r"(?i)\b(bearer[ \t]+)(?!\[REDACTED)((?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]+|[A-Za-z]{16,})")
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
# (pattern, replacement); group 1 is the public prefix that is kept.
_KNOWN_TOKENS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (_JWT, REDACTED),
    (
        re.compile(r"(?<![A-Za-z0-9_-])(sk-(?:ant-|proj-|svcacct-|admin-)?)[A-Za-z0-9_-]{16,}"),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?<![A-Za-z0-9_])(gh[pousr]_)[A-Za-z0-9]{20,}"), r"\1" + REDACTED),
    (re.compile(r"(?<![A-Za-z0-9_])(github_pat_)[A-Za-z0-9_]{20,}"), r"\1" + REDACTED),
    (re.compile(r"(?<![A-Za-z0-9_-])(xox[abposr]-)[A-Za-z0-9-]{10,}"), r"\1" + REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])(AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"), r"\1" + REDACTED),
    (re.compile(r"(?<![A-Za-z0-9_-])(AIza)[0-9A-Za-z_-]{35}"), r"\1" + REDACTED),
)


def _normalize_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


_WORDS: Final = tuple(dict.fromkeys(_normalize_key(word) for word in SECRET_KEY_WORDS))


_COUNT_KEY = re.compile(
    r"(?:tokens|tokencount)(?:details|count|used|usage|limit|total|remaining|left|persecond|perminute|perday)?$"
)


def _is_count_key(normalized: str) -> bool:
    """``max_tokens``, ``input_tokens``, ``prompt_tokens_details``: a key naming numbers of tokens."""
    return _COUNT_KEY.search(normalized) is not None


def _looks_like_count(value: Any) -> bool:
    if isinstance(value, (int, float, Mapping)):
        return True
    return isinstance(value, str) and _NUMBER.fullmatch(value) is not None


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a broken __repr__ must not break auditing
        return f"<{type(value).__name__} (repr failed: {type(exc).__name__})>"


def _clip(text: str, limit: int, marker: str) -> str:
    return text if len(text) <= limit else text[:limit] + marker


class Redactor:
    """Configured redaction: ``Redactor(extra_keys=("x-tenant",))(record)``.

    ``enabled=False`` keeps secrets but still returns a bounded, JSON-safe copy (depth limit, cycles,
    clipping, ``repr`` of foreign objects), so sinks can rely on the output either way.
    """

    __slots__ = ("_extra", "enabled", "extra_keys", "max_depth", "max_string")

    def __init__(
        self,
        extra_keys: Iterable[str] = (),
        *,
        enabled: bool = True,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_string: int = DEFAULT_MAX_STRING,
    ) -> None:
        if isinstance(extra_keys, str):
            raise ConfigError("must be an iterable of key names, not a string", field="extra_keys")
        self.extra_keys: tuple[str, ...] = tuple(extra_keys)
        self._extra = tuple(_normalize_key(key) for key in self.extra_keys if key)
        self.enabled = bool(enabled)
        self.max_depth = _positive_int(max_depth, "max_depth")
        self.max_string = _positive_int(max_string, "max_string")

    def __call__(self, value: Any) -> Any:
        return self._copy(value, 0, set())

    def __repr__(self) -> str:
        return (
            f"Redactor(extra_keys={list(self.extra_keys)!r}, enabled={self.enabled}, "
            f"max_depth={self.max_depth}, max_string={self.max_string})"
        )

    def is_secret_key(self, key: str, value: Any = None) -> bool:
        """Whether the value stored under ``key`` must be hidden (``None`` and booleans never are)."""
        if value is None or isinstance(value, bool):
            return False
        normalized = _normalize_key(key)
        if any(extra in normalized for extra in self._extra):
            return True
        if _is_count_key(normalized) and _looks_like_count(value):
            return False
        stripped = _HARMLESS_WORDS.sub("", normalized)
        return any(word in stripped for word in _WORDS)

    def scrub(self, text: str) -> str:
        """Replace the secrets found inside ``text`` (no clipping)."""
        text = _PEM.sub("[REDACTED PRIVATE KEY]", text)
        text = _URL_USERINFO.sub(r"\1\2:" + REDACTED + "@", text)
        text = _COOKIE_HEADER.sub(r"\1" + REDACTED, text)
        text = self._redact_pairs(text)
        text = _BEARER.sub(r"\1" + REDACTED, text)
        for pattern, replacement in _KNOWN_TOKENS:
            text = pattern.sub(replacement, text)
        return text

    def _redact_pairs(self, text: str) -> str:
        """``password=...``, ``"token": "..."``, ``Authorization: Bearer ...``: hide the value only."""
        parts: list[str] = []
        done = search_from = 0
        while (head := _PAIR_NAME.search(text, search_from)) is not None:
            search_from = head.end("name")  # the value may itself hold a pair: "url=https://x/?token=..."
            name = head.group("name")
            if not self.is_secret_key(name, ""):  # cheap test first: most names are harmless
                continue
            value = _PAIR_VALUE.match(text, head.end())
            if value is None:
                continue
            group = "qval" if value.group("qval") is not None else "val"
            if self.is_secret_key(name, value.group(group)):
                parts += [text[done : value.start(group)], REDACTED]
                done = search_from = value.end(group)
        return "".join([*parts, text[done:]])

    def _string(self, text: str) -> str:
        clipped = text[: self.max_string]
        if self.enabled:
            clipped = self.scrub(clipped)
        if len(text) > self.max_string:
            clipped += f"...[TRUNCATED {len(text) - self.max_string} chars]"
        return clipped

    def _foreign(self, value: Any) -> str:
        text = _clip(_safe_repr(value), REPR_LIMIT - 3, "...")
        return self.scrub(text) if self.enabled else text

    def _copy(self, value: Any, depth: int, path: set[int]) -> Any:
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else repr(value)
        if isinstance(value, str):
            return self._string(value)
        if not isinstance(value, (Mapping, list, tuple, set, frozenset)):
            return self._foreign(value)
        if depth >= self.max_depth:
            return TRUNCATED
        if id(value) in path:
            return CYCLE
        path.add(id(value))
        try:
            return self._container(value, depth + 1, path)
        finally:
            path.discard(id(value))

    def _container(self, value: Any, depth: int, path: set[int]) -> Any:
        if isinstance(value, Mapping):
            return self._mapping(value, depth, path)
        items: Iterable[Any] = value
        if isinstance(value, (set, frozenset)):
            items = sorted(value, key=_safe_repr)
        return [self._copy(item, depth, path) for item in items]

    def _mapping(self, value: Mapping[Any, Any], depth: int, path: set[int]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key, item in value.items():
            safe_key = self._key(key)
            if self.enabled and isinstance(key, str) and self.is_secret_key(key, item):
                result[safe_key] = REDACTED
            else:
                result[safe_key] = self._copy(item, depth, path)
        return result

    def _key(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._string(key)
        if key is None or isinstance(key, (bool, int)):
            return key
        if isinstance(key, float) and math.isfinite(key):
            return key
        return self._foreign(key)


def _positive_int(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"must be a positive integer, got {value!r}", field=field)
    return value


_DEFAULT: Final = Redactor()


def redact(value: Any, *, extra_keys: Iterable[str] = ()) -> Any:
    """Return a redacted, bounded, JSON-safe deep copy of ``value`` (see the module docstring)."""
    redactor = _DEFAULT if extra_keys == () else Redactor(extra_keys)
    return redactor(value)
