"""The OTLP receivers on real sockets: OpenTelemetry SDK exporters (gRPC, HTTP), hand-written OTLP/JSON,
protobuf + gzip, size limits, malformed payloads, partial success, own telemetry ignored."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from ingest.otlp_testutil import MemorySink, expected_records, fixtures_dir
from ragpulse.config import Settings
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from testsupport import wait_until

QUESTION = "How many days per week can I work remotely while I'm still on probation?"
ANSWER = "Up to 2 days per week while on probation."
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "otlp_grpc_address": "127.0.0.1:0",
        "otlp_http_address": "127.0.0.1:0",
        "otlp_root_grace_s": 0.05,
        "otlp_idle_timeout_s": 30.0,
        "otlp_max_request_bytes": 256 * 1024,
    }
    base.update(over)
    return Settings(**base)


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[OtlpReceivers, MemorySink]]:
    sink = MemorySink()
    async with OtlpReceivers(_settings().otlp, sink) as r:
        assert r.ready
        yield r, sink
    assert not r.ready


def _emit_rag_trace(exporter: SpanExporter, service: str = "hr-assistant") -> str:
    """Emit one OpenInference RAG trace through the real SDK (children end, and are exported, first)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    with tracer.start_as_current_span("RetrievalQA") as root:
        root.set_attributes(
            {
                "openinference.span.kind": "CHAIN",
                "input.value": QUESTION,
                "output.value": ANSWER,
                "metadata": json.dumps({"app": "hr-assistant", "scenario": "policy-qa"}),
                "ragpulse.run.id": "run-42",
                "ragpulse.test_case.id": "case-7",
                "ragpulse.keywords": ["probation", "2 days"],
            }
        )
        with tracer.start_as_current_span("VectorStoreRetriever") as ret:
            ret.set_attributes(
                {
                    "openinference.span.kind": "RETRIEVER",
                    "retrieval.documents.0.document.id": "hr-remote-work-policy-v3#s4.2",
                    "retrieval.documents.0.document.content": "Probation: up to two days.",
                    "retrieval.documents.0.document.score": 0.8931,
                    "retrieval.documents.1.document.id": "hr-remote-work-policy-v3#s4.1",
                    "retrieval.documents.1.document.content": "After probation: up to four days.",
                    "retrieval.documents.1.document.score": 0.8412,
                }
            )
        with tracer.start_as_current_span("ChatOpenAI") as llm:
            llm.set_attributes({"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini-2024-07-18"})
        trace_id = f"{root.get_span_context().trace_id:032x}"
    provider.shutdown()
    return trace_id


def _check_sdk_trace(sink: MemorySink, trace_id: str) -> None:
    (t,) = sink.traces
    assert t.trace_id == trace_id
    assert t.question == QUESTION
    assert t.answer == ANSWER
    assert t.doc_ids == ["hr-remote-work-policy-v3#s4.2", "hr-remote-work-policy-v3#s4.1"]
    assert t.contexts == ["Probation: up to two days.", "After probation: up to four days."]
    assert [d.score for d in t.documents] == [0.8931, 0.8412]
    assert t.model == "gpt-4o-mini-2024-07-18"
    assert (t.app, t.scenario) == ("hr-assistant", "policy-qa")
    assert (t.run_id, t.test_case_id, t.keywords) == ("run-42", "case-7", ("probation", "2 days"))
    assert t.latency_s is not None
    assert 0 <= t.latency_s < 5
    assert t.incomplete is False


async def test_sdk_grpc_exporter(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{r.grpc_port}", insecure=True, timeout=5)
    trace_id = await asyncio.to_thread(_emit_rag_trace, exporter)
    await sink.wait_for(1)
    _check_sdk_trace(sink, trace_id)
    assert r.intake.spans_accepted == 3


async def test_sdk_grpc_exporter_gzip(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    exporter = GrpcExporter(
        endpoint=f"127.0.0.1:{r.grpc_port}", insecure=True, timeout=5, compression=grpc.Compression.Gzip
    )
    trace_id = await asyncio.to_thread(_emit_rag_trace, exporter)
    await sink.wait_for(1)
    _check_sdk_trace(sink, trace_id)


async def test_sdk_http_exporter(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    from opentelemetry.exporter.otlp.proto.http import Compression

    r, sink = receivers
    exporter = HttpExporter(
        endpoint=f"http://127.0.0.1:{r.http_port}/v1/traces", timeout=5, compression=Compression.Gzip
    )
    trace_id = await asyncio.to_thread(_emit_rag_trace, exporter)
    await sink.wait_for(1)
    _check_sdk_trace(sink, trace_id)


async def test_entry_span_with_remote_parent_counts_as_root(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    """A RAG service called by an upstream gateway: its entry span has a remote parent that is never
    exported here. The trace completes after the grace period (not the 30 s idle timeout)."""
    from opentelemetry import trace as trace_api
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    r, sink = receivers
    upstream = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B173, True, TraceFlags(1))

    def emit() -> None:
        provider = TracerProvider(resource=Resource.create({"service.name": "hr-assistant"}))
        provider.add_span_processor(
            SimpleSpanProcessor(GrpcExporter(endpoint=f"127.0.0.1:{r.grpc_port}", insecure=True, timeout=5))
        )
        tracer = provider.get_tracer("openinference.instrumentation.langchain")
        ctx = trace_api.set_span_in_context(NonRecordingSpan(upstream))
        with tracer.start_as_current_span("RetrievalQA", context=ctx) as root:
            root.set_attributes(
                {"openinference.span.kind": "CHAIN", "input.value": "q?", "output.value": "a."}
            )
            with tracer.start_as_current_span("VectorStoreRetriever") as ret:
                ret.set_attribute("openinference.span.kind", "RETRIEVER")
        provider.shutdown()

    await asyncio.to_thread(emit)
    (t,) = await sink.wait_for(1, timeout=5)
    assert t.trace_id == "5b8efff798038103d269b633813fc60c"
    assert (t.question, t.answer, t.incomplete) == ("q?", "a.", False)
    assert t.span_id != "eee19b7ec3c1b173"
    assert t.latency_s is not None


async def test_own_service_spans_are_ignored(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{r.grpc_port}", insecure=True, timeout=5)
    await asyncio.to_thread(_emit_rag_trace, exporter, "ragpulse")
    await wait_until(lambda: r.intake.spans_ignored == 3, what="the three own spans to be ignored")
    assert sink.traces == []
    assert r.assembler.pending_traces == 0


async def test_http_json_fixture_and_json_response(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    body = (fixtures_dir() / "otlp-multi-trace-batch.json").read_bytes()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.json() == {}
    await sink.wait_for(2)
    got = sink.by_id()
    for rec in expected_records()["otlp-multi-trace-batch.json"][1:]:
        t = got[rec["traceId"]]
        assert (t.question, t.answer, t.doc_ids, t.model) == (
            rec["question"],
            rec["answer"],
            rec["docIds"],
            rec["model"],
        )
    # the in-flight trace waits for its root (idle timeout 30 s), then is flushed as incomplete on exit
    assert r.assembler.pending_traces == 1


async def test_http_protobuf_gzip_fixture(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    body = gzip.compress((fixtures_dir() / "otlp-genai-semconv-rag.binpb").read_bytes())
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post(
            "/v1/traces",
            content=body,
            headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
        )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/x-protobuf"
    out = ExportTraceServiceResponse.FromString(resp.content)
    assert not out.HasField("partial_success")
    (t,) = await sink.wait_for(1)
    rec = expected_records()["otlp-genai-semconv-rag.json"][0]
    assert (t.trace_id, t.question, t.doc_ids, t.scenario) == (
        rec["traceId"],
        rec["question"],
        rec["docIds"],
        rec["scenario"],
    )


async def test_flush_on_exit_hands_incomplete_traces_to_the_sink() -> None:
    sink = MemorySink()
    async with OtlpReceivers(_settings(otlp_grpc_address="").otlp, sink) as r:
        assert r.grpc_port is None
        assert r.ready
        body = (fixtures_dir() / "otlp-multi-trace-batch.json").read_bytes()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            resp = await client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
        assert resp.status_code == 200
    got = sink.by_id()
    assert len(got) == 3
    assert got["5d753e009d3739ee88db86021265fb07"].incomplete is True


def _partial_json() -> bytes:
    doc = json.loads((fixtures_dir() / "otlp-openinference-langchain-rag.json").read_text("utf-8"))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "not-an-id"
    spans[1]["traceId"] = "1234"
    return json.dumps(doc).encode()


async def test_http_partial_success_json_and_protobuf(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = receivers
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post(
            "/v1/traces", content=_partial_json(), headers={"Content-Type": "application/json"}
        )
        assert resp.status_code == 200
        ps = resp.json()["partialSuccess"]
        assert ps["rejectedSpans"] == "2"
        assert "not-an-id" in ps["errorMessage"]
        # protobuf: a span with a 24-byte trace id (what a naive json_format.Parse of hex ids produces)
        req = ExportTraceServiceRequest()
        ss = req.resource_spans.add().scope_spans.add()
        ss.spans.add(trace_id=b"\x01" * 24, span_id=b"\x02" * 8, name="bad")
        ss.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="good")
        resp = await client.post(
            "/v1/traces", content=req.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
        )
        assert resp.status_code == 200
        assert ExportTraceServiceResponse.FromString(resp.content).partial_success.rejected_spans == 1
    # the root (the only good span of the JSON request) still makes a trace
    await sink.wait_for(1)
    t = sink.by_id()["94fcbde9a2d1349a3a807c1ab886d48a"]
    assert t.question == QUESTION
    assert t.doc_ids == []
    assert r.intake.spans_rejected == 3


async def test_http_errors(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, _ = receivers
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        resp = await client.post("/v1/traces", content=b"{oops", headers={"Content-Type": "application/json"})
        assert resp.status_code == 400
        assert resp.json()["code"] == 3
        assert "malformed JSON" in resp.json()["message"]
        resp = await client.post(
            "/v1/traces", content=b"\xff\xff\xff\xff\x0f", headers={"Content-Type": "application/x-protobuf"}
        )
        assert resp.status_code == 400
        assert status_pb2.Status.FromString(resp.content).code == 3
        resp = await client.post(
            "/v1/traces",
            content=b"not gzip",
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert resp.status_code == 400
        resp = await client.post("/v1/traces", content=b"{}", headers={"Content-Type": "text/plain"})
        assert resp.status_code == 415
        big = b" " * (256 * 1024 + 1)
        resp = await client.post("/v1/traces", content=big, headers={"Content-Type": "application/json"})
        assert resp.status_code == 413
        assert resp.json()["code"] == 8  # RESOURCE_EXHAUSTED
        bomb = gzip.compress(b"{" + b" " * (2 * 1024 * 1024) + b"}")
        assert len(bomb) < 256 * 1024
        resp = await client.post(
            "/v1/traces",
            content=bomb,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert resp.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: limit enforced while reading
            for _ in range(300):
                yield b" " * 1024

        resp = await client.post("/v1/traces", content=chunks(), headers={"Content-Type": "application/json"})
        assert resp.status_code == 413
        resp = await client.get("/v1/traces")
        assert resp.status_code == 405


async def test_grpc_errors_and_partial_success(receivers: tuple[OtlpReceivers, MemorySink]) -> None:
    r, _ = receivers
    async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
        raw = channel.unary_unary(EXPORT)
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw(b"\xff\xff\xff\xff\x0f", timeout=5)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw(b"\n" + b"\x80\x80\x10" + b"\x00" * (256 * 1024 + 10), timeout=5)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        export = channel.unary_unary(
            EXPORT,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        req = ExportTraceServiceRequest()
        json_format.Parse(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}), req)
        ss = req.resource_spans[0].scope_spans[0]
        ss.spans.add(trace_id=b"\x01" * 16, span_id=b"\x00" * 8, name="zero span id")
        ss.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="ok")
        resp = await export(req, timeout=5)
        assert resp.partial_success.rejected_spans == 1
        assert "span id" in resp.partial_success.error_message


async def test_grpc_limit_applies_after_gzip_decompression(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    r, _ = receivers
    req = ExportTraceServiceRequest()
    sp = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="huge")
    )
    sp.attributes.add(key="blob").value.string_value = "0" * (512 * 1024)
    assert len(gzip.compress(req.SerializeToString())) < 256 * 1024
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{r.grpc_port}", compression=grpc.Compression.Gzip
    ) as channel:
        export = channel.unary_unary(
            EXPORT,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await export(req, timeout=5)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert r.intake.spans_accepted == 0


async def test_port_in_use_is_a_config_error() -> None:
    from ragpulse.errors import ConfigError

    sink = MemorySink()
    async with OtlpReceivers(_settings(otlp_grpc_address="").otlp, sink) as first:
        with pytest.raises(ConfigError):
            async with OtlpReceivers(
                _settings(otlp_grpc_address="", otlp_http_address=f"127.0.0.1:{first.http_port}").otlp, sink
            ):
                pass


async def test_large_request_is_decoded_off_the_event_loop(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    from ragpulse.ingest.otlp.encode import request_to_otlp_json, trace_to_openinference_spans
    from ragpulse.ingest.otlp.intake import OFFLOAD_BYTES
    from ragpulse.model import Document, Trace

    r, sink = receivers
    big = "Records must be kept for seven years. " * 3000  # ~114 KB
    t = Trace(
        trace_id="7d4a0f51c26e41b2d3f4051627b8c9ea",
        question="q?",
        answer="a.",
        documents=[Document(id="d", content=big)],
    )
    for body, ctype in (
        (request_to_otlp_json(trace_to_openinference_spans(t)).encode(), "application/json"),
        (trace_to_openinference_spans(t).SerializeToString(), "application/x-protobuf"),
    ):
        assert len(body) > OFFLOAD_BYTES
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            resp = await client.post("/v1/traces", content=body, headers={"Content-Type": ctype})
        assert resp.status_code == 200
        (got,) = await sink.wait_for(1)  # the protobuf copy arrives after release: late, dropped
    assert got.contexts == [big]
    assert got.question == "q?"
    assert r.intake.spans_accepted == 3
    assert r.assembler.stats.late_spans == 3


async def test_http_deeply_nested_json_is_a_400_not_a_500(
    receivers: tuple[OtlpReceivers, MemorySink],
) -> None:
    """JSON nested deeper than the parser's recursion limit is a malformed payload, not a server error."""
    r, sink = receivers
    deep_array = b"[" * 100_000 + b"]" * 100_000
    inner = '{"stringValue": "x"}'
    for _ in range(5_000):
        inner = '{"arrayValue": {"values": [' + inner + "]}}"
    deep_attr = (
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0123456789abcdef0123456789abcdef",'
        ' "spanId": "0123456789abcdef", "name": "x", "attributes": [{"key": "input.value", "value": '
        + inner
        + "}]}]}]}]}"
    ).encode()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        for body in (deep_array, deep_attr):
            resp = await client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})
            assert resp.status_code == 400
            assert resp.json()["code"] == 3
            assert resp.json()["message"] == "too_deep: JSON nested deeper than 64 levels"
    assert sink.traces == []


@pytest.mark.integration  # slow check (waits for the gRPC idle GOAWAY, ~1.1 s): the integration lane, docs/dev/testing.md
async def test_grpc_closes_an_idle_connection_after_max_connection_idle() -> None:
    """Issue 25 item 8: no client holds a gRPC connection for ever (``otlp.grpc_max_connection_idle_s``)."""
    sink = MemorySink()
    async with (
        OtlpReceivers(
            _settings(otlp={"grpc_max_connection_idle_s": 0.5, "http_address": ""}).otlp, sink
        ) as r,
        grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel,
    ):
        raw = channel.unary_unary(EXPORT)
        assert await raw(b"", timeout=5) == b""  # an empty export: connected and answered
        assert channel.get_state() is grpc.ChannelConnectivity.READY
        await wait_until(
            lambda: channel.get_state() is grpc.ChannelConnectivity.IDLE, 10, "the server's GOAWAY on idle"
        )
