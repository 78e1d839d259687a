"""OTLP/HTTP receiver: ``POST /v1/traces`` and ``POST /v1/logs`` (``gen_ai`` event log records, joined to
their spans: :mod:`ragpulse.ingest.otlp.logs`) as a FastAPI app. Both paths follow the same rules below;
``/v1/logs`` answers ``ExportLogsServiceResponse``.

Bodies: ``application/x-protobuf`` or ``application/json`` (OTLP/JSON), optionally ``Content-Encoding: gzip``
(or ``deflate``). Answers follow the OTLP/HTTP spec, encoded like the request:

- 200 with ``ExportTraceServiceResponse`` (``partialSuccess.rejectedSpans`` when some spans were dropped);
- 400 with a ``google.rpc.Status`` for a payload that cannot be decoded;
- 413 when the body (compressed or decompressed) exceeds ``max_request_bytes`` — checked on
  ``Content-Length`` first and while reading, so an oversized body is never held in memory;
- 401 with ``WWW-Authenticate: Bearer`` when a token is configured and the request lacks
  ``Authorization: Bearer <token>`` (checked before the body is read);
- 415 for another content type;
- 403 for a request from a web page (an ``Origin`` header, or ``Sec-Fetch-Site`` other than ``none``): no
  browser is an OTLP exporter here, and a page must not post traces to a receiver it can reach;
- 503 with ``Retry-After: 1`` while ``otlp_max_pending_traces`` traces are held (back-pressure; OTLP
  exporters retry).

A client that disconnects before its body arrived is one DEBUG line (``otlp_client_disconnected``), never an
ERROR traceback: nothing of the request was taken.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from starlette.requests import ClientDisconnect

from ragpulse.authcheck import bearer_matches, refused
from ragpulse.errors import IngestError, PayloadTooLarge
from ragpulse.ingest.otlp.intake import OtlpIntake, Overloaded, count_rejected
from ragpulse.logging import get_logger

__all__ = ["JSON", "PROTOBUF", "build_http_app"]

log = get_logger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def _encode(msg: Message, as_json: bool, status_code: int = 200) -> Response:
    if as_json:
        body = json_format.MessageToJson(msg, indent=None).encode("utf-8")
        return Response(body, status_code=status_code, media_type=JSON)
    return Response(msg.SerializeToString(), status_code=status_code, media_type=PROTOBUF)


def _status(code: int, message: str, as_json: bool, http_status: int) -> Response:
    return _encode(status_pb2.Status(code=code, message=message), as_json, http_status)


def build_http_app(intake: OtlpIntake, max_request_bytes: int, token: str | None = None) -> FastAPI:
    """Build the receiver app.

    Args:
        intake: where decoded requests go.
        max_request_bytes: limit for the body as sent and after decompression, bytes.
        token: when set, every request needs ``Authorization: Bearer <token>`` (else 401, nothing read).
    """
    app = FastAPI(title="ragpulse OTLP/HTTP receiver", openapi_url=None, docs_url=None, redoc_url=None)

    @app.post("/v1/traces")
    async def export_traces(request: Request) -> Response:
        return await _export(request, logs=False)

    @app.post("/v1/logs")
    async def export_logs(request: Request) -> Response:
        return await _export(request, logs=True)

    async def _export(request: Request, *, logs: bool) -> Response:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        as_json = ctype == JSON
        if (
            request.headers.get("origin") is not None
            or request.headers.get("sec-fetch-site", "none") != "none"
        ):
            count_rejected("cross_site")
            return _status(
                code_pb2.PERMISSION_DENIED, "requests from web pages are not accepted", as_json, 403
            )
        auth = request.headers.get("authorization")
        if token is not None and not bearer_matches(auth, token):
            count_rejected("unauthenticated")
            client = request.client.host if request.client is not None else None
            refused("otlp_http", "wrong" if auth else "missing", where="http", client=client)
            denied = _status(code_pb2.UNAUTHENTICATED, "missing or wrong bearer token", as_json, 401)
            denied.headers["WWW-Authenticate"] = 'Bearer realm="ragpulse-otlp"'
            return denied
        if ctype not in (PROTOBUF, JSON):
            count_rejected("unsupported_media_type")
            return _status(
                code_pb2.INVALID_ARGUMENT, f"unsupported content type {ctype or '(none)'!r}", False, 415
            )
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_request_bytes:
            count_rejected("too_large")
            return _status(code_pb2.RESOURCE_EXHAUSTED, "request body too large", as_json, 413)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_request_bytes:
                    count_rejected("too_large")
                    return _status(code_pb2.RESOURCE_EXHAUSTED, "request body too large", as_json, 413)
                chunks.append(chunk)
        except ClientDisconnect:  # the exporter gave up (timeout, shutdown): nothing was taken
            log.debug("otlp_client_disconnected", transport="http", received_bytes=size)
            return Response(status_code=499)
        handle = intake.handle_logs if logs else intake.handle
        try:
            resp: Message = await handle(
                b"".join(chunks),
                json=as_json,
                encoding=request.headers.get("content-encoding"),
                limit=max_request_bytes,
                transport="http",
            )
        except Overloaded as e:
            busy = _status(code_pb2.UNAVAILABLE, str(e), as_json, 503)
            busy.headers["Retry-After"] = "1"
            return busy
        except PayloadTooLarge as e:
            count_rejected("too_large")
            return _status(code_pb2.RESOURCE_EXHAUSTED, str(e), as_json, 413)
        except IngestError as e:
            count_rejected("malformed")
            return _status(code_pb2.INVALID_ARGUMENT, str(e), as_json, 400)
        return _encode(resp, as_json)

    return app
