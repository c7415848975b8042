"""How the Redis stores read back what they keep (a session's hash, a swarm's counts), whatever a damaged hash
holds, and write a swarm's counts back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from . import Versioned, from_storable, storable


def versioned(reply: Any) -> Versioned | None:
    """An ``HMGET v s t`` reply (a hash from before tokens: its token is ``v`` and its version)."""
    version, state, token = reply
    if version is None and state is None and token is None:
        return None
    if token is None:
        token = "" if version is None else f"v{version}"
    return Versioned(int_of(version), from_storable(state or ""), token)


def int_of(value: Any) -> int:
    """A stored version (``-1`` for one that is not a number: a damaged hash)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def swarm_counts_of(order: list[str], calls: dict[str, str], tools: dict[str, str], workers: dict[str, str]) -> Any:
    out: dict[str, tuple[int, list[str], str]] = {}
    listed = set(order)
    for fp in [*order, *(fp for fp in calls if fp not in listed)]:
        if fp in calls and from_storable(fp) not in out:
            names = _names(workers.get(fp))
            tool = from_storable(tools.get(fp, ""))
            out[from_storable(fp)] = (int_of(calls[fp]), names, tool)
    return out


def _names(raw: str | None) -> list[str]:
    """A stored JSON list of worker names (nothing from a damaged one)."""
    try:
        names = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [from_storable(str(w)) for w in names] if isinstance(names, list) else []


def restore_pipeline(pipe: Any, keys: Sequence[str], counts: dict[str, tuple[int, list[str], str]], store: Any) -> Any:
    """A (sync or async) transaction pipeline that replaces a swarm's keys by ``counts``, not yet sent."""
    calls, tools, workers = _restore_args(counts)
    pipe.execute_command("DEL", *keys)
    if calls:
        pipe.hset(keys[0], mapping=calls)
        pipe.hset(keys[1], mapping=tools)
        pipe.hset(keys[2], mapping=workers)
        pipe.execute_command("RPUSH", keys[3], *calls)
        if store.ttl:
            for key in keys:
                pipe.execute_command("PEXPIRE", key, store._ttl_ms)
    return pipe


def _restore_args(
    counts: dict[str, tuple[int, list[str], str]],
) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
    calls = {storable(str(fp)): int(c) for fp, (c, _, _) in counts.items()}
    workers = {
        storable(str(fp)): json.dumps([storable(str(x)) for x in w], ensure_ascii=False)
        for fp, (_, w, _) in counts.items()
    }
    tools = {storable(str(fp)): storable(str(t)) for fp, (_, _, t) in counts.items()}
    return calls, tools, workers
