"""Canonical JSON of tool arguments: keys sorted at every depth, array order kept, bounded.

Arguments come from models and frameworks: they can be huge, deeply nested, cyclic, binary or not
JSON at all. :func:`canonical_json` never raises and works in bounded time and memory: strings longer
than ``MAX_STRING`` are folded to their head, tail, length and a digest of the middle; containers
deeper than ``MAX_DEPTH`` or with more than ``MAX_NODES`` nodes in total are summarised.
"""

from __future__ import annotations

import json
import math

try:  # CPython's own BLAKE2 module: the same function as hashlib's, without loading OpenSSL (~3 ms at start-up)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - other Pythons
    from hashlib import blake2b
from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

MAX_STRING: Final = 16_384
MAX_DEPTH: Final = 24
MAX_NODES: Final = 5_000
_FAST_KEYS: Final = 64
_FOLD_EDGE: Final = 4_096
_MAX_INT_BITS: Final = 13_000  # about 3,900 digits: Python refuses to convert ints over 4,300 digits to str
_DUMPS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode
_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODE_FLAT: Final = (
    _C_ENCODER(None, _refuse, json.encoder.encode_basestring, None, ":", ",", True, False, True)
    if _C_ENCODER is not None
    else None
)
"""``_DUMPS``'s own C encoder, made once (``_DUMPS`` makes one for every call, from Python: half its cost on a
call's arguments), without the check for cycles a flat mapping cannot have: it gives a list of ``_DUMPS``'s parts."""


_BLAKE2B_8: Final = blake2b(digest_size=8)
"""An empty 64-bit blake2b, never updated: a copy of it is a new hasher at ~60% of the cost of making one (no
parameters to read), ~0.1 us a digest."""


def digest(text: str) -> str:
    """A stable 64-bit hex digest (the same in every process, unlike ``hash``)."""
    hasher = _BLAKE2B_8.copy()
    hasher.update(text.encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()


def digest_bytes(data: bytes) -> str:
    """:func:`digest` of raw bytes."""
    hasher = _BLAKE2B_8.copy()
    hasher.update(data)
    return hasher.hexdigest()


def digest_parts(*parts: bytes) -> str:
    """:func:`digest_bytes` of the parts joined (at least one), without joining them (no copy of a large part)."""
    hasher = _BLAKE2B_8.copy()
    for part in parts:
        hasher.update(part)
    return hasher.hexdigest()


def shortened(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else cut to ``limit``, an ellipsis last (how a preview ends)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fold_string(text: str, limit: int = MAX_STRING) -> str:
    """``text`` if short; otherwise head + length + digest of the middle + tail (bounded)."""
    if len(text) <= limit:
        return text
    middle = text[_FOLD_EDGE:-_FOLD_EDGE]
    sample = middle[:: max(1, len(middle) // 65_536)]
    return f"{text[:_FOLD_EDGE]}…[{len(text)} chars #{digest(sample)}]…{text[-_FOLD_EDGE:]}"


def _is_flat(args: Mapping[Any, Any]) -> bool:
    """True when ``json`` can encode ``args`` directly, quickly and safely."""
    if len(args) > _FAST_KEYS:
        return False
    for key, value in args.items():
        if type(key) is not str:
            return False
        kind = type(value)
        if kind is str:
            if len(value) > MAX_STRING:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif kind is not int and kind is not bool and value is not None:
            return False
    return True


def flat_payload(args: Mapping[Any, Any]) -> bytes | None:
    """An unambiguous byte encoding of a flat mapping, keys sorted; ``None`` when ``args`` is not flat.

    Flat: at most 64 string keys whose values are short strings, ints, finite floats, booleans or
    ``None``. Encoding such arguments costs a copy of their text, not a character-by-character JSON
    escape, so the fingerprints of typical calls cost a few microseconds. Every value is typed and
    length-prefixed, so two different mappings never share a payload.
    """
    if not _is_flat(args):
        return None
    parts = [b"\x01flat"]
    try:
        for key in sorted(args):
            value = args[key]
            raw_key = key.encode("utf-8", "surrogatepass")
            kind = type(value)
            if kind is str:
                raw = value.encode("utf-8", "surrogatepass")
                parts.append(b"%d:%b=s%d:%b" % (len(raw_key), raw_key, len(raw), raw))
            elif kind is float:
                parts.append(b"%d:%b=f%b" % (len(raw_key), raw_key, repr(value).encode()))
            elif kind is int:
                parts.append(b"%d:%b=i%d" % (len(raw_key), raw_key, value))
            else:  # bool or None
                parts.append(b"%d:%b=%b" % (len(raw_key), raw_key, b"n" if value is None else b"b%d" % value))
    except (TypeError, ValueError):  # a key whose comparison or encoding fails: take the general path
        return None
    return b";".join(parts)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value``; never raises, bounded in time and memory."""
    if (type(value) is dict or isinstance(value, Mapping)) and _is_flat(value):  # a dict without the ABC's ~80 ns
        try:
            return "".join(_ENCODE_FLAT(value, 0)) if _ENCODE_FLAT is not None else _DUMPS(value)
        except (TypeError, ValueError):  # surrogates in keys and similar oddities
            pass
    budget = [MAX_NODES]
    try:
        return _DUMPS(_safe(value, 0, budget, set()))
    except Exception:  # a container whose iteration raises, and similar: summarise it whole
        return _DUMPS(_repr(value))


def _safe(value: Any, depth: int, budget: list[int], seen: set[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        bits = value.bit_length()
        if bits <= _MAX_INT_BITS:
            return value
        raw = value.to_bytes(bits // 8 + 1, "little", signed=True)  # too long for str(): digest it
        return f"<int {bits} bits #{digest_bytes(raw)}>"
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return fold_string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return f"<bytes {len(raw)} #{blake2b(raw, digest_size=8).hexdigest()}>"
    if depth >= MAX_DEPTH:
        return "<deep>"
    if isinstance(value, (Mapping, list, tuple)):
        marker = id(value)
        if marker in seen:
            return "<cycle>"
        seen.add(marker)
        try:
            if isinstance(value, Mapping):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if budget[0] <= 0:  # out of nodes: say how many entries are left out, stop reading
                        out["…"] = f"{len(value) - len(out)} more"
                        break
                    out[_key(k)] = _safe(v, depth + 1, budget, seen)
                return out
            items: list[Any] = []
            for v in value:
                if budget[0] <= 0:
                    items.append(f"…{len(value) - len(items)} more")
                    break
                items.append(_safe(v, depth + 1, budget, seen))
            return items
        finally:
            seen.discard(marker)
    if isinstance(value, (set, frozenset)):
        members = [_safe(v, depth + 1, budget, seen) for v in islice(value, 1000)]
        return {"<set>": sorted(members, key=_DUMPS)}  # sorted by their JSON: the order of a set is arbitrary
    return _repr(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return fold_string(key, 1024)
    return _repr(key)


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break the guard
        text = f"<{type(value).__name__}>"
    return f"<{type(value).__name__}:{fold_string(text, 200)}>"
