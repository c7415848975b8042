"""What the command line's commands share: how bad input is reported, how a JSON line is written, and the facts
shown above a result (the preset, the embedder, the configuration file, the time it took)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Final, TypeAlias

from .._policy_spec import PolicySpec
from ..core._policy import Policy
from ..errors import InputError

FAIL_ON: Final = ("nudge", "block", "stop")
"""The levels ``scan --fail-on`` takes, weakest first."""


class InputErrors:
    """Bad input, reported on stderr as it is found and counted (the exit status says some input was bad)."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, error: InputError) -> None:
        self.seen += 1
        print(f"loopwatch: {error}", file=sys.stderr)


Command: TypeAlias = Callable[[argparse.Namespace, PolicySpec, Policy, InputErrors], int]
"""A command: the parsed arguments, the policy's spec and the policy built from it, the bad-input reporter; it
returns the exit status."""


_LINE_BREAKS: Final = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Characters JSON leaves raw that line readers (``str.splitlines``) take for line ends: written escaped."""


def json_line(data: object) -> str:
    """One JSON Lines record: non-ASCII text kept readable, every character a line reader splits on escaped."""
    return json.dumps(data, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


def short(path: str, width: int = 50) -> str:
    """``path`` for a progress bar: its last ``width`` characters, an ellipsis first when it is longer."""
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def embedder_name(policy: Policy) -> str:
    """Which embedding model the policy's rules use, or how they do without one."""
    for detector in policy.detectors:
        embedder = detector._params().get("embedder")  # what the rule's repr shows
        if embedder is not None:
            return repr(embedder)
    if any(detector.name == "rephrase" for detector in policy.detectors):
        return "none (reworded intents compared by their words)"
    return "none"


def run_facts(policy: Policy, spec: PolicySpec, took: float) -> list[tuple[str, str]]:
    """What ran: the preset, the embedder, the configuration file and how long it took."""
    return [
        ("preset", policy.name),
        ("embedder", embedder_name(policy)),
        ("config", spec.config or "none"),
        ("took", duration(took)),
    ]


def duration(seconds: float) -> str:
    """``12.3 s`` under a minute, else ``4 min 05 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"
