"""The same recorded values leave two ways — Prometheus text and OTLP — and replay runs push to a gateway."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ExportError
from ragpulse.export import push_to_gateway
from ragpulse.export.otel_setup import SCORE_BUCKETS, MetricsRuntime, otlp_protocol

from .helpers import OtlpMetricsReceiver, value

REPO = Path(__file__).resolve().parents[2]

# Runs in a fresh process: the meter provider is installed once per process, reading the OTLP variables.
SCRIPT = """
import sys
from ragpulse.config import Settings
from ragpulse.export import build_exporters, render_metrics, shutdown_metrics
from ragpulse.model import Backend, Judgement, JudgementStatus, Trace, TraceOutcome, TraceResult

exporters = build_exporters(Settings(export_service_name="ragpulse-otlp-test").export)
for i, score in enumerate([0.1, 0.45, 0.96, 1.0]):
    j = Judgement(judge="faithfulness", version="v1", backend=Backend.LLM, score=score, passed=score >= 0.5,
                  threshold=0.5, status=JudgementStatus.OK, latency_s=0.25, prompt_tokens=10, completion_tokens=2)
    r = TraceResult(trace=Trace(trace_id=f"{i:032x}", app="shop"), outcome=TraceOutcome.EVALUATED, judgements=(j,))
    for e in exporters:
        e.on_stored(r, [j])
open(sys.argv[1], "wb").write(render_metrics())
shutdown_metrics()
"""


@pytest.mark.integration  # slow check (a Python subprocess that imports ragpulse and pushes OTLP metrics, ~1.4 s): the integration lane, docs/dev/testing.md
def test_one_recording_exported_to_prometheus_and_otlp(tmp_path: Path) -> None:
    with OtlpMetricsReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            PYTHONPATH=str(REPO / "src"),
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=rx.url,
            OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="http/protobuf",
            OTEL_METRIC_EXPORT_INTERVAL="60000",
        )
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "metrics.txt")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        got = rx.metrics()

    # Prometheus side (same process, same aggregation)
    text = (tmp_path / "metrics.txt").read_text(encoding="utf-8")
    lbl = {"judge": "faithfulness", "app": "shop", "backend": "llm"}
    assert value(text, "ragpulse_judge_score_count", **lbl) == 4
    assert value(text, "ragpulse_judge_score_sum", **lbl) == 0.1 + 0.45 + 0.96 + 1.0
    assert value(text, "ragpulse_judge_score_bucket", **lbl, le="0.5") == 2

    # OTLP side: the same histogram with the same explicit buckets, cumulative
    score = got["ragpulse_judge_score"]
    (dp,) = score.histogram.data_points
    assert {a.key: a.value.string_value for a in dp.attributes} == lbl
    assert list(dp.explicit_bounds) == list(SCORE_BUCKETS)
    assert dp.count == 4
    assert dp.sum == 0.1 + 0.45 + 0.96 + 1.0
    assert list(dp.bucket_counts) == [0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0]
    outcomes = {
        next(a.value.string_value for a in p.attributes if a.key == "outcome"): p.as_int
        for p in got["ragpulse_judgements"].sum.data_points
    }
    assert outcomes == {"pass": 2, "fail": 2}
    assert got["ragpulse_judgements"].sum.is_monotonic
    latency = got["ragpulse_judge_latency_seconds"]
    assert latency.unit == "s"
    assert latency.histogram.data_points[0].count == 4


def test_unsupported_otlp_protocol_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    with pytest.raises(ExportError, match="http/json"):
        otlp_protocol("metrics")


class _Gateway:
    """A test-owned HTTP server recording Pushgateway PUTs (method, path, body)."""

    def __init__(self, status: int = 200) -> None:
        self.pushes: list[tuple[str, str, str]] = []
        gw = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                gw.pushes.append(("PUT", self.path, body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway() -> Iterator[_Gateway]:
    gw = _Gateway()
    yield gw
    gw.close()


def test_push_to_gateway_groups_by_run_id(metrics_runtime: MetricsRuntime, gateway: _Gateway) -> None:
    from ragpulse.export import MetricsExporter

    from .test_metrics_exporter import ok, result

    j = ok("pushjudge", 0.9)
    MetricsExporter().on_stored(result("push-app", j), [j])
    assert push_to_gateway(Settings(export_pushgateway_url=gateway.url).export, "run-42") is True
    ((method, path, body),) = gateway.pushes
    assert method == "PUT"
    assert path == "/metrics/job/ragpulse_replay/run_id/run-42"
    assert value(body, "ragpulse_judgements_total", judge="pushjudge", app="push-app", outcome="pass") == 1
    assert push_to_gateway(Settings().export, "run-43") is False  # no URL: no push
    assert len(gateway.pushes) == 1


def test_push_failure_is_reported_not_raised(metrics_runtime: MetricsRuntime) -> None:
    gw = _Gateway(status=500)
    try:
        assert push_to_gateway(Settings(export_pushgateway_url=gw.url).export, "run-1") is False
        with pytest.raises(ExportError, match="pushgateway"):
            push_to_gateway(Settings(export_pushgateway_url=gw.url).export, "run-1", strict=True)
        assert len(gw.pushes) == 2
    finally:
        gw.close()
