"""Every OTLP fixture re-sent through the real OpenTelemetry SDK exporters (gRPC and HTTP), one span per
export request in file order (children before their parents), then checked against ``expected-records.json``.
"""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ingest.otlp_testutil import MemorySink, check_record, expected_records, fixtures_dir
from ragpulse.config import Settings
from ragpulse.ingest.otlp.decode import decode_protobuf
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.ingest.otlp.spans import attributes_to_dict

FILES = [
    "otlp-openinference-langchain-rag.json",
    "otlp-genai-semconv-rag.json",
    "otlp-openllmetry-rag.json",
    "otlp-multi-trace-batch.json",
]


def _sdk_spans(name: str) -> list[ReadableSpan]:
    """The fixture's spans as SDK ``ReadableSpan`` objects (ids, times, kinds, attributes, events kept)."""
    req = decode_protobuf((fixtures_dir() / name.replace(".json", ".binpb")).read_bytes()).request
    out = []
    for rs in req.resource_spans:
        resource = Resource(attributes_to_dict(rs.resource.attributes))
        for ss in rs.scope_spans:
            scope = InstrumentationScope(ss.scope.name, ss.scope.version or None)
            for sp in ss.spans:
                tid = int.from_bytes(sp.trace_id, "big")
                ctx = SpanContext(tid, int.from_bytes(sp.span_id, "big"), False, TraceFlags(1))
                parent = (
                    SpanContext(tid, int.from_bytes(sp.parent_span_id, "big"), False, TraceFlags(1))
                    if sp.parent_span_id
                    else None
                )
                out.append(
                    ReadableSpan(
                        name=sp.name,
                        context=ctx,
                        parent=parent,
                        resource=resource,
                        attributes=attributes_to_dict(sp.attributes),
                        events=[
                            Event(e.name, attributes_to_dict(e.attributes), e.time_unix_nano)
                            for e in sp.events
                        ],
                        kind=SpanKind(sp.kind - 1),
                        status=Status(StatusCode(sp.status.code)),
                        start_time=sp.start_time_unix_nano,
                        end_time=sp.end_time_unix_nano,
                        instrumentation_scope=scope,
                    )
                )
    return out


def _export_one_by_one(exporter: SpanExporter, spans: list[ReadableSpan]) -> None:
    for span in spans:
        assert exporter.export([span]) is SpanExportResult.SUCCESS
    exporter.shutdown()


@pytest.mark.parametrize("transport", ["grpc", "http"])
@pytest.mark.parametrize("name", FILES)
async def test_fixture_through_sdk_exporter(name: str, transport: str) -> None:
    records = expected_records()[name]
    spans = _sdk_spans(name)
    sink = MemorySink()
    settings = Settings(
        otlp_grpc_address="127.0.0.1:0", otlp_http_address="127.0.0.1:0", otlp_root_grace_s=0.2
    )
    async with OtlpReceivers(settings.otlp, sink) as r:
        exporter: SpanExporter = (
            GrpcExporter(endpoint=f"127.0.0.1:{r.grpc_port}", insecure=True, timeout=5)
            if transport == "grpc"
            else HttpExporter(endpoint=f"http://127.0.0.1:{r.http_port}/v1/traces", timeout=5)
        )
        await asyncio.to_thread(_export_one_by_one, exporter, spans)
        complete = [rec for rec in records if rec["complete"]]
        await sink.wait_for(len(complete))
        assert r.intake.spans_accepted == len(spans)
    # the in-flight trace (no root) is handed over, flagged incomplete, when the receivers stop
    got = sink.by_id()
    assert len(sink.traces) == len(records) == len(got)
    for rec in records:
        check_record(got[rec["traceId"]], rec, name)
