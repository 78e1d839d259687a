"""One OTLP sender: ``publish_otlp`` (``send --to otlp``, ``replay --via otlp``) goes through
``OtlpTraceClient`` — batches, gzip, and the receiver token as a bearer header."""

from __future__ import annotations

import gzip
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ragpulse.config import load_settings
from ragpulse.errors import IngestError
from ragpulse.ingest.publish import publish_otlp
from ragpulse.model import Trace
from testsupport import serve_http

SEEN: list[dict[str, Any]] = []


class _Collector(BaseHTTPRequestHandler):
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest.FromString(body)
        SEEN.append(
            {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "encoding": self.headers.get("Content-Encoding"),
                "resource_spans": len(req.resource_spans),
            }
        )
        out = ExportTraceServiceResponse().SerializeToString() if self.status == 200 else b"nope"
        self.send_response(self.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def _traces(n: int) -> list[Trace]:
    return [Trace(trace_id=f"{i:032x}", question="q?", answer="a.", app="hr") for i in range(1, n + 1)]


async def test_publish_otlp_batches_gzips_and_sends_the_token() -> None:
    SEEN.clear()
    with serve_http(_Collector) as base:
        s = load_settings(environ={"RAGPULSE_OTLP_TOKEN": "s3cret"})
        sent = await publish_otlp(s.otlp, _traces(5), base, batch_size=2)
    assert sent == 5
    assert [r["resource_spans"] for r in SEEN] == [2, 2, 1]
    assert {r["path"] for r in SEEN} == {"/v1/traces"}
    assert {r["auth"] for r in SEEN} == {"Bearer s3cret"}
    assert {r["encoding"] for r in SEEN} == {"gzip"}


async def test_no_token_no_header_and_an_error_answer_names_the_status() -> None:
    SEEN.clear()

    class _Refusing(_Collector):
        status = 400

    with serve_http(_Refusing) as base:
        s = load_settings(environ={})
        with pytest.raises(
            IngestError, match=r"^OTLP export to http://127\.0\.0\.1:\d+/v1/traces answered 400: nope$"
        ):
            await publish_otlp(s.otlp, _traces(1), base)
    assert SEEN[0]["auth"] is None
