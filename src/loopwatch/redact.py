"""Redaction of secrets in audit records before they leave the process.

:func:`redact` returns a bounded, JSON-safe deep copy of a value in which

* the values of dict keys that look secret (``api_key``, ``Authorization``, ``x-auth-token``...) are
  replaced by ``"[REDACTED]"``; keys naming token *counts* (``max_tokens``, ``input_tokens``...) are
  kept as long as their value is not a string;
* strings that contain well-known credentials have just the secret part replaced, so ``curl -H
  'Authorization: Bearer abc.def' ...`` stays readable: the key formats of :data:`KEY_FORMATS` (OpenAI,
  Anthropic, GitHub, GitLab, Slack, Stripe, Hugging Face, SendGrid, AWS, Google, Azure, npm, PyPI and
  more, each recognised by its documented prefix and length), JWTs, ``Bearer`` tokens, PEM private keys,
  ``password=...`` pairs and ``--password VALUE`` options, URL passwords, Azure connection strings and SAS
  signatures, and the passwords of command lines (``mysql -pSECRET``, ``sshpass -p SECRET``, ``redis-cli
  -a SECRET``, ``curl -u user:SECRET``);
* a header given as a pair (``["Authorization", "Bearer ..."]``) or as a name/value object (``{"name":
  "X-Api-Key", "value": ...}``) has its value hidden when the name looks secret;
* containers deeper than ``max_depth`` become ``"[TRUNCATED]"``, reference cycles become ``"[CYCLE]"``,
  strings longer than ``max_string`` are clipped with a marker (after redaction, which sees a few thousand
  characters past the cut, so a secret across the cut is hidden whole, never left half visible),
  non-finite floats become strings and any other object becomes its ``repr`` clipped to 200 characters.

Every pattern is linear in the text (a literal prefix, bounded repetitions, no nested ambiguity): redaction
costs a few passes over at most ``max_string`` characters per string, whatever the string holds.

Redaction is best effort: it catches the common shapes of credentials, not every secret. The formats were
written from each vendor's documentation and are tested with samples of each (``tests/test_redact.py``):
the maintained public pattern sets were considered and not taken (detect-secrets, on PyPI, misses several
of these kinds and brings ``requests`` and ``pyyaml``, and some of its expressions backtrack on hostile text;
gitleaks' table is written for Go's linear-time engine, not Python's, and is no registry package).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .core._checked import integer_at_least
from .core._lazy_re import lazy_compile
from .errors import ConfigError

__all__ = [
    "CYCLE",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_STRING",
    "KEY_FORMATS",
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
_LOOKAHEAD: Final = 4_096  # characters past a cut that redaction still reads: a secret across the cut is seen whole

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
    "sshpass",
    "mysql_pwd",
    "subscription_key",
    "account_key",
    "shared_access",
    "signing_key",
    "encryption_key",
    "master_key",
    "webhook_url",
    "dsn",
)

# Words that contain a secret word but are harmless: "author" (not "authorize"), "tokenizer".
_HARMLESS_WORDS = lazy_compile(r"author(?!i[sz])|tokeni[sz](?:ers?|ations?|ed|es|e|ing)?")
_NUMBER = lazy_compile(r"\s*-?\d+(?:\.\d+)?\s*")

_PEM = lazy_compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
_URL_USERINFO = lazy_compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,30}://)([^\s:/?#@'\"]{0,200}):([^\s/?#@'\"]+)@")
_COOKIE_HEADER = lazy_compile(
    r"(?i)(?<![A-Za-z0-9_-])((?:set-)?cookie[ \t]*:[ \t]*)(?!\[REDACTED)([^\s'\"][^\r\n'\"]*)"
)
_PAIR_NAME = lazy_compile(r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})[\"']?[ \t]{0,8}[:=][ \t]{0,8}")
_PAIR_VALUE = lazy_compile(
    r"(?:(?i:bearer|basic|token|digest)[ \t]+)?"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\r\n]{1,4096})(?P=q)"
    r"|(?P<val>(?!(?i:(?:bearer|basic|token|digest)[ \t]+)?\[REDACTED)[^\s&\"',;]+))"
)
_BEARER = lazy_compile(
    r"(?i)\b(bearer[ \t]+)(?!\[REDACTED)((?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]+|[A-Za-z]{16,})"
)
_JWT = lazy_compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
#: Key formats recognised anywhere in a text: (name, prefix kept, the secret after it). Each is the vendor's
#: documented shape: a literal prefix and a bounded run of its alphabet (never a bare run of letters).
KEY_FORMATS: Final[tuple[tuple[str, str, str], ...]] = (
    ("OpenAI / Anthropic", r"sk-(?:ant-|proj-|svcacct-|admin-)?", r"[A-Za-z0-9_-]{16,}"),
    ("GitHub", r"gh[pousr]_", r"[A-Za-z0-9]{20,}"),
    ("GitHub fine-grained", r"github_pat_", r"[A-Za-z0-9_]{20,}"),
    ("GitLab", r"(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas|glffct|glcip)-", r"[A-Za-z0-9_-]{20,}"),
    ("GitLab runner registration", r"GR1348941", r"[A-Za-z0-9_-]{20,}"),
    ("Slack", r"xox[abposre]-", r"[A-Za-z0-9-]{10,}"),
    ("Slack app", r"xapp-", r"[A-Za-z0-9-]{10,}"),
    ("Stripe", r"(?:sk|rk)_(?:live|test)_", r"[A-Za-z0-9]{10,}"),
    ("Stripe webhook", r"whsec_", r"[A-Za-z0-9+/]{24,}"),
    ("Hugging Face", r"hf_", r"[A-Za-z0-9]{30,}"),
    ("Hugging Face organisation", r"api_org_", r"[A-Za-z0-9]{30,}"),
    ("SendGrid", r"SG\.", r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    ("AWS access key", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])", r"[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ("Google API key", r"AIza", r"[0-9A-Za-z_-]{35}"),
    ("Google OAuth client secret", r"GOCSPX-", r"[A-Za-z0-9_-]{20,}"),
    ("npm", r"npm_", r"[A-Za-z0-9]{36}"),
    ("PyPI", r"pypi-", r"AgE[A-Za-z0-9_-]{50,}"),
    ("Shopify", r"shp(?:at|ca|pa|ss)_", r"[a-fA-F0-9]{32}"),
    ("DigitalOcean", r"do[opr]_v1_", r"[a-f0-9]{64}"),
    ("Databricks", r"dapi", r"[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])"),
    ("Mailgun", r"key-", r"[0-9a-zA-Z]{32}(?![A-Za-z0-9])"),
    ("Square", r"sq0(?:atp|csp)-", r"[0-9A-Za-z_-]{22,43}"),
    ("Twilio auth", r"(?:AC|SK)", r"[0-9a-f]{32}(?![A-Za-z0-9])"),
    ("Groq", r"gsk_", r"[A-Za-z0-9]{40,}"),
    ("Replicate", r"r8_", r"[A-Za-z0-9]{30,}"),
    ("Perplexity", r"pplx-", r"[A-Za-z0-9]{40,}"),
    ("xAI", r"xai-", r"[A-Za-z0-9]{40,}"),
    ("Azure AD client secret", r"[A-Za-z0-9_~.-]{3}\dQ~", r"[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    ("Azure storage key", r"AccountKey=", r"[A-Za-z0-9+/]{86}=="),
)
_BEFORE_KEY: Final = r"(?<![A-Za-z0-9_-])"
# (pattern, replacement); group 1 is the public prefix that is kept.
_KNOWN_TOKENS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (_JWT, REDACTED),
    *((lazy_compile(f"{_BEFORE_KEY}({prefix}){secret}"), r"\1" + REDACTED) for _, prefix, secret in KEY_FORMATS),
    # webhooks whose URL is the credential
    (
        lazy_compile(r"(https://hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]{8,200}"),
        r"\1" + REDACTED,
    ),
    (
        lazy_compile(r"(https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d{1,30}/)[A-Za-z0-9_-]{20,200}"),
        r"\1" + REDACTED,
    ),
)
# secrets after a name: Azure connection strings (AccountKey=...;), SAS signatures (sig=...), option values
# given after a space (--password VALUE); the name is kept
_AFTER_NAME: Final = lazy_compile(
    r"(?i)(?<![A-Za-z0-9_-])(?P<name>(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig|client_secret)=|"
    r"--(?:password|passwd|pass|token|api-key|apikey|secret|client-secret|access-key|secret-key|auth-token)[ \t]+)"
    r"(?P<q>[\"']?)(?P<secret>(?!\[REDACTED)[^\s;&\"']{1,4096})"
)
# passwords on command lines: mysql -pSECRET (glued), sshpass -p SECRET, redis-cli -a SECRET, curl -u user:SECRET,
# docker login -p SECRET; the program's name, bounded text up to the option, then the option's value
_COMMAND_SECRETS: Final = lazy_compile(
    r"(?<![\w-])(?:"
    r"(?:mysql\w{0,10}|mariadb(?:-\w{1,10})?)[ \t][^\n]{0,400}?(?<=\s)-p(?P<mysql>(?![\s\[])['\"]?[^\s'\"]{1,512})"
    r"|sshpass[ \t][^\n]{0,400}?(?<=\s)-p[ \t]*(?P<sshpass>(?!\[)['\"]?[^\s'\"]{1,512})"
    r"|redis-cli[ \t][^\n]{0,400}?(?<=\s)(?:-a|--pass)[ \t]+(?P<redis>(?!\[)['\"]?[^\s'\"]{1,512})"
    r"|curl[ \t][^\n]{0,1000}?(?<=\s)(?:-u|--user)[ \t]*['\"]?[^\s:'\"]{1,200}:(?P<curl>(?!\[)[^\s'\"]{1,512})"
    r"|(?:docker|podman|helm)[ \t]+(?:\w+[ \t]+)?login[ \t][^\n]{0,400}?(?<=\s)-p[ \t]+"
    r"(?P<docker>(?!\[)['\"]?[^\s'\"]{1,512})"
    r")"
)
_COMMAND_GROUPS: Final = ("mysql", "sshpass", "redis", "curl", "docker")
# a header as a name/value object: {"name": "Authorization", "value": "..."}
_HEADER_NAME_KEYS: Final = ("name", "key", "header", "Name", "Key", "Header")
_HEADER_VALUE_KEYS: Final = ("value", "values", "Value", "Values")


def _normalize_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


_WORDS: Final = tuple(dict.fromkeys(_normalize_key(word) for word in SECRET_KEY_WORDS))


_COUNT_KEY = lazy_compile(
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
        keys = tuple(extra_keys) if isinstance(extra_keys, Iterable) else None  # (a generator is read once)
        if keys is None or not all(isinstance(key, str) for key in keys):
            raise ConfigError(f"must be an iterable of key names, got {extra_keys!r}", field="extra_keys")
        self.extra_keys: tuple[str, ...] = keys
        self._extra = tuple(_normalize_key(key) for key in self.extra_keys if key)
        self.enabled = bool(enabled)
        self.max_depth = integer_at_least(max_depth, 1, "max_depth")
        self.max_string = integer_at_least(max_string, 1, "max_string")

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
        text = _COMMAND_SECRETS.sub(_hide_command_secret, text)
        text = _AFTER_NAME.sub(r"\g<name>\g<q>" + REDACTED, text)
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
        if len(text) <= self.max_string:
            return self.scrub(text) if self.enabled else text
        # redacted before the cut, reading past it: a secret across the cut is hidden whole
        window = text[: self.max_string + _LOOKAHEAD]
        clipped = (self.scrub(window) if self.enabled else window)[: self.max_string]
        return clipped + f"...[TRUNCATED {len(text) - self.max_string} chars]"

    def _foreign(self, value: Any) -> str:
        text = _safe_repr(value)[: REPR_LIMIT + _LOOKAHEAD]
        if self.enabled:
            text = self.scrub(text)
        return _clip(text, REPR_LIMIT - 3, "...")

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
        elif self.enabled and len(value) == 2 and isinstance(value[0], str) and self.is_secret_key(value[0], value[1]):
            return [self._copy(value[0], depth, path), REDACTED]  # a header as a pair: ["X-Api-Key", "..."]
        return [self._copy(item, depth, path) for item in items]

    def _mapping(self, value: Mapping[Any, Any], depth: int, path: set[int]) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        hidden = self._named_value(value) if self.enabled else None
        for key, item in value.items():
            safe_key = self._key(key)
            if self.enabled and isinstance(key, str) and (key == hidden or self.is_secret_key(key, item)):
                result[safe_key] = REDACTED
            else:
                result[safe_key] = self._copy(item, depth, path)
        return result

    def _named_value(self, value: Mapping[Any, Any]) -> str | None:
        """The key of the value to hide in a name/value object naming a secret (``{"name": "Authorization",
        "value": ...}``), or None."""
        for name_key in _HEADER_NAME_KEYS:
            name = value.get(name_key)
            if isinstance(name, str):
                for value_key in _HEADER_VALUE_KEYS:
                    if value_key in value and self.is_secret_key(name, value[value_key]):
                        return value_key
        return None

    def _key(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._string(key)
        if key is None or isinstance(key, (bool, int)):
            return key
        if isinstance(key, float) and math.isfinite(key):
            return key
        return self._foreign(key)


def _hide_command_secret(match: re.Match[str]) -> str:
    """A command line's password replaced (the quote it may start with kept), the rest of the match kept."""
    for group in _COMMAND_GROUPS:
        start = match.start(group)
        if start >= 0:
            secret = match.group(group)
            quote = secret[0] if secret[:1] in ("'", '"') else ""
            offset = start - match.start()
            return match.group(0)[:offset] + quote + REDACTED
    return match.group(0)


_DEFAULT: Final = Redactor()


def redact(value: Any, *, extra_keys: Iterable[str] = ()) -> Any:
    """Return a redacted, bounded, JSON-safe deep copy of ``value`` (see the module docstring)."""
    redactor = _DEFAULT if extra_keys == () else Redactor(extra_keys)
    return redactor(value)
