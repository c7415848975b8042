"""How one event is shown on a run's timeline: its kind, a one-line label, its colour. The command line's HTML report
and the service's dashboard draw a run's steps the same way, so a session reads alike in both."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .core._events import Event, Message, Reset, TextDelta, ToolCall, ToolResult, Usage

LABEL_CHARS: Final = 80
"""A step's one-line label is cut to this many characters."""

ACTION_COLOURS: Final[dict[str, str]] = {"nudge": "#e0a106", "block": "#e8590c", "stop": "#c92a2a"}
KIND_COLOURS: Final[dict[str, str]] = {
    "result": "#ced4da",
    "error": "#fa5252",
    "assistant": "#b197fc",
    "user": "#74c0fc",
    "system": "#adb5bd",
    "delta": "#e5dbff",
    "usage": "#ffe066",
    "reset": "#212529",
}
KIND_NAMES: Final[dict[str, str]] = {
    "result": "tool result",
    "error": "failed result",
    "assistant": "assistant message",
    "user": "user message",
    "system": "system message",
    "delta": "text delta",
    "usage": "usage",
    "reset": "reset",
}
TOOL_PALETTE: Final[tuple[str, ...]] = (
    "#1c7ed6",
    "#37b24d",
    "#f76707",
    "#7048e8",
    "#0ca678",
    "#d6336c",
    "#f59f00",
    "#1098ad",
    "#845ef7",
    "#5c940d",
)
OTHER_TOOL: Final = "#495057"


def describe(event: Event) -> tuple[str, str | None, str, bool]:
    """(kind, tool, label, failed) of one event."""
    if isinstance(event, ToolCall):
        args = args_text(event.args)
        label = args if args.split(" ", 1)[0] == event.tool else f"{event.tool} {args}".strip()
        return "call", event.tool, cut(label), False
    if isinstance(event, ToolResult):
        failed = event.is_error is True or (event.exit_code is not None and event.exit_code != 0)
        text = flat(event.output) or ("(error)" if failed else "(no output)")
        return ("error" if failed else "result"), event.tool, cut("→ " + text), failed
    if isinstance(event, Message):
        return event.role, None, cut(flat(event.text) or "(empty)"), False
    if isinstance(event, TextDelta):
        return "delta", None, cut(flat(event.text)), False
    if isinstance(event, Usage):
        bits = []
        if event.cost is not None:
            bits.append(f"cost {event.cost:g}")
        if event.input_tokens is not None:
            bits.append(f"{event.input_tokens} in")
        if event.output_tokens is not None:
            bits.append(f"{event.output_tokens} out")
        return "usage", None, cut("usage " + ", ".join(bits)), False
    if isinstance(event, Reset):
        return "reset", None, "reset", False
    return "system", None, cut(type(event).__name__), False  # pragma: no cover (every event type is above)


def args_text(args: Mapping[str, Any]) -> str:
    """A call's arguments on one line: a lone string or a ``command`` as it is, else compact JSON."""
    if not args:
        return ""
    strings = [v for v in args.values() if isinstance(v, str)]
    if len(args) == 1 and strings:
        return flat(strings[0])
    command = args.get("command")
    if isinstance(command, str):
        return flat(command)
    try:
        return flat(json.dumps(dict(args), ensure_ascii=False, separators=(",", ":"), default=str))
    except (TypeError, ValueError):  # pragma: no cover (args come from JSON)
        return flat(repr(dict(args)))


def flat(text: str) -> str:
    """Whitespace collapsed; at most a few hundred characters looked at."""
    return " ".join(text[: LABEL_CHARS * 4].split())


def cut(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis last when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
