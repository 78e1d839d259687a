"""``EvaluationSpanExporter``: each stored judgement as an OpenInference ``EVALUATOR`` span (optional).

Some backends (Arize Phoenix, OpenInference-based tools) show evaluations as spans rather than log events. With
``RAGPULSE_EXPORT_EVALUATION_SPANS=true`` and an OTLP traces endpoint (``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``), each
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

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from ragpulse import __version__
from ragpulse.config import ExportSettings
from ragpulse.errors import ExportError
from ragpulse.export.batched import BatchedOtelExporter
from ragpulse.export.events import event_attributes, otel_span_id, otel_trace_id
from ragpulse.model import Judgement, JudgementStatus, Trace

__all__ = ["EvaluationSpanExporter", "build_span_exporter"]


def _default_span_exporter(protocol: str) -> SpanExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExp

        return GrpcExp()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExp

    return HttpExp()


class EvaluationSpanExporter(BatchedOtelExporter):
    """Emits an OpenInference ``EVALUATOR`` span per judgement the store inserted or changed.

    Args:
        settings: the ``export`` section (``service_name`` names the resource).
        redact_text: the ``store.redact_text`` setting: drop free-text explanations.
        span_exporter: the OTel SDK span exporter (default: OTLP for ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``).
        max_queue_size: spans buffered before new ones are dropped.

    Attributes:
        emitted / dropped: spans handed to the pipeline / dropped (queue full, closed, or SDK failure).
    """

    _kind = "span"
    _fail_event = "evaluation_span_failed"
    _shutdown_failed_event = "evaluation_spans_shutdown_failed"

    def __init__(
        self,
        settings: ExportSettings | None = None,
        *,
        redact_text: bool = False,
        span_exporter: SpanExporter | None = None,
        protocol: str = "http/protobuf",
        max_queue_size: int = 4096,
        schedule_delay_s: float = 1.0,
    ) -> None:
        settings = settings or ExportSettings()
        processor = BatchSpanProcessor(
            span_exporter or _default_span_exporter(protocol),
            max_queue_size=max_queue_size,
            schedule_delay_millis=schedule_delay_s * 1000,
            max_export_batch_size=min(512, max_queue_size),
        )
        resource = Resource.create({"service.name": settings.service_name, "service.version": __version__})
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(processor)
        super().__init__(processor, provider, max_queue_size=max_queue_size, redact=redact_text)
        self._tracer = provider.get_tracer("ragpulse.evaluation", __version__)

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


def build_span_exporter(
    settings: ExportSettings, *, redact_text: bool = False
) -> EvaluationSpanExporter | None:
    """An :class:`EvaluationSpanExporter` when ``settings.evaluation_spans`` is on and an OTLP traces endpoint
    is configured, else ``None``.

    Raises:
        ExportError: the OTLP protocol variable names an unsupported protocol.
    """
    from ragpulse.export.otel_setup import otlp_endpoint, otlp_protocol

    if not settings.evaluation_spans or otlp_endpoint("traces") is None:
        return None
    try:
        return EvaluationSpanExporter(settings, redact_text=redact_text, protocol=otlp_protocol("traces"))
    except ExportError:
        raise
    except Exception as e:
        raise ExportError(f"cannot set up the OTLP evaluation spans exporter: {e}") from e
