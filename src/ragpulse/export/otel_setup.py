"""Install the OpenTelemetry SDK ``MeterProvider`` once per process and expose its Prometheus registry.

Library code records on the instruments of :mod:`ragpulse.telemetry` (OTel metrics API). This module, called
by the CLI (``serve``, ``replay``), turns those instruments into exported data:

- a :class:`~opentelemetry.exporter.prometheus.PrometheusMetricReader` that feeds a private
  ``prometheus_client`` :class:`~prometheus_client.CollectorRegistry`, served on ``/metrics``
  (:func:`metrics_asgi_app`, :func:`render_metrics`) and pushed by replay runs (:func:`push_to_gateway`);
- a :class:`~opentelemetry.sdk.metrics.export.PeriodicExportingMetricReader` with an OTLP exporter when
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (protocol from
  ``OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``grpc`` or ``http/protobuf``,
  default ``http/protobuf``; interval from ``OTEL_METRIC_EXPORT_INTERVAL``, milliseconds).

Both readers observe the same aggregations, so every value is recorded once and exported two ways.

Exposed Prometheus names (OTel → Prometheus translation; counters gain ``_total``, histograms
``_bucket``/``_sum``/``_count``; unit ``1`` adds nothing, unit ``s`` keeps ``..._seconds``)::

    ragpulse_judge_score_bucket{judge,app,backend,le}   le: 0.05 0.1 0.2 … 0.9 0.95 1.0 +Inf
    ragpulse_judgements_total{judge,app,outcome}
    ragpulse_judge_errors_total{judge,reason}
    ragpulse_judge_latency_seconds_bucket{judge,le}
    ragpulse_judge_tokens_total{judge,kind}
    ragpulse_app_tokens_total{app,model,kind}            the judged app's own LLM tokens
    ragpulse_app_cost_total{app,model}                   …priced by export.model_prices (priced models only)
    ragpulse_evaluation_lag_seconds_bucket{source,le}
    target_info{service_name,…}                          resource attributes

Instrumentation-scope labels (``otel_scope_*``) are switched off so series carry only ragpulse's labels. The
registry also carries prometheus-client's process, platform and GC collectors (``process_*``, ``python_*``).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    make_asgi_app,
)
from prometheus_client import push_to_gateway as _prom_push

from ragpulse import __version__, telemetry
from ragpulse.config import ExportSettings
from ragpulse.errors import ExportError
from ragpulse.logging import get_logger

__all__ = [
    "EVALUATION_LAG_BUCKETS_S",
    "LATENCY_BUCKETS_S",
    "SCORE_BUCKETS",
    "MetricsRuntime",
    "flush_metrics",
    "install_metrics",
    "metrics_asgi_app",
    "otlp_endpoint",
    "otlp_protocol",
    "push_to_gateway",
    "render_metrics",
    "shutdown_metrics",
]

_log = get_logger(__name__)

#: Upper bounds of ``ragpulse_judge_score`` buckets (0–1 scores): 0.1 steps plus 0.05 and 0.95.
SCORE_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
#: Upper bounds of ``ragpulse_judge_latency_seconds`` buckets, seconds (heuristic judges → LLM retries).
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
#: Upper bounds of ``ragpulse_evaluation_lag_seconds`` buckets, seconds (trace end → judgements stored).
EVALUATION_LAG_BUCKETS_S: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip

_VIEW_BUCKETS: dict[str, tuple[float, ...]] = {
    "ragpulse_judge_score": SCORE_BUCKETS,
    "ragpulse_judge_latency_seconds": LATENCY_BUCKETS_S,
    "ragpulse_evaluation_lag_seconds": EVALUATION_LAG_BUCKETS_S,
}


@dataclass(frozen=True)
class MetricsRuntime:
    """The installed metrics pipeline (one per process).

    Attributes:
        provider: the SDK meter provider set as the global one.
        registry: the ``prometheus_client`` registry holding the OTel Prometheus collector.
        otlp_reader: the periodic OTLP reader, or ``None`` when no OTLP endpoint is configured.
    """

    provider: MeterProvider
    registry: CollectorRegistry
    otlp_reader: MetricReader | None


_lock = threading.Lock()
_runtime: MetricsRuntime | None = None


def otlp_endpoint(signal: str) -> str | None:
    """The OTLP endpoint for ``signal`` (``metrics`` or ``logs``) from the standard OTel variables, or ``None``.

    ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` wins over ``OTEL_EXPORTER_OTLP_ENDPOINT``.
    """
    specific = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    generic = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return specific or generic or None


def otlp_protocol(signal: str) -> str:
    """``grpc`` or ``http/protobuf`` for ``signal`` (``OTEL_EXPORTER_OTLP_[<SIGNAL>_]PROTOCOL``).

    Raises:
        ExportError: another protocol (e.g. ``http/json``, which the Python exporters do not support).
    """
    proto = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "").strip()
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or "http/protobuf"
    )
    if proto not in ("grpc", "http/protobuf"):
        raise ExportError(f"unsupported OTLP protocol {proto!r} (use grpc or http/protobuf)")
    return proto


def _otlp_metric_reader() -> MetricReader | None:
    if otlp_endpoint("metrics") is None:
        return None
    exporter: Any
    if otlp_protocol("metrics") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExp

        exporter = GrpcExp()
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExp

        exporter = HttpExp()
    # The exporters read endpoint, headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables.
    return PeriodicExportingMetricReader(exporter)


def resource_for(settings: ExportSettings) -> Resource:
    """The OTel resource describing this process (``service.name`` from ``settings.service_name``).

    ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME`` are merged in by :meth:`Resource.create`.
    """
    return Resource.create({"service.name": settings.service_name, "service.version": __version__})


def install_metrics(settings: ExportSettings | None = None) -> MetricsRuntime:
    """Install the SDK meter provider (Prometheus + optional OTLP readers) once per process; idempotent.

    Later calls return the runtime installed first (the global OTel meter provider can be set only once).
    Also applies ``settings.metrics_app_label_limit`` to :func:`ragpulse.telemetry.app_label`.

    Raises:
        ExportError: the OTLP protocol variable names an unsupported protocol.
    """
    global _runtime
    settings = settings or ExportSettings()
    with _lock:
        if _runtime is not None:
            return _runtime
        telemetry.configure_app_label_limit(settings.metrics_app_label_limit)
        registry = CollectorRegistry(auto_describe=True)
        # The process's own health (CPU, memory, open fds, GC, Python version), as prometheus-client exposes it.
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        readers: list[MetricReader] = [PrometheusMetricReader(scope_info_enabled=False, registry=registry)]
        otlp_reader = _otlp_metric_reader()
        if otlp_reader is not None:
            readers.append(otlp_reader)
        views = [
            View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(boundaries=bounds))
            for name, bounds in _VIEW_BUCKETS.items()
        ]
        provider = MeterProvider(metric_readers=readers, resource=resource_for(settings), views=views)
        metrics.set_meter_provider(provider)
        _runtime = MetricsRuntime(provider=provider, registry=registry, otlp_reader=otlp_reader)
        _log.info(
            "metrics_installed",
            otlp_endpoint=otlp_endpoint("metrics") if otlp_reader else None,
            app_label_limit=settings.metrics_app_label_limit,
        )
        return _runtime


def _registry() -> CollectorRegistry:
    return install_metrics().registry


def render_metrics() -> bytes:
    """The Prometheus text exposition (format 0.0.4) of every ragpulse metric, installing the SDK if needed."""
    return bytes(generate_latest(_registry()))


def metrics_asgi_app() -> Any:
    """An ASGI app serving :func:`render_metrics` (content negotiation by ``prometheus_client``).

    Mount it at ``/metrics`` (``FastAPI.mount("/metrics", metrics_asgi_app())``).
    """
    return make_asgi_app(registry=_registry())


def push_to_gateway(
    settings: ExportSettings, run_id: str, *, job: str = "ragpulse_replay", strict: bool = False
) -> bool:
    """Push the current metrics to ``settings.pushgateway_url`` grouped by ``run_id``; no-op when unset.

    Uses ``prometheus_client.push_to_gateway`` (HTTP PUT ``/metrics/job/<job>/run_id/<run_id>``, replacing
    that group). Returns ``True`` when pushed, ``False`` when no URL is configured or the push failed (logged
    as ``pushgateway_push_failed``; a finished replay should not fail because its metrics could not be pushed).

    Raises:
        ExportError: only with ``strict=True``, when the Pushgateway could not be reached or refused the push.
    """
    if not settings.pushgateway_url:
        return False
    try:
        _prom_push(settings.pushgateway_url, job=job, registry=_registry(), grouping_key={"run_id": run_id})
    except Exception as e:  # urllib errors, HTTP errors
        if strict:
            raise ExportError(f"pushgateway push to {settings.pushgateway_url} failed: {e}") from e
        _log.warning("pushgateway_push_failed", url=settings.pushgateway_url, run_id=run_id, error=str(e))
        return False
    return True


def flush_metrics(timeout_s: float = 5.0) -> None:
    """Export pending OTLP metrics now (no-op without an OTLP reader or before install); never raises."""
    rt = _runtime
    if rt is None or rt.otlp_reader is None:
        return
    try:
        rt.provider.force_flush(timeout_millis=int(timeout_s * 1000))
    except Exception as e:
        _log.warning("metrics_flush_failed", error=str(e))


def shutdown_metrics(timeout_s: float = 5.0) -> None:
    """Flush the OTLP reader (if any) and shut the meter provider down; safe to call when never installed."""
    rt = _runtime
    if rt is None:
        return
    try:
        rt.provider.force_flush(timeout_millis=int(timeout_s * 1000))
        rt.provider.shutdown(timeout_millis=int(timeout_s * 1000))
    except Exception as e:
        _log.warning("metrics_shutdown_failed", error=str(e))
