"""A bare stdio JSON-RPC peer standing in for an MCP server (standard library only), to check what the proxy
does to the bytes: every line it receives is appended, as received, to ``$MCP_TEST_WIRE``, and every line it
sends to ``$MCP_TEST_SENT``. Its lines are written with ``json.dumps``' default spacing and ASCII escapes, not
the proxy's compact form, so a line the proxy re-encoded would show.

Answers:

- ``tools/call`` ``echo``: the text ``echo ARGUMENTS`` (sorted JSON), the same for the same arguments;
- ``tools/call`` ``noisy``: first a line that is not JSON and a log notification, then the ``echo`` answer;
- ``tools/call`` ``ask``: first asks the client ``sampling/createMessage`` (id ``"s-1"``), then answers the call
  with the text of the client's answer;
- ``tools/call`` ``broken``: a JSON-RPC error;
- ``tools/call`` ``hang``: never answered;
- any other request: ``{"echo": METHOD}``; a batch: a batch of such answers; notifications: nothing;
- a line that is not JSON: a parse error (id null).

With ``$MCP_TEST_PID`` set, it writes its process id there when it starts.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

WIRE = os.environ.get("MCP_TEST_WIRE")
SENT = os.environ.get("MCP_TEST_SENT")
_asked: dict[str, Any] = {}


def _log(path: str | None, data: bytes) -> None:
    if path:
        with open(path, "ab") as log:
            log.write(data)


def send(message: object) -> None:
    data = message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode()
    _log(SENT, data)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def text_result(request_id: object, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    if method is None:  # the client's answer to our request
        call = _asked.pop(str(message.get("id")), None)
        if call is not None:
            content = (message.get("result") or {}).get("content") or {}
            return text_result(call, f"the client said {content.get('text')}")
        return None
    if "id" not in message:
        return None
    if method != "tools/call":
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"echo": method}}
    params = message.get("params") or {}
    name = params.get("name")
    args = json.dumps(params.get("arguments"), sort_keys=True)
    if name == "noisy":
        send(b"this line is not JSON\n")
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "caf\u00e9"}})
    elif name == "ask":
        _asked["s-1"] = message["id"]
        send({"jsonrpc": "2.0", "id": "s-1", "method": "sampling/createMessage", "params": {"messages": []}})
        return None
    elif name == "broken":
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "broken on purpose"}}
    elif name == "hang":
        return None
    return text_result(message["id"], f"echo {args}")


def main() -> None:
    if os.environ.get("MCP_TEST_PID"):
        with open(os.environ["MCP_TEST_PID"], "w", encoding="utf-8") as pid:
            pid.write(str(os.getpid()))
    for line in sys.stdin.buffer:
        _log(WIRE, line)
        try:
            message = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(message, list):
            answers = [a for a in (answer(m) for m in message if isinstance(m, dict)) if a is not None]
            if answers:
                send(answers)
        elif isinstance(message, dict):
            reply = answer(message)
            if reply is not None:
                send(reply)


if __name__ == "__main__":
    main()
