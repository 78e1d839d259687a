"""OTLP trace ingestion: receivers (gRPC, HTTP), decoding, trace assembly and convention mappers.

Flow: :class:`~ragpulse.ingest.otlp.receivers.OtlpReceivers` accepts ``ExportTraceServiceRequest`` payloads
(:mod:`~ragpulse.ingest.otlp.decode`), turns them into :class:`~ragpulse.ingest.otlp.spans.SpanData`
(:func:`~ragpulse.ingest.otlp.spans.request_to_spans`), groups them per trace in the
:class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`, and maps each finished trace to a
:class:`~ragpulse.model.Trace` with the convention mappers (:mod:`~ragpulse.ingest.otlp.conventions`)
before handing it to the engine (a :class:`~ragpulse.protocols.TraceSink`).
"""

from ragpulse.ingest.otlp.assembly import TraceAssembler
from ragpulse.ingest.otlp.client import OtlpTraceClient
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.encode import trace_to_openinference_spans
from ragpulse.ingest.otlp.receivers import OtlpReceivers

__all__ = [
    "OtlpReceivers",
    "OtlpTraceClient",
    "TraceAssembler",
    "TraceBuilder",
    "trace_to_openinference_spans",
]
