"""ragpulse's own metric instruments, declared once against the OpenTelemetry metrics **API**.

Library code (engine, ingest, export) records on these instruments; it never touches an SDK. The CLI
installs the SDK ``MeterProvider`` with two readers — Prometheus (``/metrics``) and OTLP (when
``OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`` is set) — so every value is recorded once and exported two ways
(:mod:`ragpulse.export.otel_setup`). Until then the API's proxy meter makes every call a cheap no-op.

Names follow Prometheus conventions after the OTel → Prometheus translation: a counter ``x`` is exposed as
``x_total``, so instruments here are named without the ``_total`` suffix.

Label cardinality: ``app`` values pass through :func:`app_label`, which keeps at most
``limit`` distinct values and folds the rest into ``other`` (counted by ``ragpulse_app_labels_folded``);
judge-error reason codes pass through :func:`reason_label` the same way.
Trace ids, request-supplied model names and free text never become attributes.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

__all__ = [
    "APP_COST",
    "APP_LABELS_FOLDED",
    "APP_TOKENS",
    "AUTH_REFUSED",
    "CASCADE_ESCALATIONS",
    "CORRECTED_PASS_RATES",
    "ENGINE_QUEUE_DEPTH",
    "EVALUATION_EVENTS",
    "EVALUATION_EVENTS_DROPPED",
    "EVALUATION_LAG",
    "JUDGEMENTS",
    "JUDGE_ERRORS",
    "JUDGE_LATENCY",
    "JUDGE_SCORE",
    "JUDGE_TOKENS",
    "OUTCOMES",
    "TRACES_ERRORED",
    "TRACES_NOT_SAMPLED",
    "TRACES_RECEIVED",
    "TRACES_REJECTED",
    "CorrectedPassRates",
    "LabelFolder",
    "app_label",
    "configure_app_label_limit",
    "initialise_series",
    "meter",
    "model_label",
    "reason_label",
]

meter = metrics.get_meter("ragpulse")

#: Scores of ``ok`` judgements, 0–1. Attributes: judge, app, backend.
JUDGE_SCORE = meter.create_histogram("ragpulse_judge_score", unit="1", description="Judge scores (0-1)")
#: Judgements by outcome. Attributes: judge, app, outcome (pass|fail|error|abstained|skipped).
JUDGEMENTS = meter.create_counter("ragpulse_judgements", description="Judgements stored, by outcome")
#: Judge errors. Attributes: judge, reason (machine reason code).
JUDGE_ERRORS = meter.create_counter("ragpulse_judge_errors", description="Judgements with status error")
#: Judge wall time, seconds. Attributes: judge.
JUDGE_LATENCY = meter.create_histogram(
    "ragpulse_judge_latency_seconds", unit="s", description="Time to make one judgement"
)
#: Judge-model tokens. Attributes: judge, kind (prompt|completion).
JUDGE_TOKENS = meter.create_counter("ragpulse_judge_tokens", description="Judge model tokens used")
#: The judged app's own LLM tokens (every LLM call of its traces). Attributes: app, model, kind
#: (prompt|completion).
APP_TOKENS = meter.create_counter("ragpulse_app_tokens", description="The app's own LLM tokens")
#: The app's cost of those tokens at the price table (``export.model_prices``), in the table's currency; only
#: models in the table (the tokens of the others are in ``ragpulse_app_tokens`` alone). Attributes: app, model.
APP_COST = meter.create_counter("ragpulse_app_cost", description="The app's own LLM cost at the price table")
#: Cascade judgements the first stage did not decide (stage ``main`` or ``first_fallback``). Attributes:
#: judge, stage.
CASCADE_ESCALATIONS = meter.create_counter(
    "ragpulse_cascade_escalations", description="Cascade judgements escalated to the main judge"
)
#: Traces received. Attributes: source (kafka|otlp|replay).
TRACES_RECEIVED = meter.create_counter("ragpulse_traces_received", description="Traces received")
#: Input rejected before it became a trace. Attributes: source, reason.
TRACES_REJECTED = meter.create_counter(
    "ragpulse_traces_rejected", description="Inputs rejected (dead-lettered)"
)
#: Authentication attempts refused (no token, or a wrong one) by a listener that requires a token
#: (:mod:`ragpulse.authcheck`). Labels: ``listener`` (portal/otlp_http/otlp_grpc), ``reason`` (missing/wrong).
AUTH_REFUSED = meter.create_counter(
    "ragpulse_auth_refused",
    description="Authentication attempts refused (missing or wrong token), by listener",
)
#: Traces the source reported as failed (OTLP root status ERROR, Kafka ``error``): stored ``not_evaluable`` with
#: reason ``trace_error`` and kept out of the score histograms. Labels: ``source``, ``app`` (bounded).
TRACES_ERRORED = meter.create_counter(
    "ragpulse_traces_errored", description="Traces the source reported as failed (not judged)"
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


class QueueDepths:
    """The engines' input queues, read by the observable gauge ``ragpulse_engine_queue_depth`` at each
    collection (the sum over live engines; no attributes): no per-trace cost on the hot path.

    An engine calls :meth:`watch` with a callable returning its queue length when it starts; the callable is
    held weakly (a bound method of the engine), so a dropped engine is forgotten.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[weakref.WeakMethod[Callable[[], int]]] = []

    def watch(self, depth: Callable[[], int]) -> None:
        """Count ``depth()`` (a bound method) in the gauge while its object lives."""
        with self._lock:
            self._sources = [r for r in self._sources if r() is not None]
            self._sources.append(weakref.WeakMethod(depth))

    def total(self) -> int:
        """Traces waiting in every watched queue now."""
        with self._lock:
            fns = [r() for r in self._sources]
        return sum(fn() for fn in fns if fn is not None)

    def observe(self, _: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self.total())]


#: Traces waiting in the engines' queues (observed at collection). No attributes.
ENGINE_QUEUE_DEPTH = QueueDepths()
meter.create_observable_gauge(
    "ragpulse_engine_queue_depth",
    callbacks=[ENGINE_QUEUE_DEPTH.observe],
    description="Traces waiting in the engine queue",
)
#: The adaptive limit on judge-model calls in flight (set by the LLM client's controller on every change).
#: No attributes.
JUDGE_CONCURRENCY_LIMIT = meter.create_gauge(
    "ragpulse_judge_concurrency_limit", description="Judge-model calls allowed in flight (adaptive limit)"
)
#: Decreases of that limit. Attributes: signal (the congestion signal: ``rate_limited`` 429, ``unavailable`` 503,
#: ``gateway_timeout`` 408/504, ``slow_error`` a slow 5xx, ``timeout``, ``connection``, ``latency`` rising).
JUDGE_CONCURRENCY_DECREASES = meter.create_counter(
    "ragpulse_judge_concurrency_decreases",
    description="Decreases of the adaptive judge concurrency limit, by congestion signal",
)
#: Evaluation events emitted to OTLP. Attributes: kind (``log``: gen_ai.evaluation.result; ``span``: EVALUATOR).
EVALUATION_EVENTS = meter.create_counter(
    "ragpulse_evaluation_events", description="Evaluation events handed to the OTLP logs pipeline"
)
#: Evaluation events dropped because the export queue was full (or the pipeline failed). Attributes: kind.
EVALUATION_EVENTS_DROPPED = meter.create_counter(
    "ragpulse_evaluation_events_dropped", description="Evaluation events dropped (queue full or failure)"
)


class CorrectedPassRates:
    """The latest corrected pass rates, read by observable gauges at each collection.

    A periodic task (``ragpulse.calibration.live``) computes the figures from the store and calls
    :meth:`publish`; series that are not in the latest publication disappear from ``/metrics`` instead of
    keeping a stale last value. Gauges (attributes): ``ragpulse_judge_pass_rate_corrected`` and its
    ``_lower``/``_upper`` bounds (judge, app; 0–1), ``ragpulse_judge_calibration_stale`` (judge; 1 when the
    judge's current version has no calibration profile, 0 when it has one).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rates: dict[tuple[str, str], tuple[float, float, float]] = {}
        self._stale: dict[str, int] = {}

    def publish(
        self, rates: Mapping[tuple[str, str], tuple[float, float, float]], stale: Mapping[str, bool]
    ) -> None:
        """Replace the figures: ``rates[(judge, app)] = (value, lower, upper)``; ``stale[judge]``."""
        with self._lock:
            self._rates = dict(rates)
            self._stale = {judge: int(flag) for judge, flag in stale.items()}

    def _observe(self, index: int) -> Iterable[Observation]:
        with self._lock:
            items = list(self._rates.items())
        return [Observation(v[index], {"judge": judge, "app": app}) for (judge, app), v in items]

    def value(self, _: CallbackOptions) -> Iterable[Observation]:
        return self._observe(0)

    def lower(self, _: CallbackOptions) -> Iterable[Observation]:
        return self._observe(1)

    def upper(self, _: CallbackOptions) -> Iterable[Observation]:
        return self._observe(2)

    def stale(self, _: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [Observation(flag, {"judge": judge}) for judge, flag in self._stale.items()]


#: The process's corrected-pass-rate figures (see :class:`CorrectedPassRates`).
CORRECTED_PASS_RATES = CorrectedPassRates()
meter.create_observable_gauge(
    "ragpulse_judge_pass_rate_corrected",
    callbacks=[CORRECTED_PASS_RATES.value],
    unit="1",
    description="Pass rate corrected for judge error (Rogan-Gladen) over the sliding window",
)
meter.create_observable_gauge(
    "ragpulse_judge_pass_rate_corrected_lower",
    callbacks=[CORRECTED_PASS_RATES.lower],
    unit="1",
    description="Lower bound of the 95% interval of the corrected pass rate",
)
meter.create_observable_gauge(
    "ragpulse_judge_pass_rate_corrected_upper",
    callbacks=[CORRECTED_PASS_RATES.upper],
    unit="1",
    description="Upper bound of the 95% interval of the corrected pass rate",
)
meter.create_observable_gauge(
    "ragpulse_judge_calibration_stale",
    callbacks=[CORRECTED_PASS_RATES.stale],
    description="1 when the judge's current version has no calibration profile",
)


_REASON_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,47}$")


class LabelFolder:
    """Keeps at most ``limit`` distinct values of one label; later new values become ``other``.

    Thread-safe. ``folded`` counts the observations that were folded (since construction or the last
    :meth:`reset`), and ``on_fold`` is called for each.
    """

    def __init__(self, limit: int, on_fold: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._seen: set[str] = set()
        self._on_fold = on_fold
        self.folded = 0

    def reset(self, limit: int | None = None) -> None:
        """Forget the values seen (and change the limit when given)."""
        with self._lock:
            if limit is not None:
                self._limit = limit
            self._seen.clear()
            self.folded = 0

    @property
    def distinct(self) -> int:
        """Number of distinct values currently kept."""
        with self._lock:
            return len(self._seen)

    def __call__(self, value: str) -> str:
        """``value`` itself while it is known or the limit is not reached, else ``other``."""
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) < self._limit:
                self._seen.add(value)
                return value
            self.folded += 1
        if self._on_fold is not None:
            self._on_fold()
        return "other"


_apps = LabelFolder(50, on_fold=lambda: APP_LABELS_FOLDED.add(1))
#: Distinct judge-error reason codes kept as ``reason`` label values.
REASON_LABEL_LIMIT = 32
_reasons = LabelFolder(REASON_LABEL_LIMIT)


_models = LabelFolder(50)


def configure_app_label_limit(limit: int) -> None:
    """Set the number of distinct ``app`` (and app ``model``) label values kept (the
    ``export.metrics_app_label_limit`` setting).

    Also forgets the values seen so far (tests and a fresh ``serve`` start from zero).
    """
    _apps.reset(limit)
    _models.reset(limit)


def model_label(model: str | None) -> str:
    """The ``model`` label of the app's token metrics: the model name while fewer than the limit were seen, else
    ``other``; ``None``/empty → ``unknown``."""
    if not model:
        return "unknown"
    return _models(model)


def app_label(app: str | None) -> str:
    """Return the ``app`` label for ``app``: itself while fewer than the limit were seen, else ``other``.

    ``None``/empty → ``unknown``. Each fold adds 1 to ``ragpulse_app_labels_folded``.
    """
    if not app:
        return "unknown"
    return _apps(app)


def reason_label(reason_code: str | None) -> str:
    """Return a bounded ``reason`` label for a judge error's reason code (e.g. ``judge_unavailable``).

    Codes that do not look like machine codes (lower-case ``[a-z0-9_.-]``, at most 48 chars — free text,
    say) become ``other``, as do new codes once :data:`REASON_LABEL_LIMIT` distinct ones were seen; an empty
    code is ``unknown``.
    """
    if not reason_code:
        return "unknown"
    if not _REASON_RE.match(reason_code):
        return "other"
    return _reasons(reason_code)


#: The ``outcome`` label values of ``ragpulse_judgements_total`` (:attr:`ragpulse.model.Judgement.outcome`).
OUTCOMES = ("pass", "fail", "error", "abstained", "skipped")
#: Reason codes of the errors every judge may record (``judge_exception``) and those of a judge that calls a
#: judge model (``ragpulse_judge_errors_total`` label values created at start).
ERROR_REASONS = ("judge_exception",)
MODEL_ERROR_REASONS = ("judge_unavailable", "unparseable", "out_of_range", "truncated")
#: The stages of a cascade judgement that escalated (``ragpulse_cascade_escalations_total``).
ESCALATION_STAGES = ("main", "first_fallback")


def initialise_series(
    judges: Iterable[str],
    *,
    model_judges: Iterable[str] = (),
    cascade_judges: Iterable[str] = (),
    sources: Iterable[str] = (),
    rejected: Mapping[str, Iterable[str]] | None = None,
    signals: Iterable[str] = (),
    event_kinds: Iterable[str] = (),
    priced_models: Iterable[str] = (),
    more: Iterable[tuple[Any, Mapping[str, str]]] = (),
) -> int:
    """Add 0 to every labelled counter series known at start, so ``/metrics`` shows it at 0 from the first
    scrape and a dashboard panel or an alert of a healthy system reads 0, not "No data" (issue 30 item 9).

    The series: ``ragpulse_judgements_total`` for every judge × :data:`OUTCOMES` with ``app="unknown"`` (the
    label of traces without an app; apps are not known before their traffic); ``ragpulse_judge_errors_total``
    for every judge × :data:`ERROR_REASONS` (and × :data:`MODEL_ERROR_REASONS` for ``model_judges``);
    ``ragpulse_judge_tokens_total`` for ``model_judges`` × ``prompt``/``completion``;
    ``ragpulse_cascade_escalations_total`` for ``cascade_judges`` × :data:`ESCALATION_STAGES`;
    ``ragpulse_traces_received_total`` per source; ``ragpulse_traces_errored_total`` per source with
    ``app="unknown"``; ``ragpulse_traces_rejected_total`` per source × reason of ``rejected``;
    ``ragpulse_judge_concurrency_decreases_total`` per signal (when a judge calls a model);
    ``ragpulse_evaluation_events[_dropped]_total`` per kind; ``ragpulse_app_tokens_total`` (× kind) and
    ``ragpulse_app_cost_total`` for each model of the price table (``priced_models``) with ``app="unknown"``;
    ``more``: other ``(counter, labels)`` (a block's own counters); and the counters without labels
    (``ragpulse_traces_not_sampled_total``, ``ragpulse_app_labels_folded_total``). Histograms are left alone:
    a histogram series exists only with an observation (a quantile of nothing is rightly "No data").
    Idempotent (adding 0 changes no value). Returns how many series it touched.
    """
    series: list[tuple[Any, dict[str, str]]] = [(TRACES_NOT_SAMPLED, {}), (APP_LABELS_FOLDED, {})]
    names = list(dict.fromkeys(judges))
    model = list(dict.fromkeys(model_judges))
    for judge in names:
        series += [(JUDGEMENTS, {"judge": judge, "app": "unknown", "outcome": o}) for o in OUTCOMES]
        reasons = ERROR_REASONS + (MODEL_ERROR_REASONS if judge in model else ())
        series += [(JUDGE_ERRORS, {"judge": judge, "reason": reason_label(r)}) for r in reasons]
    for judge in model:
        series += [(JUDGE_TOKENS, {"judge": judge, "kind": k}) for k in ("prompt", "completion")]
    for judge in dict.fromkeys(cascade_judges):
        series += [(CASCADE_ESCALATIONS, {"judge": judge, "stage": s}) for s in ESCALATION_STAGES]
    for source in dict.fromkeys(sources):
        series += [
            (TRACES_RECEIVED, {"source": source}),
            (TRACES_ERRORED, {"source": source, "app": "unknown"}),
        ]
    for source, codes in (rejected or {}).items():
        series += [(TRACES_REJECTED, {"source": source, "reason": r}) for r in dict.fromkeys(codes)]
    if model:
        series += [(JUDGE_CONCURRENCY_DECREASES, {"signal": s}) for s in sorted(set(signals))]
    for kind in dict.fromkeys(event_kinds):
        series += [(EVALUATION_EVENTS, {"kind": kind}), (EVALUATION_EVENTS_DROPPED, {"kind": kind})]
    for m in dict.fromkeys(priced_models):
        series += [(APP_TOKENS, {"app": "unknown", "model": m, "kind": k}) for k in ("prompt", "completion")]
        series.append((APP_COST, {"app": "unknown", "model": m}))
    series += [(counter, dict(labels)) for counter, labels in more]
    for counter, labels in series:
        counter.add(0, labels)
    return len(series)
