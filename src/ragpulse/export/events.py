"""``EvaluationEventExporter``: each stored judgement as a ``gen_ai.evaluation.result`` OTLP log record.

Following the OpenTelemetry GenAI semantic conventions, an evaluation result is an *event* (a log record with
``event_name = "gen_ai.evaluation.result"``) whose trace id and span id are those of the **evaluated** RAG
request, so backends that correlate logs with traces show the scores next to the trace. Attributes:

===================================  ===========================================================
``gen_ai.evaluation.name``           judge name (``faithfulness``, ``relevancy``, …)
``gen_ai.evaluation.score.value``    0–1 score (status ``ok`` only)
``gen_ai.evaluation.score.label``    ``pass`` / ``fail`` (status ``ok`` only)
``gen_ai.evaluation.explanation``    the judge's reason, when it gave one (with ``redact_text``: none
                                     for ``ok``, the reason code for ``skipped``/``error``)
``error.type``                       the machine reason code (status ``error`` only)
``ragpulse.evaluation.status``       ``ok`` / ``skipped`` / ``error``
``ragpulse.judge.version``           judge version hash; also ``ragpulse.judge.backend``, ``.threshold``,
                                     ``.model`` (judge model, when an LLM judged)
``ragpulse.trace_id``                the trace id as ragpulse stores it (also for non-hex ids)
``ragpulse.app`` / ``ragpulse.run_id``  the evaluated trace's app and replay run, when known
``ragpulse.claims.unsupported``      judgements with per-claim details (``flags.claims``): how many
                                     claims are ``unsupported`` or ``contradicted``
``ragpulse.claims.first_unsupported.start`` / ``.end``  character offsets into the stored answer of the
                                     first such claim (when located); ``.text`` its text, only without
                                     ``redact_text``
``ragpulse.claims.retrieval_misses``  failing judgements whose unsupported claims were attributed
``ragpulse.claims.generation_errors`` (``flags.attribution``): how many a not-retrieved reference context
                                     supports / none does
===================================  ===========================================================

Trace ids that are 32 hex characters (OTLP), UUIDs, or shorter hex ids (left-padded) become the record's trace
id; other ids (arbitrary Kafka keys) leave it unset and are carried by ``ragpulse.trace_id`` only.

Records go through the OTel SDK logs pipeline — a :class:`~opentelemetry.sdk._logs.export.BatchLogRecordProcessor`
in front of an OTLP log exporter (gRPC or HTTP/protobuf, configured by the standard ``OTEL_EXPORTER_OTLP_*``
variables). ``on_stored`` never blocks and never raises: when the batch queue is full the event is dropped and
counted (``dropped``, ``ragpulse_evaluation_events_dropped_total``).
"""

from __future__ import annotations

import re
import time
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from ragpulse import __version__
from ragpulse.config import ExportSettings
from ragpulse.errors import ExportError
from ragpulse.export.batched import BatchedOtelExporter
from ragpulse.model import Judgement, JudgementStatus, Trace

__all__ = [
    "EVENT_NAME",
    "EvaluationEventExporter",
    "claim_attributes",
    "event_attributes",
    "otel_span_id",
    "otel_trace_id",
]

#: The GenAI semantic-conventions event name.
EVENT_NAME = "gen_ai.evaluation.result"

_HEX = re.compile(r"^[0-9a-f]+$")


def otel_trace_id(trace_id: str) -> int:
    """The 128-bit OTel trace id for a ragpulse trace id, or ``0`` (invalid) when it has no hex form.

    32 hex chars and UUIDs map directly; hex ids of at most 32 chars are left-padded with zeros.
    """
    t = trace_id.strip().lower().replace("-", "") if len(trace_id) == 36 else trace_id.strip().lower()
    if t and len(t) <= 32 and _HEX.match(t):
        return int(t, 16)
    return 0


def otel_span_id(span_id: str | None) -> int:
    """The 64-bit OTel span id for a span id of at most 16 hex chars, else ``0`` (invalid)."""
    if not span_id:
        return 0
    s = span_id.strip().lower()
    if len(s) <= 16 and _HEX.match(s):
        return int(s, 16)
    return 0


def _default_log_exporter(protocol: str) -> LogRecordExporter:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExp

        return GrpcExp()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExp

    return HttpExp()


class EvaluationEventExporter(BatchedOtelExporter):
    """Emits a ``gen_ai.evaluation.result`` log record per judgement the store inserted or changed.

    Args:
        settings: ``service_name`` names the resource.
        log_exporter: the OTel SDK log exporter; default: the OTLP exporter for
            ``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` default)
            configured by the standard ``OTEL_EXPORTER_OTLP_[LOGS_]ENDPOINT`` variables.
        max_queue_size: events buffered before new ones are dropped.
        schedule_delay_s: longest wait before a partial batch is exported, seconds.

    Attributes:
        emitted: events handed to the pipeline. dropped: events dropped (queue full, closed, or SDK failure).
    """

    _kind = "log"
    _fail_event = "evaluation_event_failed"
    _shutdown_failed_event = "evaluation_events_shutdown_failed"

    def __init__(
        self,
        settings: ExportSettings | None = None,
        *,
        redact_text: bool = False,
        log_exporter: LogRecordExporter | None = None,
        protocol: str = "http/protobuf",
        max_queue_size: int = 4096,
        schedule_delay_s: float = 1.0,
        max_export_batch_size: int = 512,
    ) -> None:
        settings = settings or ExportSettings()
        processor = BatchLogRecordProcessor(
            log_exporter or _default_log_exporter(protocol),
            schedule_delay_millis=schedule_delay_s * 1000,
            max_queue_size=max_queue_size,
            max_export_batch_size=min(max_export_batch_size, max_queue_size),
        )
        resource = Resource.create({"service.name": settings.service_name, "service.version": __version__})
        provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_log_record_processor(processor)
        super().__init__(processor, provider, max_queue_size=max_queue_size, redact=redact_text)
        self._logger = provider.get_logger("ragpulse.evaluation", __version__)

    def _emit(self, trace: Trace, j: Judgement) -> None:
        span_ctx = SpanContext(
            trace_id=otel_trace_id(trace.trace_id),
            span_id=otel_span_id(trace.span_id),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        ctx = otel_trace.set_span_in_context(NonRecordingSpan(span_ctx))
        error = j.status is JudgementStatus.ERROR
        self._logger.emit(
            timestamp=time.time_ns(),
            context=ctx,
            severity_number=SeverityNumber.WARN if error else SeverityNumber.INFO,
            severity_text="WARN" if error else "INFO",
            event_name=EVENT_NAME,
            attributes=event_attributes(trace, j, redact=self._redact),
        )


def event_attributes(trace: Trace, j: Judgement, *, redact: bool = False) -> dict[str, AttributeValue]:
    """The attributes of the ``gen_ai.evaluation.result`` event for judgement ``j`` on ``trace``.

    With ``redact`` (``settings.redact_text``) a judge's free-text reason is left out (it may quote the answer
    or the context): ``skipped``/``error`` events keep only the machine reason code as explanation.
    """
    attrs: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": j.judge,
        "ragpulse.evaluation.status": j.status.value,
        "ragpulse.judge.version": j.version,
        "ragpulse.judge.backend": j.backend.value,
        "ragpulse.trace_id": trace.trace_id,
    }
    if j.status is JudgementStatus.OK and j.score is not None:
        attrs["gen_ai.evaluation.score.value"] = float(j.score)
        attrs["gen_ai.evaluation.score.label"] = "pass" if j.passed else "fail"
    if j.reason and not redact:
        attrs["gen_ai.evaluation.explanation"] = j.reason
    elif j.reason and j.status is not JudgementStatus.OK:
        attrs["gen_ai.evaluation.explanation"] = j.reason_code
    if j.status is JudgementStatus.ERROR:
        attrs["error.type"] = j.reason_code or "unknown"
    optional: dict[str, Any] = {
        "ragpulse.judge.threshold": j.threshold,
        "ragpulse.judge.model": j.model,
        "ragpulse.app": trace.app,
        "ragpulse.run_id": trace.run_id,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    attrs.update(claim_attributes(j, redact=redact))
    return attrs


def claim_attributes(j: Judgement, *, redact: bool = False) -> dict[str, AttributeValue]:
    """``ragpulse.claims.*`` attributes of a judgement with per-claim details (``flags.claims``), else ``{}``."""
    claims = getattr(j.flags, "claims", None)
    if not isinstance(claims, list):
        return {}
    bad = [c for c in claims if isinstance(c, dict) and c.get("verdict") in ("unsupported", "contradicted")]
    attrs: dict[str, AttributeValue] = {"ragpulse.claims.unsupported": len(bad)}
    if bad:
        first = bad[0]
        for key in ("start", "end"):
            if isinstance(first.get(key), int):
                attrs[f"ragpulse.claims.first_unsupported.{key}"] = first[key]
        if not redact and isinstance(first.get("text"), str):
            attrs["ragpulse.claims.first_unsupported.text"] = first["text"]
    causes = getattr(j.flags, "attribution", None)
    if isinstance(causes, dict):
        for key in ("retrieval_misses", "generation_errors"):
            if isinstance(causes.get(key), int):
                attrs[f"ragpulse.claims.{key}"] = causes[key]
    return attrs


def build_event_exporter(
    settings: ExportSettings, *, redact_text: bool = False
) -> EvaluationEventExporter | None:
    """An :class:`EvaluationEventExporter` when an OTLP logs endpoint is configured, else ``None``.

    Raises:
        ExportError: the OTLP protocol variable names an unsupported protocol.
    """
    from ragpulse.export.otel_setup import otlp_endpoint, otlp_protocol

    if otlp_endpoint("logs") is None:
        return None
    try:
        return EvaluationEventExporter(settings, redact_text=redact_text, protocol=otlp_protocol("logs"))
    except ExportError:
        raise
    except Exception as e:
        raise ExportError(f"cannot set up the OTLP evaluation events exporter: {e}") from e
