"""The dashboard's data, read from the board: its state (rows, feed, summary), its rates by agent, model or other
dimension, a session's recent timeline, and a stream of its changes (server-sent events)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .._timeline import ACTION_COLOURS, KIND_COLOURS, KIND_NAMES, OTHER_TOOL, TOOL_PALETTE
from ._board import DIMENSIONS, Board
from ._http import checked_name, int_param, json_response
from .errors import ApiError

_TICK: Final = 0.2
_HEARTBEAT: Final = 15.0

_REPORT_COLOURS: Final = {
    "actions": ACTION_COLOURS,
    "kinds": KIND_COLOURS,
    "kind_names": KIND_NAMES,
    "tools": list(TOOL_PALETTE),
    "other_tool": OTHER_TOOL,
}
"""The HTML report's colours, so a session's timeline on the dashboard reads like the report's."""


class BoardRoutes:
    """The dashboard's routes over one :class:`~loopwatch.server._board.Board` (the service's)."""

    def __init__(self, board: Board) -> None:
        self.board = board

    async def board_state(self, request: Request) -> Response:
        since = int_param(request, "since", 0, 0, 2**62)
        feed = int_param(request, "feed", 0, 0, 2**62)
        return json_response(self._board_message(since, feed))

    def _board_message(self, since: int, feed: int) -> dict[str, Any]:
        summary = self.board.summary()
        return {"summary": summary, "rows": self.board.rows(since), "feed": self.board.feed(feed)}

    async def board_rates(self, request: Request) -> Response:
        dimension = request.query_params.get("dimension", "agent")
        if dimension not in DIMENSIONS:
            raise ApiError("invalid_request", f"dimension is one of {', '.join(DIMENSIONS)}", field="dimension")
        return json_response(self.board.rates(dimension))

    async def board_session(self, request: Request) -> Response:
        session = checked_name(request.path_params["session"], "session")
        timeline = self.board.timeline(session)
        if timeline is None:
            raise ApiError("not_found", f"no recent activity of session {session!r} on the board")
        return json_response({**timeline, "colours": _REPORT_COLOURS})

    async def live(self, request: Request) -> Response:
        """Server-sent events: the board's changes (rows, feed, summary) every 200 ms while there are any."""

        async def stream() -> AsyncIterator[bytes]:
            version, seq = 0, max(self.board.feed_seq - 100, 0)
            quiet = 0.0
            while True:
                summary = self.board.summary()
                if summary["version"] != version or summary["feed_seq"] != seq or quiet >= _HEARTBEAT:
                    message = self._board_message(version, seq)
                    version, seq, quiet = summary["version"], summary["feed_seq"], 0.0
                    yield b"event: board\ndata: " + json.dumps(message, default=str).encode() + b"\n\n"
                await asyncio.sleep(_TICK)
                quiet += _TICK

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
