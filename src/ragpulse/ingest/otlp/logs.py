"""OTLP log records (``gen_ai`` events) as trace data: the logs receiver's decoder and the span join.

Instrumentations that emit prompts and completions as **log records** — ``opentelemetry-instrumentation-openai-v2``
with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, and other ``gen_ai`` event emitters — send
``gen_ai.user.message`` / ``gen_ai.system.message`` / ``gen_ai.choice`` … as logs carrying the ``trace_id`` and
``span_id`` of the model call. ragpulse turns each such record into a **carrier span**
(:func:`logs_to_trace_request`): same trace id, a derived span id, parent = the record's span, name
:data:`CARRIER_NAME`, attribute :data:`CARRIER_ATTR` = the target span id (hex), and one span event holding the
record (event name = the record's ``event_name``, else its ``event.name`` attribute; event attributes = the
record's attributes plus the body's keys when the body is a key-value list, else the body as ``body``). The
carrier travels through the same intake, journal, assembler and Kafka path as any span, so logs and spans of
one trace may arrive in any order and share the trace's durability rules. Before mapping,
:func:`fold_carriers` moves the carriers' events onto their target spans (in time order) and drops the
carriers; a carrier whose target never arrived is dropped.

Records without a trace id or span id, or without an event name, cannot be joined and are ignored (counted in
``partial_success.rejected_log_records`` only when their ids are malformed).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.decode import SPAN_ID_BYTES, TRACE_ID_BYTES, DecodeResult, id_to_bytes
from ragpulse.ingest.otlp.spans import SpanData, SpanEvent

__all__ = [
    "CARRIER_ATTR",
    "CARRIER_NAME",
    "LogsDecodeResult",
    "decode_logs_json",
    "decode_logs_protobuf",
    "fold_carriers",
    "logs_to_trace_request",
]

#: Name of a carrier span (one per joined log record).
CARRIER_NAME = "ragpulse.log_event"
#: Attribute of a carrier span: the hex span id of the span the log record belongs to.
CARRIER_ATTR = "ragpulse.log_event.span_id"


@dataclasses.dataclass
class LogsDecodeResult:
    """A logs request converted to carrier spans.

    Attributes:
        traces: the carriers, as a trace request (empty when no record could be joined).
        rejected_log_records: records dropped for malformed ids.
        ignored: records without trace/span id or event name (not ``gen_ai`` events of a span).
        errors: the first few problems (for ``partial_success.error_message``).
    """

    traces: DecodeResult
    rejected_log_records: int = 0
    ignored: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)


def _event_name(rec: Any) -> str:
    name = str(getattr(rec, "event_name", "") or "")
    if not name:
        for kv in rec.attributes:
            if kv.key == "event.name" and kv.value.HasField("string_value"):
                return str(kv.value.string_value)
    return name


def logs_to_trace_request(req: ExportLogsServiceRequest) -> LogsDecodeResult:
    """One carrier span per log record that names a span and an event (see the module docstring)."""
    out = ExportTraceServiceRequest()
    result = LogsDecodeResult(traces=DecodeResult(request=out))
    for rl in req.resource_logs:
        rs = ResourceSpans()
        rs.resource.CopyFrom(rl.resource)
        for sl in rl.scope_logs:
            ss = ScopeSpans()
            ss.scope.CopyFrom(sl.scope)
            for i, rec in enumerate(sl.log_records):
                tid, sid = bytes(rec.trace_id), bytes(rec.span_id)
                name = _event_name(rec)
                if not any(tid) or not any(sid) or not name:
                    result.ignored += 1
                    continue
                if len(tid) != TRACE_ID_BYTES or len(sid) != SPAN_ID_BYTES:
                    result.rejected_log_records += 1
                    if len(result.errors) < 5:
                        result.errors.append(f"log record {i}: trace or span id of the wrong length")
                    continue
                when = int(rec.time_unix_nano or rec.observed_time_unix_nano)
                digest = hashlib.sha256(
                    tid + sid + name.encode() + when.to_bytes(8, "big") + rec.SerializeToString()
                ).digest()
                span = Span(
                    trace_id=tid,
                    span_id=digest[:SPAN_ID_BYTES],
                    parent_span_id=sid,
                    name=CARRIER_NAME,
                    kind=Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=when,
                    end_time_unix_nano=when,
                )
                span.attributes.append(KeyValue(key=CARRIER_ATTR, value=AnyValue(string_value=sid.hex())))
                event = span.events.add(name=name, time_unix_nano=when)
                event.attributes.extend(kv for kv in rec.attributes if kv.key != "event.name")
                if rec.body.HasField("kvlist_value"):
                    event.attributes.extend(rec.body.kvlist_value.values)
                elif rec.body.WhichOneof("value") is not None:
                    event.attributes.append(KeyValue(key="body", value=rec.body))
                ss.spans.append(span)
            if ss.spans:
                rs.scope_spans.append(ss)
        if rs.scope_spans:
            out.resource_spans.append(rs)
    return result


def decode_logs_protobuf(data: bytes) -> LogsDecodeResult:
    """A protobuf ``ExportLogsServiceRequest`` as carrier spans.

    Raises:
        IngestError: the payload is not a logs request.
    """
    try:
        req = ExportLogsServiceRequest.FromString(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise IngestError(f"malformed protobuf payload: {e}") from e
    return logs_to_trace_request(req)


def _fix_ids(obj: Any) -> None:
    """Hex ``traceId``/``spanId`` (OTLP/JSON) → base64, which protobuf's JSON parser expects for bytes."""
    for rl in obj.get("resourceLogs") or obj.get("resource_logs") or []:
        for sl in rl.get("scopeLogs") or rl.get("scope_logs") or []:
            for rec in sl.get("logRecords") or sl.get("log_records") or []:
                for key, size in (("traceId", TRACE_ID_BYTES), ("spanId", SPAN_ID_BYTES)):
                    for k in (key, "trace_id" if key == "traceId" else "span_id"):
                        if isinstance(rec.get(k), str):
                            try:
                                rec[k] = base64.b64encode(id_to_bytes(rec[k], size)).decode("ascii")
                            except ValueError:
                                rec[k] = ""


def decode_logs_json(data: bytes) -> LogsDecodeResult:
    """An OTLP/JSON ``ExportLogsServiceRequest`` (hex ids, as the spec says) as carrier spans.

    Raises:
        IngestError: not JSON, or not a logs request.
    """
    try:
        doc = json.loads(data.decode("utf-8", errors="replace"), strict=False)
        if not isinstance(doc, dict):
            raise IngestError("OTLP/JSON payload must be an object")
        _fix_ids(doc)
        req = json_format.ParseDict(doc, ExportLogsServiceRequest(), ignore_unknown_fields=True)
    except IngestError:
        raise
    except (ValueError, TypeError, AttributeError, json_format.ParseError, RecursionError) as e:
        raise IngestError(f"malformed JSON payload: {e}") from e
    return logs_to_trace_request(req)


def fold_carriers(spans: Sequence[SpanData]) -> list[SpanData]:
    """``spans`` with the carriers' events appended to their target spans (time order) and the carriers
    removed; a carrier whose target is absent is dropped."""
    carriers = [s for s in spans if s.name == CARRIER_NAME and CARRIER_ATTR in s.attributes]
    if not carriers:
        return list(spans)
    extra: dict[str, list[SpanEvent]] = {}
    for c in carriers:
        extra.setdefault(str(c.attributes[CARRIER_ATTR]), []).extend(c.events)
    out = []
    for s in spans:
        if s.name == CARRIER_NAME and CARRIER_ATTR in s.attributes:
            continue
        more = extra.get(s.span_id)
        if more:
            events = sorted((*s.events, *more), key=lambda e: e.time_unix_nano)
            s = dataclasses.replace(s, events=tuple(events))
        out.append(s)
    return out
