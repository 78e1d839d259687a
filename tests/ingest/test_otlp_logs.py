"""The OTLP logs receiver (issue 23 item 13): ``gen_ai`` events sent as log records by
``opentelemetry-instrumentation-openai-v2`` (recorded in ``tests/conformance/captured``) are joined to their
spans — over gRPC ``LogsService/Export`` and HTTP ``/v1/logs`` (protobuf and OTLP/JSON), in either order,
with the token rule of the traces endpoint."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from conformance.corpus import CAPTURED, expected
from ingest.otlp_testutil import MemorySink
from ragpulse.config import Settings
from ragpulse.ingest.otlp.logs import CARRIER_NAME, decode_logs_protobuf, fold_carriers
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.ingest.otlp.spans import request_to_spans

CASE = "otel-v2-events-prompt"
LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
TRACES_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = {"content-type": "application/x-protobuf"}


def _settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "otlp_grpc_address": "127.0.0.1:0",
        "otlp_http_address": "127.0.0.1:0",
        "otlp_root_grace_s": 0.3,
        "otlp_idle_timeout_s": 30.0,
    }
    return Settings(**{**base, **over})


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[OtlpReceivers, MemorySink]]:
    sink = MemorySink()
    async with OtlpReceivers(_settings().otlp, sink) as r:
        yield r, sink


def _check(sink: MemorySink) -> None:
    (turn,) = expected()[CASE]["turns"]
    (t,) = sink.traces
    assert t.question == turn["question"]
    assert t.answer == turn["answer"]
    assert all(d["text"] in (t.context or "") for d in turn["documents"])
    assert t.model == "gpt-4o-mini"


def test_log_records_become_carriers_folded_onto_their_span() -> None:
    logs = decode_logs_protobuf((CAPTURED / f"{CASE}.logs.binpb").read_bytes())
    assert logs.rejected_log_records == 0
    carriers = request_to_spans(logs.traces.request, "ragpulse").spans
    assert [c.name for c in carriers] == [CARRIER_NAME, CARRIER_NAME]
    assert [c.events[0].name for c in carriers] == ["gen_ai.user.message", "gen_ai.choice"]
    target = carriers[0].parent_span_id
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString((CAPTURED / f"{CASE}.binpb").read_bytes())
    spans = request_to_spans(req, "ragpulse").spans
    folded = fold_carriers([*carriers, *spans])
    assert [s.span_id for s in folded] == [s.span_id for s in spans]
    (chat,) = folded
    assert chat.span_id == target
    assert [e.name for e in chat.events] == ["gen_ai.user.message", "gen_ai.choice"]


async def test_grpc_logs_then_traces(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
        raw = await channel.unary_unary(LOGS_EXPORT)((CAPTURED / f"{CASE}.logs.binpb").read_bytes())
        resp = ExportLogsServiceResponse.FromString(raw)
        assert resp.partial_success.rejected_log_records == 0
        await channel.unary_unary(TRACES_EXPORT)((CAPTURED / f"{CASE}.binpb").read_bytes())
    await sink.wait_for(1)
    _check(sink)


def _logs_json_hex_ids() -> bytes:
    """The recorded logs request as OTLP/JSON with hex ids (as the spec writes them)."""
    req = ExportLogsServiceRequest.FromString((CAPTURED / f"{CASE}.logs.binpb").read_bytes())
    doc = json_format.MessageToDict(req)
    for rl in doc["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for rec in sl["logRecords"]:
                for key in ("traceId", "spanId"):
                    rec[key] = base64.b64decode(rec[key]).hex()
    return json.dumps(doc).encode()


async def test_http_traces_then_json_logs(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    base = f"http://127.0.0.1:{r.http_port}"
    async with httpx.AsyncClient() as client:
        traces = (CAPTURED / f"{CASE}.binpb").read_bytes()
        assert (await client.post(f"{base}/v1/traces", content=traces, headers=PROTOBUF)).status_code == 200
        resp = await client.post(
            f"{base}/v1/logs", content=_logs_json_hex_ids(), headers={"content-type": "application/json"}
        )
        assert resp.status_code == 200
        assert resp.json() == {}
    await sink.wait_for(1)
    _check(sink)


async def test_logs_need_the_token_and_reject_garbage() -> None:
    sink = MemorySink()
    async with OtlpReceivers(_settings(otlp_grpc_address="", otlp_token="s3cret").otlp, sink) as r:
        base = f"http://127.0.0.1:{r.http_port}/v1/logs"
        body = (CAPTURED / f"{CASE}.logs.binpb").read_bytes()
        async with httpx.AsyncClient() as client:
            assert (await client.post(base, content=body, headers=PROTOBUF)).status_code == 401
            auth = {**PROTOBUF, "authorization": "Bearer s3cret"}
            assert (await client.post(base, content=b"\xff\x00garbage", headers=auth)).status_code == 400
            assert (await client.post(base, content=body, headers=auth)).status_code == 200
