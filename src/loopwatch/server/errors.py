"""The service's errors: every failure is a JSON body ``{"error": {"code", "message"}}`` with a stable code."""

from __future__ import annotations

from typing import Any, Final

from ..errors import LoopwatchError

__all__ = ["CODES", "ApiError"]

CODES: Final[dict[str, int]] = {
    "malformed_json": 400,
    "bad_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "body_too_large": 413,
    "batch_too_large": 413,
    "invalid_event": 422,
    "invalid_snapshot": 422,
    "invalid_request": 422,
    "rate_limited": 429,
    "store_unavailable": 503,
    "internal_error": 500,
}
"""Each error code and its HTTP status."""


class ApiError(LoopwatchError):
    """An error answered to the client: ``code`` (one of :data:`CODES`) decides the status."""

    def __init__(self, code: str, message: str, *, headers: dict[str, str] | None = None, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.status = CODES[code]
        self.message = message
        self.headers = headers or {}
        self.details = details

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        error.update(self.details)
        return {"error": error}
