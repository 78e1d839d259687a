"""Plain-Python view of OTLP spans, as the assembler and the convention mappers use them.

:func:`request_to_spans` flattens an ``ExportTraceServiceRequest`` into :class:`SpanData` objects, each
carrying its resource and scope, with ids as lower-case hex and attribute values as Python values
(:func:`any_value_to_python`); every text (names, keys, values, status messages) without NUL characters and
with lone surrogates as U+FFFD, as Kafka events (:mod:`ragpulse.textclean`). Spans from ragpulse's own service or instrumentation scope are dropped there,
so telemetry that ragpulse emits about itself is never evaluated (no feedback loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ragpulse.textclean import clean_text

__all__ = [
    "SpanData",
    "SpanEvent",
    "SplitResult",
    "any_value_to_python",
    "attributes_to_dict",
    "is_own_telemetry",
    "request_to_spans",
]


#: ``SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` of trace.proto.
_PARENT_IS_REMOTE = 0x200


def any_value_to_python(v: AnyValue) -> Any:
    """Convert an OTLP ``AnyValue`` to a Python value.

    ``string_value`` → ``str`` (NUL characters removed, lone surrogates as U+FFFD: :func:`ragpulse.textclean.clean_text`,
    the rule every source applies before anything is judged or stored), ``bool_value`` → ``bool``, ``int_value`` → ``int``, ``double_value`` →
    ``float``, ``bytes_value`` → ``bytes``, ``array_value`` → ``list``, ``kvlist_value`` → ``dict`` (later
    duplicate keys win); an empty ``AnyValue`` → ``None``.
    """
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return clean_text(v.string_value)
    if kind == "bool_value":
        return v.bool_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "bytes_value":
        return bytes(v.bytes_value)
    if kind == "array_value":
        return [any_value_to_python(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return attributes_to_dict(v.kvlist_value.values)
    return None


def attributes_to_dict(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    """``KeyValue`` list → ``{key: python value}`` (see :func:`any_value_to_python`; keys cleaned alike)."""
    return {clean_text(kv.key): any_value_to_python(kv.value) for kv in kvs}


@dataclass(frozen=True)
class SpanEvent:
    """A span event: name, time (Unix nanoseconds) and attributes."""

    name: str
    time_unix_nano: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class SpanData:
    """One span with its context.

    Attributes:
        trace_id: 32 lower-case hex characters.
        span_id: 16 lower-case hex characters.
        parent_span_id: 16 lower-case hex characters, ``None`` for a root span.
        name: span name.
        kind: OTLP ``SpanKind`` number (1 internal, 2 server, 3 client, 4 producer, 5 consumer).
        start_unix_nano / end_unix_nano: Unix times, nanoseconds (0 when unset).
        attributes: span attributes as Python values.
        events: span events in the order sent.
        resource: resource attributes (``service.name`` …).
        scope_name: instrumentation scope name.
        status_code: 0 unset, 1 ok, 2 error.
        status_message: the status description (set with status ERROR), ``""`` when none.
        parent_is_remote: the parent span belongs to another process (OTLP span flag
            ``SPAN_FLAGS_CONTEXT_IS_REMOTE``), e.g. the upstream gateway that called the RAG service.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int = 0
    start_unix_nano: int = 0
    end_unix_nano: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    status_code: int = 0
    parent_is_remote: bool = False
    status_message: str = ""

    @property
    def is_root(self) -> bool:
        """True when the span has no parent, or its parent is remote (the entry span of this service's part
        of a distributed trace, whose upstream caller may export elsewhere)."""
        return self.parent_span_id is None or self.parent_is_remote

    @property
    def service_name(self) -> str | None:
        """The resource's ``service.name``, if set."""
        v = self.resource.get("service.name")
        return str(v) if v not in (None, "") else None

    @property
    def duration_s(self) -> float | None:
        """End minus start, seconds; ``None`` when either is unset or the end is before the start."""
        if self.start_unix_nano <= 0 or self.end_unix_nano < self.start_unix_nano:
            return None
        return (self.end_unix_nano - self.start_unix_nano) / 1e9


def is_own_telemetry(service_name: str | None, scope_name: str, own_service: str) -> bool:
    """True for spans ragpulse itself produced: resource ``service.name == own_service``, or an
    instrumentation scope named ``own_service`` or ``<own_service>.<anything>``."""
    if service_name is not None and service_name == own_service:
        return True
    return scope_name == own_service or scope_name.startswith(own_service + ".")


@dataclass
class SplitResult:
    """Spans of a request, plus how many were ignored as ragpulse's own telemetry."""

    spans: list[SpanData]
    ignored_own: int = 0


def request_to_spans(request: ExportTraceServiceRequest, own_service: str) -> SplitResult:
    """Flatten a decoded request into :class:`SpanData`, dropping ragpulse's own spans.

    The request's spans must already have ids of the right length (:mod:`ragpulse.ingest.otlp.decode`
    guarantees it).
    """
    out: list[SpanData] = []
    ignored = 0
    for rs in request.resource_spans:
        resource = attributes_to_dict(rs.resource.attributes)
        svc = resource.get("service.name")
        service = str(svc) if svc not in (None, "") else None
        for ss in rs.scope_spans:
            scope = clean_text(ss.scope.name)
            if is_own_telemetry(service, scope, own_service):
                ignored += len(ss.spans)
                continue
            for sp in ss.spans:
                parent = sp.parent_span_id.hex() if sp.parent_span_id and any(sp.parent_span_id) else None
                out.append(
                    SpanData(
                        trace_id=sp.trace_id.hex(),
                        span_id=sp.span_id.hex(),
                        parent_span_id=parent,
                        name=clean_text(sp.name),
                        kind=int(sp.kind),
                        start_unix_nano=int(sp.start_time_unix_nano),
                        end_unix_nano=int(sp.end_time_unix_nano),
                        attributes=attributes_to_dict(sp.attributes),
                        events=tuple(
                            SpanEvent(
                                clean_text(e.name), int(e.time_unix_nano), attributes_to_dict(e.attributes)
                            )
                            for e in sp.events
                        ),
                        resource=resource,
                        scope_name=scope,
                        status_code=int(sp.status.code),
                        status_message=clean_text(sp.status.message),
                        parent_is_remote=parent is not None and bool(sp.flags & _PARENT_IS_REMOTE),
                    )
                )
    return SplitResult(spans=out, ignored_own=ignored)
