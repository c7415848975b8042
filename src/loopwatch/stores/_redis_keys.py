"""The Redis stores' key layout: each session and each swarm under the prefix, inside a hash tag (so a session's
or a swarm's keys share one Redis Cluster slot), and names read back from keys."""

from __future__ import annotations

from urllib.parse import unquote

from . import from_storable, storable


def _tag(name: str) -> str:
    """``name`` as the inside of a hash tag: never empty, without ``{`` or ``}``, reversible."""
    if not name:
        return "%"
    if "%" in name or "{" in name or "}" in name:
        return name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return name


def _untag(tag: str) -> str | None:
    if tag == "%":
        return ""
    if not tag or "{" in tag or "}" in tag:
        return None
    return unquote(tag) if "%" in tag else tag


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._session_head = f"{prefix}:s:{{"
        self.session_pattern = _glob_escape(self._session_head) + "*}"

    def session(self, name: str) -> str:
        return f"{self._session_head}{_tag(storable(name))}}}"

    def session_name(self, key: str) -> str | None:
        if not key.startswith(self._session_head) or not key.endswith("}"):
            return None
        name = _untag(key[len(self._session_head) : -1])
        return None if name is None else from_storable(name)

    def swarm(self, name: str) -> tuple[str, str, str, str]:
        base = f"{self.prefix}:w:{{{_tag(storable(name))}}}"
        return f"{base}:calls", f"{base}:tools", f"{base}:workers", f"{base}:order"
