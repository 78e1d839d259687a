"""Encode a :class:`~ragpulse.model.Trace` as synthetic OpenInference spans (for ``replay --via otlp``).

:func:`trace_to_openinference_spans` builds one ``ExportTraceServiceRequest`` with three spans — a root
``CHAIN`` (question in ``input.value``, answer in ``output.value``, ``metadata`` JSON with app/scenario and
the replay identity ``ragpulse.run.id``, ``ragpulse.test_case.id``, ``ragpulse.expected_answer``,
``ragpulse.keywords``, and the trace's ``attributes`` as a JSON object in ``ragpulse.attributes`` — the
typed fields older receivers read from attributes (reference contexts, labels, not-evaluable reason; see
:meth:`~ragpulse.model.Trace.wire_attributes`) travel there), a ``RETRIEVER`` child with ``retrieval.documents.<i>.document.{id,content,score,
metadata}`` (only when there are documents) and an ``LLM`` child (``llm.model_name``, the context as the
system message, question and answer as messages). Decoding it with this package's receivers gives back the
same question, answer, documents, context, model, app, scenario, latency, attributes and replay identity.

Ids: a trace id of 32 hex characters (or a UUID) becomes the OTLP trace id; any other id is hashed to 16
bytes (SHA-256) and carried in ``ragpulse.trace.id`` so the receiver restores it. Span ids are derived from
the trace id, so re-sending a trace produces the same spans. The resource ``service.name`` is ``trace.app``
(``ragpulse-replay`` when unset — never ragpulse's own service name, whose spans are ignored).

:func:`request_to_otlp_json` writes a request as OTLP/JSON (hex ids, as the spec requires).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ragpulse.model import Trace

__all__ = ["REPLAY_SCOPE", "REPLAY_SERVICE", "request_to_otlp_json", "trace_to_openinference_spans"]

#: ``service.name`` of replayed traces without an app.
REPLAY_SERVICE = "ragpulse-replay"
#: Instrumentation scope of the synthetic spans.
REPLAY_SCOPE = "ragpulse-replay"

_HEX32 = re.compile(r"^[0-9a-f]{32}$")


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list | tuple):
        v = AnyValue()
        v.array_value.values.extend(_any(x) for x in value)
        return v
    return AnyValue(string_value=str(value))


def _set(span: Span, attrs: dict[str, Any]) -> None:
    span.attributes.extend(KeyValue(key=k, value=_any(v)) for k, v in attrs.items() if v is not None)


def _trace_id_bytes(trace_id: str) -> bytes:
    compact = trace_id.replace("-", "") if len(trace_id) == 36 else trace_id
    if _HEX32.match(compact):
        return bytes.fromhex(compact)
    return hashlib.sha256(trace_id.encode("utf-8")).digest()[:16]


def _span_id(trace_id: str, role: str) -> bytes:
    raw = hashlib.sha256(f"{trace_id}/{role}".encode()).digest()[:8]
    return raw if any(raw) else b"\x00" * 7 + b"\x01"


def _ns(dt: datetime) -> int:
    return int(dt.timestamp() * 1_000_000_000)


def trace_to_openinference_spans(trace: Trace) -> ExportTraceServiceRequest:
    """Build the OTLP request for ``trace`` (see the module docstring).

    Times: ``trace.start_time`` (else now); the end is ``trace.end_time``, else start + ``latency_s``,
    else the start. Missing question/answer/model/context are left out (the receiver then records the
    trace as ``not_evaluable``, as the engine would for the trace itself).
    """
    tid = _trace_id_bytes(trace.trace_id)
    start = trace.start_time or datetime.now(UTC)
    if trace.end_time is not None:
        end = trace.end_time
    elif trace.latency_s is not None:
        end = datetime.fromtimestamp(start.timestamp() + trace.latency_s, tz=UTC)
    else:
        end = start
    start_ns, end_ns = _ns(start), max(_ns(end), _ns(start))
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(KeyValue(key="service.name", value=_any(trace.app or REPLAY_SERVICE)))
    ss = rs.scope_spans.add()
    ss.scope.name = REPLAY_SCOPE

    root_id = _span_id(trace.trace_id, "root")
    root = ss.spans.add(trace_id=tid, span_id=root_id, name="rag", kind=Span.SPAN_KIND_INTERNAL)
    root.start_time_unix_nano, root.end_time_unix_nano = start_ns, end_ns
    metadata = {k: v for k, v in (("app", trace.app), ("scenario", trace.scenario)) if v}
    _set(
        root,
        {
            "openinference.span.kind": "CHAIN",
            "input.value": trace.question,
            "input.mime_type": "text/plain" if trace.question is not None else None,
            "output.value": trace.answer,
            "output.mime_type": "text/plain" if trace.answer is not None else None,
            "metadata": json.dumps(metadata, ensure_ascii=False) if metadata else None,
            "ragpulse.trace.id": trace.trace_id if tid.hex() != trace.trace_id else None,
            "ragpulse.run.id": trace.run_id,
            "ragpulse.test_case.id": trace.test_case_id,
            "ragpulse.expected_answer": trace.expected_answer,
            "ragpulse.keywords": list(trace.keywords) if trace.keywords else None,
            "ragpulse.attributes": (
                json.dumps(wire, ensure_ascii=False, default=str)
                if (wire := trace.wire_attributes())
                else None
            ),
        },
    )

    if trace.documents:
        ret = ss.spans.add(
            trace_id=tid, span_id=_span_id(trace.trace_id, "retriever"), parent_span_id=root_id
        )
        ret.name, ret.kind = "retrieve", Span.SPAN_KIND_INTERNAL
        ret.start_time_unix_nano, ret.end_time_unix_nano = start_ns, start_ns
        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": trace.question}
        for i, d in enumerate(trace.documents):
            p = f"retrieval.documents.{i}.document."
            attrs[p + "id"] = d.id
            attrs[p + "content"] = d.content
            attrs[p + "score"] = float(d.score) if d.score is not None else None
            attrs[p + "metadata"] = json.dumps(d.metadata, ensure_ascii=False) if d.metadata else None
        _set(ret, attrs)

    llm = ss.spans.add(trace_id=tid, span_id=_span_id(trace.trace_id, "llm"), parent_span_id=root_id)
    llm.name, llm.kind = "generate", Span.SPAN_KIND_INTERNAL
    llm.start_time_unix_nano, llm.end_time_unix_nano = start_ns, end_ns
    llm_attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": trace.model}
    i = 0
    for role, text in (("system", trace.context), ("user", trace.question)):
        if text is not None:
            llm_attrs[f"llm.input_messages.{i}.message.role"] = role
            llm_attrs[f"llm.input_messages.{i}.message.content"] = text
            i += 1
    if trace.answer is not None:
        llm_attrs["llm.output_messages.0.message.role"] = "assistant"
        llm_attrs["llm.output_messages.0.message.content"] = trace.answer
    _set(llm, llm_attrs)
    return req


def request_to_otlp_json(request: ExportTraceServiceRequest) -> str:
    """Serialise ``request`` as OTLP/JSON: lowerCamelCase keys, hex ids, enums as integers."""
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(key):
                        sp[key] = base64.b64decode(sp[key]).hex()
                for link in sp.get("links", []):
                    for key in ("traceId", "spanId"):
                        if link.get(key):
                            link[key] = base64.b64decode(link[key]).hex()
    return json.dumps(doc, ensure_ascii=False)
