"""What both receivers do with a decoded request: drop own telemetry, hand spans to the assembler, answer.

Kept apart from the transports so gRPC and HTTP behave identically (same counting, same partial success).
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse import telemetry
from ragpulse.errors import IngestError, PayloadTooLarge, StoreError
from ragpulse.ingest.otlp.assembly import TraceAssembler
from ragpulse.ingest.otlp.decode import (
    DecodeResult,
    decode_json,
    decode_protobuf,
    decompress,
)
from ragpulse.ingest.otlp.journal import PendingJournal, split_by_trace
from ragpulse.ingest.otlp.logs import decode_logs_json, decode_logs_protobuf
from ragpulse.ingest.otlp.spans import SplitResult, request_to_spans
from ragpulse.logging import get_logger
from ragpulse.protocols import DeadLetterSink

__all__ = [
    "DEAD_LETTER_MAX_BYTES",
    "OFFLOAD_BYTES",
    "OTLP_REJECT_REASONS",
    "OWN_SPANS_IGNORED",
    "OtlpIntake",
    "Overloaded",
    "count_rejected",
]

#: Bodies larger than this (bytes) are decompressed and decoded in a worker thread, so one big request
#: does not stall the event loop (engine, other requests).
OFFLOAD_BYTES = 64 * 1024

#: Most bytes of an undecodable request body kept as its dead letter.
DEAD_LETTER_MAX_BYTES = 1024 * 1024

log = get_logger(__name__)

OWN_SPANS_IGNORED = telemetry.meter.create_counter(
    "ragpulse_otlp_own_spans_ignored", description="OTLP spans ignored because ragpulse itself produced them"
)


#: The ``reason`` labels of ``ragpulse_traces_rejected_total{source="otlp"}`` (:func:`count_rejected`, and
#: ``unmappable`` from the trace assembler).
OTLP_REJECT_REASONS = (
    "bad_span", "not_taken", "malformed", "too_large", "unsupported_media_type", "unauthenticated", "cross_site",
    "overloaded", "unmappable",
)  # fmt: skip


def count_rejected(reason: str, n: int = 1) -> None:
    """Count ``n`` rejected OTLP inputs on ``ragpulse_traces_rejected{source=otlp, reason}``.

    Reasons: ``bad_span`` (one undecodable span), ``not_taken`` (a span the assembler did not take: its
    trace was already released, over the per-trace span limit, or no room), ``malformed`` (whole request),
    ``too_large``, ``unsupported_media_type``, ``unauthenticated``, ``cross_site`` (OTLP/HTTP from a web page),
    ``overloaded`` (refused for back-pressure
    or while the journal is unavailable; the client retries).
    """
    if n:
        telemetry.TRACES_REJECTED.add(n, {"source": "otlp", "reason": reason})


class Overloaded(IngestError):
    """The backlog holds ``otlp_max_pending_traces`` traces (the engine is not keeping up) or the journal
    cannot record: the request is refused with a retryable answer (HTTP 503 + ``Retry-After`` / gRPC
    ``UNAVAILABLE``) so OTLP clients retry later; nothing of it was taken."""

    retriable = True


class OtlpIntake:
    """Accepts decoded requests into a :class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`.

    With a ``journal`` the spans taken are made durable before the answer (a failure to do so answers
    :class:`Overloaded`, retryable); what the assembler does not take (backlog full, late spans, spans over
    the per-trace limit) is reported as ``partial_success``, or — when nothing at all could be taken for lack
    of room — refused as :class:`Overloaded`.

    Args:
        assembler: where spans go.
        own_service: the ``export.service_name`` setting; spans of that service or scope are ignored.
        journal: the durable record of accepted traces, or ``None`` (memory only).
        dead_letters: where rejected input is kept (the store's ``dead_letters`` table): an undecodable
            request body (cut to :data:`DEAD_LETTER_MAX_BYTES`) and the errors of rejected spans. Written in
            the background; a failed write is logged and never changes the answer.
    """

    def __init__(
        self,
        assembler: TraceAssembler,
        own_service: str,
        journal: PendingJournal | None = None,
        dead_letters: DeadLetterSink | None = None,
    ) -> None:
        self._assembler = assembler
        self._own = own_service
        self._journal = journal
        self._dead_letters = dead_letters
        self._writes: set[asyncio.Task[None]] = set()
        self.spans_accepted = 0
        self.spans_rejected = 0
        self.spans_ignored = 0

    async def handle(
        self, body: bytes, *, json: bool, encoding: str | None, limit: int, transport: str
    ) -> ExportTraceServiceResponse:
        """Decompress, decode and accept one request body.

        Args:
            body: the body as received.
            json: OTLP/JSON (else protobuf).
            encoding: ``Content-Encoding`` (``None`` for identity; gRPC decompresses itself).
            limit: largest decompressed size, bytes.
            transport: ``http`` or ``grpc`` (for logs).

        Raises:
            Overloaded: the backlog is full or the journal cannot record; nothing was taken.
            PayloadTooLarge: over ``limit`` after decompression.
            IngestError: undecodable payload.
        """
        if self._assembler.saturated:
            count_rejected("overloaded")
            raise Overloaded("too many traces pending; retry later")

        def work() -> tuple[DecodeResult, SplitResult]:
            raw = decompress(body, encoding, limit)
            result = decode_json(raw) if json else decode_protobuf(raw)
            return result, request_to_spans(result.request, self._own)

        big = len(body) > OFFLOAD_BYTES
        try:
            result, split = await asyncio.to_thread(work) if big else work()
        except PayloadTooLarge:
            raise
        except IngestError as e:
            self.dead_letter(
                str(e) if str(e).startswith("too_deep") else f"malformed: {e}",
                body[:DEAD_LETTER_MAX_BYTES],
                {"transport": transport, "format": "json" if json else "protobuf", "encoding": encoding,
                 "bytes": len(body), "truncated": len(body) > DEAD_LETTER_MAX_BYTES},
            )  # fmt: skip
            raise
        return await self.accept(result, transport, split, offload=big)

    async def handle_logs(
        self, body: bytes, *, json: bool, encoding: str | None, limit: int, transport: str
    ) -> ExportLogsServiceResponse:
        """Decompress and decode one OTLP **logs** request; its ``gen_ai`` event records become carrier spans
        (:mod:`ragpulse.ingest.otlp.logs`) taken like any span (same backlog, journal and partial-success
        rules). Records that cannot be joined to a span are ignored.

        Raises:
            Overloaded / PayloadTooLarge / IngestError: as :meth:`handle`.
        """
        if self._assembler.saturated:
            count_rejected("overloaded")
            raise Overloaded("too many traces pending; retry later")
        try:
            raw = decompress(body, encoding, limit)
            logs = decode_logs_json(raw) if json else decode_logs_protobuf(raw)
        except PayloadTooLarge:
            raise
        except IngestError as e:
            self.dead_letter(
                f"malformed: {e}",
                body[:DEAD_LETTER_MAX_BYTES],
                {"transport": transport, "signal": "logs", "format": "json" if json else "protobuf",
                 "encoding": encoding, "bytes": len(body), "truncated": len(body) > DEAD_LETTER_MAX_BYTES},
            )  # fmt: skip
            raise
        resp = await self.accept(logs.traces, transport)
        out = ExportLogsServiceResponse()
        rejected = logs.rejected_log_records + resp.partial_success.rejected_spans
        if rejected:
            out.partial_success.rejected_log_records = rejected
            errors = [*logs.errors, resp.partial_success.error_message]
            out.partial_success.error_message = "; ".join(e for e in errors if e)[:1000]
        return out

    async def accept(
        self,
        result: DecodeResult,
        transport: str,
        split: SplitResult | None = None,
        *,
        offload: bool = False,
    ) -> ExportTraceServiceResponse:
        """Take the good spans of ``result`` (durably, with a journal); the response reports what was not
        taken (OTLP partial success).

        Traces are submitted to the engine later, from the assembler's task. Must run on the event loop's
        thread (the assembler is not thread-safe); ``split`` may be computed elsewhere; ``offload`` splits the
        request per trace in a worker thread.

        Raises:
            Overloaded: nothing could be taken for lack of room, or the journal could not record.
        """
        if split is None:
            split = request_to_spans(result.request, self._own)
        plan = self._assembler.plan(split.spans)
        if plan.no_room and not plan.keep:
            count_rejected("overloaded")
            raise Overloaded("too many traces pending; retry later")
        if plan.keep and self._journal is not None:
            try:
                if offload:
                    payloads = await asyncio.to_thread(split_by_trace, result.request, plan.keep)
                else:
                    payloads = split_by_trace(result.request, plan.keep)
                await self._journal.record(payloads)
            except StoreError as e:
                self._assembler.abort(plan)
                count_rejected("overloaded")
                log.warning("otlp_journal_unavailable", transport=transport, error=str(e)[:200])
                raise Overloaded("cannot persist the traces now; retry later") from e
            except BaseException:
                self._assembler.abort(plan)
                raise
        kept = self._assembler.commit(plan)
        self.spans_accepted += kept
        self.spans_ignored += split.ignored_own
        if split.ignored_own:
            OWN_SPANS_IGNORED.add(split.ignored_own)
        resp = ExportTraceServiceResponse()
        rejected = result.rejected_spans + plan.not_taken
        if rejected:
            self.spans_rejected += rejected
            if result.rejected_spans:
                count_rejected("bad_span", result.rejected_spans)
                self.dead_letter(
                    "bad_span",
                    "\n".join(result.errors),
                    {"transport": transport, "rejected_spans": result.rejected_spans, "accepted_spans": kept},
                )
            if plan.not_taken:
                count_rejected("not_taken", plan.not_taken)
            errors = [*result.errors, *([plan.message()] if plan.not_taken else [])]
            resp.partial_success.rejected_spans = rejected
            resp.partial_success.error_message = "; ".join(errors)[:1000]
            log.warning(
                "otlp_spans_rejected",
                transport=transport,
                rejected=rejected,
                accepted=kept,
                errors=errors,
            )
        return resp

    def dead_letter(self, reason: str, payload: bytes | str, meta: dict[str, Any]) -> None:
        """Keep rejected input in :attr:`dead_letters` (background write; never raises, never blocks)."""
        if self._dead_letters is None:
            return
        sink = self._dead_letters

        async def write() -> None:
            try:
                await sink.write_dead_letter("otlp", reason[:500], payload, meta)
            except Exception as e:  # the store is down or refused it: the client already has its answer
                log.warning("otlp_dead_letter_not_stored", error=str(e), reason=reason[:100])

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def flush_dead_letters(self, timeout_s: float = 5.0) -> None:
        """Wait (up to ``timeout_s`` seconds) for dead-letter writes in flight (on close)."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=timeout_s)
