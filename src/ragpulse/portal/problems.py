"""Errors as ``application/problem+json`` (RFC 9457) and the request-body size limit (413).

Service errors map to statuses here, once: :class:`~ragpulse.errors.BadRequest` 422,
:class:`~ragpulse.errors.NotFoundError` 404, :class:`~ragpulse.errors.Conflict` 409, an evaluation
past its deadline 504, a store failure 503, anything unexpected 500 (logged, details not returned).
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragpulse.errors import (
    BadRequest,
    ConfigError,
    Conflict,
    NotFoundError,
    PayloadTooLarge,
    ServiceError,
    StoreError,
)
from ragpulse.jsonutil import TooDeep
from ragpulse.logging import get_logger
from ragpulse.portal.evaluate import EvaluationFailed, EvaluationTimeout

__all__ = ["PROBLEM_JSON", "BodyLimit", "install_problem_handlers", "problem", "validation_message"]

PROBLEM_JSON = "application/problem+json"
_log = get_logger("ragpulse.portal")


def _too_large(limit: int) -> PayloadTooLarge:
    """The portal's upload limit error (answered 413 by :func:`install_problem_handlers` and :class:`BodyLimit`)."""
    return PayloadTooLarge(
        f"request body larger than {limit / 1048576:g} MiB (RAGPULSE_API_MAX_UPLOAD_MB)", limit=limit
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


def validation_message(err: Mapping[str, Any]) -> str:
    """The message of one pydantic error: a validator's own words (``ValueError`` raised by ragpulse, e.g. an
    invalid run id) without pydantic's ``Value error, `` prefix; pydantic's message otherwise."""
    cause = (err.get("ctx") or {}).get("error")
    if err.get("type") == "value_error" and cause is not None:
        return str(cause)
    return str(err.get("msg", "invalid"))


def _validation_detail(exc: RequestValidationError) -> str:
    """At most three of the request's validation errors as ``field: message``; a body that is not JSON as
    ``malformed JSON at character N: <parser's reason>`` (FastAPI reports it as ``body.N: JSON decode error``)."""
    parts = []
    for err in exc.errors()[:3]:
        if err.get("type") == "json_invalid":
            pos = next((p for p in err.get("loc", ()) if isinstance(p, int)), None)
            why = (err.get("ctx") or {}).get("error") or "not JSON"
            parts.append(f"malformed JSON{f' at character {pos}' if pos is not None else ''}: {why}")
            continue
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {validation_message(err)}")
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
        if isinstance(exc.__cause__, RecursionError):  # FastAPI's body parser ran out of stack: "[[[[…"
            return respond_coded(request, 422, str(TooDeep()), TooDeep.code)
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
        code = getattr(exc, "code", None) if isinstance(exc, BadRequest) else None
        if code is not None:
            return respond_coded(request, status, str(exc), code)
        return respond(request, status, str(exc))

    def respond_coded(request: Request, status: int, detail: str, code: str) -> Response:
        if html_error is not None and not request.url.path.startswith("/api/"):
            resp: Response = html_error(request, status, detail)
            return resp
        return problem(status, detail, code=code)

    async def store_error(request: Request, exc: Exception) -> Response:
        _log.warning("api_store_error", path=request.url.path, error=str(exc))
        if isinstance(exc, StoreError) and not exc.retriable:  # the database rejected the data: not an outage
            return respond(request, 422, "the database rejected the request's data")
        return respond(request, 503, "the database is not available; try again")

    async def too_large(request: Request, exc: Exception) -> Response:
        return respond(request, 413, str(exc))

    async def unexpected(request: Request, exc: Exception) -> Response:
        _log.error("api_unexpected_error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
        return respond(request, 500, "internal error (logged)")

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(ConfigError, service_error)
    app.add_exception_handler(NotFoundError, service_error)
    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(PayloadTooLarge, too_large)
    app.add_exception_handler(Exception, unexpected)


#: What a path parameter names, for the 404 of an id that cannot exist (the messages of the services' own 404s).
_PATH_PARAM_NAMES = {"trace_id": "trace", "session_id": "session", "run_id": "run", "name": "test set"}


def refuse_nul(request: Request) -> None:
    """A dependency of every portal route: a NUL character (which PostgreSQL cannot store in text, so no stored
    id or value holds one) in a path parameter answers 404 (no such thing can exist), in a query parameter 422
    naming the parameter — instead of the database refusing the query.

    Raises:
        NotFoundError: a path parameter holds NUL.
        BadRequest: a query parameter's name or value holds NUL.
    """
    params = request.path_params
    for key, value in params.items():
        if isinstance(value, str) and "\x00" in value:
            if key == "case_id":
                test_set = str(params.get("name", ""))
                raise NotFoundError(f"case {value[:100]!r} not found in test set {test_set[:100]!r}")
            raise NotFoundError(f"{_PATH_PARAM_NAMES.get(key, key)} {value[:100]!r} not found")
    for key, value in request.query_params.multi_items():
        if key == "q":  # the text search matches no stored text with NUL: an empty answer, not an error
            continue
        if "\x00" in key or "\x00" in value:
            raise BadRequest(f"query parameter {key[:100]!r} contains a NUL character")


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
                    await problem(413, str(_too_large(self.max_bytes)))(scope, receive, send)
                    return
        seen = 0
        limit = self.max_bytes

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return msg

        await self.app(scope, limited, send)
