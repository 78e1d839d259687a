"""The durable record of accepted OTLP traces: what a receiver answered 200 for survives a restart.

Before a receiver answers, the spans it takes are written to a :class:`~ragpulse.protocols.PendingStore`
(PostgreSQL table ``pending_inputs``, source ``otlp``, key = the 32-hex trace id): one row per trace and
request, holding a serialized ``ExportTraceServiceRequest`` with just that trace's spans (with their resource
and scope). Protobuf concatenation merges messages, so the rows of one trace read back as one request.

- a trace whose result is stored → its rows are deleted (:meth:`PendingJournal.done`);
- a trace whose result can never be stored, that cannot be mapped or whose rows cannot be read → its rows
  become one dead letter (``dead_letters``, source ``otlp``, payload = the request bytes);
- on start, every pending trace is read back into the assembler (:meth:`PendingJournal.load`) and judged
  as if it had just arrived — at-least-once, like Kafka (a stored verdict for identical content is not
  re-judged).

Deletes are batched: :meth:`PendingJournal.done` queues the trace id and one background task deletes what
has queued up in one statement (an engine batch of 100 stored traces costs one ``DELETE``, not 100). A failure
to delete is logged and leaves the rows pending (re-judged after a restart, which the store's idempotence
absorbs); a failure to record makes the receiver answer 503 / ``UNAVAILABLE``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from ragpulse.errors import StoreError
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.logging import get_logger
from ragpulse.protocols import PendingStore, not_stored_reason

__all__ = ["SOURCE", "PendingJournal", "split_by_trace"]

#: ``source`` of OTLP rows in the pending store and the dead letters.
SOURCE = "otlp"

log = get_logger(__name__)


def split_by_trace(request: ExportTraceServiceRequest, keep: Sequence[SpanData]) -> dict[str, bytes]:
    """One serialized ``ExportTraceServiceRequest`` per trace id, holding the spans of ``request`` that are in
    ``keep`` (matched by trace and span id) with their resource and scope."""
    wanted = {(s.trace_id, s.span_id) for s in keep}
    out: dict[str, ExportTraceServiceRequest] = {}
    for rs in request.resource_spans:
        per_trace_rs: dict[str, ResourceSpans] = {}
        for ss in rs.scope_spans:
            per_trace_ss: dict[str, ScopeSpans] = {}
            for sp in ss.spans:
                tid = sp.trace_id.hex()
                if (tid, sp.span_id.hex()) not in wanted:
                    continue
                scope_spans = per_trace_ss.get(tid)
                if scope_spans is None:
                    res = per_trace_rs.get(tid)
                    if res is None:
                        res = out.setdefault(tid, ExportTraceServiceRequest()).resource_spans.add()
                        res.resource.CopyFrom(rs.resource)
                        res.schema_url = rs.schema_url
                        per_trace_rs[tid] = res
                    scope_spans = res.scope_spans.add()
                    scope_spans.scope.CopyFrom(ss.scope)
                    scope_spans.schema_url = ss.schema_url
                    per_trace_ss[tid] = scope_spans
                scope_spans.spans.append(sp)
    return {tid: req.SerializeToString() for tid, req in out.items()}


class PendingJournal:
    """Records accepted OTLP traces in ``store`` until their results are stored (see the module docstring)."""

    def __init__(self, store: PendingStore) -> None:
        self._store = store
        self._done: list[str] = []
        self._flusher: asyncio.Task[None] | None = None

    async def record(self, payloads: dict[str, bytes]) -> None:
        """Keep the per-trace payloads of one request (from :func:`split_by_trace`), all or none.

        Raises:
            StoreError: nothing was kept; the receiver must not answer "accepted".
        """
        await self._store.add_pending(SOURCE, list(payloads.items()))

    async def load(self) -> list[tuple[str, bytes]]:
        """Every pending trace as ``(trace id, request bytes)``, oldest first.

        Raises:
            StoreError: the store cannot be read.
        """
        return await self._store.load_pending(SOURCE)

    async def done(self, trace_id: str, ok: bool) -> None:
        """The engine acknowledged ``trace_id``: stored (``ok``) → forget it (queued, see the module
        docstring); failed for good → dead letter ``not_stored: <store error>``
        (:func:`ragpulse.protocols.not_stored_reason`). Never raises."""
        if not ok:
            await self.dead_letter(trace_id, not_stored_reason())
            return
        self._done.append(trace_id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="otlp-journal-flush")

    async def _flush(self) -> None:
        while self._done:
            await asyncio.sleep(0)  # let the acks of the same engine batch queue up
            batch, self._done = self._done, []
            try:
                await self._store.remove_pending(SOURCE, batch)
            except StoreError as e:
                log.warning("otlp_pending_remove_failed", traces=len(batch), error=str(e)[:200])

    async def dead_letter(self, trace_id: str, reason: str) -> None:
        """Move ``trace_id``'s pending rows to the dead letters with ``reason``. Never raises."""
        try:
            await self._store.dead_letter_pending(SOURCE, trace_id, reason)
        except StoreError as e:
            log.warning(
                "otlp_pending_dead_letter_failed", trace_id=trace_id, reason=reason, error=str(e)[:200]
            )
        else:
            log.warning("otlp_trace_dead_lettered", trace_id=trace_id, reason=reason)
