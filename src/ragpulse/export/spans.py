"""``EvaluationSpanExporter``: each stored judgement as an OpenInference ``EVALUATOR`` span (optional).

Some backends (Arize Phoenix, OpenInference-based tools) show evaluations as spans rather than log events. With
``RAGPULSE_EVALUATION_SPANS=true`` and an OTLP traces endpoint (``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``), each
judgement the store inserted or changed becomes one span:

- name ``evaluation <judge>``, kind ``INTERNAL``, a root span of its own trace with a **link** to the evaluated
  span (trace id + span id of the RAG request, when they have OTLP form), lasting the judgement's latency;
- attributes ``openinference.span.kind = "EVALUATOR"``, ``evaluation.name``, ``evaluation.score``,
  ``evaluation.label`` (``pass``/``fail``), ``evaluation.explanation``, ``output.value`` (the score or the
  status), and the ``gen_ai.evaluation.*`` / ``ragpulse.*`` attributes of :mod:`ragpulse.export.events`;
- status ``ERROR`` (description = reason code) for ``error`` judgements.

The spans carry ragpulse's ``service.name``, which ragpulse's own OTLP receiver ignores, so pointing both at
one collector never makes ragpulse judge its own output. Spans go through a private ``TracerProvider`` with a
``BatchSpanProcessor``; ``on_stored`` never blocks or raises (full queue → dropped and counted).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from ragpulse import __version__, telemetry
from ragpulse.config import Settings
from ragpulse.errors import ExportError
from ragpulse.export.events import event_attributes, otel_span_id, otel_trace_id
from ragpulse.logging import get_logger
from ragpulse.model import Judgement, JudgementStatus, Trace, TraceResult

__all__ = ["EvaluationSpanExporter", "build_span_exporter"]

_log = get_logger(__name__)


def _default_span_exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExp

        return GrpcExp()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExp

    return HttpExp()


class EvaluationSpanExporter:
    """Emits an OpenInference ``EVALUATOR`` span per judgement the store inserted or changed.

    Args:
        settings: ``service_name`` names the resource; ``redact_text`` drops free-text explanations.
        span_exporter: the OTel SDK span exporter (default: OTLP for ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``).
        max_queue_size: spans buffered before new ones are dropped.

    Attributes:
        emitted / dropped: spans handed to the pipeline / dropped (queue full, closed, or SDK failure).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        span_exporter: SpanExporter | None = None,
        protocol: str = "http/protobuf",
        max_queue_size: int = 4096,
        schedule_delay_s: float = 1.0,
    ) -> None:
        settings = settings or Settings()
        self._max_queue = max_queue_size
        self._processor = BatchSpanProcessor(
            span_exporter or _default_span_exporter(protocol),
            max_queue_size=max_queue_size,
            schedule_delay_millis=schedule_delay_s * 1000,
            max_export_batch_size=min(512, max_queue_size),
        )
        resource = Resource.create({"service.name": settings.service_name, "service.version": __version__})
        self._provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer("ragpulse.evaluation", __version__)
        self._redact = settings.redact_text
        self._closed = False
        self.emitted = 0
        self.dropped = 0

    def _queue_full(self) -> bool:
        # As in EvaluationEventExporter: look at the SDK batch queue so a full queue drops the new span, counted.
        queue = getattr(getattr(self._processor, "_batch_processor", None), "_queue", None)
        try:
            return queue is not None and len(queue) >= self._max_queue
        except TypeError:
            return False

    def on_stored(self, result: TraceResult, changed: Sequence[Judgement]) -> None:
        """Emit one span per judgement in ``changed``; an empty ``changed`` emits nothing. Never raises."""
        for j in changed:
            if self._closed or self._queue_full():
                self._drop()
                continue
            try:
                self._emit(result.trace, j)
                self.emitted += 1
                telemetry.EVALUATION_EVENTS.add(1, {"kind": "span"})
            except Exception as e:  # never raise into the engine
                self._drop()
                _log.warning("evaluation_span_failed", error=str(e), error_type=type(e).__name__)

    def _drop(self) -> None:
        self.dropped += 1
        telemetry.EVALUATION_EVENTS_DROPPED.add(1, {"kind": "span"})

    def _emit(self, trace: Trace, j: Judgement) -> None:
        links = []
        tid, sid = otel_trace_id(trace.trace_id), otel_span_id(trace.span_id)
        if tid and sid:
            links.append(
                Link(SpanContext(tid, sid, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)))
            )
        attrs: dict[str, AttributeValue] = dict(event_attributes(trace, j, redact=self._redact))
        attrs["openinference.span.kind"] = "EVALUATOR"
        attrs["evaluation.name"] = j.judge
        if j.score is not None:
            attrs["evaluation.score"] = float(j.score)
            attrs["evaluation.label"] = "pass" if j.passed else "fail"
            attrs["output.value"] = str(j.score)
        else:
            attrs["output.value"] = j.status.value
        if "gen_ai.evaluation.explanation" in attrs:
            attrs["evaluation.explanation"] = attrs["gen_ai.evaluation.explanation"]
        end = time.time_ns()
        start = end - int(max(0.0, j.latency_s) * 1e9)
        span = self._tracer.start_span(
            f"evaluation {j.judge}", kind=SpanKind.INTERNAL, links=links, attributes=attrs, start_time=start
        )
        if j.status is JudgementStatus.ERROR:
            span.set_status(Status(StatusCode.ERROR, j.reason_code or "error"))
        span.end(end_time=end)

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Export buffered spans now; ``True`` when done within ``timeout_s`` seconds."""
        return bool(self._provider.force_flush(timeout_millis=int(timeout_s * 1000)))

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Flush and stop the pipeline (idempotent); later spans are dropped and counted."""
        if self._closed:
            return
        self._closed = True
        try:
            self._provider.force_flush(timeout_millis=int(timeout_s * 1000))
            self._provider.shutdown()
        except Exception as e:
            _log.warning("evaluation_spans_shutdown_failed", error=str(e))


def build_span_exporter(settings: Settings) -> EvaluationSpanExporter | None:
    """An :class:`EvaluationSpanExporter` when ``settings.evaluation_spans`` is on and an OTLP traces endpoint
    is configured, else ``None``.

    Raises:
        ExportError: the OTLP protocol variable names an unsupported protocol.
    """
    from ragpulse.export.otel_setup import otlp_endpoint, otlp_protocol

    if not settings.evaluation_spans or otlp_endpoint("traces") is None:
        return None
    try:
        return EvaluationSpanExporter(settings, protocol=otlp_protocol("traces"))
    except ExportError:
        raise
    except Exception as e:
        raise ExportError(f"cannot set up the OTLP evaluation spans exporter: {e}") from e
