"""OTLP through Kafka (as the Collector's Kafka exporter publishes it) against a real tansu broker.

The shared OTLP fixtures are sent once over OTLP/HTTP to the receivers and once through Kafka — whole requests
in ``otlp_proto``, one message per span in ``otlp_json`` — and the traces must be equal field by field.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.kafka_testutil import RecordingSink, committed, create_topic, produce, read_topic
from ingest.otlp_testutil import MemorySink, fixtures_dir
from ragpulse.config import Settings
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.ingest.otlp.decode import decode_protobuf
from ragpulse.ingest.otlp.encode import request_to_otlp_json
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.model import Trace

FILES = [
    "otlp-openinference-langchain-rag",
    "otlp-genai-semconv-rag",
    "otlp-openllmetry-rag",
    "otlp-multi-trace-batch",
]
ASSEMBLY: dict[str, Any] = {"otlp_root_grace_s": 0.2, "otlp_idle_timeout_s": 1.5}


async def _wait_for(cond: Callable[[], bool], wait_s: float = 30.0) -> None:
    async with asyncio.timeout(wait_s):
        while not cond():  # noqa: ASYNC110 - polling state owned by other tasks
            await asyncio.sleep(0.05)


def _request(name: str) -> ExportTraceServiceRequest:
    return decode_protobuf((fixtures_dir() / f"{name}.binpb").read_bytes()).request


def _per_span(req: ExportTraceServiceRequest) -> list[tuple[bytes, ExportTraceServiceRequest]]:
    """One request per span, keyed by trace id (as recent Collector versions publish), children first."""
    out = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in reversed(ss.spans):
                one = ExportTraceServiceRequest()
                r = one.resource_spans.add()
                r.resource.CopyFrom(rs.resource)
                r.schema_url = rs.schema_url
                s = r.scope_spans.add()
                s.scope.CopyFrom(ss.scope)
                s.schema_url = ss.schema_url
                s.spans.add().CopyFrom(sp)
                out.append((sp.trace_id.hex().encode(), one))
    return out


async def _over_http() -> dict[str, Trace]:
    sink = MemorySink()
    s = Settings(otlp_grpc_address="", otlp_http_address="127.0.0.1:0", **ASSEMBLY)
    async with OtlpReceivers(s.otlp, sink) as r:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            for name in FILES:
                body = (fixtures_dir() / f"{name}.binpb").read_bytes()
                resp = await client.post(
                    "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
                )
                assert resp.status_code == 200
        n = sum(len({sp.trace_id for sp in _spans(_request(f))}) for f in FILES)
        await sink.wait_for(n)
    return sink.by_id()


def _spans(req: ExportTraceServiceRequest) -> list[Any]:
    return [sp for rs in req.resource_spans for ss in rs.scope_spans for sp in ss.spans]


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
async def test_fixtures_through_kafka_equal_otlp_http(kafka_bootstrap: str, encoding: str) -> None:
    expected = await _over_http()
    assert len(expected) == 6
    topic = f"otlp-{uuid.uuid4().hex[:8]}"
    await create_topic(kafka_bootstrap, topic, 3)
    values: list[bytes] = []
    keys: list[bytes | None] = []
    for name in FILES:
        req = _request(name)
        if encoding == "otlp_proto":  # whole requests, as older Collectors publish them
            values.append(req.SerializeToString())
            keys.append(None)
        else:  # one message per span, keyed by trace id
            for key, one in _per_span(req):
                values.append(request_to_otlp_json(one).encode())
                keys.append(key)
    await produce(kafka_bootstrap, topic, values, keys=keys)
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[f"unused-{uuid.uuid4().hex[:8]}"],
        kafka_topic_encodings={topic: encoding},
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        engine_shutdown_deadline_s=5.0,
        **ASSEMBLY,
    )
    sink = RecordingSink(50)
    async with KafkaSource(s.kafka, sink, otlp=s.otlp, commit_interval_s=0.2) as src:
        await _wait_for(lambda: len(sink.acked) >= len(expected))
        # every message is committed once all its traces are stored
        await _wait_for(lambda: src.stats["committed"] > 0 and not src._tracker.in_flight())
    await sink.close()
    got = {t.trace_id: t for t in sink.acked}
    assert len(sink.acked) == len(expected)
    assert sorted(got) == sorted(expected)
    for tid, trace in expected.items():
        assert got[tid].model_dump() == trace.model_dump(), tid
    assert (
        got["5d753e009d3739ee88db86021265fb07"].incomplete is True
    )  # in flight: released after idle timeout
    assert src.stats["dead_lettered"] == 0
    offs = await committed(kafka_bootstrap, s.kafka.group_id, topic)
    assert sum(o or 0 for o in offs.values()) == len(values)  # every partition committed to its end


async def test_undecodable_message_dead_lettered_loop_goes_on(kafka_bootstrap: str) -> None:
    topic = f"otlp-{uuid.uuid4().hex[:8]}"
    await create_topic(kafka_bootstrap, topic, 1)
    good = _request("otlp-genai-semconv-rag")
    await produce(
        kafka_bootstrap,
        topic,
        [b"\xff\xfe not protobuf", b"", good.SerializeToString()],
        keys=[b"a", b"b", b"c"],
    )
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[f"unused-{uuid.uuid4().hex[:8]}"],
        kafka_topic_encodings={topic: "otlp_proto"},
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        engine_shutdown_deadline_s=5.0,
        **ASSEMBLY,
    )
    sink = RecordingSink()
    async with KafkaSource(s.kafka, sink, otlp=s.otlp, commit_interval_s=0.2) as src:
        await _wait_for(lambda: len(sink.acked) == 1 and src.stats["dead_lettered"] == 2)
    await sink.close()
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 2)
    reasons = [dict(r.headers)["ragpulse.dlq.reason"].decode() for r in dlq]
    assert reasons[0].startswith("malformed_otlp: malformed protobuf payload")
    assert reasons[1] == "malformed_otlp: empty message"
    assert await committed(kafka_bootstrap, s.kafka.group_id, topic, 1) == {0: 3}


async def test_spans_in_assembly_hold_the_commit_and_are_redelivered(kafka_bootstrap: str) -> None:
    """A trace without its root holds the commit; on stop it is dropped, and the group's next consumer reads
    its spans again and assembles the whole trace."""
    topic = f"otlp-{uuid.uuid4().hex[:8]}"
    await create_topic(kafka_bootstrap, topic, 1)
    complete = _per_span(_request("otlp-genai-semconv-rag"))
    partial = _per_span(_request("otlp-openllmetry-rag"))
    root = [(k, r) for k, r in partial if not _spans(r)[0].parent_span_id]
    children = [(k, r) for k, r in partial if _spans(r)[0].parent_span_id]
    assert len(root) == 1
    assert children
    first = complete + children
    await produce(
        kafka_bootstrap, topic, [r.SerializeToString() for _, r in first], keys=[k for k, _ in first]
    )
    group = f"g-{uuid.uuid4().hex[:8]}"
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[f"unused-{uuid.uuid4().hex[:8]}"],
        kafka_topic_encodings={topic: "otlp_proto"},
        kafka_group_id=group,
        engine_shutdown_deadline_s=5.0,
        otlp_root_grace_s=0.2,
        otlp_idle_timeout_s=600.0,
    )
    sink = RecordingSink()
    async with KafkaSource(s.kafka, sink, otlp=s.otlp, commit_interval_s=0.1) as src:
        await _wait_for(lambda: len(sink.acked) == 1)
        await _wait_for(lambda: src._tracker.to_commit() == {} and src.stats["committed"] >= 1)
        commits = src.stats["committed"]
        await _wait_for(lambda: src._tracker.in_flight() == len(children))
        assert src._otlp is not None
        assert src._otlp.assembler.pending_traces == 1
    await sink.close()
    assert src.stats["committed"] >= commits
    # committed up to the first span of the held trace, not beyond
    assert await committed(kafka_bootstrap, group, topic, 1) == {0: len(complete)}

    await produce(kafka_bootstrap, topic, [root[0][1].SerializeToString()], keys=[root[0][0]])
    sink2 = RecordingSink()
    async with KafkaSource(s.kafka, sink2, otlp=s.otlp, commit_interval_s=0.1):
        await _wait_for(lambda: len(sink2.acked) == 1)
    await sink2.close()
    (trace,) = sink2.acked
    assert trace.trace_id == root[0][0].decode()
    assert trace.incomplete is False
    assert trace.question is not None
    assert trace.answer is not None
    assert await committed(kafka_bootstrap, group, topic, 1) == {0: len(first) + 1}


async def test_revoked_partition_drops_held_spans_and_the_new_owner_assembles_the_trace(
    kafka_bootstrap: str,
) -> None:
    """Consumer A holds a trace without its root; B joins the group and takes the partition over (A's spans in
    assembly are dropped, its offsets not committed); B reads every span again plus the root: one whole trace,
    judged by B only."""
    topic = f"otlp-{uuid.uuid4().hex[:8]}"
    await create_topic(kafka_bootstrap, topic, 1)
    partial = _per_span(_request("otlp-openllmetry-rag"))
    root = [(k, r) for k, r in partial if not _spans(r)[0].parent_span_id]
    children = [(k, r) for k, r in partial if _spans(r)[0].parent_span_id]
    await produce(
        kafka_bootstrap, topic, [r.SerializeToString() for _, r in children], keys=[k for k, _ in children]
    )
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[topic],  # listed in both: consumed once, as OTLP
        kafka_topic_encodings={topic: "otlp_proto"},
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        engine_shutdown_deadline_s=5.0,
        otlp_root_grace_s=0.2,
        otlp_idle_timeout_s=600.0,
    )
    sink_a, sink_b = RecordingSink(), RecordingSink()
    async with KafkaSource(s.kafka, sink_a, otlp=s.otlp, commit_interval_s=0.1) as a:
        await _wait_for(lambda: a._tracker.in_flight() == len(children))
        async with KafkaSource(s.kafka, sink_b, otlp=s.otlp, commit_interval_s=0.1) as b:
            # B joining revokes A's partition: A drops the spans it holds (its offsets stay uncommitted)
            await _wait_for(lambda: a.stats["otlp_dropped"] >= len(children), 60)
            await a.stop()  # whoever got the partition back, B owns it now
            assert a._otlp is not None
            assert a._otlp.held_messages == 0  # dropped, not committed
            await _wait_for(lambda: b._tracker.in_flight() == len(children), 60)
            await produce(kafka_bootstrap, topic, [root[0][1].SerializeToString()], keys=[root[0][0]])
            await _wait_for(lambda: len(sink_b.acked) == 1, 60)
    await sink_a.close()
    await sink_b.close()
    assert sink_a.acked == []
    (trace,) = sink_b.acked
    assert trace.trace_id == root[0][0].decode()
    assert trace.incomplete is False
    assert await committed(kafka_bootstrap, s.kafka.group_id, topic, 1) == {0: len(partial)}
