"""What both receivers do with a decoded request: drop own telemetry, hand spans to the assembler, answer.

Kept apart from the transports so gRPC and HTTP behave identically (same counting, same partial success).
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse import telemetry
from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.assembly import TraceAssembler
from ragpulse.ingest.otlp.decode import (
    DecodeResult,
    PayloadTooLarge,
    decode_json,
    decode_protobuf,
    decompress,
)
from ragpulse.ingest.otlp.spans import SplitResult, request_to_spans
from ragpulse.logging import get_logger
from ragpulse.protocols import DeadLetterSink

__all__ = [
    "DEAD_LETTER_MAX_BYTES",
    "OFFLOAD_BYTES",
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


def count_rejected(reason: str, n: int = 1) -> None:
    """Count ``n`` rejected OTLP inputs on ``ragpulse_traces_rejected{source=otlp, reason}``.

    Reasons: ``bad_span`` (one undecodable span), ``malformed`` (whole request), ``too_large``,
    ``unsupported_media_type``, ``overloaded`` (refused for back-pressure; the client retries).
    """
    if n:
        telemetry.TRACES_REJECTED.add(n, {"source": "otlp", "reason": reason})


class Overloaded(IngestError):
    """The assembler holds ``otlp_max_pending_traces`` traces (the engine is not keeping up): the request is
    refused with a retryable answer (HTTP 503 + ``Retry-After`` / gRPC ``UNAVAILABLE``) so OTLP clients retry
    later instead of ragpulse evicting traces."""

    retriable = True


class OtlpIntake:
    """Accepts decoded requests into a :class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`.

    Args:
        assembler: where spans go.
        own_service: the ``export.service_name`` setting; spans of that service or scope are ignored.
        dead_letters: where rejected input is kept (the store's ``dead_letters`` table): an undecodable
            request body (cut to :data:`DEAD_LETTER_MAX_BYTES`) and the errors of rejected spans. Written in
            the background; a failed write is logged and never changes the answer.
    """

    def __init__(
        self, assembler: TraceAssembler, own_service: str, dead_letters: DeadLetterSink | None = None
    ) -> None:
        self._assembler = assembler
        self._own = own_service
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
            Overloaded: the assembler is full; nothing was read.
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

        try:
            result, split = await asyncio.to_thread(work) if len(body) > OFFLOAD_BYTES else work()
        except PayloadTooLarge:
            raise
        except IngestError as e:
            self.dead_letter(
                f"malformed: {e}",
                body[:DEAD_LETTER_MAX_BYTES],
                {"transport": transport, "format": "json" if json else "protobuf", "encoding": encoding,
                 "bytes": len(body), "truncated": len(body) > DEAD_LETTER_MAX_BYTES},
            )  # fmt: skip
            raise
        return self.accept(result, transport, split)

    def accept(
        self, result: DecodeResult, transport: str, split: SplitResult | None = None
    ) -> ExportTraceServiceResponse:
        """Queue the good spans of ``result``; the response reports rejected spans (OTLP partial success).

        Fast and non-blocking: traces are submitted to the engine later, from the assembler's task. Must run
        on the event loop's thread (the assembler is not thread-safe); ``split`` may be computed elsewhere.
        """
        if split is None:
            split = request_to_spans(result.request, self._own)
        kept = self._assembler.add(split.spans)
        self.spans_accepted += kept
        self.spans_ignored += split.ignored_own
        if split.ignored_own:
            OWN_SPANS_IGNORED.add(split.ignored_own)
        resp = ExportTraceServiceResponse()
        if result.rejected_spans:
            self.spans_rejected += result.rejected_spans
            count_rejected("bad_span", result.rejected_spans)
            resp.partial_success.rejected_spans = result.rejected_spans
            resp.partial_success.error_message = "; ".join(result.errors)[:1000]
            self.dead_letter(
                "bad_span",
                "\n".join(result.errors),
                {"transport": transport, "rejected_spans": result.rejected_spans, "accepted_spans": kept},
            )
            log.warning(
                "otlp_spans_rejected",
                transport=transport,
                rejected=result.rejected_spans,
                accepted=kept,
                errors=result.errors,
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
