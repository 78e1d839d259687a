"""Optional OpenInference EVALUATOR spans, received by a test-owned OTLP/HTTP traces receiver."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ragpulse.config import Settings
from ragpulse.export import EvaluationSpanExporter, MetricsExporter, build_exporters, shutdown_exporters
from ragpulse.export.otel_setup import MetricsRuntime

from .helpers import OtlpHttpReceiver, attr_value
from .test_events import SPAN_ID, TRACE_ID, _result


class _TracesReceiver(OtlpHttpReceiver):
    path = "/v1/traces"
    request_type = ExportTraceServiceRequest
    response_type = ExportTraceServiceResponse

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict[str, Any]] = []
        super().__init__()

    def _received(self, req: ExportTraceServiceRequest) -> None:
        for rs in req.resource_spans:
            res = {a.key: attr_value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    self.spans.append(sp)
                    self.resources.append(res)


def test_evaluator_spans_linked_to_the_evaluated_span(
    metrics_runtime: MetricsRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _TracesReceiver() as rx:
        for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.url)
        assert [type(e) for e in build_exporters(Settings().export)] == [MetricsExporter]  # off by default
        exporters = build_exporters(
            Settings(export_evaluation_spans=True, export_service_name="ragpulse-spans-test").export
        )
        assert [type(e) for e in exporters] == [MetricsExporter, EvaluationSpanExporter]
        res, js = _result()
        for e in exporters:
            e.on_stored(res, js)
            e.on_stored(res, [])  # redelivery: nothing
        shutdown_exporters(exporters)

    assert len(rx.spans) == 4
    by_name = {s.name: s for s in rx.spans}
    assert set(by_name) == {"evaluation faithfulness", "evaluation relevancy", "evaluation keyword",
                            "evaluation correctness"}  # fmt: skip
    assert rx.resources[0]["service.name"] == "ragpulse-spans-test"
    for s in rx.spans:
        assert s.kind == Span.SPAN_KIND_INTERNAL
        assert not s.parent_span_id
        assert s.trace_id.hex() != TRACE_ID  # its own trace …
        (link,) = s.links  # … linked to the evaluated span
        assert link.trace_id.hex() == TRACE_ID
        assert link.span_id.hex() == SPAN_ID
    faith = {a.key: attr_value(a.value) for a in by_name["evaluation faithfulness"].attributes}
    assert faith["openinference.span.kind"] == "EVALUATOR"
    assert faith["evaluation.name"] == "faithfulness"
    assert faith["evaluation.score"] == 0.92
    assert faith["evaluation.label"] == "pass"
    assert faith["gen_ai.evaluation.score.label"] == "pass"
    assert faith["evaluation.explanation"] == "Every claim is supported by passages [1]-[3]."
    err = by_name["evaluation correctness"]
    assert err.status.code == Status.STATUS_CODE_ERROR
    assert err.status.message == "judge_unavailable"
    assert {a.key: attr_value(a.value) for a in err.attributes}["output.value"] == "error"
