"""Issue 11 item 7 (OTLP side): one bad character never costs a trace.

A lone surrogate in OTLP/JSON, raw invalid UTF-8 in a JSON body and a cut three-byte character in one
attribute of an OTLP/protobuf request (HTTP and gRPC) become U+FFFD; the healthy traces of the same request
are kept and the answer is 200 / OK without partial rejection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ingest.otlp_testutil import MemorySink, fixtures_dir
from ragpulse.config import Settings
from ragpulse.ingest.otlp.decode import decode_json, decode_protobuf
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.textclean import repair_json, repair_text
from testsupport import wait_until

OI_TRACE = "94fcbde9a2d1349a3a807c1ab886d48a"
BATCH_COMPLETE = ("29dfa1532bddb0964c969dee12dd6760", "558795ce994e52db4ee06ba29377c305")
QUESTION = "How many days per week can I work remotely while I'm still on probation?"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#: Placeholder of 6 UTF-8 bytes ("€€") that the tests overwrite with a cut character in the raw bytes.
PLACEHOLDER = "€€"


def _combined(question: str) -> dict[str, Any]:
    """The OpenInference fixture (root question replaced) plus the multi-trace batch, in one request."""
    oi: dict[str, Any] = json.loads(
        (fixtures_dir() / "otlp-openinference-langchain-rag.json").read_text("utf-8")
    )
    for sp in oi["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if sp["name"] == "RetrievalQA":
            for a in sp["attributes"]:
                if a["key"] == "input.value":
                    a["value"] = {"stringValue": question}
    batch = json.loads((fixtures_dir() / "otlp-multi-trace-batch.json").read_text("utf-8"))
    oi["resourceSpans"].extend(batch["resourceSpans"])
    return oi


def _protobuf_with_cut_character() -> bytes:
    """Binary request whose OpenInference root question ends in ``e2 82`` (the first two bytes of ``€``)."""
    doc = _combined(f"{QUESTION} {PLACEHOLDER}")
    result = decode_json(json.dumps(doc).encode())
    assert result.rejected_spans == 0
    raw: bytes = result.request.SerializeToString()
    good = PLACEHOLDER.encode()
    assert raw.count(good) == 1
    return raw.replace(good, b"\xe2\x82" + b"!!!!")


def _settings() -> Settings:
    return Settings(
        otlp_grpc_address="127.0.0.1:0",
        otlp_http_address="127.0.0.1:0",
        otlp_root_grace_s=0.05,
        otlp_idle_timeout_s=30.0,
    )


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[OtlpReceivers, MemorySink]]:
    sink = MemorySink()
    async with OtlpReceivers(_settings().otlp, sink) as r:
        yield r, sink


def test_repair_text_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert repair_text("half \ud83d emoji") == "half \ufffd emoji"
    assert repair_text("\ude00 low first") == "\ufffd low first"
    assert repair_text("pair \ud83d\ude00") == "pair 😀"
    clean = "no surrogate 😀"
    assert repair_text(clean) is clean
    assert repair_json({"k\ud800": ["\udfff", 1, None]}) == {"k\ufffd": ["\ufffd", 1, None]}


def test_protobuf_with_invalid_utf8_is_strictly_unparseable_but_decodes_leniently() -> None:
    raw = _protobuf_with_cut_character()
    with pytest.raises(Exception, match="UTF-8"):
        ExportTraceServiceRequest.FromString(raw)
    result = decode_protobuf(raw)
    assert result.rejected_spans == 0
    spans = [sp for rs in result.request.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    assert len(spans) == 10
    roots = [sp for sp in spans if sp.name == "RetrievalQA"]
    (q,) = [a.value.string_value for a in roots[0].attributes if a.key == "input.value"]
    assert q == f"{QUESTION} \ufffd!!!!"


async def test_http_json_lone_surrogate_keeps_every_trace(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, sink = receivers
    body = json.dumps(_combined(f"{QUESTION} \ud83d")).encode()  # ensure_ascii: "\ud83d" escape
    assert b"\\ud83d" in body
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200
    assert resp.json() == {}
    await sink.wait_for(3)
    got = sink.by_id()
    assert got[OI_TRACE].question == f"{QUESTION} \ufffd"
    assert set(BATCH_COMPLETE) <= set(got)


async def test_http_json_invalid_utf8_bytes_keep_every_trace(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, sink = receivers
    body = json.dumps(_combined(f"{QUESTION} {PLACEHOLDER}"), ensure_ascii=False).encode()
    body = body.replace(PLACEHOLDER.encode(), b"\xe2\x82!!!!")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200
    await sink.wait_for(3)
    assert sink.by_id()[OI_TRACE].question == f"{QUESTION} \ufffd!!!!"


async def test_http_protobuf_cut_character_keeps_every_trace(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, sink = receivers
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post(
            "/v1/traces",
            content=_protobuf_with_cut_character(),
            headers={"Content-Type": "application/x-protobuf"},
        )
    assert resp.status_code == 200
    assert not ExportTraceServiceResponse.FromString(resp.content).HasField("partial_success")
    await sink.wait_for(3)
    got = sink.by_id()
    assert got[OI_TRACE].question == f"{QUESTION} \ufffd!!!!"
    assert set(BATCH_COMPLETE) <= set(got)


async def test_grpc_cut_character_keeps_every_trace(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
        raw = channel.unary_unary(EXPORT, response_deserializer=ExportTraceServiceResponse.FromString)
        resp = await raw(_protobuf_with_cut_character(), timeout=5)
    assert json_format.MessageToDict(resp) == {}
    await sink.wait_for(3)
    assert sink.by_id()[OI_TRACE].question == f"{QUESTION} \ufffd!!!!"


async def test_client_disconnect_is_one_debug_line_not_an_error_traceback(
    receivers: tuple[OtlpReceivers, MemorySink], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 11 item 15: an exporter that hangs up mid-body leaves one DEBUG line and no ERROR traceback."""
    import asyncio
    import logging

    import structlog

    from ragpulse.logging import configure_logging

    r, sink = receivers
    configure_logging("DEBUG", json=True)
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        _reader, writer = await asyncio.open_connection("127.0.0.1", r.http_port)
        writer.write(
            b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100000\r\n\r\n" + b"\x0a" * 1000
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        await wait_until(
            lambda: any(e["event"] == "otlp_client_disconnected" for e in logs), 5, "the disconnect log"
        )
        # the gRPC side: a call abandoned by its deadline
        async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await channel.unary_unary(EXPORT)(b"\x0a" * 10, timeout=0.0001)
    (event,) = [e for e in logs if e["event"] == "otlp_client_disconnected"]
    assert (event["log_level"], event["transport"], event["received_bytes"]) == ("debug", "http", 1000)
    assert [e for e in logs if e["log_level"] in ("error", "critical")] == []
    assert [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR] == []
    assert sink.traces == []
