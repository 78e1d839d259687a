"""The evaluation engine: bounded queue → judges → batched store writes → exporters → ack.

Pipeline (all inside one event loop, created when the engine is entered, never at import):

1. :meth:`Engine.submit` puts a trace on a bounded :class:`asyncio.Queue` (``engine_queue_size``); it waits
   while the queue is full, which is the back-pressure sources feel.
2. ``engine_workers`` worker tasks take traces off the queue, decide the trace outcome (sampling,
   evaluability) and run the routed judges concurrently. A trace with a question but no answer is judged by
   the routed judges that need no answer (``needs_answer = False``, the retrieval judges); the others get a
   ``skipped``/``no_answer`` judgement. When no routed judge can run it is ``not_evaluable``/``no_answer``.
3. Finished results go on a second bounded queue to ``engine_writers`` writer tasks, each writing batches of
   up to ``engine_batch_size`` (or what arrived within ``engine_flush_interval_s``) in its own transaction. A retriable
   :class:`~ragpulse.errors.StoreError` is retried with exponential backoff up to ``engine_store_retries``
   attempts — or, for redelivering sources (``redelivering=True``, ``ragpulse serve``), for as long as the
   outage lasts; meanwhile the workers block on the full result queue, so memory stays bounded.
4. After a successful write, exporters get ``on_stored(result, changed)`` (only the judgements the store
   inserted or changed; or, when an exporter has it, one ``on_stored_many([(result, changed), …])`` per
   batch) and then the source's ``ack(result, True)``. A batch that fails for good is acked with
   ``ok=False``; a non-retriable failure of a multi-trace batch is retried trace by trace so one bad trace
   cannot fail its neighbours.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from types import TracebackType
from typing import Self, cast

import structlog

from ragpulse import telemetry
from ragpulse.config import EngineSettings, JudgeRoute
from ragpulse.engine.routing import Router
from ragpulse.engine.sampling import SamplingPolicy, SamplingRule
from ragpulse.errors import RagpulseError, StoreError
from ragpulse.logging import get_logger
from ragpulse.model import (
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.protocols import (
    STORE_FAILURE,
    AckCallback,
    Exporter,
    FinalJudgementLookup,
    Judge,
    ResultStore,
    ShadowReuseLookup,
    WriteReport,
    judge_inline,
    judge_needs_answer,
)

__all__ = [
    "OFFLOAD_CHARS",
    "OUTRANKED",
    "REUSED_FROM_SHADOW",
    "TRACE_ERROR",
    "Engine",
    "EngineClosedError",
    "EngineStats",
    "not_evaluable_reason",
    "reused_shadow",
    "trace_text_chars",
]

log = get_logger("ragpulse.engine")

#: A trace with at least this many characters of text (:func:`trace_text_chars`) has its inline judges run
#: in a worker thread instead of on the event loop. The default offline judges cost 0.3–0.4 µs of CPU a
#: character of English and 7–14 µs of Chinese (halueval and rgb_zh texts; docs/dev/architecture.md), so a
#: trace below this holds the loop ~0.1 s at most (Chinese); a hop to the thread costs ~50 µs, and traces
#: of the usual size (a question, 3–5 chunks of ~150 words, an answer) stay on the loop.
OFFLOAD_CHARS = 8_000


def _failure_text(e: StoreError) -> str:
    """The first line of a store error's message, at most 300 characters (store errors name the error type
    and PostgreSQL's primary message, never row values: :func:`ragpulse.store.errors.to_store_error`)."""
    text = (str(e).splitlines() or [""])[0].strip()
    return text[:300] or type(e).__name__


def trace_text_chars(trace: Trace) -> int:
    """Characters of the texts a judge of ``trace`` may read: question, answer, context, retrieved documents,
    expected answer, reference and labelled contexts."""
    n = sum(len(t) for t in (trace.question, trace.answer, trace.context, trace.expected_answer) if t)
    n += sum(len(d.content) for d in trace.documents if d.content)
    for extra in (trace.reference_contexts, trace.labelled_contexts):
        if extra:
            n += sum(len(c) for c in extra)
    return n


def _evaluate_inline(judges: Sequence[Judge], trace: Trace) -> list[tuple[Judgement | str, float]]:
    """The synchronous ``evaluate`` of each inline judge in turn, with when each started
    (``time.perf_counter()``): its judgement, or what went wrong (``judge_exception: …``) when it raised or
    returned something else. Touches no engine state, so it may run in a worker thread."""
    outs: list[tuple[Judgement | str, float]] = []
    for judge in judges:
        started = time.perf_counter()
        try:
            # judge_inline checked that it has evaluate (not part of the Judge protocol)
            out = judge.evaluate(trace)  # type: ignore[attr-defined]
            if not isinstance(out, Judgement):
                out = f"judge_exception: returned {type(out).__name__}, not a Judgement"
        except Exception as e:
            out = f"judge_exception: {type(e).__name__}: {e}"
        outs.append((out, started))
    return outs


#: Most (trace id, content hash) keys whose final judgements the engine remembers.
FINAL_CACHE_SIZE = 20_000
#: Longest wait for the store's answer in :meth:`Engine.prefetch`, seconds (on timeout the traces are judged).
PREFETCH_TIMEOUT_S = 5.0

#: Longest pause between two store write attempts, seconds.
MAX_BACKOFF_S = 30.0
#: Longest pause between two store write attempts of a redelivering engine during an outage, seconds (work
#: resumes at most this long after the database is back).
OUTAGE_BACKOFF_S = 10.0


class EngineClosedError(RagpulseError):
    """Raised by :meth:`Engine.submit` when the engine is not running (not entered, closing or closed)."""


@dataclass
class EngineStats:
    """Counters since the engine started (plain ints; read them, do not write them).

    Attributes:
        received: traces accepted by ``submit``.
        evaluated / incomplete / not_sampled / not_evaluable: traces by outcome.
        answerless: traces without an answer judged by the judges that need none (``needs_answer=False``;
            also counted as evaluated/incomplete).
        judge_exceptions: judges that raised (turned into ``error`` judgements).
        stored: traces whose result was written (acked ``ok=True``; outranked ones included).
        outranked: traces the store kept its higher-ranked version of (``WriteReport.outranked``: a started/
            partial event after the complete trace); nothing of them was written, they are acked ``ok=True``.
        failed: traces whose write failed for good (acked ``ok=False``).
        store_retries: store write attempts that failed and were retried.
        batches: successful store writes.
        already_judged: redelivered traces whose every routed judgement was already final for their content
            (no judge call, nothing changed).
        judgements_final: judge calls skipped because the judgement was final for the content.
        outranked_unjudged: traces not judged because the store already held a more complete version of them
            (a started/partial event or an ``incomplete`` trace after the complete one; the store's
            ``stored_version_ranks``); the store writes nothing of them (also counted in ``outranked``).
        shadow_judgements: shadow judgements made (``judge.options.<name>.shadow``; stored apart, see
            :func:`shadow_hit`).
        shadow_failures: shadow judgements that could not be stored (logged; the trace is unaffected).
        shadow_reused: judgements copied from a stored shadow judgement of the same judge version and content
            instead of calling the judge (a promoted shadow, :meth:`Engine.prefetch`).
        offloaded_traces: traces whose inline judges ran in a worker thread (at least :data:`OFFLOAD_CHARS`
            characters of text).
        session_lookup_failures: look-ups of a session's earlier turns that failed (the trace was judged
            without them).
    """

    received: int = 0
    evaluated: int = 0
    incomplete: int = 0
    not_sampled: int = 0
    not_evaluable: int = 0
    answerless: int = 0
    judge_exceptions: int = 0
    stored: int = 0
    outranked: int = 0
    failed: int = 0
    store_retries: int = 0
    batches: int = 0
    already_judged: int = 0
    judgements_final: int = 0
    outranked_unjudged: int = 0
    shadow_judgements: int = 0
    shadow_failures: int = 0
    shadow_reused: int = 0
    offloaded_traces: int = 0
    session_lookup_failures: int = 0


class _State(Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


@dataclass(slots=True)
class _Item:
    trace: Trace
    ack: AckCallback | None
    received_at: datetime


#: Reason of a trace its source reported as failed (``Trace.error``: OTLP root status ERROR, Kafka ``error``).
TRACE_ERROR = "trace_error"

#: Reason of a version the engine did not judge because the store holds a more complete one of the same trace
#: id (:meth:`Engine._outranked`); the store writes nothing of it, so the reason is seen in acks and logs only.
OUTRANKED = "outranked"


def not_evaluable_reason(trace: Trace) -> str | None:
    """Why ``trace`` cannot be judged, else ``None``.

    The producer's reason in ``trace.not_evaluable`` when set (no judge runs; replay sets it when the RAG
    endpoint failed for a case, so that no judge scores contexts the endpoint never returned; older producers
    send it as the ``ragpulse.not_evaluable`` attribute, which :class:`~ragpulse.model.Trace` moves into the
    field), else :data:`TRACE_ERROR` when the source reported the trace as failed (``trace.error``), else
    ``no_question`` /
    ``no_answer`` when the trace lacks one (missing or blank; without an answer the judges that need none still
    run).
    """
    if trace.not_evaluable:
        return trace.not_evaluable
    if trace.error:
        return TRACE_ERROR
    if not trace.question or not trace.question.strip():
        return "no_question"
    if not trace.answer or not trace.answer.strip():
        return "no_answer"
    return None


def _skipped_no_answer(judge: Judge) -> Judgement:
    """The ``skipped``/``no_answer`` judgement of an answer-needing judge on a trace without an answer."""
    model = getattr(judge, "model", None)
    return Judgement(
        judge=judge.name,
        version=judge.version,
        backend=judge.backend,
        model=model if isinstance(model, str) else None,
        threshold=judge.threshold,
        status=JudgementStatus.SKIPPED,
        reason="no_answer",
    )


#: ``flags.reused_from`` of a judgement copied from a stored shadow judgement (:func:`reused_shadow`).
REUSED_FROM_SHADOW = "shadow"


def reused_shadow(shadow: Judgement) -> Judgement:
    """The main judgement made from a stored ``ok`` shadow judgement of the same judge version and content:
    the same verdict, reason, flags and raw output; no model call now, so latency and tokens are 0, and the
    shadow's own cost and time move to ``flags.shadow_cost`` (``judged_at``, ``latency_s``, ``prompt_tokens``,
    ``completion_tokens``); ``flags.reused_from`` = :data:`REUSED_FROM_SHADOW`."""
    flags = shadow.flags.model_dump()
    cost = {
        "judged_at": flags.pop("judged_at", None),
        "latency_s": shadow.latency_s,
        "prompt_tokens": shadow.prompt_tokens,
        "completion_tokens": shadow.completion_tokens,
    }
    return shadow.model_copy(
        update={
            "flags": JudgementFlags(**{**flags, "reused_from": REUSED_FROM_SHADOW, "shadow_cost": cost}),
            "latency_s": 0.0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
    )


def shadow_hit(trace_id: str, judge: str, share: float) -> bool:
    """Whether the shadow of ``judge`` judges ``trace_id``: the first 8 bytes of SHA-256 of
    ``"<trace_id>\x00<judge>\x00shadow"`` read as a fraction of 2**64 are below ``share`` — the same traces on
    every replica and redelivery, among the traces the main judge judged."""
    if share <= 0.0:
        return False
    digest = hashlib.sha256(f"{trace_id}\x00{judge}\x00shadow".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


class Engine:
    """Judges traces asynchronously and stores every judgement; implements :class:`~ragpulse.protocols.TraceSink`.

    Use as ``async with Engine(judges, store, settings.engine, exporters, routes=settings.judge.routes) as
    engine: await engine.submit(trace, ack)``.
    Leaving the block closes the engine gracefully (:meth:`aclose`).

    Args:
        judges: judge name → judge; which of them run per trace follows ``routes`` (first match by
            app/scenario), else all of them.
        store: where results are written (``write_results``).
        settings: the ``engine`` section (queue, workers, batches, store retries, sampling, shutdown deadline).
        exporters: receive ``on_stored(result, changed)`` after each successful write.
        routes: the ``judge.routes`` setting.
        sampling: which traces are judged (:class:`~ragpulse.engine.sampling.SamplingPolicy`); default: built
            from ``always_judge``, ``sampling_rules`` and ``sampling_rate`` (test traffic is always judged).
        redelivering: the sources redeliver what is never acked (Kafka; ``ragpulse serve``). A retriable store
            failure (connection lost or refused, timeout) is then retried for as long as it lasts, with backoff
            capped at :data:`OUTAGE_BACKOFF_S`, instead of giving up after ``engine_store_retries`` attempts —
            nothing is acked, so nothing is committed or dead-lettered during a database outage; only a data
            error (non-retriable) fails a trace for good. Default ``False`` (in-process replay): bounded retries.
        history_turns: a trace of a session (``session_id``) that carries no earlier turns gets the last this
            many from the store (``store.session_turns``: the session's traces stored before it) before it is
            judged, and is stored with them (``judge.history_turns``; ``ragpulse serve``). 0: no look-up.
    """

    def __init__(
        self,
        judges: Mapping[str, Judge],
        store: ResultStore,
        settings: EngineSettings,
        exporters: Sequence[Exporter] = (),
        *,
        routes: Sequence[JudgeRoute] = (),
        sampling: SamplingPolicy | None = None,
        redelivering: bool = False,
        history_turns: int = 0,
    ) -> None:
        self._judges = dict(judges)
        self._history_turns = history_turns
        #: ``id(judge)`` → whether it runs inline (:func:`judge_inline`), for the configured judges.
        self._inline = {id(j): judge_inline(j) for j in self._judges.values()}
        self._redelivering = redelivering
        #: ``{(trace_id, content_hash): {(judge, version)}}`` of final judgements, from :meth:`prefetch` and
        #: from this engine's own writes (LRU, :data:`FINAL_CACHE_SIZE` keys).
        self._final: OrderedDict[tuple[str, str], frozenset[tuple[str, str]]] = OrderedDict()
        #: ``(judge, version)`` of this engine's judges with reusable stored shadow judgements (asked once at
        #: start); empty — the normal case — means no reuse lookup at all.
        self._reusable: frozenset[tuple[str, str]] = frozenset()
        #: Reusable shadow judgements looked up by :meth:`prefetch`, per ``(trace_id, content_hash)`` (LRU).
        self._reuse: OrderedDict[tuple[str, str], dict[tuple[str, str], Judgement]] = OrderedDict()
        self._sampling = sampling or SamplingPolicy.build(
            settings.sampling_rate,
            rules=[SamplingRule(r.rate, r.app, r.scenario) for r in settings.sampling_rules],
            always_judge=settings.always_judge,
        )
        self._router = Router(self._judges, routes)
        self._store = store
        self._settings = settings
        self._exporters = tuple(exporters)
        self.stats = EngineStats()
        self._state = _State.NEW
        self._pending = 0
        self._held = 0  # results taken by writers and not yet acked
        # asyncio objects are created in start(), inside the running loop.
        self._queue: asyncio.Queue[_Item] | None = None
        self._results: asyncio.Queue[tuple[TraceResult, AckCallback | None]] | None = None
        self._idle: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the queues and start the worker and writer tasks.

        Raises:
            RuntimeError: the engine was already started.
        """
        if self._state is not _State.NEW:
            raise RuntimeError(f"engine already {self._state.value}")
        s = self._settings
        self._queue = asyncio.Queue(maxsize=s.queue_size)
        self._results = asyncio.Queue(maxsize=max(s.batch_size * s.writers, s.workers))
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = asyncio.Event()
        await self._find_reusable_shadows()
        telemetry.ENGINE_QUEUE_DEPTH.watch(self._queue_depth)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"ragpulse-engine-worker-{i}") for i in range(s.workers)
        ]
        self._tasks.extend(
            asyncio.create_task(self._writer(), name=f"ragpulse-engine-writer-{i}") for i in range(s.writers)
        )
        self._state = _State.RUNNING
        log.debug("engine_started", workers=s.workers, queue_size=s.queue_size)

    async def aclose(self, deadline_s: float | None = None) -> bool:
        """Stop accepting traces, drain in-flight work within ``deadline_s`` (default ``shutdown_deadline_s``
        seconds), then cancel what is left. Idempotent.

        Traces still in flight at the deadline are neither acked nor failed (their source redelivers them).

        Returns:
            True when everything submitted was stored or failed for good before the deadline.
        """
        if self._state in (_State.NEW, _State.CLOSED):
            self._state = _State.CLOSED
            return True
        if self._state is _State.CLOSING:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            return self._pending == 0
        self._state = _State.CLOSING
        assert self._closing is not None
        self._closing.set()
        deadline = self._settings.shutdown_deadline_s if deadline_s is None else deadline_s
        drained = await self.drain(deadline)
        if not drained:
            log.warning("engine_shutdown_deadline_passed", pending=self._pending, deadline_s=deadline)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._state = _State.CLOSED
        log.debug("engine_closed", drained=drained, **self._stats_dict())
        return drained

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close (:meth:`aclose`); when the block is left by cancellation or Ctrl-C/SIGTERM nothing more is
        awaited: in-flight work is cancelled at once instead of drained for ``shutdown_deadline_s``."""
        interrupted = exc_type is not None and issubclass(
            exc_type, asyncio.CancelledError | KeyboardInterrupt
        )
        await self.aclose(0.0 if interrupted else None)

    # -- TraceSink ------------------------------------------------------------------------------------------

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        """Queue ``trace``; wait while the queue is full (back-pressure).

        ``ack(result, ok)`` is awaited later: ``ok=True`` once the result is stored, ``ok=False`` once the
        store write failed for good.

        Raises:
            EngineClosedError: the engine is not running, or began closing while this call waited.
        """
        if self._state is not _State.RUNNING:
            raise EngineClosedError(f"engine is {self._state.value}; cannot accept traces")
        assert self._queue is not None
        assert self._idle is not None
        assert self._closing is not None
        item = _Item(trace, ack, datetime.now(UTC))
        self._pending += 1
        self._idle.clear()
        if not self._queue.full():
            self._queue.put_nowait(item)
        else:
            await self._put_waiting(item)
        self.stats.received += 1
        telemetry.TRACES_RECEIVED.add(1, {"source": trace.source.value})

    async def _put_waiting(self, item: _Item) -> None:
        """Wait for room; on closing or cancellation the item is not queued and ``pending`` is given back."""
        assert self._queue is not None
        assert self._closing is not None
        put = asyncio.ensure_future(self._queue.put(item))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({put, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            queued = put.done() and not put.cancelled() and put.exception() is None
            if not put.done():
                put.cancel()
            if not queued:
                self._one_done()
        if not queued:
            raise EngineClosedError("engine began closing while the trace waited for room")

    async def prefetch(self, traces: Sequence[Trace]) -> None:
        """Look up, in one store query, the final (``ok``/``skipped``) judgements of ``traces`` for their
        judged content (:func:`ragpulse.model.judged_content_hash`); a trace submitted afterwards skips the
        judges whose judgement is final (exactly once on redelivery: no judge call, nothing re-exported).

        Sources that see batches call it once per batch (Kafka: per poll). Never raises: when the store cannot
        answer (no such capability, an error, :data:`PREFETCH_TIMEOUT_S`), the traces are simply judged.
        """
        if not isinstance(self._store, FinalJudgementLookup) or not traces:
            return
        keys = list(dict.fromkeys((t.trace_id, t.content_hash) for t in traces))
        try:
            async with asyncio.timeout(PREFETCH_TIMEOUT_S):
                found = await self._store.final_judgements(keys)
        except Exception as e:  # a lookup is an optimisation of correctness already kept by the store
            log.debug("engine_prefetch_failed", traces=len(keys), error=str(e)[:200])
            return
        for key, finals in found.items():
            self._remember(key, finals)
        if self._reusable and isinstance(self._store, ShadowReuseLookup):
            try:
                async with asyncio.timeout(PREFETCH_TIMEOUT_S):
                    shadows = await self._store.reusable_shadows(keys, sorted(self._reusable))
            except Exception as e:  # the per-trace lookup (or the judge) still decides
                log.debug("engine_prefetch_shadows_failed", traces=len(keys), error=str(e)[:200])
                return
            for key in keys:
                self._reuse.pop(key, None)
                self._reuse[key] = shadows.get(key, {})
            while len(self._reuse) > FINAL_CACHE_SIZE:
                self._reuse.popitem(last=False)

    async def _find_reusable_shadows(self) -> None:
        """Ask the store once which of this engine's judges (name, version) have reusable stored shadow
        judgements (a shadow configuration that has since become the main one). Never raises: without an
        answer nothing is reused."""
        if not isinstance(self._store, ShadowReuseLookup) or not self._judges:
            return
        pairs = sorted({(j.name, j.version) for j in self._judges.values()})
        try:
            async with asyncio.timeout(PREFETCH_TIMEOUT_S):
                self._reusable = await self._store.shadow_versions(pairs)
        except Exception as e:
            log.warning("engine_shadow_lookup_failed", error=str(e)[:200])
            return
        if self._reusable:
            log.info(
                "engine_reuses_shadow_judgements", judges=[f"{n}@{v}" for n, v in sorted(self._reusable)]
            )

    async def _reused_shadows(self, trace: Trace, judges: Sequence[Judge]) -> dict[str, Judgement]:
        """``{judge name: judgement}`` copied from stored ``ok`` shadow judgements of the same judge version
        and judged content (:data:`REUSED_FROM_SHADOW`), for the ``judges`` that have some; looked up by
        :meth:`prefetch` or here, one query per trace. A failed lookup reuses nothing (the judges run)."""
        wanted = [(j.name, j.version) for j in judges if (j.name, j.version) in self._reusable]
        if not wanted or not isinstance(self._store, ShadowReuseLookup):
            return {}
        key = (trace.trace_id, trace.content_hash)
        found = self._reuse.pop(key, None)
        if found is None:
            try:
                async with asyncio.timeout(PREFETCH_TIMEOUT_S):
                    found = (await self._store.reusable_shadows([key], wanted)).get(key, {})
            except Exception as e:
                log.debug("engine_shadow_reuse_failed", trace_id=trace.trace_id, error=str(e)[:200])
                return {}
        out = {
            name: reused_shadow(j)
            for name, version in wanted
            if (j := found.get((name, version))) is not None and j.status is JudgementStatus.OK
        }
        self.stats.shadow_reused += len(out)
        return out

    def _remember(self, key: tuple[str, str], finals: frozenset[tuple[str, str]]) -> None:
        old = self._final.pop(key, frozenset())
        self._final[key] = old | finals
        while len(self._final) > FINAL_CACHE_SIZE:
            self._final.popitem(last=False)

    def _queue_depth(self) -> int:
        """Traces waiting in the input queue (read by the ``ragpulse_engine_queue_depth`` gauge)."""
        return self._queue.qsize() if self._queue is not None else 0

    def has_room(self) -> bool:
        """True while the input queue has a free slot (sources pause/resume partitions on it)."""
        return self._state is _State.RUNNING and self._queue is not None and not self._queue.full()

    async def drain(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109 (documented contract)
        """Wait until every submitted trace has been acked (stored or failed for good).

        Args:
            timeout: seconds to wait at most; ``None`` waits without limit.

        Returns:
            True when nothing is in flight any more, False on timeout.
        """
        if self._idle is None or self._pending == 0:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def route(self, trace: Trace) -> tuple[str, ...]:
        """Names of the judges this engine routes ``trace`` to (``judge_routes``, first match by
        app/scenario, else every judge), whether or not the trace turns out evaluable. Replay reports a
        not-evaluable case as ``skipped`` once per judge named here."""
        return tuple(j.name for j in self._router.select(trace))

    @property
    def in_flight(self) -> int:
        """Traces submitted but not yet acked."""
        return self._pending

    # -- workers --------------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        assert self._queue is not None
        assert self._results is not None
        queue, results = self._queue, self._results
        while True:
            item = await queue.get()
            try:
                result = await self._evaluate(item)
            except Exception as e:  # a bug, not an input problem: keep the trace, say why
                log.exception("engine_evaluate_failed", trace_id=item.trace.trace_id)
                result = TraceResult(
                    trace=item.trace,
                    outcome=TraceOutcome.NOT_EVALUABLE,
                    outcome_reason=f"engine_error: {type(e).__name__}",
                    received_at=item.received_at,
                )
            finally:
                queue.task_done()
            await results.put((result, item.ack))

    async def _evaluate(self, item: _Item) -> TraceResult:
        trace = item.trace
        if not self._sampling.decide(trace).sampled:
            self.stats.not_sampled += 1
            return TraceResult(trace=trace, outcome=TraceOutcome.NOT_SAMPLED, received_at=item.received_at)
        reason = not_evaluable_reason(trace)
        judges = self._router.select(trace) if reason in (None, "no_answer") else ()
        # Without an answer only the judges declaring needs_answer=False can run (retrieval judges).
        runnable = judges if reason is None else tuple(j for j in judges if not judge_needs_answer(j))
        if runnable and await self._outranked(trace):  # a late started/partial event: nothing to judge
            self.stats.outranked_unjudged += 1
            return TraceResult(
                trace=trace,
                outcome=TraceOutcome.NOT_EVALUABLE,
                outcome_reason=OUTRANKED,
                received_at=item.received_at,
            )
        final = self._final.get((trace.trace_id, trace.content_hash)) if self._final and runnable else None
        if final:  # a redelivery of judged content: its ok/skipped judgements are final, no judge call
            todo = tuple(j for j in runnable if (j.name, j.version) not in final)
            self.stats.judgements_final += len(runnable) - len(todo)
            if not todo:
                self.stats.already_judged += 1
                return TraceResult(
                    trace=trace,
                    outcome=TraceOutcome.INCOMPLETE if trace.incomplete else TraceOutcome.EVALUATED,
                    received_at=item.received_at,
                )
            runnable = todo
            if reason is None:
                judges = todo
        if reason is not None and not runnable:
            self.stats.not_evaluable += 1
            return TraceResult(
                trace=trace,
                outcome=TraceOutcome.NOT_EVALUABLE,
                outcome_reason=reason,
                received_at=item.received_at,
            )
        if reason is None and trace.session_id and not trace.turns and self._history_turns > 0:
            trace = await self._with_session_turns(trace)
        reused = await self._reused_shadows(trace, runnable) if self._reusable else {}
        to_run = [j for j in runnable if j.name not in reused]
        made = await self._run_judges(to_run, trace)
        if reused:
            by_judge = dict(zip((j.name for j in to_run), made, strict=True))
            ran: Sequence[Judgement] = [reused.get(j.name) or by_judge[j.name] for j in runnable]
        else:
            ran = made
        judgements: list[Judgement]
        if reason is None:
            judgements = list(ran)
        else:  # no answer: the answer-needing judges are recorded as skipped, in route order
            self.stats.answerless += 1
            by_name = {j.judge: j for j in ran}
            judgements = []
            for j in judges:  # judgements already final for this content are left out
                if not judge_needs_answer(j):
                    if j.name in by_name:
                        judgements.append(by_name[j.name])
                elif not final or (j.name, j.version) not in final:
                    judgements.append(_skipped_no_answer(j))
        if reason is None:
            await self._run_shadows(runnable, trace)
        if trace.incomplete:
            self.stats.incomplete += 1
            outcome = TraceOutcome.INCOMPLETE
        else:
            self.stats.evaluated += 1
            outcome = TraceOutcome.EVALUATED
        return TraceResult(
            trace=trace, outcome=outcome, judgements=tuple(judgements), received_at=item.received_at
        )

    async def _outranked(self, trace: Trace) -> bool:
        """True when the store holds a more complete version of ``trace`` (its optional ``stored_version_ranks``
        look-up, ``{trace_id: rank}``, which ``PostgresStore`` and ``MemoryStore`` have: a started/
        partial event, rank 0, or an ``incomplete`` trace, rank 1, after the complete one, rank 2): the store
        would write nothing of it (:meth:`ragpulse.model.Trace.replaces`), so it is not judged either — no
        judge call, no token spent. Only asked for versions that can be outranked (rank below 2, not a replay);
        one primary-key query. Never raises: without an answer the trace is judged (the store still keeps the
        complete version)."""
        if trace.version_rank >= 2 or trace.source is Source.REPLAY:
            return False
        lookup = getattr(self._store, "stored_version_ranks", None)
        if lookup is None:
            return False
        try:
            async with asyncio.timeout(PREFETCH_TIMEOUT_S):
                ranks = await lookup([trace.trace_id])
        except Exception as e:  # an optimisation of what the store keeps anyway
            log.debug("engine_rank_lookup_failed", trace_id=trace.trace_id, error=str(e)[:200])
            return False
        stored = ranks.get(trace.trace_id)
        return stored is not None and stored > trace.version_rank

    async def _with_session_turns(self, trace: Trace) -> Trace:
        """``trace`` with the earlier turns of its session read from the store (``store.session_turns``, the
        last ``history_turns``) when it carries none itself; unchanged when the store has no such look-up, the
        session has no earlier stored trace, or the look-up fails (logged: judged without its history, never
        lost)."""
        lookup = getattr(self._store, "session_turns", None)
        if lookup is None or trace.session_id is None:
            return trace
        try:
            turns = await lookup(
                trace.session_id,
                before=trace.start_time or trace.end_time,
                exclude=trace.trace_id,
                limit=self._history_turns,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.stats.session_lookup_failures += 1
            log.warning("session_turns_failed", trace_id=trace.trace_id, error=str(e)[:300])
            return trace
        return trace.model_copy(update={"turns": tuple(turns)}) if turns else trace

    async def _run_shadows(self, judges: Sequence[Judge], trace: Trace) -> None:
        """Run the shadow configurations of ``judges`` that :func:`shadow_hit` picks for ``trace`` and store
        their judgements apart (``store.write_shadow_judgements``). Never changes the trace's result; a
        failure is logged and counted (``shadow_failures``)."""
        picked = [
            spec.judge
            for j in judges
            if (spec := getattr(j, "shadow", None)) is not None
            and shadow_hit(trace.trace_id, j.name, spec.share)
        ]
        write = getattr(self._store, "write_shadow_judgements", None)
        if not picked or write is None:
            return
        ran = await asyncio.gather(*(self._run_judge(j, trace) for j in picked))
        self.stats.shadow_judgements += len(ran)
        try:
            await write(trace.trace_id, trace.app, ran, trace.content_hash)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.stats.shadow_failures += len(ran)
            log.warning("shadow_write_failed", trace_id=trace.trace_id, error=str(e)[:300])

    async def _run_judges(self, judges: Sequence[Judge], trace: Trace) -> list[Judgement]:
        """The judgements of ``judges`` on ``trace``, in their order: judges that decide without I/O
        (:func:`~ragpulse.protocols.judge_inline`, the heuristic ones) are called one after the other —
        directly on the event loop, or in a worker thread when the trace holds at least
        :data:`OFFLOAD_CHARS` characters of text (so one long trace cannot stall the loop: sources, health
        checks and Kafka heartbeats go on); the rest run concurrently (one task each when there are several),
        with ``trace_id`` bound in structlog's context for what they log while they wait (inline judges name
        the trace themselves)."""
        inline = [i for i, j in enumerate(judges) if self._is_inline(j)]
        made: list[Judgement | None] = [None] * len(judges)
        if inline:
            picked = [judges[i] for i in inline]
            if trace_text_chars(trace) >= OFFLOAD_CHARS:
                self.stats.offloaded_traces += 1
                outs = await asyncio.to_thread(_evaluate_inline, picked, trace)
            else:
                outs = _evaluate_inline(picked, trace)
            for i, (out, started) in zip(inline, outs, strict=True):
                made[i] = (
                    out
                    if isinstance(out, Judgement)
                    else self._judge_raised(judges[i], out, started, trace.trace_id)
                )
        waiting = [i for i, m in enumerate(made) if m is None]
        if not waiting:
            return cast("list[Judgement]", made)
        with structlog.contextvars.bound_contextvars(trace_id=trace.trace_id):
            if len(waiting) == 1:
                made[waiting[0]] = await self._run_judge(judges[waiting[0]], trace)
            else:
                done = await asyncio.gather(*(self._run_judge(judges[i], trace) for i in waiting))
                for i, m in zip(waiting, done, strict=True):
                    made[i] = m
        return [m for m in made if m is not None]

    def _is_inline(self, judge: Judge) -> bool:
        known = self._inline.get(id(judge))
        return judge_inline(judge) if known is None else known

    async def _run_judge(self, judge: Judge, trace: Trace) -> Judgement:
        """Run one judge; a judge that raises (against its contract) becomes an ``error`` judgement."""
        started = time.perf_counter()
        try:
            out = await judge.judge(trace)
            if isinstance(out, Judgement):
                return out
            problem = f"judge_exception: returned {type(out).__name__}, not a Judgement"
        except asyncio.CancelledError:
            raise
        except Exception as e:
            problem = f"judge_exception: {type(e).__name__}: {e}"
        return self._judge_raised(judge, problem, started, trace.trace_id)

    def _judge_raised(self, judge: Judge, problem: str, started: float, trace_id: str) -> Judgement:
        """The ``error`` judgement of a judge that raised or returned something else (counted, logged)."""
        self.stats.judge_exceptions += 1
        log.error("judge_raised", judge=judge.name, trace_id=trace_id, problem=problem[:300])
        return Judgement(
            judge=judge.name,
            version=judge.version,
            backend=judge.backend,
            threshold=judge.threshold,
            status=JudgementStatus.ERROR,
            reason=problem,
            latency_s=time.perf_counter() - started,
        )

    # -- writer ---------------------------------------------------------------------------------------------

    async def _writer(self) -> None:
        assert self._results is not None
        results = self._results
        size = self._settings.batch_size
        interval = self._settings.flush_interval_s
        loop = asyncio.get_running_loop()
        while True:
            batch = [await results.get()]
            self._held += 1
            deadline = loop.time() + interval
            while len(batch) < size:
                try:
                    batch.append(results.get_nowait())
                    self._held += 1
                    continue
                except asyncio.QueueEmpty:
                    pass
                # Nothing else can arrive for this batch (the rest is held by other writers): write now
                # instead of waiting for the timer.
                remaining = deadline - loop.time()
                if self._pending - (self._held - len(batch)) <= len(batch) or remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        batch.append(await results.get())
                        self._held += 1
                except TimeoutError:
                    break
            await self._write_batch(batch)

    async def _write_batch(self, batch: list[tuple[TraceResult, AckCallback | None]]) -> None:
        try:
            report = await self._write_with_retry([r for r, _ in batch])
        except StoreError as e:
            if not e.retriable and len(batch) > 1:
                log.warning("store_batch_rejected_splitting", traces=len(batch), error=str(e)[:300])
                for one in batch:
                    await self._write_batch([one])
                return
            log.error(
                "store_write_failed",
                traces=len(batch),
                trace_ids=[r.trace.trace_id for r, _ in batch[:20]],
                retriable=e.retriable,
                error=str(e)[:300],
            )
            for result, ack in batch:
                self.stats.failed += 1
                await self._ack(ack, result, False, failure=_failure_text(e))
            return
        self.stats.batches += 1
        # A trace twice in one batch (a quick redelivery) is stored once, as the copy the store keeps (the
        # highest version rank, the last of equal rank): export that one. An outranked trace wrote nothing.
        last: dict[str, int] = {}
        for i, (r, _) in enumerate(batch):
            had = last.get(r.trace.trace_id)
            if had is None or r.trace.replaces(batch[had][0].trace):
                last[r.trace.trace_id] = i
        for tid in report.outranked & last.keys():
            self.stats.outranked += 1
            log.info("trace_version_outranked", trace_id=tid, rank=batch[last.pop(tid)][0].trace.version_rank)
        self._export([r for i, (r, _) in enumerate(batch) if last.get(r.trace.trace_id) == i], report)
        for i, (result, ack) in enumerate(batch):
            if last.get(result.trace.trace_id) == i:
                finals = frozenset(
                    (j.judge, j.version) for j in result.judgements if j.status is not JudgementStatus.ERROR
                )
                if finals:
                    self._remember((result.trace.trace_id, result.trace.content_hash), finals)
            self.stats.stored += 1
            await self._ack(ack, result, True)

    async def _write_with_retry(self, results: list[TraceResult]) -> WriteReport:
        attempts = self._settings.store_retries
        backoff = self._settings.store_backoff_s
        cap = OUTAGE_BACKOFF_S if self._redelivering else MAX_BACKOFF_S
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._store.write_results(results)
            except StoreError as e:
                if not e.retriable or (attempt >= attempts and not self._redelivering):
                    raise
                err = e
            except Exception as e:  # a store outside the contract: not retriable
                raise StoreError(f"store raised {type(e).__name__}: {e}", retriable=False) from e
            self.stats.store_retries += 1
            delay = min(backoff * 2 ** min(attempt - 1, 30), cap) * random.uniform(0.8, 1.0)
            log.warning(
                "store_write_retry",
                attempt=attempt,
                attempts=None if self._redelivering else attempts,
                delay_s=round(delay, 3),
                traces=len(results),
                error=str(err)[:300],
            )
            await asyncio.sleep(delay)

    def _export(self, results: Sequence[TraceResult], report: WriteReport) -> None:
        """Hand the stored ``results`` to the exporters with only the judgements ``report`` says changed, in one
        ``on_stored_many`` call when an exporter has it (else ``on_stored`` per trace); count the traces
        first inserted as not sampled / errored, and hand them to exporters that have ``on_traces_inserted``
        (the app's own token usage, counted once per trace)."""
        items: list[tuple[TraceResult, list[Judgement]]] = []
        inserted_results: list[TraceResult] = []
        for result in results:
            tid = result.trace.trace_id
            changed = [j for j in result.judgements if (tid, j.judge, j.version) in report.changed]
            inserted = tid in report.trace_inserted
            if not changed and not inserted:
                continue  # a redelivery that changed nothing: never count twice
            if inserted:
                inserted_results.append(result)
            if inserted and result.outcome is TraceOutcome.NOT_SAMPLED:
                telemetry.TRACES_NOT_SAMPLED.add(1)
            if inserted and result.outcome_reason == TRACE_ERROR:
                telemetry.TRACES_ERRORED.add(
                    1, {"source": result.trace.source.value, "app": telemetry.app_label(result.trace.app)}
                )
            items.append((result, changed))
        if not items:
            return
        for exporter in self._exporters:
            on_inserted = getattr(exporter, "on_traces_inserted", None)
            if on_inserted is not None and inserted_results:
                try:
                    on_inserted(inserted_results)
                except Exception:
                    log.exception(
                        "exporter_failed", exporter=type(exporter).__name__, traces=len(inserted_results)
                    )
        # Judgement metrics and the evaluation lag are recorded by the exporters (ragpulse.export).
        for exporter in self._exporters:
            many = getattr(exporter, "on_stored_many", None)
            if many is not None:
                try:
                    many(items)
                except Exception:
                    log.exception("exporter_failed", exporter=type(exporter).__name__, traces=len(items))
                continue
            for result, changed in items:
                try:
                    exporter.on_stored(result, changed)
                except Exception:
                    log.exception(
                        "exporter_failed", exporter=type(exporter).__name__, trace_id=result.trace.trace_id
                    )

    async def _ack(
        self, ack: AckCallback | None, result: TraceResult, ok: bool, *, failure: str | None = None
    ) -> None:
        token = STORE_FAILURE.set(failure)  # why the store refused it, for the source's dead letter
        try:
            if ack is not None:
                await ack(result, ok)
        except Exception:
            log.exception("ack_failed", trace_id=result.trace.trace_id, ok=ok)
        finally:
            STORE_FAILURE.reset(token)
            self._held -= 1
            self._one_done()

    def _one_done(self) -> None:
        self._pending -= 1
        if self._pending <= 0 and self._idle is not None:
            self._pending = 0
            self._idle.set()

    def _stats_dict(self) -> dict[str, int]:
        return dict(vars(self.stats))
