"""Errors as ``application/problem+json`` (RFC 9457) and the request-body size limit (413).

Service errors map to statuses here, once: :class:`~ragpulse.services.errors.BadRequest` 422,
:class:`~ragpulse.errors.NotFoundError` 404, :class:`~ragpulse.services.errors.Conflict` 409, an evaluation
past its deadline 504, a store failure 503, anything unexpected 500 (logged, details not returned).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragpulse.errors import ConfigError, NotFoundError, StoreError
from ragpulse.logging import get_logger
from ragpulse.services.errors import BadRequest, Conflict, ServiceError
from ragpulse.services.evaluate import EvaluationFailed, EvaluationTimeout

__all__ = ["PROBLEM_JSON", "BodyLimit", "PayloadTooLarge", "install_problem_handlers", "problem"]

PROBLEM_JSON = "application/problem+json"
_log = get_logger("ragpulse.api")


class PayloadTooLarge(StarletteHTTPException):
    """The request body is larger than ``max_upload_mb``."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"request body larger than {limit / 1048576:g} MiB (RAGPULSE_API_MAX_UPLOAD_MB)"
        )


def problem(status: int, detail: str, *, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """A problem+json response: ``type`` ``about:blank``, ``title`` the status phrase, ``status``, ``detail``."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _validation_detail(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


ErrorPage = Any  # (request, status, detail) -> Response for non-API paths (the web UI's error page)


def install_problem_handlers(app: FastAPI, html_error: ErrorPage | None = None) -> None:
    """Register the error handlers: problem+json under ``/api/``, ``html_error`` (if given) elsewhere."""

    def respond(
        request: Request, status: int, detail: str, headers: dict[str, str] | None = None
    ) -> Response:
        if html_error is not None and not request.url.path.startswith("/api/"):
            resp: Response = html_error(request, status, detail)
            return resp
        return problem(status, detail, headers=headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return respond(request, exc.status_code, detail, dict(exc.headers) if exc.headers else None)

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return respond(request, 422, _validation_detail(exc))

    async def service_error(request: Request, exc: Exception) -> Response:
        status = 422
        if isinstance(exc, NotFoundError):
            status = 404
        elif isinstance(exc, Conflict):
            status = 409
        elif isinstance(exc, EvaluationTimeout):
            status = 504
        elif isinstance(exc, EvaluationFailed):
            status = 503
        elif isinstance(exc, BadRequest | ConfigError):
            status = 422
        return respond(request, status, str(exc))

    async def store_error(request: Request, exc: Exception) -> Response:
        _log.warning("api_store_error", path=request.url.path, error=str(exc))
        if isinstance(exc, StoreError) and not exc.retriable:  # the database rejected the data: not an outage
            return respond(request, 422, "the database rejected the request's data")
        return respond(request, 503, "the database is not available; try again")

    async def unexpected(request: Request, exc: Exception) -> Response:
        _log.error("api_unexpected_error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
        return respond(request, 500, "internal error (logged)")

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(ConfigError, service_error)
    app.add_exception_handler(NotFoundError, service_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(Exception, unexpected)


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 (by its ``Content-Length`` before
    reading, else while reading)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    size = int(v)
                except ValueError:
                    size = 0
                if size > self.max_bytes:
                    exc = PayloadTooLarge(self.max_bytes)
                    await problem(413, str(exc.detail))(scope, receive, send)
                    return
        seen = 0
        limit = self.max_bytes

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(limit)
            return msg

        await self.app(scope, limited, send)
