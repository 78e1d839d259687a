"""OtlpTraceClient against the real receivers (HTTP and gRPC), and engine back-pressure not holding
OTLP responses."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from ingest.otlp_testutil import MemorySink
from ragpulse.config import Settings
from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.client import OtlpTraceClient
from ragpulse.ingest.otlp.encode import trace_to_openinference_spans
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.model import Document, Trace
from ragpulse.protocols import AckCallback
from testsupport import wait_until


def _traces(n: int) -> list[Trace]:
    return [
        Trace(
            trace_id=f"case-{i}",
            question=f"question {i}?",
            answer=f"answer {i}",
            documents=[Document(id=f"d{i}", content=f"context {i}")],
            run_id="run-1",
            test_case_id=f"case-{i}",
        )
        for i in range(n)
    ]


def _settings() -> Settings:
    return Settings(otlp_grpc_address="127.0.0.1:0", otlp_http_address="127.0.0.1:0", otlp_root_grace_s=0.0)


@pytest.mark.parametrize("transport", ["http", "grpc"])
async def test_client_sends_traces(transport: str) -> None:
    sink = MemorySink()
    async with OtlpReceivers(_settings().otlp, sink) as r:
        port = r.http_port if transport == "http" else r.grpc_port
        async with OtlpTraceClient(f"{transport}://127.0.0.1:{port}") as client:
            assert await client.send(_traces(5)) == 0
        await sink.wait_for(5)
    got = sink.by_id()
    assert sorted(got) == [f"case-{i}" for i in range(5)]
    t = got["case-3"]
    assert (t.question, t.answer, t.doc_ids, t.contexts, t.run_id, t.test_case_id) == (
        "question 3?",
        "answer 3",
        ["d3"],
        ["context 3"],
        "run-1",
        "case-3",
    )


async def test_client_errors() -> None:
    with pytest.raises(ValueError):
        OtlpTraceClient("ftp://x")
    async with OtlpTraceClient("http://127.0.0.1:1") as client:
        with pytest.raises(IngestError) as ei:
            await client.send(_traces(1))
        assert ei.value.retriable


class BlockedSink(MemorySink):
    """A sink whose submit waits until released (an engine with a full queue)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        await self.release.wait()
        await super().submit(trace, ack)

    def has_room(self) -> bool:
        return self.release.is_set()


async def test_engine_back_pressure_does_not_hold_otlp_responses() -> None:
    sink = BlockedSink()
    async with OtlpReceivers(_settings().otlp, sink) as r:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            started = time.monotonic()
            for t in _traces(20):
                resp = await client.post(
                    "/v1/traces",
                    content=trace_to_openinference_spans(t).SerializeToString(),
                    headers={"Content-Type": "application/x-protobuf"},
                )
                assert resp.status_code == 200
            assert time.monotonic() - started < 5
        await asyncio.sleep(0.1)
        assert sink.traces == []
        sink.release.set()
        await sink.wait_for(20)
    assert len(sink.traces) == 20


async def test_full_assembler_answers_retryable_503_and_unavailable() -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    sink = BlockedSink()
    settings = Settings(
        otlp_grpc_address="127.0.0.1:0",
        otlp_http_address="127.0.0.1:0",
        otlp_root_grace_s=0.0,
        otlp_max_pending_traces=2,
    )
    traces = _traces(4)
    bodies = [trace_to_openinference_spans(t).SerializeToString() for t in traces]
    headers = {"Content-Type": "application/x-protobuf"}
    async with (
        OtlpReceivers(settings.otlp, sink) as r,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client,
    ):
        assert (await client.post("/v1/traces", content=bodies[0], headers=headers)).status_code == 200
        # the first trace is taken by the blocked submit
        await wait_until(lambda: not r.assembler.pending_traces, 5, "the assembler to hand the trace over")
        # the trace in the blocked submit still counts: one more fits (backlog limit 2)
        assert (await client.post("/v1/traces", content=bodies[1], headers=headers)).status_code == 200
        assert r.assembler.saturated
        busy = await client.post("/v1/traces", content=bodies[2], headers=headers)
        assert busy.status_code == 503
        assert busy.headers["retry-after"] == "1"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await export(bodies[2], timeout=5)
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        sink.release.set()
        await sink.wait_for(2)
        for body in bodies[2:]:
            retry = await client.post("/v1/traces", content=body, headers=headers)
            assert retry.status_code == 200
        await sink.wait_for(4)
    assert sorted(t.trace_id for t in sink.traces) == [t.trace_id for t in traces]
    assert r.assembler.stats.spans_no_room == 0
