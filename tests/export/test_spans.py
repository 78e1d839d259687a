"""Optional OpenInference EVALUATOR spans, received by a test-owned OTLP/HTTP traces receiver."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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

from .helpers import attr_value
from .test_events import SPAN_ID, TRACE_ID, _result


class _TracesReceiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict[str, Any]] = []
        rx = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                for rs in req.resource_spans:
                    res = {a.key: attr_value(a.value) for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for sp in ss.spans:
                            rx.spans.append(sp)
                            rx.resources.append(res)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_evaluator_spans_linked_to_the_evaluated_span(
    metrics_runtime: MetricsRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    rx = _TracesReceiver()
    try:
        for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.url)
        assert [type(e) for e in build_exporters(Settings())] == [MetricsExporter]  # off by default
        exporters = build_exporters(Settings(evaluation_spans=True, service_name="ragpulse-spans-test"))
        assert [type(e) for e in exporters] == [MetricsExporter, EvaluationSpanExporter]
        res, js = _result()
        for e in exporters:
            e.on_stored(res, js)
            e.on_stored(res, [])  # redelivery: nothing
        shutdown_exporters(exporters)
    finally:
        rx.close()

    assert len(rx.spans) == 4
    by_name = {s.name: s for s in rx.spans}
    assert set(by_name) == {"evaluation faithfulness", "evaluation relevancy", "evaluation keyword",
                            "evaluation correctness"}  # fmt: skip
    assert rx.resources[0]["service.name"] == "ragpulse-spans-test"
    for s in rx.spans:
        assert s.kind == Span.SPAN_KIND_INTERNAL and not s.parent_span_id
        assert s.trace_id.hex() != TRACE_ID  # its own trace …
        (link,) = s.links  # … linked to the evaluated span
        assert link.trace_id.hex() == TRACE_ID and link.span_id.hex() == SPAN_ID
    faith = {a.key: attr_value(a.value) for a in by_name["evaluation faithfulness"].attributes}
    assert faith["openinference.span.kind"] == "EVALUATOR"
    assert faith["evaluation.name"] == "faithfulness" and faith["evaluation.score"] == 0.92
    assert faith["evaluation.label"] == "pass" and faith["gen_ai.evaluation.score.label"] == "pass"
    assert faith["evaluation.explanation"] == "Every claim is supported by passages [1]-[3]."
    err = by_name["evaluation correctness"]
    assert err.status.code == Status.STATUS_CODE_ERROR and err.status.message == "judge_unavailable"
    assert {a.key: attr_value(a.value) for a in err.attributes}["output.value"] == "error"
