"""Group OTLP spans into traces and decide when a trace is complete.

Spans of one trace may arrive in several requests, out of order (a child before its parent). The assembler
keeps the spans of each open trace (keyed by trace id, deduplicated by span id) and releases a trace:

- ``otlp_root_grace_s`` seconds after its root span (no parent) arrived — children such as a retriever span
  may be exported after the root; or
- ``otlp_idle_timeout_s`` seconds after its last span arrived without a root: released with
  ``incomplete=True``.

At most ``otlp_max_pending_traces`` traces, of at most ``max_spans_per_trace`` spans each, are held; beyond that the least recently updated trace is evicted
(dropped, logged and counted in :attr:`AssemblerStats.evicted` and ``ragpulse_otlp_traces_evicted``). Spans
arriving for a trace that was already released are dropped and counted (``late_spans``), so a trace is never
judged twice from one export stream.

Time comes from an injectable monotonic ``clock`` (seconds) so tests need no sleeps; :meth:`TraceAssembler.poll`
does the work and :meth:`TraceAssembler.run` calls it periodically and submits the traces to a
:class:`~ragpulse.protocols.TraceSink`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ragpulse import telemetry
from ragpulse.config import OtlpSettings
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.logging import get_logger
from ragpulse.model import Trace
from ragpulse.protocols import TraceSink

__all__ = ["AssemblerStats", "Clock", "TraceAssembler"]

#: A monotonic clock in seconds.
Clock = Callable[[], float]

log = get_logger(__name__)

TRACES_EVICTED = telemetry.meter.create_counter(
    "ragpulse_otlp_traces_evicted",
    description="Partial OTLP traces dropped because the pending limit was hit",
)
SPANS_OVER_LIMIT = telemetry.meter.create_counter(
    "ragpulse_otlp_spans_over_limit", description="OTLP spans dropped because their trace had too many spans"
)
LATE_SPANS = telemetry.meter.create_counter(
    "ragpulse_otlp_late_spans", description="OTLP spans dropped because their trace was already released"
)


@dataclass
class AssemblerStats:
    """Counters since start: traces released complete / incomplete, evicted, late spans dropped, spans
    dropped over the per-trace limit, traces that could not be mapped, traces submitted to the sink and
    submissions the sink refused (raised)."""

    completed: int = 0
    incomplete: int = 0
    evicted: int = 0
    late_spans: int = 0
    spans_over_limit: int = 0
    unmappable: int = 0
    submit_errors: int = 0
    submitted: int = 0


@dataclass
class _Pending:
    spans: dict[str, SpanData] = field(default_factory=dict)
    last_seen: float = 0.0
    root_seen_at: float | None = None


class TraceAssembler:
    """Collects spans per trace and releases finished traces (see the module docstring).

    Args:
        settings: ``otlp_root_grace_s``, ``otlp_idle_timeout_s``, ``otlp_max_pending_traces``.
        builder: maps a released trace's spans to a :class:`~ragpulse.model.Trace`.
        clock: monotonic seconds (default :func:`time.monotonic`).
        max_spans_per_trace: spans kept per trace; further spans of that trace are dropped and counted
            (bounds memory against a runaway or hostile trace).
    """

    def __init__(
        self,
        settings: OtlpSettings,
        builder: TraceBuilder,
        clock: Clock = time.monotonic,
        max_spans_per_trace: int = 10_000,
    ) -> None:
        self._max_spans = max_spans_per_trace
        self._grace = settings.root_grace_s
        self._idle = settings.idle_timeout_s
        self._max = settings.max_pending_traces
        self._builder = builder
        self._clock = clock
        # Least recently updated first.
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        # (due time, trace id) of traces whose root arrived; due times are non-decreasing.
        self._due: deque[tuple[float, str]] = deque()
        self._released: OrderedDict[str, None] = OrderedDict()
        self._released_max = max(self._max, 1000)
        self._wake = asyncio.Event()
        self._stopping = False
        self.stats = AssemblerStats()

    @property
    def pending_traces(self) -> int:
        """Traces currently held."""
        return len(self._pending)

    @property
    def saturated(self) -> bool:
        """True when ``otlp_max_pending_traces`` traces are held (receivers then refuse new requests with a
        retryable answer until the engine catches up)."""
        return len(self._pending) >= self._max

    def add(self, spans: Iterable[SpanData]) -> int:
        """Add spans (any traces, any order). Returns how many were kept (late ones are dropped)."""
        now = self._clock()
        kept = 0
        for span in spans:
            tid = span.trace_id
            if tid in self._released:
                self.stats.late_spans += 1
                LATE_SPANS.add(1)
                continue
            p = self._pending.get(tid)
            if p is None:
                p = self._pending[tid] = _Pending()
            elif len(p.spans) >= self._max_spans and span.span_id not in p.spans:
                self.stats.spans_over_limit += 1
                SPANS_OVER_LIMIT.add(1)
                continue
            else:
                self._pending.move_to_end(tid)
            p.spans[span.span_id] = span
            p.last_seen = now
            kept += 1
            if span.is_root and p.root_seen_at is None:
                p.root_seen_at = now
                self._due.append((now + self._grace, tid))
                self._wake.set()
        while len(self._pending) > self._max:
            tid, p = self._pending.popitem(last=False)
            self.stats.evicted += 1
            TRACES_EVICTED.add(1)
            self._mark_released(tid)
            log.warning("otlp_trace_evicted", trace_id=tid, spans=len(p.spans), limit=self._max)
        return kept

    def _mark_released(self, tid: str) -> None:
        self._released[tid] = None
        while len(self._released) > self._released_max:
            self._released.popitem(last=False)

    def _release(self, tid: str, *, incomplete: bool) -> Trace | None:
        """Pop and map one trace; ``None`` (logged, counted as rejected ``unmappable``) if mapping fails."""
        p = self._pending.pop(tid)
        self._mark_released(tid)
        try:
            trace = self._builder.build(tid, list(p.spans.values()), incomplete=incomplete)
        except Exception as e:  # a mapper bug or an unusable value must not stop the assembler
            self.stats.unmappable += 1
            telemetry.TRACES_REJECTED.add(1, {"source": "otlp", "reason": "unmappable"})
            log.error("otlp_trace_unmappable", trace_id=tid, spans=len(p.spans), error=f"{type(e).__name__}")
            return None
        if incomplete:
            self.stats.incomplete += 1
        else:
            self.stats.completed += 1
        return trace

    def poll(self, now: float | None = None) -> list[Trace]:
        """Release the traces that are due at ``now`` (default: the clock), oldest first."""
        t = self._clock() if now is None else now
        out: list[Trace | None] = []
        while self._due and self._due[0][0] <= t:
            _, tid = self._due.popleft()
            if tid in self._pending:
                out.append(self._release(tid, incomplete=False))
        while self._pending:
            tid, p = next(iter(self._pending.items()))
            if p.last_seen + self._idle > t:
                break
            out.append(self._release(tid, incomplete=p.root_seen_at is None))
        return [x for x in out if x is not None]

    def flush(self) -> list[Trace]:
        """Release every held trace now (shutdown): with a root → complete, else incomplete."""
        out = [
            self._release(tid, incomplete=p.root_seen_at is None) for tid, p in list(self._pending.items())
        ]
        self._due.clear()
        return [x for x in out if x is not None]

    def next_deadline(self) -> float | None:
        """Clock time at which the next trace becomes due, ``None`` when nothing is held."""
        times = []
        if self._due:
            times.append(self._due[0][0])
        if self._pending:
            times.append(next(iter(self._pending.values())).last_seen + self._idle)
        return min(times) if times else None

    async def _submit(self, sink: TraceSink, traces: list[Trace]) -> None:
        for trace in traces:
            try:
                await sink.submit(trace)
            except Exception as e:  # the engine refused it (e.g. closing); keep serving the others
                self.stats.submit_errors += 1
                log.error("otlp_submit_failed", trace_id=trace.trace_id, error=f"{type(e).__name__}: {e}")
                continue
            self.stats.submitted += 1  # counted on TRACES_RECEIVED by the engine, once

    def stop(self) -> None:
        """Ask :meth:`run` to flush everything held and return."""
        self._stopping = True
        self._wake.set()

    async def run(self, sink: TraceSink, max_tick_s: float = 0.25) -> None:
        """Release due traces into ``sink`` until :meth:`stop`, then flush the rest and return.

        Waits between polls until the next deadline (at most ``max_tick_s``), or until a root span arrives.
        ``sink.submit`` may block (engine back-pressure); spans keep being collected meanwhile, bounded by
        ``otlp_max_pending_traces``. Cancelling the task drops what was not yet submitted.
        """
        while not self._stopping:
            await self._submit(sink, self.poll())
            deadline = self.next_deadline()
            wait = max_tick_s if deadline is None else min(max_tick_s, max(0.0, deadline - self._clock()))
            self._wake.clear()
            if wait > 0 and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
        rest = self.flush()
        if rest:
            log.info("otlp_flush_on_shutdown", traces=len(rest))
        await self._submit(sink, rest)
