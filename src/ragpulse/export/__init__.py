"""Export: Prometheus / OTLP metrics and OpenTelemetry evaluation events.

- :mod:`ragpulse.export.otel_setup` installs the OTel SDK meter provider once per process (Prometheus reader
  for ``/metrics``, OTLP reader when ``OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`` is set) and pushes replay runs to
  a Pushgateway.
- :class:`MetricsExporter` records judgements on :mod:`ragpulse.telemetry`'s instruments.
- :class:`EvaluationEventExporter` emits ``gen_ai.evaluation.result`` OTLP log records.
- :class:`EvaluationSpanExporter` (optional) emits OpenInference ``EVALUATOR`` spans linked to the evaluated span.

The CLI calls :func:`build_exporters` once, hands the list to the engine, and calls :func:`shutdown_exporters`
on exit.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.config import ExportSettings
from ragpulse.export.events import EvaluationEventExporter, build_event_exporter
from ragpulse.export.metrics_exporter import MetricsExporter
from ragpulse.export.otel_setup import (
    flush_metrics,
    install_metrics,
    metrics_asgi_app,
    push_to_gateway,
    render_metrics,
    shutdown_metrics,
)
from ragpulse.export.spans import EvaluationSpanExporter, build_span_exporter
from ragpulse.logging import get_logger
from ragpulse.protocols import Exporter

__all__ = [
    "EvaluationEventExporter",
    "EvaluationSpanExporter",
    "MetricsExporter",
    "build_exporters",
    "flush_metrics",
    "install_metrics",
    "metrics_asgi_app",
    "push_to_gateway",
    "render_metrics",
    "shutdown_exporters",
    "shutdown_metrics",
]

_log = get_logger(__name__)


def build_exporters(
    settings: ExportSettings, *, redact_text: bool = False, live_quality_only: bool = False
) -> list[Exporter]:
    """Install the metrics SDK (idempotent) and return the exporters for the engine.

    Always a :class:`MetricsExporter` (``live_quality_only``: test traffic stays out of the quality metrics, as
    the sidecar wants); plus an :class:`EvaluationEventExporter` when an OTLP logs endpoint is
    configured (``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``), and an
    :class:`EvaluationSpanExporter` when ``settings.evaluation_spans`` is on and an OTLP traces endpoint is set.

    Raises:
        ExportError: the OTLP configuration is unusable (e.g. an unsupported protocol).
    """
    install_metrics(settings)
    exporters: list[Exporter] = [MetricsExporter(settings, live_quality_only=live_quality_only)]
    events = build_event_exporter(settings, redact_text=redact_text)
    if events is not None:
        exporters.append(events)
    spans = build_span_exporter(settings, redact_text=redact_text)
    if spans is not None:
        exporters.append(spans)
    return exporters


def shutdown_exporters(exporters: Sequence[Exporter], timeout_s: float = 5.0) -> None:
    """Flush and shut down every exporter (:meth:`~ragpulse.protocols.Exporter.shutdown`), and flush the
    metrics pipeline (OTLP push); never raises.

    The process-wide meter provider stays installed (several replays may run in one process);
    :func:`shutdown_metrics` stops it at process exit (``ragpulse serve`` calls it).
    """
    for e in exporters:
        try:
            e.shutdown(timeout_s)
        except Exception as err:  # an exporter must not raise; one that does must not stop the others
            _log.warning("exporter_shutdown_failed", exporter=type(e).__name__, error=str(err))
    flush_metrics(timeout_s)
