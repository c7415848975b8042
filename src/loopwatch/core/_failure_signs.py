"""Whether a tool failed, when its result does not say: ``is_error``, else the exit code, else unmistakable failure
text at the ends of its output (a traceback, ``command not found``, an ``Error:`` line, a harness's time-out notice).
"""

from __future__ import annotations

import re
from typing import Final

from ._kernels import failure_marked
from ._lazy_re import lazy_compile

_FAILURE_STARTS: Final = (
    "Error:", "Error ", "ERROR:", "ERROR ", "error:", "error ", "fatal:", "E: ", "npm ERR!", "Segmentation fault",
)  # fmt: skip
"""Line starts that mark a failure (``E: `` is how apt and dpkg report one)."""
_FAILURE_LINE_START: Final = lazy_compile("\n(?:" + "|".join(re.escape(start) for start in _FAILURE_STARTS) + ")")
"""A line that starts as a failure does, after the first: one search from newline to newline costs less than a
search of the whole text for each start."""
_SH_NOT_FOUND: Final = lazy_compile(r"^\S+: (?:line )?\d+: [^\n]*: not found$", re.M)
"""POSIX sh's "command not found": ``./run.sh: 3: java: not found``, ``/bin/bash: line 7: type: mvn: not found``."""


def infer_failure(output: str, is_error: bool | None, exit_code: int | None) -> bool:
    """Did a tool fail? ``is_error``, else ``exit_code``, else unmistakable failure text at its ends."""
    if is_error is not None:
        return is_error
    if exit_code is not None:
        return exit_code != 0
    ends = output if len(output) <= 800 else output[:400] + "\n" + output[-400:]
    if failure_marked(ends):  # text that marks a failure wherever it shows (_kernels_py.FAILURE_MARKERS)
        return True
    if "<returncode>" in ends and "<returncode>0</returncode>" not in ends:
        return True
    if ": not found" in ends and _SH_NOT_FOUND.search(ends):
        return True
    return ends.startswith(_FAILURE_STARTS) or _FAILURE_LINE_START.search(ends) is not None
