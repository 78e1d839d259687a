"""Group OTLP spans into traces and decide when a trace is complete.

Spans of one trace may arrive in several requests, out of order (a child before its parent). The assembler
keeps the spans of each open trace (keyed by trace id, deduplicated by span id) and releases a trace:

- ``otlp_root_grace_s`` seconds after its root span (no parent, or a remote parent) arrived — children such
  as a retriever span may be exported after the root — provided a convention mapper recognises its spans:
  the root of a front service (a gateway calling the RAG service with W3C ``traceparent``) often arrives
  seconds before the RAG service's spans (the SDK's batch delay is 5 s), so a trace holding only spans no
  mapper recognises waits for more (each further root restarts the grace), up to the idle timeout; or
- ``otlp_idle_timeout_s`` seconds after its last span arrived without a root: released with
  ``incomplete=True`` — except a trace a mapper recognises that has no answer yet (only its retriever span
  arrived while the model call runs): it is held up to :data:`SLOW_ANSWER_FACTOR` idle timeouts after its
  last span, so a slow answer (longer than the idle timeout) is not lost.

Accepting spans is two steps, so a receiver can make them durable before it answers:
:meth:`TraceAssembler.plan` decides what is taken (and reserves room), :meth:`TraceAssembler.commit` adds it
(:meth:`TraceAssembler.abort` gives the room back). :meth:`TraceAssembler.add` does both at once. A trace with
spans between plan and commit is never released.

Bounds — nothing that was taken is dropped later, and no trace ever makes room for another:

- the **backlog** — traces held plus traces released and not yet acknowledged by the sink (only counted when
  a ``journal`` is set: then a trace leaves the backlog once its result is stored) — is at most
  ``otlp_max_pending_traces``; spans that would open a trace beyond it are not taken (``no_room``);
- a trace keeps at most ``max_spans_per_trace`` spans; further spans are not taken (``over_limit``);
- spans arriving for a trace that was already released are not taken (``late``), so a trace is never judged
  twice from one export stream.

Receivers report what was not taken as OTLP ``partial_success`` (or refuse the request while the backlog is
full). With a :class:`~ragpulse.ingest.otlp.journal.PendingJournal`, a released trace is submitted with an
ack that deletes its pending rows once stored (or moves them to the dead letters when it can never be), a
trace that cannot be mapped is dead-lettered, and :meth:`TraceAssembler.run` does not flush on stop (held
traces stay pending and are resumed on the next start).

Time comes from an injectable monotonic ``clock`` (seconds) so tests need no sleeps; :meth:`TraceAssembler.poll`
does the work and :meth:`TraceAssembler.run` calls it periodically and submits the traces to a
:class:`~ragpulse.protocols.TraceSink`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragpulse import telemetry
from ragpulse.config import OtlpSettings
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.logging import get_logger
from ragpulse.model import Trace, TraceResult
from ragpulse.protocols import AckCallback, TraceSink

if TYPE_CHECKING:
    from ragpulse.ingest.otlp.journal import PendingJournal

__all__ = [
    "NOT_TAKEN_REASONS",
    "SLOW_ANSWER_FACTOR",
    "SPANS_NOT_TAKEN",
    "AssemblerStats",
    "Clock",
    "Plan",
    "TraceAssembler",
]

#: A rootless trace that a mapper recognises but that has no answer yet is held this many idle timeouts after
#: its last span (in total) before it is released ``incomplete``: slow model calls (longer than the idle
#: timeout) end, and their spans and the root arrive, after the retriever's span was exported.
SLOW_ANSWER_FACTOR = 5

#: A monotonic clock in seconds.
Clock = Callable[[], float]

log = get_logger(__name__)

#: The ``reason`` labels of ``ragpulse_otlp_spans_not_taken_total``.
NOT_TAKEN_REASONS = ("late", "over_limit", "no_room")

SPANS_NOT_TAKEN = telemetry.meter.create_counter(
    "ragpulse_otlp_spans_not_taken",
    description="OTLP spans refused (partial success): reason late, over_limit or no_room",
)

#: Grace before a trace whose spans are being made durable is looked at again, seconds.
_RECHECK_S = 0.05


@dataclass
class AssemblerStats:
    """Counters since start: traces released complete / incomplete, spans not taken (late, over the
    per-trace limit, no room in the backlog), traces that could not be mapped, traces submitted to the sink and
    submissions the sink refused (raised)."""

    completed: int = 0
    incomplete: int = 0
    late_spans: int = 0
    spans_over_limit: int = 0
    spans_no_room: int = 0
    unmappable: int = 0
    submit_errors: int = 0
    submitted: int = 0


@dataclass
class Plan:
    """What :meth:`TraceAssembler.plan` decided for a batch of spans.

    Attributes:
        keep: the spans taken (to commit).
        late / over_limit / no_room: spans not taken, by reason.
        traces: ids of the traces ``keep`` touches (held against release until commit/abort).
    """

    keep: list[SpanData] = field(default_factory=list)
    late: int = 0
    over_limit: int = 0
    no_room: int = 0
    traces: set[str] = field(default_factory=set)

    @property
    def not_taken(self) -> int:
        """Spans not taken."""
        return self.late + self.over_limit + self.no_room

    def message(self) -> str:
        """One line for ``partial_success.error_message``."""
        parts = []
        if self.no_room:
            parts.append(f"{self.no_room} spans not taken: pending-trace limit reached, retry later")
        if self.late:
            parts.append(f"{self.late} spans of traces already released")
        if self.over_limit:
            parts.append(f"{self.over_limit} spans over the per-trace span limit")
        return "; ".join(parts)


@dataclass
class _Pending:
    spans: dict[str, SpanData] = field(default_factory=dict)
    last_seen: float = 0.0
    root_seen_at: float | None = None
    planned: int = 0  # spans planned and not yet committed/aborted
    holds: int = 0  # plans touching this trace not yet committed/aborted
    hold_until: float | None = None  # rootless and unanswered at the idle timeout: waited for until then


class TraceAssembler:
    """Collects spans per trace and releases finished traces (see the module docstring).

    Args:
        settings: ``otlp_root_grace_s``, ``otlp_idle_timeout_s``, ``otlp_max_pending_traces``.
        builder: maps a released trace's spans to a :class:`~ragpulse.model.Trace`.
        clock: monotonic seconds (default :func:`time.monotonic`).
        max_spans_per_trace: spans kept per trace; further spans of that trace are not taken (bounds memory
            against a runaway or hostile trace).
        journal: the durable record of accepted traces (acks, dead letters, no flush on stop); ``None``
            keeps everything in memory.
    """

    def __init__(
        self,
        settings: OtlpSettings,
        builder: TraceBuilder,
        clock: Clock = time.monotonic,
        max_spans_per_trace: int = 10_000,
        journal: PendingJournal | None = None,
    ) -> None:
        self._max_spans = max_spans_per_trace
        self._grace = settings.root_grace_s
        self._idle = settings.idle_timeout_s
        self._max = settings.max_pending_traces
        self._builder = builder
        self._clock = clock
        self._journal = journal
        # Least recently updated first.
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        # (due time, trace id) of traces whose root arrived, a heap (earliest first).
        self._due: list[tuple[float, str]] = []
        self._released: OrderedDict[str, None] = OrderedDict()
        self._released_max = max(self._max, 1000)
        self._in_hand = 0
        self._unacked = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self.stats = AssemblerStats()

    @property
    def pending_traces(self) -> int:
        """Traces currently held."""
        return len(self._pending)

    @property
    def backlog(self) -> int:
        """Traces held, plus traces released and not yet handed to the sink, plus (with a journal) traces
        handed over whose results are not stored yet."""
        return len(self._pending) + self._in_hand + self._unacked

    @property
    def saturated(self) -> bool:
        """True when the backlog is at ``otlp_max_pending_traces`` (receivers then refuse new requests with a
        retryable answer until the engine catches up)."""
        return self.backlog >= self._max

    def plan(self, spans: Iterable[SpanData], *, resumed: bool = False) -> Plan:
        """Decide which of ``spans`` are taken and hold room for them until :meth:`commit` / :meth:`abort`.

        ``resumed``: spans read back from the journal at start (they were taken before): no backlog limit.
        """
        now = self._clock()
        plan = Plan()
        for span in spans:
            tid = span.trace_id
            if tid in self._released:
                plan.late += 1
                continue
            p = self._pending.get(tid)
            if p is None:
                if self.backlog >= self._max and not resumed:
                    plan.no_room += 1
                    continue
                p = self._pending[tid] = _Pending(last_seen=now)
            if span.span_id not in p.spans and len(p.spans) + p.planned >= self._max_spans:
                plan.over_limit += 1
                continue
            p.planned += 1
            plan.keep.append(span)
            if tid not in plan.traces:
                plan.traces.add(tid)
                p.holds += 1
        self.stats.late_spans += plan.late
        self.stats.spans_over_limit += plan.over_limit
        self.stats.spans_no_room += plan.no_room
        for reason, n in zip(NOT_TAKEN_REASONS, (plan.late, plan.over_limit, plan.no_room), strict=True):
            if n:
                SPANS_NOT_TAKEN.add(n, {"reason": reason})
        return plan

    def commit(self, plan: Plan) -> int:
        """Add the spans of ``plan``; returns how many."""
        now = self._clock()
        for span in plan.keep:
            p = self._pending[span.trace_id]
            p.planned -= 1
            p.spans[span.span_id] = span
            p.last_seen = now
            if span.is_root:  # every root: a second service's entry span (remote parent) restarts the grace
                if p.root_seen_at is None:
                    p.root_seen_at = now
                heapq.heappush(self._due, (now + self._grace, span.trace_id))
                self._wake.set()
        for tid in plan.traces:
            self._pending[tid].holds -= 1
            self._pending.move_to_end(tid)
        return len(plan.keep)

    def abort(self, plan: Plan) -> None:
        """Give back what ``plan`` held (its spans were not taken after all)."""
        for span in plan.keep:
            self._pending[span.trace_id].planned -= 1
        for tid in plan.traces:
            p = self._pending[tid]
            p.holds -= 1
            if p.holds == 0 and not p.spans:
                del self._pending[tid]

    def add(self, spans: Iterable[SpanData]) -> int:
        """:meth:`plan` and :meth:`commit` at once. Returns how many spans were taken."""
        return self.commit(self.plan(spans))

    def _mark_released(self, tid: str) -> None:
        self._released[tid] = None
        while len(self._released) > self._released_max:
            self._released.popitem(last=False)

    def _release(self, tid: str, *, incomplete: bool) -> tuple[str, Trace | None]:
        """Pop and map one trace; ``None`` (logged, counted as rejected ``unmappable``) if mapping fails."""
        p = self._pending.pop(tid)
        self._mark_released(tid)
        try:
            trace = self._builder.build(tid, list(p.spans.values()), incomplete=incomplete)
        except Exception as e:  # a mapper bug or an unusable value must not stop the assembler
            self.stats.unmappable += 1
            telemetry.TRACES_REJECTED.add(1, {"source": "otlp", "reason": "unmappable"})
            log.error("otlp_trace_unmappable", trace_id=tid, spans=len(p.spans), error=f"{type(e).__name__}")
            return tid, None
        if incomplete:
            self.stats.incomplete += 1
        else:
            self.stats.completed += 1
        return tid, trace

    def _poll(self, now: float | None = None) -> list[tuple[str, Trace | None]]:
        t = self._clock() if now is None else now
        out: list[tuple[str, Trace | None]] = []
        recheck: list[str] = []
        while self._due and self._due[0][0] <= t:
            _, tid = heapq.heappop(self._due)
            p = self._pending.get(tid)
            if p is None:
                continue
            if p.holds:
                recheck.append(tid)
            elif not self._recognised(p):
                continue  # only a front service's spans so far: wait for the RAG service (or the idle timeout)
            else:
                out.append(self._release(tid, incomplete=False))
        for tid in recheck:
            heapq.heappush(self._due, (t + _RECHECK_S, tid))
        for tid, p in list(self._pending.items()):
            if p.last_seen + self._idle > t:
                break
            if p.holds:  # being made durable: look again after the idle timeout
                p.last_seen = t
                self._pending.move_to_end(tid)
                continue
            if p.root_seen_at is None:
                if p.hold_until is None and self._awaits_answer(p):
                    p.hold_until = p.last_seen + self._idle * SLOW_ANSWER_FACTOR
                if p.hold_until is not None and t < p.hold_until:
                    continue  # a slow answer: its root and model call are still running
            out.append(self._release(tid, incomplete=p.root_seen_at is None))
        return out

    def _awaits_answer(self, p: _Pending) -> bool:
        """True for a rootless trace a mapper recognises and that has no answer yet (e.g. only its retriever
        span arrived: the model call and the root span are still running)."""
        spans = list(p.spans.values())
        try:
            if not any(m.match(spans) for m in self._builder.mappers):
                return False
            fields = self._builder.merge(spans)
        except Exception:  # a broken mapper: release as before
            return False
        return fields.get("answer") is None and not fields.get("not_evaluable")

    def _recognised(self, p: _Pending) -> bool:
        """True when a convention mapper recognises the trace's spans (it holds the RAG service's part)."""
        spans = list(p.spans.values())
        try:
            return any(m.match(spans) for m in self._builder.mappers)
        except Exception:  # a broken custom mapper: release as before rather than hold the trace
            return True

    def release_due(self, now: float | None = None) -> list[tuple[str, Trace | None]]:
        """Like :meth:`poll`, with each trace's id; ``None`` for a trace that could not be mapped (for sources
        that answer per trace, e.g. Kafka commits)."""
        return self._poll(now)

    def held_trace_ids(self) -> frozenset[str]:
        """Ids of the traces currently held (not released)."""
        return frozenset(self._pending)

    def discard(self, trace_ids: Iterable[str]) -> int:
        """Drop held traces without releasing them (their spans will be delivered again, e.g. to another Kafka
        consumer after a rebalance); returns how many were held. A trace being planned is not dropped."""
        n = 0
        for tid in trace_ids:
            p = self._pending.get(tid)
            if p is not None and not p.holds:
                del self._pending[tid]  # its entry in the due queue is skipped when popped
                n += 1
        return n

    def poll(self, now: float | None = None) -> list[Trace]:
        """Release the traces that are due at ``now`` (default: the clock), oldest first."""
        return [t for _, t in self._poll(now) if t is not None]

    def _flush(self) -> list[tuple[str, Trace | None]]:
        out = [
            self._release(tid, incomplete=p.root_seen_at is None) for tid, p in list(self._pending.items())
        ]
        self._due.clear()
        return out

    def flush(self) -> list[Trace]:
        """Release every held trace now (shutdown): with a root → complete, else incomplete."""
        return [t for _, t in self._flush() if t is not None]

    def next_deadline(self) -> float | None:
        """Clock time at which the next trace becomes due, ``None`` when nothing is held."""
        times = []
        if self._due:
            times.append(self._due[0][0])
        for p in self._pending.values():  # least recently updated first; held slow traces wait longer
            if p.hold_until is not None and p.root_seen_at is None:
                times.append(p.hold_until)
                continue
            times.append(p.last_seen + self._idle)
            break
        return min(times) if times else None

    def _ack_for(self, tid: str) -> AckCallback:
        journal = self._journal
        assert journal is not None

        async def ack(result: TraceResult, ok: bool) -> None:
            try:
                await journal.done(tid, ok)
            finally:
                self._unacked -= 1

        return ack

    async def _submit(self, sink: TraceSink, released: list[tuple[str, Trace | None]]) -> None:
        """Hand ``released`` to ``sink`` one by one; until handed over they count in the backlog."""
        self._in_hand += len(released)
        try:
            for tid, trace in released:
                await self._submit_one(sink, tid, trace)  # moves it out of _in_hand
        finally:  # cancelled mid-way: what was not handed over stays pending in the journal
            self._in_hand = 0

    async def _submit_one(self, sink: TraceSink, tid: str, trace: Trace | None) -> None:
        if trace is None:  # unmappable
            self._in_hand -= 1
            if self._journal is not None:
                await self._journal.dead_letter(tid, "unmappable")
            return
        if self._journal is not None:  # from here on its ack takes it out of the backlog
            self._unacked += 1
            self._in_hand -= 1
        try:
            if self._journal is not None:
                await sink.submit(trace, self._ack_for(tid))
            else:
                await sink.submit(trace)
        except Exception as e:  # the engine refused it (e.g. closing); keep serving the others
            if self._journal is not None:
                self._unacked -= 1  # still pending in the journal: resumed on the next start
            else:
                self._in_hand -= 1
            self.stats.submit_errors += 1
            log.error("otlp_submit_failed", trace_id=trace.trace_id, error=f"{type(e).__name__}: {e}")
            return
        if self._journal is None:
            self._in_hand -= 1
        self.stats.submitted += 1  # counted on TRACES_RECEIVED by the engine, once

    def stop(self) -> None:
        """Ask :meth:`run` to return (flushing held traces first unless a journal keeps them)."""
        self._stopping = True
        self._wake.set()

    async def run(self, sink: TraceSink, max_tick_s: float = 0.25) -> None:
        """Release due traces into ``sink`` until :meth:`stop`, then return; without a journal, every held
        trace is flushed into ``sink`` first.

        Waits between polls until the next deadline (at most ``max_tick_s``), or until a root span arrives.
        ``sink.submit`` may block (engine back-pressure); spans keep being collected meanwhile, bounded by
        ``otlp_max_pending_traces``. Cancelling the task drops what was not yet submitted (with a journal it
        stays pending).
        """
        while not self._stopping:
            await self._submit(sink, self._poll())
            deadline = self.next_deadline()
            wait = max_tick_s if deadline is None else min(max_tick_s, max(0.0, deadline - self._clock()))
            self._wake.clear()
            if wait > 0 and not self._stopping:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
        if self._journal is not None:
            log.info("otlp_pending_kept", traces=len(self._pending))
            return
        rest = self._flush()
        if rest:
            log.info("otlp_flush_on_shutdown", traces=len(rest))
        await self._submit(sink, rest)
