"""gen_ai.evaluation.result events received by a test-owned OTLP/HTTP receiver (opentelemetry-proto)."""

from __future__ import annotations

import time
import uuid

import pytest

from ragpulse.config import Settings
from ragpulse.export import EvaluationEventExporter, MetricsExporter, build_exporters, shutdown_exporters
from ragpulse.export.events import EVENT_NAME, otel_span_id, otel_trace_id
from ragpulse.export.otel_setup import MetricsRuntime
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)

from .helpers import OtlpLogsReceiver, attr_value

TRACE_ID = "c0bed30f3bcb3c6c9d41ef208e34d0c1"
SPAN_ID = "8999deb2b4951219"


def _result(trace_id: str = TRACE_ID, span_id: str | None = SPAN_ID) -> tuple[TraceResult, list[Judgement]]:
    trace = Trace(trace_id=trace_id, span_id=span_id, app="kestrel-kb", source=Source.OTLP, run_id="run-7")
    js = [
        Judgement(judge="faithfulness", version="f1", backend=Backend.LLM, model="judge-mini", score=0.92,
                  passed=True, threshold=0.7, status=JudgementStatus.OK,
                  reason="Every claim is supported by passages [1]-[3]."),
        Judgement(judge="relevancy", version="r1", backend=Backend.LLM, model="judge-mini", score=0.2,
                  passed=False, threshold=0.5, status=JudgementStatus.OK, reason="Answers another question."),
        Judgement(judge="keyword", version="k1", backend=Backend.HEURISTIC, status=JudgementStatus.SKIPPED,
                  reason="no_reference: no keywords"),
        Judgement(judge="correctness", version="c1", backend=Backend.LLM, status=JudgementStatus.ERROR,
                  reason="judge_unavailable: HTTP 429 after 3 attempts"),
    ]  # fmt: skip
    return TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=tuple(js)), js


def test_events_reach_an_otlp_receiver_with_trace_context(
    metrics_runtime: MetricsRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpLogsReceiver() as rx:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/protobuf")
        exporters = build_exporters(Settings(export_service_name="ragpulse-test").export)
        assert [type(e) for e in exporters] == [MetricsExporter, EvaluationEventExporter]
        res, js = _result()
        for e in exporters:
            e.on_stored(res, js)
        shutdown_exporters(exporters)  # flushes the batch
        records = rx.wait_for(4)

    assert len(records) == 4
    by_name = {attr_value(next(a.value for a in r.attributes if a.key == "gen_ai.evaluation.name")): r
               for r in records}  # fmt: skip
    for r in records:
        assert r.event_name == EVENT_NAME
        assert r.trace_id.hex() == TRACE_ID
        assert r.span_id.hex() == SPAN_ID
        assert r.time_unix_nano > 0
    assert rx.resources[0]["service.name"] == "ragpulse-test"

    def attrs(name: str) -> dict[str, object]:
        return {a.key: attr_value(a.value) for a in by_name[name].attributes}

    assert attrs("faithfulness") == {
        "gen_ai.evaluation.name": "faithfulness",
        "gen_ai.evaluation.score.value": 0.92,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "Every claim is supported by passages [1]-[3].",
        "ragpulse.evaluation.status": "ok",
        "ragpulse.judge.version": "f1",
        "ragpulse.judge.backend": "llm",
        "ragpulse.judge.threshold": 0.7,
        "ragpulse.judge.model": "judge-mini",
        "ragpulse.trace_id": TRACE_ID,
        "ragpulse.app": "kestrel-kb",
        "ragpulse.run_id": "run-7",
    }
    assert attrs("relevancy")["gen_ai.evaluation.score.label"] == "fail"
    assert attrs("relevancy")["gen_ai.evaluation.score.value"] == 0.2
    assert by_name["faithfulness"].severity_number == 9  # INFO
    kw = attrs("keyword")
    assert "gen_ai.evaluation.score.value" not in kw
    assert "error.type" not in kw
    assert kw["ragpulse.evaluation.status"] == "skipped"
    assert kw["gen_ai.evaluation.explanation"] == "no_reference: no keywords"
    err = attrs("correctness")
    assert err["error.type"] == "judge_unavailable"
    assert "gen_ai.evaluation.score.value" not in err
    assert "gen_ai.evaluation.score.label" not in err
    assert by_name["correctness"].severity_number == 13  # WARN


def test_no_endpoint_no_event_exporter(
    metrics_runtime: MetricsRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    assert [type(e) for e in build_exporters(Settings().export)] == [MetricsExporter]


def test_non_otlp_trace_ids() -> None:
    assert otel_trace_id(TRACE_ID.upper().lower()) == int(TRACE_ID, 16)
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert otel_trace_id(str(u)) == u.int
    assert otel_trace_id("abc") == 0xABC
    assert otel_trace_id("order-42") == 0
    assert otel_span_id(None) == 0
    assert otel_span_id("zz") == 0
    assert otel_span_id(SPAN_ID) == int(SPAN_ID, 16)


def test_redelivery_emits_nothing_and_full_queue_drops_and_counts() -> None:
    with OtlpLogsReceiver() as rx:
        rx.gate.clear()  # the collector hangs: the batch worker blocks on its first export
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        exp = EvaluationEventExporter(
            Settings().export, log_exporter=OTLPLogExporter(endpoint=rx.url, timeout=10), max_queue_size=4,
            schedule_delay_s=0.01, max_export_batch_size=1,
        )  # fmt: skip
        res, js = _result()
        exp.on_stored(res, [])
        assert exp.emitted == 0
        assert exp.dropped == 0
        t0 = time.monotonic()
        for _ in range(10):
            exp.on_stored(res, js)  # 40 events, never blocking
        assert time.monotonic() - t0 < 1.0
        assert exp.emitted + exp.dropped == 40
        assert exp.dropped >= 40 - 4 - 2  # queue of 4, plus at most a batch or two in flight
        rx.gate.set()
        exp.shutdown(5)
        records = rx.wait_for(exp.emitted)
        assert len(records) == exp.emitted
        exp.on_stored(res, js[:1])  # after shutdown: dropped, not raised
        assert exp.emitted + exp.dropped == 41


def test_events_over_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc

    received: list[logs_service_pb2.ExportLogsServiceRequest] = []

    class Servicer(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request, context):  # type: ignore[no-untyped-def]
            received.append(request)
            return logs_service_pb2.ExportLogsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    # the generated gRPC module has no type hints
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Servicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_INSECURE", "true")
        from ragpulse.export.events import build_event_exporter

        exp = build_event_exporter(Settings().export)
        assert exp is not None
        res, js = _result()
        exp.on_stored(res, js[:2])
        exp.shutdown(5)
    finally:
        server.stop(0)
    records = [
        r for req in received for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records
    ]
    assert len(records) == 2
    assert {r.trace_id.hex() for r in records} == {TRACE_ID}
    assert {r.span_id.hex() for r in records} == {SPAN_ID}
    names = {attr_value(a.value) for r in records for a in r.attributes if a.key == "gen_ai.evaluation.name"}
    assert names == {"faithfulness", "relevancy"}


def test_redacted_explanations_keep_only_the_reason_code() -> None:
    from ragpulse.export.events import event_attributes

    res, js = _result()
    full = event_attributes(res.trace, js[3])
    red = event_attributes(res.trace, js[3], redact=True)
    assert full["gen_ai.evaluation.explanation"] == "judge_unavailable: HTTP 429 after 3 attempts"
    assert red["gen_ai.evaluation.explanation"] == "judge_unavailable"
    assert "gen_ai.evaluation.explanation" not in event_attributes(res.trace, js[0], redact=True)
    assert event_attributes(res.trace, js[2], redact=True)["gen_ai.evaluation.explanation"] == "no_reference"


def test_event_carries_unsupported_claim_count_and_first_span() -> None:
    from ragpulse.export.events import event_attributes

    answer = "Paris is in France. It has 90 million people. The Seine flows through it."
    claims = [
        {"text": "Paris is in France.", "start": 0, "end": 19, "verdict": "supported",
         "evidence": {"doc_id": "d1", "rank": 0}},
        {"text": "It has 90 million people.", "start": 20, "end": 45, "verdict": "unsupported", "evidence": None},
        {"text": "The Seine flows through it.", "start": 46, "end": 73, "verdict": "contradicted", "evidence": None},
    ]  # fmt: skip
    assert answer[20:45] == "It has 90 million people."
    trace = Trace(trace_id="c" * 32, question="Where is Paris?", answer=answer)
    j = Judgement(
        judge="faithfulness",
        version="v1",
        backend=Backend.HEURISTIC,
        status=JudgementStatus.OK,
        score=1 / 3,
        passed=False,
        threshold=0.65,
        flags=JudgementFlags.model_validate({"claims": claims}),
    )
    full = event_attributes(trace, j)
    assert full["ragpulse.claims.unsupported"] == 2
    assert full["ragpulse.claims.first_unsupported.start"] == 20
    assert full["ragpulse.claims.first_unsupported.end"] == 45
    assert full["ragpulse.claims.first_unsupported.text"] == "It has 90 million people."
    red = event_attributes(trace, j, redact=True)
    assert red["ragpulse.claims.unsupported"] == 2
    assert red["ragpulse.claims.first_unsupported.start"] == 20
    assert "ragpulse.claims.first_unsupported.text" not in red
    # a judgement without per-claim details carries none of these attributes
    plain = j.model_copy(update={"flags": JudgementFlags()})
    assert not [k for k in event_attributes(trace, plain) if k.startswith("ragpulse.claims")]


def test_event_carries_the_claim_cause_counts_of_an_attributed_judgement() -> None:
    from ragpulse.export.events import event_attributes

    claims = [
        {"start": 0, "end": 19, "verdict": "unsupported", "evidence": None, "cause": "retrieval_miss",
         "reference": {"source": "reference_contexts", "index": 0, "doc_id": None}},
        {"start": 20, "end": 45, "verdict": "unsupported", "evidence": None, "cause": "generation_error",
         "reference": None},
        {"start": 46, "end": 73, "verdict": "contradicted", "evidence": None, "cause": "generation_error",
         "reference": None},
    ]  # fmt: skip
    attribution = {"retrieval_misses": 1, "generation_errors": 2, "undecided": 0, "reason": None}
    trace = Trace(trace_id="d" * 32, question="Where is Paris?", answer="x" * 73)
    j = Judgement(
        judge="faithfulness",
        version="v1",
        backend=Backend.LLM,
        model="m",
        status=JudgementStatus.OK,
        score=0.0,
        passed=False,
        threshold=0.8,
        flags=JudgementFlags.model_validate({"claims": claims, "attribution": attribution}),
    )
    attrs = event_attributes(trace, j, redact=True)
    assert (attrs["ragpulse.claims.retrieval_misses"], attrs["ragpulse.claims.generation_errors"]) == (1, 2)
    assert attrs["ragpulse.claims.unsupported"] == 3
    # not attributed (a passing judgement, or one stored before): no cause counts
    plain = j.model_copy(update={"flags": JudgementFlags.model_validate({"claims": claims})})
    assert "ragpulse.claims.retrieval_misses" not in event_attributes(trace, plain)
