"""``trace_to_openinference_spans`` round-trips through the decoder, the assembler and the mappers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx

from ingest.otlp_testutil import MemorySink, group
from ragpulse.config import Settings
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.decode import decode_json, decode_protobuf
from ragpulse.ingest.otlp.encode import REPLAY_SERVICE, request_to_otlp_json, trace_to_openinference_spans
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.ingest.otlp.spans import request_to_spans
from ragpulse.model import Document, Source, Trace

START = datetime(2026, 3, 14, 12, 0, 3, 415000, tzinfo=UTC)


def _replay_trace(trace_id: str = "run-7:case-3") -> Trace:
    return Trace(
        trace_id=trace_id,
        app="finance-assistant",
        scenario="reimbursement-qa",
        question="出差回来后，差旅费用报销需要在多少天内提交？",
        documents=[
            Document(id="fin#art4", content="第四条 报销时限：15个工作日内。", score=0.91, metadata={"a": 4}),
            Document(id=None, content="第六条 报销材料。", score=None),
        ],
        context="你是财务制度助手。",
        answer="应在15个工作日内提交。",
        model="qwen2.5-72b-instruct",
        latency_s=3.395,
        start_time=START,
        source=Source.REPLAY,
        run_id="run-7",
        test_case_id="case-3",
        expected_answer="15个工作日内",
        keywords=("15", "工作日"),
        attributes={"test_set": "zh-finance", "reference_contexts": ["第四条 …"], "context_labels": [1, 0]},
    )


def _roundtrip(trace: Trace, via_json: bool) -> Trace:
    req = trace_to_openinference_spans(trace)
    result = decode_json(request_to_otlp_json(req)) if via_json else decode_protobuf(req.SerializeToString())
    assert result.rejected_spans == 0
    spans = request_to_spans(result.request, "ragpulse").spans
    ((tid, trace_spans),) = group(spans).items()
    return TraceBuilder(Settings().otlp).build(tid, trace_spans)


def _same(a: Trace, b: Trace) -> None:
    for field in (
        "trace_id",
        "app",
        "scenario",
        "question",
        "context",
        "answer",
        "model",
        "run_id",
        "test_case_id",
        "expected_answer",
        "keywords",
        "start_time",
    ):
        assert getattr(a, field) == getattr(b, field), field
    assert b.doc_ids == a.doc_ids
    assert b.contexts == a.contexts
    assert [d.score for d in b.documents] == [d.score for d in a.documents]
    assert [d.metadata for d in b.documents] == [d.metadata for d in a.documents]
    assert b.latency_s is not None
    assert abs(b.latency_s - (a.latency_s or 0)) < 1e-6
    assert b.source is Source.OTLP
    assert b.incomplete is False
    for k, v in a.attributes.items():
        assert b.attributes[k] == v, k


def test_roundtrip_protobuf_and_json() -> None:
    original = _replay_trace()
    for via_json in (False, True):
        _same(original, _roundtrip(original, via_json))


def test_hex_trace_id_is_used_directly_and_spans_are_deterministic() -> None:
    t = _replay_trace("0AF7651916CD43DD8448EB211C80319C")
    req = trace_to_openinference_spans(t)
    assert req == trace_to_openinference_spans(t)
    sp = req.resource_spans[0].scope_spans[0].spans[0]
    assert sp.trace_id.hex() == "0af7651916cd43dd8448eb211c80319c"
    assert "ragpulse.trace.id" not in {kv.key for kv in sp.attributes}
    assert _roundtrip(t, True).trace_id == "0af7651916cd43dd8448eb211c80319c"


def test_minimal_trace_without_answer_stays_without_answer() -> None:
    t = Trace(trace_id="case-1", question="q?")
    back = _roundtrip(t, False)
    assert (back.trace_id, back.question, back.answer, back.doc_ids, back.app) == (
        "case-1",
        "q?",
        None,
        [],
        REPLAY_SERVICE,
    )


def test_request_to_otlp_json_uses_hex_ids() -> None:
    doc = json.loads(request_to_otlp_json(trace_to_openinference_spans(_replay_trace())))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert {s.get("parentSpanId") for s in spans[1:]} == {spans[0]["spanId"]}


async def test_replay_via_otlp_http_socket() -> None:
    sink = MemorySink()
    settings = Settings(otlp_grpc_address="", otlp_http_address="127.0.0.1:0", otlp_root_grace_s=0.0)
    original = _replay_trace()
    async with OtlpReceivers(settings.otlp, sink) as r:
        async with httpx.AsyncClient() as client:
            resp = await client.post(
                f"http://127.0.0.1:{r.http_port}/v1/traces",
                content=trace_to_openinference_spans(original).SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
        assert resp.status_code == 200
        (got,) = await sink.wait_for(1)
    _same(original, got)


def test_a_refused_replay_id_is_not_used_and_the_trace_says_why() -> None:
    """Ids are data: a ``ragpulse.trace.id`` / ``ragpulse.test_case.id`` that is a path (``../x``) or holds a
    control or bidirectional character is not taken; the trace keeps its OTLP id and records the refusal."""
    sent = _replay_trace("../test-sets/victim")
    sent = sent.model_copy(update={"test_case_id": "case-\u202e3"})
    got = _roundtrip(sent, via_json=True)
    otlp_id = trace_to_openinference_spans(sent).resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    assert got.trace_id == otlp_id
    assert got.test_case_id is None
    assert got.run_id == "run-7"
    assert got.attributes["id_refused"] == {
        "ragpulse.trace.id": "'../test-sets/victim' has a '.' or '..' path segment",
        "ragpulse.test_case.id": "'case-\\u202e3' contains a bidirectional control character (U+202A–U+202E, "
        "U+2066–U+2069)",
    }
    assert (
        got.answer == "应在15个工作日内提交。"
    )  # the trace itself is kept (the control is shown escaped by repr)
