"""Every size limit at its boundary: a payload of exactly the limit is taken, one byte more is refused.

Kafka events (``kafka.max_message_bytes``, JSON events and OTLP topics), OTLP over HTTP (``Content-Length``, a
body streamed without one, and after ``gzip``) and gRPC (``otlp.max_request_bytes``), and the portal's upload
limit that guards test-case imports (``api.max_upload_mb``). A check written ``>=`` instead of ``>`` refuses
the first of each pair; one that forgets the limit takes the second.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.otlp_testutil import MemorySink
from ragpulse.config import Settings
from ragpulse.errors import IngestError, PayloadTooLarge
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.kafka_otlp import decode_otlp_message
from ragpulse.ingest.otlp.decode import decode_json, decompress
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.portal.problems import BodyLimit, install_problem_handlers

LIMIT = 4096
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
JSON_CT = {"Content-Type": "application/json"}


def _padded_json(doc: dict[str, Any], size: int) -> bytes:
    """``doc`` as JSON, padded with trailing spaces (still the same JSON) to exactly ``size`` bytes."""
    raw = json.dumps(doc).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def _event(size: int) -> bytes:
    return _padded_json({"traceId": "t-1", "question": "Q?", "answer": "A."}, size)


def _otlp_doc() -> dict[str, Any]:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "rag",
        "startTimeUnixNano": "1764590000000000000",
        "endTimeUnixNano": "1764590000500000000",
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}},
            {"key": "input.value", "value": {"stringValue": "What is rule 1?"}},
            {"key": "output.value", "value": {"stringValue": "Rule 1 says yes."}},
        ],
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _padded_protobuf(size: int) -> bytes:
    """The request of :func:`_otlp_doc` in protobuf, exactly ``size`` bytes: padded with an unknown
    length-delimited field 99 (skipped by the parser) of the right length."""
    base: bytes = decode_json(json.dumps(_otlp_doc())).request.SerializeToString()
    tag = _varint((99 << 3) | 2)
    for n in range(size):
        if len(base) + len(tag) + len(_varint(n)) + n == size:
            return base + tag + _varint(n) + b"\0" * n
    raise AssertionError(f"no padding reaches {size} bytes")


# -- Kafka ------------------------------------------------------------------------------------------------------


def test_kafka_event_of_exactly_the_limit_is_taken_one_byte_more_is_rejected() -> None:
    assert parse_event(_event(LIMIT), max_bytes=LIMIT).trace_id == "t-1"
    with pytest.raises(EventRejected) as ei:
        parse_event(_event(LIMIT + 1), max_bytes=LIMIT)
    assert ei.value.reason == f"too_large: {LIMIT + 1} bytes > {LIMIT}"


@pytest.mark.parametrize("encoding", ["otlp_json", "otlp_proto"])
def test_kafka_otlp_message_of_exactly_the_limit_is_taken_one_byte_more_is_rejected(encoding: str) -> None:
    def message(size: int) -> bytes:
        return _padded_json(_otlp_doc(), size) if encoding == "otlp_json" else _padded_protobuf(size)

    spans = decode_otlp_message(message(LIMIT), encoding, "ragpulse", LIMIT)
    assert [(sp.name, sp.trace_id) for sp in spans] == [("rag", "0af7651916cd43dd8448eb211c80319c")]
    with pytest.raises(
        IngestError, match=rf"^message of {LIMIT + 1} bytes exceeds kafka_max_message_bytes={LIMIT}$"
    ):
        decode_otlp_message(message(LIMIT + 1), encoding, "ragpulse", LIMIT)


# -- OTLP: the decompression step ---------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
def test_otlp_body_of_exactly_the_limit_after_decompression_is_taken(encoding: str | None) -> None:
    def encoded(raw: bytes) -> bytes:
        if encoding == "gzip":
            return gzip.compress(raw)
        if encoding == "deflate":
            return zlib.compress(raw)
        return raw

    at = b"x" * LIMIT
    assert decompress(encoded(at), encoding, LIMIT) == at
    with pytest.raises(PayloadTooLarge) as ei:
        decompress(encoded(at + b"x"), encoding, LIMIT)
    assert ei.value.limit == LIMIT


# -- OTLP: the receivers ------------------------------------------------------------------------------------------


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[OtlpReceivers, MemorySink]]:
    settings = Settings(
        otlp_grpc_address="127.0.0.1:0",
        otlp_http_address="127.0.0.1:0",
        otlp_root_grace_s=0.05,
        otlp_max_request_bytes=LIMIT,
    )
    sink = MemorySink()
    async with OtlpReceivers(settings.otlp, sink) as r:
        yield r, sink


async def test_otlp_http_body_of_exactly_the_limit_is_taken_one_byte_more_is_413(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, _ = receivers
    at, over = _padded_json(_otlp_doc(), LIMIT), _padded_json(_otlp_doc(), LIMIT + 1)

    def streamed(
        body: bytes,
    ) -> AsyncIterator[bytes]:  # no Content-Length: the limit is checked while reading
        async def gen() -> AsyncIterator[bytes]:
            for i in range(0, len(body), 1000):
                yield body[i : i + 1000]

        return gen()

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        for content in (at, streamed(at)):
            resp = await client.post("/v1/traces", content=content, headers=JSON_CT)
            assert resp.status_code == 200, resp.text
        for content in (over, streamed(over)):
            resp = await client.post("/v1/traces", content=content, headers=JSON_CT)
            assert resp.status_code == 413
            assert resp.json()["code"] == 8  # RESOURCE_EXHAUSTED
        gz = {**JSON_CT, "Content-Encoding": "gzip"}
        resp = await client.post("/v1/traces", content=gzip.compress(at), headers=gz)
        assert resp.status_code == 200
        resp = await client.post("/v1/traces", content=gzip.compress(over), headers=gz)
        assert resp.status_code == 413


async def test_otlp_grpc_message_of_exactly_the_limit_is_taken_one_byte_more_is_resource_exhausted(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, _ = receivers
    async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT, response_deserializer=ExportTraceServiceResponse.FromString)
        got = await export(_padded_protobuf(LIMIT), timeout=10)
        assert isinstance(got, ExportTraceServiceResponse)
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await export(_padded_protobuf(LIMIT + 1), timeout=10)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


# -- the portal's upload limit (test-case imports) ------------------------------------------------------------


def _upload_app(limit: int) -> Any:
    """A route that reads the whole body, behind the portal's own limit and problem handlers (as in
    ``ragpulse.portal.app.build_app``)."""
    app = FastAPI()

    @app.post("/api/v1/test-sets/t/cases/import")
    async def take(request: Request) -> JSONResponse:
        return JSONResponse({"bytes": len(await request.body())})

    install_problem_handlers(app)
    return BodyLimit(app, limit)


async def test_import_body_of_exactly_the_upload_limit_is_taken_one_byte_more_is_413() -> None:
    transport = httpx.ASGITransport(app=_upload_app(LIMIT))
    url = "/api/v1/test-sets/t/cases/import"

    async def streamed(size: int) -> AsyncIterator[bytes]:
        left = size
        while left:
            n = min(1000, left)
            yield b"x" * n
            left -= n

    async with httpx.AsyncClient(transport=transport, base_url="http://portal") as client:
        for content in (b"x" * LIMIT, streamed(LIMIT)):
            resp = await client.post(url, content=content)
            assert (resp.status_code, resp.json()) == (200, {"bytes": LIMIT})
        for content in (b"x" * (LIMIT + 1), streamed(LIMIT + 1)):
            resp = await client.post(url, content=content)
            assert resp.status_code == 413
            assert resp.headers["content-type"] == "application/problem+json"
            assert "RAGPULSE_API_MAX_UPLOAD_MB" in resp.json()["detail"]
