"""The ``loopwatch`` console script (and ``python -m loopwatch``): ``loopwatch hook ...`` goes straight to the
Claude Code hook and ``loopwatch mcp-proxy ...`` to the MCP proxy, without loading the command line's package
(:mod:`loopwatch.cli`: its scans, reports and evaluation); everything else goes to the command line. It lives
outside that package for this reason: a hook is a new process on every tool call."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["hook"]:
        from .adapters.claude_code import main as hook_main

        return hook_main(arguments[1:])
    if arguments[:1] == ["mcp-proxy"]:
        from .adapters.mcp import main as mcp_main

        return mcp_main(arguments[1:])
    from .cli import main as cli_main

    return cli_main(arguments)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
