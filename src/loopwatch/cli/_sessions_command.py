"""``loopwatch sessions``: list the sessions a store holds, reset or forget one, show or clear a swarm's tally."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..errors import ConfigError
from ._common import InputErrors


def sessions(args: argparse.Namespace, spec: PolicySpec, policy: Policy, errors: InputErrors) -> int:
    from .._guard import Guard
    from ..stores import StoreError, store_from_url

    if args.clear and not args.swarm:
        raise ConfigError("--clear needs --swarm ID", field="clear")
    store = store_from_url(args.store)
    try:
        guard = Guard(policy=policy, store=store, on_store_error="raise", clock=None)
        target = args.reset or args.forget
        if target and target not in guard.sessions():
            print(f"loopwatch: {_unknown_session(target, guard.sessions(), args.store)}", file=sys.stderr)
            return 2
        if args.reset:
            guard.reset(args.reset)
            print(f"reset {args.reset}")
        elif args.forget:
            guard.forget(args.forget)
            print(f"forgot {args.forget}")
        elif args.swarm:
            return _swarm(guard, args)
        else:
            _list_sessions(guard, args.json)
        return 0
    except StoreError as exc:  # unreachable, locked, not a store: one line, not a traceback
        print(f"loopwatch: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()


def _unknown_session(session: str, known: Sequence[str], store: str) -> str:
    import difflib

    close = difflib.get_close_matches(session, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no session {session!r} in {store} ({len(known)} sessions{hint}; loopwatch sessions --store URL lists them)"


def _swarm(guard: Any, args: argparse.Namespace) -> int:
    if args.clear:
        guard.clear_swarm(args.swarm)
        print(f"cleared swarm {args.swarm}")
        return 0
    counts = guard.swarm_snapshot(args.swarm)["counts"]
    if args.json:
        print(json.dumps({"swarm": args.swarm, "counts": counts}, indent=1))
        return 0
    print(f"swarm {args.swarm}: {len(counts)} fingerprints")
    for fingerprint, (calls, workers, tool) in sorted(counts.items(), key=lambda kv: -kv[1][0])[:50]:
        print(f"  {calls:>5} calls  {len(workers):>3} workers  {tool}  #{fingerprint[:8]}")
    return 0


def _list_sessions(guard: Any, as_json: bool) -> None:
    from .._stored import DamagedStateError

    rows: list[dict[str, Any]] = []
    for name in sorted(guard.sessions()):
        try:
            state = guard.snapshot(name)["state"]
        except DamagedStateError as exc:  # listed as such: --forget ID (or the next event, failing open) clears it
            rows.append({"session": name, "damaged": exc.reason})
            continue
        streaks = {p: ladder.get("emitted", 0) for p, ladder in (state.get("ladders") or {}).items()}
        last = state.get("last")
        rows.append(
            {
                "session": name,
                "events": state["index"],
                "stopped": state.get("stopped") is not None,
                "streaks": {p: level for p, level in streaks.items() if level},
                "last": dict(zip(("index", "action", "pattern", "level"), last, strict=True)) if last else None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{len(rows)} sessions")
    for row in rows:
        if "damaged" in row:
            print(f"  {row['session']}  DAMAGED: {row['damaged']} (loopwatch sessions --forget ID clears it)")
            continue
        last = row["last"]
        said = f"last {last['action']} {last['pattern']} L{last['level']} at {last['index']}" if last else "no verdict"
        open_streaks = ", ".join(f"{p} L{level}" for p, level in row["streaks"].items()) or "no streak"
        stopped = "  STOPPED" if row["stopped"] else ""
        print(f"  {row['session']}  {row['events']} events  {open_streaks}  {said}{stopped}")
