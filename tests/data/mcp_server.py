"""A small MCP server (the ``mcp`` SDK's ``MCPServer``, stdio) for the ``loopwatch mcp-proxy`` tests.

Each tool body appends one line to the file named by ``$MCP_TEST_RUNS`` when it runs (``search q``), so a test
can tell the calls the server ran from the calls the proxy refused.

- ``search(query)``: the same text for the same query;
- ``lookup(key)``: the same text for the same key (the other half of an A-B cycle);
- ``poll(job)``: a new status on every call (progress, never a loop);
- ``fail(reason)``: raises, so the result has ``isError: true``;
- ``ask_roots()``: asks the client for its roots (a server-to-client request) and returns them;
- ``slow(steps)``: reports progress ``steps`` times, logs a message, then answers;
- ``crash(code)``: the server process exits with ``code`` without answering;
- resource ``data://greeting``, prompt ``review(code)``.

With ``$MCP_TEST_PID`` set, the server writes its process id there when it starts.
"""

from __future__ import annotations

import os
import sys
import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots and logging are deprecated as of 2026-07-28

server = MCPServer("loopwatch-test-server")
RUNS = os.environ.get("MCP_TEST_RUNS")
_polls: dict[str, int] = {}


def _ran(line: str) -> None:
    if RUNS:
        with open(RUNS, "a", encoding="utf-8") as runs:
            runs.write(line + "\n")


@server.tool()
def search(query: str) -> str:
    """Search the documents."""
    _ran(f"search {query}")
    return f"3 documents match {query!r}: a.txt, b.txt, c.txt"


@server.tool()
def lookup(key: str) -> str:
    """Look a key up."""
    _ran(f"lookup {key}")
    return f"{key} = 42"


@server.tool()
def poll(job: str) -> str:
    """The status of a job (it moves on at every call)."""
    _ran(f"poll {job}")
    _polls[job] = _polls.get(job, 0) + 1
    return f"job {job}: running, {_polls[job]} of 1000 steps done"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    _ran(f"fail {reason}")
    raise ToolError(f"cannot do it: {reason}")


@server.tool()
async def ask_roots(ctx: Context) -> str:
    """The client's roots (asks the client)."""
    _ran("ask_roots")
    roots = await ctx.session.list_roots()
    return " ".join(str(root.uri) for root in roots.roots)


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports progress, then answers."""
    _ran(f"slow {steps}")
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
    await ctx.info("slow is done")
    return f"done in {steps} steps"


@server.tool()
def crash(code: int) -> str:
    """Exits the server process without answering."""
    _ran(f"crash {code}")
    sys.stdout.flush()
    os._exit(code)


@server.resource("data://greeting")
def greeting() -> str:
    """A fixed text."""
    return "hello from the test server"


@server.prompt()
def review(code: str) -> str:
    """Review some code."""
    return f"Please review this code:\n{code}"


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_PID"):
        with open(os.environ["MCP_TEST_PID"], "w", encoding="utf-8") as pid:
            pid.write(str(os.getpid()))
    print("mcp test server starting", file=sys.stderr, flush=True)
    server.run("stdio")
