"""``MetricsExporter``: records stored judgements on ragpulse's metric instruments.

It implements :class:`ragpulse.protocols.Exporter`: the engine calls :meth:`MetricsExporter.on_stored` after a
store write with only the judgements the store inserted or changed, so a Kafka redelivery (nothing changed)
records nothing and no value is counted twice. Values go to the OTel API instruments of
:mod:`ragpulse.telemetry`; :mod:`ragpulse.export.otel_setup` exports them to Prometheus and OTLP.

Per changed judgement:

- ``ragpulse_judgements_total{judge,app,outcome}`` +1 (outcome ``pass``/``fail``/``error``/``abstained``/``skipped``,
  :attr:`ragpulse.model.Judgement.outcome`);
- ``ragpulse_judge_score{judge,app,backend}`` ← score (0–1), ``ok`` judgements only;
- ``ragpulse_judge_errors_total{judge,reason}`` +1 for ``error`` judgements (reason = bounded reason code);
- ``ragpulse_judge_latency_seconds{judge}`` ← ``latency_s`` for ``ok`` and ``error`` judgements (a skip made
  no judge call, so its ~0 s would hide real latency; nor did a copy of a stored shadow judgement,
  ``flags.reused_from``, which is left out too);
- ``ragpulse_judge_tokens_total{judge,kind}`` += prompt / completion tokens (when non-zero: heuristic judges
  use none, and each measurement costs tens of microseconds in the OTel SDK);
- ``ragpulse_cascade_escalations_total{judge,stage}`` +1 for a cascade judgement that escalated to the main
  judge (``flags.stage`` ``main`` or ``first_fallback``; :mod:`ragpulse.judges.cascade`), unless it is a copy of
  a stored shadow judgement (no cascade ran now).

Judgements of ``source=api`` traces (drafts judged on request by the portal's ``POST /evaluate``) record only
the judge's latency and tokens: they stay out of ``ragpulse_judgements_total``, ``ragpulse_judge_score`` and
``ragpulse_judge_errors_total``, so failing drafts never fire the quality alerts nor move the dashboards. With
``live_quality_only`` (``ragpulse serve``: its metrics describe production) every test trace
(:attr:`ragpulse.model.Trace.is_test_traffic`: replay cases, ``replay --via`` traces carrying a run id, portal
runs) is treated the same way, and its app tokens are not counted; a ``ragpulse replay`` process records its own
run's quality metrics (pushed to ``export.pushgateway_url``).

Per trace stored for the first time (:meth:`MetricsExporter.on_traces_inserted`; a redelivery counts nothing),
the app's own token usage beside the judge's: ``ragpulse_app_tokens_total{app,model,kind}`` += prompt /
completion tokens of each model of the trace's ``usage``, and ``ragpulse_app_cost_total{app,model}`` += their
cost at ``export.model_prices`` for the models in that table (a model missing from it adds tokens only).

Per trace with at least one changed judgement and an ``end_time`` that the source did not replace
(``time_replaced``): ``ragpulse_evaluation_lag_seconds{source}`` ← now − trace end, seconds (negative values
from clock skew are recorded as 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ragpulse import telemetry
from ragpulse.config import ExportSettings
from ragpulse.export.otel_setup import flush_metrics
from ragpulse.logging import get_logger
from ragpulse.model import Judgement, JudgementStatus, Source, TraceResult

__all__ = ["MetricsExporter"]

_log = get_logger(__name__)

#: Counter increments summed over a batch: ``(instrument, label items)`` → amount.
_Sums = dict[tuple[Any, tuple[tuple[str, str], ...]], int]


class MetricsExporter:
    """Records metrics for judgements the store inserted or changed. Never blocks, never raises.

    Args:
        settings: applies ``metrics_app_label_limit`` to the ``app`` label folding when given.
        clock: returns the current UTC time (for the evaluation lag); defaults to ``datetime.now(UTC)``.
    """

    def __init__(
        self,
        settings: ExportSettings | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        live_quality_only: bool = False,
    ) -> None:
        self._live_only = live_quality_only
        if settings is not None:
            telemetry.configure_app_label_limit(settings.metrics_app_label_limit)
        self._prices = dict(settings.model_prices) if settings is not None else {}
        self._clock = clock or (lambda: datetime.now(UTC))
        self.failures = 0

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Export pending OTLP metrics now (:func:`ragpulse.export.otel_setup.flush_metrics`); ``True``."""
        flush_metrics(timeout_s)
        return True

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Flush pending OTLP metrics; the process-wide meter provider stays installed (several runs may share
        a process; :func:`~ragpulse.export.otel_setup.shutdown_metrics` stops it at process exit)."""
        flush_metrics(timeout_s)

    def on_stored(self, result: TraceResult, changed: Sequence[Judgement]) -> None:
        """Record ``changed`` (judgements of ``result`` that the store inserted or changed).

        An empty ``changed`` records nothing. Errors inside the metrics SDK are logged and counted in
        ``failures``, never raised.
        """
        self._stored(result, changed, None)

    def on_stored_many(self, items: Sequence[tuple[TraceResult, Sequence[Judgement]]]) -> None:
        """:meth:`on_stored` for every ``(result, changed)`` of one store write, with the same values; the
        counters get one ``add`` per label set of the batch instead of one per judgement (each measurement
        costs microseconds in the OTel SDK). The engine calls this when an exporter has it."""
        sums: _Sums = {}
        for result, changed in items:
            self._stored(result, changed, sums)
        try:
            for (counter, labels), n in sums.items():
                counter.add(n, dict(labels))
        except Exception as e:  # never raise into the engine
            self.failures += 1
            _log.warning("metrics_record_failed", error=str(e), error_type=type(e).__name__)

    def on_traces_inserted(self, results: Sequence[TraceResult]) -> None:
        """Record the app's own tokens and cost of traces stored for the first time (see the module docstring).
        Never raises."""
        try:
            for result in results:
                t = result.trace
                if not t.usage or (self._live_only and t.is_test_traffic):
                    continue
                app = telemetry.app_label(t.app)
                for u in t.usage:
                    model = telemetry.model_label(u.model)
                    for kind, n in (("prompt", u.prompt_tokens), ("completion", u.completion_tokens)):
                        if n > 0:
                            telemetry.APP_TOKENS.add(n, {"app": app, "model": model, "kind": kind})
                    price = self._prices.get(u.model) if u.model else None
                    if price is not None:
                        cost = price.cost(u.prompt_tokens, u.completion_tokens)
                        telemetry.APP_COST.add(cost, {"app": app, "model": model})
        except Exception as e:  # never raise into the engine
            self.failures += 1
            _log.warning("metrics_record_failed", error=str(e), error_type=type(e).__name__)

    def _stored(self, result: TraceResult, changed: Sequence[Judgement], sums: _Sums | None) -> None:
        if not changed:
            return
        try:
            app = telemetry.app_label(result.trace.app)
            t = result.trace
            draft = t.source is Source.API or (self._live_only and t.is_test_traffic)
            for j in changed:
                self._record(j, app, quality=not draft, sums=sums)
            end = result.trace.end_time
            if end is not None and not result.trace.time_replaced:
                lag = max(0.0, (self._clock() - end).total_seconds())
                telemetry.EVALUATION_LAG.record(lag, {"source": result.trace.source.value})
        except Exception as e:  # never raise into the engine
            self.failures += 1
            _log.warning("metrics_record_failed", error=str(e), error_type=type(e).__name__)

    @staticmethod
    def _add(counter: Any, n: int, labels: dict[str, str], sums: _Sums | None) -> None:
        if sums is None:
            counter.add(n, labels)
        else:
            key = (counter, tuple(labels.items()))
            sums[key] = sums.get(key, 0) + n

    @staticmethod
    def _record(j: Judgement, app: str, *, quality: bool = True, sums: _Sums | None = None) -> None:
        add = MetricsExporter._add
        if quality:
            add(telemetry.JUDGEMENTS, 1, {"judge": j.judge, "app": app, "outcome": j.outcome}, sums)
            if j.status is JudgementStatus.OK and j.score is not None:
                telemetry.JUDGE_SCORE.record(
                    j.score, {"judge": j.judge, "app": app, "backend": j.backend.value}
                )
        if quality and j.status is JudgementStatus.ERROR:
            add(
                telemetry.JUDGE_ERRORS,
                1,
                {"judge": j.judge, "reason": telemetry.reason_label(j.reason_code)},
                sums,
            )
        # a copy of a stored shadow judgement (flags.reused_from, a promoted shadow) made no judge call
        called = (j.flags.model_extra or {}).get("reused_from") is None  # an extra flag: no getattr fallback
        if j.status is not JudgementStatus.SKIPPED and called:
            telemetry.JUDGE_LATENCY.record(max(0.0, j.latency_s), {"judge": j.judge})
        if j.prompt_tokens > 0:
            add(telemetry.JUDGE_TOKENS, j.prompt_tokens, {"judge": j.judge, "kind": "prompt"}, sums)
        if j.completion_tokens > 0:
            add(telemetry.JUDGE_TOKENS, j.completion_tokens, {"judge": j.judge, "kind": "completion"}, sums)
        stage = getattr(j.flags, "stage", None)
        if stage in ("main", "first_fallback") and called:
            add(telemetry.CASCADE_ESCALATIONS, 1, {"judge": j.judge, "stage": stage}, sums)
