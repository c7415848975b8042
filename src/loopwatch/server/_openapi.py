"""The service's OpenAPI 3.1 document (served at ``/v1/openapi.json``; ``docs/openapi.json`` is a copy).

python -m loopwatch.server._openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..core._events import EVENT_TYPES
from .errors import CODES

__all__ = ["document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        400: "Malformed JSON",
        401: "Missing or wrong bearer token",
        404: "Not found",
        413: "Body or batch too large",
        422: "Invalid request, event or snapshot",
        429: "Too many requests (Retry-After says when to try again)",
        503: "The session store is unavailable",
    }
    return {str(s): {"$ref": f"#/components/responses/E{s}"} for s in statuses if s in words}


_SESSION = {"name": "session", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 512}}
_SWARM = {"name": "swarm", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 512}}
_AUTHED = (401, 429)
_LIMITS = {"type": "object", "properties": {"limits": {"type": "boolean"}}}
_TEXT = {"text/plain": {"schema": {"type": "string"}}}
_DIMENSION = {"type": "string", "enum": ["agent", "worker", "model"]}


def _op(summary: str, ok: dict[str, Any], *errors: int, body: dict[str, Any] | None = None, **extra: Any) -> Any:
    op: dict[str, Any] = {"summary": summary, "responses": {"200": ok, **_errors(*_AUTHED, *errors)}}
    if body is not None:
        op["requestBody"] = body
    op.update(extra)
    return op


def document() -> dict[str, Any]:
    """The OpenAPI document of the service's API."""
    error_responses = {
        f"E{status}": {
            "description": description,
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        for status, description in {
            400: "Malformed JSON (code malformed_json or bad_request)",
            401: "Missing or wrong bearer token (code unauthorized)",
            404: "Not found (code not_found)",
            413: "Body or batch too large (code body_too_large or batch_too_large)",
            422: "Invalid request, event or snapshot (invalid_request, invalid_event, invalid_snapshot)",
            429: "Too many requests (code rate_limited; the Retry-After header says when to try again)",
            503: "The session store is unavailable (code store_unavailable)",
        }.items()
    }
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string", "enum": sorted(CODES)},
                        "message": {"type": "string"},
                        "field": {"type": ["string", "null"]},
                        "position": {"type": "integer", "description": "the bad event's position in a batch"},
                        "limit": {"type": "integer"},
                        "retry_after": {"type": "number"},
                    },
                }
            },
        },
        "Event": {
            "type": "object",
            "description": "An event in loopwatch's canonical form (docs/formats.md, section 1)",
            "required": ["type"],
            "properties": {
                "type": {
                    "type": "string",
                    "enum": list(EVENT_TYPES),
                },
                "tool": {"type": "string"},
                "args": {"type": "object"},
                "id": {"type": "string"},
                "thought": {"type": "string"},
                "output": {"type": "string"},
                "is_error": {"type": "boolean"},
                "exit_code": {"type": "integer"},
                "role": {"type": "string", "enum": ["assistant", "user", "system"]},
                "text": {"type": "string"},
                "cost": {"type": "number"},
                "input_tokens": {"type": "integer"},
                "output_tokens": {"type": "integer"},
                "ts": {"type": "number", "description": "seconds since the epoch"},
                "worker": {"type": "string"},
            },
        },
        "ObserveRequest": {
            "type": "object",
            "description": "Either event (one) or events (a batch, judged in order; all are checked before any is "
            "judged). agent and model label the dashboard's loop rates and the OpenTelemetry attributes.",
            "properties": {
                "event": _ref("Event"),
                "events": {"type": "array", "items": _ref("Event")},
                "swarm": {"type": "string"},
                "agent": {"type": "string"},
                "model": {"type": "string"},
            },
        },
        "Verdict": {
            "type": "object",
            "required": ["action", "index", "recorded"],
            "properties": {
                "action": {"type": "string", "enum": ["ok", "nudge", "block", "stop"]},
                "index": {"type": "integer", "description": "the event's index in the session (-1: not recorded)"},
                "recorded": {
                    "type": "boolean",
                    "description": "the event was counted in the session's state (false: the store failed and the "
                    "service failed open or closed; send the event again to have it counted)",
                },
                "level": {"type": "integer"},
                "pattern": {"type": ["string", "null"]},
                "count": {"type": "integer"},
                "loop_start": {"type": ["integer", "null"]},
                "status": {"type": ["string", "null"]},
                "message": {"type": "string", "description": "what to show the model (nudge) or return (block)"},
                "reason": {"type": "string"},
                "detector": {"type": ["string", "null"]},
                "evidence": {"type": "object"},
            },
        },
        "ObserveResponse": {
            "type": "object",
            "properties": {
                "session": {"type": "string"},
                "verdict": _ref("Verdict"),
                "verdicts": {"type": "array", "items": _ref("Verdict")},
            },
        },
        "Snapshot": {
            "type": "object",
            "required": ["session", "state"],
            "properties": {
                "session": {"type": "string"},
                "swarm": {"type": ["string", "null"]},
                "state": {"type": "object"},
            },
        },
        "SessionSummary": {
            "type": "object",
            "properties": {
                "session": {"type": "string"},
                "swarm": {"type": ["string", "null"]},
                "events": {"type": "integer"},
                "stopped": {"type": "boolean"},
                "stop": {"type": ["object", "null"]},
                "streaks": {"type": "object", "additionalProperties": {"type": "integer"}},
                "last": {"type": ["object", "null"]},
                "spend": {"type": "object"},
            },
        },
        "SwarmCounts": {
            "type": "object",
            "properties": {"swarm": {"type": "string"}, "counts": {"type": "object"}},
        },
        "Board": {
            "type": "object",
            "properties": {
                "summary": {"type": "object"},
                "rows": {"type": "array", "items": {"type": "object"}},
                "feed": {"type": "array", "items": {"type": "object"}},
            },
        },
    }
    plain = {"type": "object"}
    paths: dict[str, Any] = {
        "/v1/health": {
            "get": {
                "summary": "Liveness and store health (no token needed)",
                "security": [],
                "responses": {"200": _json_body(plain, "Healthy"), **_errors(503)},
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document (no token needed)",
                "security": [],
                "responses": {"200": _json_body(plain, "The OpenAPI document")},
            }
        },
        "/v1/sessions": {
            "get": _op(
                "List the sessions held in the store",
                _json_body(plain, "total and a page of session names"),
                422,
                503,
                parameters=[
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 1000}},
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "default": 0}},
                ],
            )
        },
        "/v1/sessions/{session}": {
            "parameters": [_SESSION],
            "get": _op("A session's state in short", _json_body(_ref("SessionSummary"), "The summary"), 404, 503),
            "delete": _op("Forget everything about a session", _json_body(plain, "Forgotten"), 503),
        },
        "/v1/sessions/{session}/events": {
            "parameters": [_SESSION],
            "post": _op(
                "Observe one event or a batch and answer each with its verdict",
                _json_body(_ref("ObserveResponse"), "verdict (one event) or verdicts (a batch, in order)"),
                400,
                413,
                422,
                503,
                body=_json_body(_ref("ObserveRequest"), "The event(s)"),
            ),
        },
        "/v1/sessions/{session}/reset": {
            "parameters": [_SESSION],
            "post": _op(
                "Clear a session's loop state (limits too with limits=true)",
                _json_body(plain, "Reset"),
                400,
                422,
                503,
                body={
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "properties": {"limits": {"type": "boolean"}}}
                        }
                    },
                },
            ),
        },
        "/v1/sessions/{session}/snapshot": {
            "parameters": [_SESSION],
            "get": _op("A session's state as JSON", _json_body(_ref("Snapshot"), "The snapshot"), 503),
            "put": _op(
                "Restore a session from a snapshot",
                _json_body(plain, "Restored"),
                400,
                413,
                422,
                503,
                body=_json_body(_ref("Snapshot"), "A snapshot from GET"),
            ),
        },
        "/v1/swarms": {
            "get": _op("List the swarms of the stored sessions", _json_body(plain, "Swarms and their sessions"), 503)
        },
        "/v1/swarms/{swarm}": {
            "parameters": [_SWARM],
            "get": _op("A swarm's shared call counts", _json_body(_ref("SwarmCounts"), "The counts"), 503),
            "delete": _op("Clear a swarm's counts", _json_body(plain, "Cleared"), 503),
            "put": _op(
                "Restore a swarm's counts from GET's answer",
                _json_body(plain, "Restored"),
                400,
                413,
                422,
                503,
                body=_json_body(_ref("SwarmCounts"), "The counts"),
            ),
        },
        "/v1/board": {
            "get": _op(
                "The dashboard's rows and feed changed since a version and sequence number",
                _json_body(_ref("Board"), "Summary, rows, feed"),
                422,
                parameters=[
                    {"name": "since", "in": "query", "schema": {"type": "integer", "default": 0}},
                    {"name": "feed", "in": "query", "schema": {"type": "integer", "default": 0}},
                ],
            )
        },
        "/v1/board/rates": {
            "get": _op(
                "Events and loops per agent, worker or model, per time bucket",
                _json_body(plain, "The series"),
                422,
                parameters=[
                    {
                        "name": "dimension",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["agent", "worker", "model"]},
                    }
                ],
            )
        },
        "/v1/board/sessions/{session}": {
            "parameters": [_SESSION],
            "get": _op("A session's recent steps with each verdict's evidence", _json_body(plain, "The timeline"), 404),
        },
        "/v1/live": {
            "get": _op(
                "Server-sent events: the board's changes (event 'board', the same body as GET /v1/board)",
                {"description": "An event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            )
        },
        "/metrics": {
            "get": _op(
                "Prometheus metrics",
                {
                    "description": "Metrics in the text format",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
            )
        },
        "/loopwatch/claude-code": {
            "post": _op(
                "Claude Code http hook: a hook input in, the hook's output (or {}) back",
                _json_body(plain, "The hook output"),
                413,
                body=_json_body(plain, "A Claude Code hook input"),
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "loopwatch service",
            "version": __version__,
            "description": "Loop detection for agents in any language: send each event of a session, get a verdict "
            "(ok, nudge, block or stop) back.",
        },
        "servers": [{"url": "http://127.0.0.1:7350"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
            "responses": error_responses,
        },
    }


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(document(), indent=1, sort_keys=True))
