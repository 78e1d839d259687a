"""OTLP trace data read from Kafka: decode messages, assemble spans across messages, know when a message is done.

The OpenTelemetry Collector's Kafka exporter publishes ``TracesData`` (wire-identical to
``ExportTraceServiceRequest``) as ``otlp_proto`` (protobuf) or ``otlp_json`` (OTLP/JSON); with
``partition_traces_by_id`` every message is keyed by trace id, so all spans of a trace land on one partition
and one consumer. A message may hold a whole request (many traces) or a single span (recent Collector
versions: one message per span). Spans go through the same :class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`
and convention mappers as the OTLP receivers, so a trace is mapped exactly as if it had been sent over
OTLP/HTTP.

Commit rule: a message is *done* — its offset may be committed — once every trace it carried spans for is
stored or dead-lettered. Spans still in assembly hold the message. Spans the assembler does not take (their
trace was already released here: ``late``; over the per-trace span limit) are counted and do not hold it.
A message none of whose traces could be mapped or stored is dead-lettered once, with the first reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from ragpulse.config import OtlpSettings
from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.assembly import Clock, TraceAssembler
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.decode import decode_json, decode_protobuf
from ragpulse.ingest.otlp.spans import SpanData, request_to_spans
from ragpulse.logging import get_logger
from ragpulse.model import Trace

__all__ = ["OTLP_ENCODINGS", "HeldMessage", "KafkaOtlp", "decode_otlp_message"]

log = get_logger(__name__)

#: ``kafka_topic_encodings`` values that carry OTLP trace data.
OTLP_ENCODINGS = frozenset({"otlp_proto", "otlp_json"})


def decode_otlp_message(
    value: bytes | None, encoding: str, own_service: str, max_bytes: int
) -> list[SpanData]:
    """Spans of one Kafka message (``TracesData`` in ``encoding``), without ragpulse's own telemetry.

    Spans that cannot be decoded (bad ids) are dropped and logged (``kafka_otlp_spans_rejected``).

    Raises:
        IngestError: empty, larger than ``max_bytes``, or not decodable as OTLP in ``encoding`` (one line).
    """
    if not value:
        raise IngestError("empty message")
    if len(value) > max_bytes:
        raise IngestError(f"message of {len(value)} bytes exceeds kafka_max_message_bytes={max_bytes}")
    result = decode_json(value) if encoding == "otlp_json" else decode_protobuf(value)
    if result.rejected_spans:
        log.warning("kafka_otlp_spans_rejected", spans=result.rejected_spans, errors=result.errors)
    return request_to_spans(result.request, own_service).spans


@dataclass(slots=True, eq=False)
class HeldMessage:
    """A Kafka message whose traces are not all stored yet: ``waiting`` trace ids; ``reason`` the first
    dead-letter reason of one of its traces (the message is then dead-lettered once done)."""

    rec: ConsumerRecord[bytes, bytes]
    tp: TopicPartition
    waiting: set[str] = field(default_factory=set)
    reason: str | None = None
    code: str | None = None


class KafkaOtlp:
    """The assembler and the message ↔ trace bookkeeping of the Kafka source's OTLP topics.

    Not thread-safe: used from the event loop only.

    Args:
        settings: the ``otlp`` section: ``root_grace_s``, ``idle_timeout_s``, ``max_pending_traces`` (assembly),
            ``attributes`` (conventions).
        clock: monotonic seconds.
    """

    def __init__(self, settings: OtlpSettings, clock: Clock = time.monotonic) -> None:
        self.assembler = TraceAssembler(settings, TraceBuilder(settings), clock=clock)
        self._by_trace: dict[str, list[HeldMessage]] = {}

    @property
    def saturated(self) -> bool:
        """True while the assembler holds ``otlp_max_pending_traces`` traces (the source stops feeding)."""
        return self.assembler.saturated

    def take(self, rec: ConsumerRecord[bytes, bytes], tp: TopicPartition, spans: list[SpanData]) -> bool:
        """Add the spans of one message; True when the message now waits for traces (else it is done).

        The caller checked :attr:`saturated` first; one message may then take the backlog over the limit by the
        traces it carries (bounded by the message size), so a big message never waits forever.
        """
        plan = self.assembler.plan(spans, resumed=True)
        self.assembler.commit(plan)
        if plan.late or plan.over_limit:
            log.info("kafka_otlp_spans_not_taken", late=plan.late, over_limit=plan.over_limit,
                     topic=rec.topic, partition=rec.partition, offset=rec.offset)  # fmt: skip
        if not plan.traces:
            return False
        msg = HeldMessage(rec, tp, set(plan.traces))
        for tid in plan.traces:
            self._by_trace.setdefault(tid, []).append(msg)
        return True

    def release_due(self) -> list[tuple[str, Trace | None]]:
        """Traces due now (``None`` for one that could not be mapped)."""
        return self.assembler.release_due()

    def resolve(self, tid: str, reason: str | None = None, code: str | None = None) -> list[HeldMessage]:
        """Trace ``tid`` is stored (``reason`` ``None``) or failed for good; returns the messages now done."""
        done = []
        for msg in self._by_trace.pop(tid, ()):
            msg.waiting.discard(tid)
            if reason is not None and msg.reason is None:
                msg.reason, msg.code = reason, code
            if not msg.waiting:
                done.append(msg)
        return done

    def drop(self, tps: Iterable[TopicPartition] | None) -> list[HeldMessage]:
        """Drop the traces in assembly that have spans in ``tps`` (default: all) — they will be delivered
        again — and return every message that waited for them (to be abandoned, not committed)."""
        wanted = None if tps is None else frozenset(tps)
        held = self.assembler.held_trace_ids()
        hit = [
            tid
            for tid, msgs in self._by_trace.items()
            if tid in held and (wanted is None or any(m.tp in wanted for m in msgs))
        ]
        self.assembler.discard(hit)
        out: dict[int, HeldMessage] = {}
        for tid in hit:
            for msg in self._by_trace.pop(tid, ()):
                out[id(msg)] = msg
        return list(out.values())

    @property
    def held_messages(self) -> int:
        """Messages waiting for a trace (in assembly or in the engine)."""
        return len({id(m) for msgs in self._by_trace.values() for m in msgs})
