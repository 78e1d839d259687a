"""ragpulse's own metric instruments, declared once against the OpenTelemetry metrics **API**.

Library code (engine, ingest, export) records on these instruments; it never touches an SDK. The CLI
installs the SDK ``MeterProvider`` with two readers — Prometheus (``/metrics``) and OTLP (when
``OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`` is set) — so every value is recorded once and exported two ways
(:mod:`ragpulse.export.otel_setup`). Until then the API's proxy meter makes every call a cheap no-op.

Names follow Prometheus conventions after the OTel → Prometheus translation: a counter ``x`` is exposed as
``x_total``, so instruments here are named without the ``_total`` suffix.

Label cardinality: ``app`` values pass through :func:`app_label`, which keeps at most
``limit`` distinct values and folds the rest into ``other`` (counted by ``ragpulse_app_labels_folded``).
Trace ids, request-supplied model names and free text never become attributes.
"""

from __future__ import annotations

import threading

from opentelemetry import metrics

__all__ = [
    "APP_LABELS_FOLDED",
    "EVALUATION_LAG",
    "JUDGEMENTS",
    "JUDGE_ERRORS",
    "JUDGE_LATENCY",
    "JUDGE_SCORE",
    "JUDGE_TOKENS",
    "TRACES_NOT_SAMPLED",
    "TRACES_RECEIVED",
    "TRACES_REJECTED",
    "app_label",
    "configure_app_label_limit",
    "meter",
]

meter = metrics.get_meter("ragpulse")

#: Scores of ``ok`` judgements, 0–1. Attributes: judge, app, backend.
JUDGE_SCORE = meter.create_histogram("ragpulse_judge_score", unit="1", description="Judge scores (0-1)")
#: Judgements by outcome. Attributes: judge, app, outcome (pass|fail|error|skipped).
JUDGEMENTS = meter.create_counter("ragpulse_judgements", description="Judgements stored, by outcome")
#: Judge errors. Attributes: judge, reason (machine reason code).
JUDGE_ERRORS = meter.create_counter("ragpulse_judge_errors", description="Judgements with status error")
#: Judge wall time, seconds. Attributes: judge.
JUDGE_LATENCY = meter.create_histogram(
    "ragpulse_judge_latency_seconds", unit="s", description="Time to make one judgement"
)
#: Judge-model tokens. Attributes: judge, kind (prompt|completion).
JUDGE_TOKENS = meter.create_counter("ragpulse_judge_tokens", description="Judge model tokens used")
#: Traces received. Attributes: source (kafka|otlp|replay).
TRACES_RECEIVED = meter.create_counter("ragpulse_traces_received", description="Traces received")
#: Input rejected before it became a trace. Attributes: source, reason.
TRACES_REJECTED = meter.create_counter(
    "ragpulse_traces_rejected", description="Inputs rejected (dead-lettered)"
)
#: Traces not judged because of sampling.
TRACES_NOT_SAMPLED = meter.create_counter(
    "ragpulse_traces_not_sampled", description="Traces skipped by sampling"
)
#: Trace end → judgements stored, seconds.
EVALUATION_LAG = meter.create_histogram(
    "ragpulse_evaluation_lag_seconds", unit="s", description="Trace end to judgements stored"
)
#: ``app`` values folded into ``other`` because the label limit was reached.
APP_LABELS_FOLDED = meter.create_counter(
    "ragpulse_app_labels_folded", description="Observations whose app label was folded into 'other'"
)

_lock = threading.Lock()
_limit = 50
_seen: set[str] = set()


def configure_app_label_limit(limit: int) -> None:
    """Set the number of distinct ``app`` label values kept (``Settings.metrics_app_label_limit``)."""
    global _limit
    with _lock:
        _limit = limit
        _seen.clear()


def app_label(app: str | None) -> str:
    """Return the ``app`` label for ``app``: itself while fewer than the limit were seen, else ``other``.

    ``None``/empty → ``unknown``.
    """
    if not app:
        return "unknown"
    with _lock:
        if app in _seen:
            return app
        if len(_seen) < _limit:
            _seen.add(app)
            return app
    APP_LABELS_FOLDED.add(1)
    return "other"
