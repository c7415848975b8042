"""What every route of the service shares: reading a request's body (bounded) and its parameters, JSON answers,
and the answers to errors (the API's error body for every one)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .errors import ApiError

logger = logging.getLogger("loopwatch")

MAX_NAME: Final = 512


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def error_response(exc: ApiError) -> Response:
    return json_response(exc.body(), exc.status, exc.headers)


def checked_name(value: str, what: str) -> str:
    if not value or len(value) > MAX_NAME:
        raise ApiError("invalid_request", f"a {what} name is 1 to {MAX_NAME} characters")
    return value


def optional_name(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise ApiError("invalid_request", f"{key}: a string of 1 to {MAX_NAME} characters", field=key)
    return value


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, read up to ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError("bad_request", "Content-Length is not a number") from None
        if size > limit:
            raise ApiError("body_too_large", f"the body is {size} bytes, more than {limit}", limit=limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError("body_too_large", f"the body is more than {limit} bytes", limit=limit)
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("malformed_json", f"the body is not JSON: {exc}") from None


async def read_object(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON body, an object, read up to ``limit`` bytes."""
    body = await read_json(request, limit)
    if not isinstance(body, dict):
        raise ApiError("invalid_request", f"the body is a JSON object, not {type(body).__name__}")
    return body


async def read_raw(request: Request, limit: int) -> bytes:
    """The request's body as it came, read up to ``limit`` bytes."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError("body_too_large", f"the body is more than {limit} bytes", limit=limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def has_body(request: Request) -> bool:
    declared = request.headers.get("content-length")
    return declared not in (None, "0") or request.headers.get("transfer-encoding") == "chunked"


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError("invalid_request", f"{name} is a whole number", field=name) from None
    if not low <= value <= high:
        raise ApiError("invalid_request", f"{name} is from {low} to {high}", field=name)
    return value


async def http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        return error_response(ApiError("not_found", f"no such endpoint: {request.method} {request.url.path}"))
    if exc.status_code == 405:
        return error_response(ApiError("method_not_allowed", f"{request.method} is not allowed on {request.url.path}"))
    return json_response({"error": {"code": "bad_request", "message": str(exc.detail)}}, exc.status_code)


async def internal_error(request: Request, exc: Exception) -> Response:
    logger.exception("loopwatch: internal error answering %s %s", request.method, request.url.path)
    return error_response(ApiError("internal_error", "internal error (logged by the service)"))
