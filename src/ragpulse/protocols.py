"""The seams between layers, as :pep:`544` protocols.

``ingest`` feeds the engine; the engine calls a :class:`Judge` per trace, writes :class:`TraceResult` batches
through a :class:`ResultStore`, and hands what the store really inserted or changed to :class:`Exporter` s.
``judges``, ``store`` and ``export`` import only :mod:`ragpulse.model` and this module, never each other.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from ragpulse.model import (
    Backend,
    CalibrationProfile,
    Judgement,
    RunRecord,
    RunStatus,
    TestCase,
    TestSet,
    Trace,
    TraceResult,
)

__all__ = [
    "STORE_FAILURE",
    "AckCallback",
    "CaseSource",
    "DeadLetterSink",
    "Exporter",
    "FinalJudgementLookup",
    "Judge",
    "PendingStore",
    "ResultStore",
    "RunStore",
    "ShadowReuseLookup",
    "Source",
    "Store",
    "TokenLedger",
    "TraceSink",
    "WriteReport",
    "judge_inline",
    "judge_needs_answer",
    "not_stored_reason",
]


@runtime_checkable
class Judge(Protocol):
    """A feedback function: one trace in, one :class:`~ragpulse.model.Judgement` out.

    Contract: ``judge`` never raises for bad input or an unusable model reply; it returns a judgement with
    status ``skipped`` or ``error`` and a reason. It may raise ``asyncio.CancelledError`` only.

    Attributes:
        name: registered judge name (``relevancy``, ``faithfulness``, …), used in the store and metrics.
        version: stable hash of prompt template, mode, threshold, backend and model.
        backend: ``llm`` or ``heuristic``.
        threshold: 0–1; ``passed = score >= threshold``.

    Optional attribute (not part of the structural check, so judges without it still match):

        needs_answer: ``bool``, default ``True``. ``False`` declares that the judge can decide from the
            question, the retrieved chunks and the trace's references alone (the retrieval judges
            ``context_precision``, ``context_recall``, ``context_relevance``). The engine then runs it on a
            trace that has a question but no answer, and records the answer-needing judges of that trace as
            ``skipped`` with reason ``no_answer``. Read it with :func:`judge_needs_answer`.
        inline: ``bool``, default ``False``. ``True`` declares that ``judge`` never waits for I/O (the heuristic
            judges) and that the synchronous ``evaluate(trace) -> Judgement`` gives the same judgement; the
            engine then calls ``evaluate`` directly instead of scheduling a task per judge. Read it with
            :func:`judge_inline`.
    """

    name: str
    version: str
    backend: Backend
    threshold: float

    async def judge(self, trace: Trace) -> Judgement: ...


def judge_needs_answer(judge: object) -> bool:
    """The judge's optional ``needs_answer`` attribute (see :class:`Judge`): ``False`` only when the judge
    sets it to ``False``; a judge without the attribute needs an answer."""
    return getattr(judge, "needs_answer", True) is not False


def judge_inline(judge: object) -> bool:
    """The judge's optional ``inline`` attribute (see :class:`Judge`): ``True`` only when the judge sets it
    to ``True`` and has a callable ``evaluate``."""
    return getattr(judge, "inline", False) is True and callable(getattr(judge, "evaluate", None))


@dataclass(frozen=True)
class WriteReport:
    """What a store write did, per trace.

    Attributes:
        changed: ``(trace_id, judge, version)`` keys of judgements that were inserted or whose stored values
            changed; unchanged redeliveries are absent (exporters count only these).
        trace_inserted: trace ids whose trace row was new.
        outranked: trace ids not written because the stored version ranks higher
            (:attr:`~ragpulse.model.Trace.version_rank`: a started/partial event after the complete trace).
    """

    changed: frozenset[tuple[str, str, str]] = field(default_factory=frozenset)
    trace_inserted: frozenset[str] = field(default_factory=frozenset)
    outranked: frozenset[str] = field(default_factory=frozenset)


class ResultStore(Protocol):
    """Persists trace results. Writes are idempotent upserts keyed by (trace id, judge, judge version).

    ``write_results`` raises :class:`~ragpulse.errors.StoreError` (``retriable`` set) on failure and writes
    nothing of the batch in that case (one transaction).
    """

    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport: ...


class PendingStore(Protocol):
    """Durable holding area for inputs a source accepted but whose result is not stored yet (OTLP traces), so
    an input answered "accepted" survives a restart. Rows are grouped by ``(source, key)`` (OTLP: the trace
    id); several payloads may share a key (spans of one trace from several requests). Every method raises
    :class:`~ragpulse.errors.StoreError` on failure.
    """

    async def add_pending(self, source: str, items: Sequence[tuple[str, bytes]]) -> None:
        """Keep ``(key, payload)`` items, all or none (one transaction)."""
        ...

    async def load_pending(self, source: str) -> list[tuple[str, bytes]]:
        """Every key of ``source`` with its payloads concatenated in arrival order, oldest key first."""
        ...

    async def remove_pending(self, source: str, keys: Sequence[str]) -> None:
        """Forget the payloads of ``keys`` (their results are stored)."""
        ...

    async def dead_letter_pending(self, source: str, key: str, reason: str) -> None:
        """Move the payloads of ``key`` into one dead letter with ``reason`` (they can never be stored)."""
        ...


class CaseSource(Protocol):
    """A test set as replay reads it: name, description, how many cases, their hash
    (:func:`~ragpulse.model.cases_hash`) and the cases in order — read as often as needed, one at a time.
    :class:`~ragpulse.model.TestSet` (in memory) and the streamed file of
    :func:`ragpulse.runs.testset_files.open_test_set` are ones."""

    @property
    def name(self) -> str:
        """The test set's name."""
        ...

    @property
    def knowledge_base(self) -> str | None:
        """The knowledge base the set is about, if any."""
        ...

    @property
    def description(self) -> str | None:
        """A description, if any."""
        ...

    @property
    def case_count(self) -> int:
        """How many cases."""
        ...

    def content_hash(self) -> str:
        """``sha256:<hex>`` of the cases (:func:`~ragpulse.model.cases_hash`)."""
        ...

    def iter_cases(self) -> Iterator[TestCase]:
        """The cases in order (a new pass each call)."""
        ...


class RunStore(ResultStore, Protocol):
    """What replay and the run services need: results, test sets and runs (``PostgresStore``, and the
    in-memory ``ragpulse.testing.MemoryStore`` of unit tests)."""

    async def get_run_results(self, run_id: str) -> list[TraceResult]:
        """Traces linked to run ``run_id``, each with the judgements that run produced, one per judge name
        (pinned while the run ran: a later rejudge never changes a finished run's rows)."""
        ...

    async def get_trace(self, trace_id: str) -> TraceResult | None:
        """One trace with every judgement (all versions), or ``None``."""
        ...

    async def run_results_page(
        self,
        run_id: str,
        *,
        after: tuple[int, str] | None = None,
        limit: int = 200,
        offset: int = 0,
        failing: bool = False,
        not_judged: bool = False,
    ) -> list[tuple[tuple[int, str], TraceResult]]:
        """One page of the run's results in run order (test-set position, then trace id) as ``(key, result)``:
        up to ``limit`` after key ``after``, skipping ``offset`` more; ``failing``: only cases whose verdict is
        ``fail``, ``not_judged``: only those not judged (``ragpulse.runs.report_model.CaseVerdict``). Latest judgement per judge; the trace may hold only its ids, routing fields and ``test_set``
        attribute."""
        ...

    async def run_results_by_case(self, run_id: str, case_ids: Sequence[str]) -> list[TraceResult]:
        """The run's results whose case id (the trace's test case id, else its trace id) is one of
        ``case_ids``, in run order; traces as in :meth:`run_results_page`."""
        ...

    async def run_case_keys(self, run_id: str, case_ids: Sequence[str]) -> list[tuple[str, str]]:
        """``(case id, trace id)`` of the results :meth:`run_results_by_case` gives, in the same order."""
        ...

    async def count_run_results(self, run_id: str) -> int:
        """How many traces are linked to run ``run_id`` (stored with their judgements)."""
        ...

    def iter_run_results(self, run_id: str, *, chunk: int = 1000) -> AsyncGenerator[TraceResult, None]:
        """Every result of the run in run order, ``chunk`` at a time (bounded memory); traces as in
        :meth:`run_results_page`."""
        ...

    def traces_for_rejudge(self, app: str | None, since: datetime, limit: int | None) -> AsyncIterator[Trace]:
        """Stored traces to re-evaluate (of ``app``, received since ``since``, at most ``limit``)."""
        ...

    async def upsert_test_set(self, ts: CaseSource) -> None:
        """Insert or replace test set ``ts.name`` and its cases (read from ``ts`` in chunks)."""
        ...

    async def link_run_cases(self, run_id: str) -> int:
        """Link the stored traces of running run ``run_id`` whose case is in the run's stored test set to the
        run, as a result write does (for traces written before their test set was stored); returns how many
        links were added."""
        ...

    async def get_test_set(self, name: str) -> TestSet | None:
        """The stored test set ``name`` with its cases, or ``None``."""
        ...

    async def test_set_head(self, name: str) -> tuple[str | None, str | None, int] | None:
        """``(knowledge_base, description, case count)`` of stored test set ``name``, or ``None``."""
        ...

    def iter_test_cases(self, name: str, *, chunk: int = 1000) -> AsyncGenerator[TestCase, None]:
        """The cases of stored test set ``name`` in order, ``chunk`` at a time (bounded memory)."""
        ...

    async def test_set_hash(self, name: str) -> str | None:
        """:func:`~ragpulse.model.cases_hash` of stored test set ``name``'s cases, or ``None`` when absent."""
        ...

    async def create_run(self, run: RunRecord, *, replace: bool = False) -> None:
        """Insert a run owned by this process (re-using an id resets it to status ``running``; ``replace``
        also drops the old run's trace links)."""
        ...

    async def heartbeat_run(self, run_id: str) -> bool:
        """Say that the running run's process is alive; ``False`` when the run is not ``running``."""
        ...

    async def database_identity(self) -> str:
        """An id equal for every connection to the same database and different between databases."""
        ...

    async def scored_judges(self, trace_ids: Sequence[str]) -> set[tuple[str, str]]:
        """``(trace_id, judge)`` pairs among ``trace_ids`` with a scored (``ok``) judgement of any version."""
        ...

    async def finish_run(self, run_id: str, status: RunStatus, report: dict[str, Any]) -> None:
        """Set a run's final status and its report (JSON form)."""
        ...

    async def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The most recently started runs, newest first."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Run ``run_id`` or ``None``."""
        ...

    async def latest_calibration_profile(self, judge: str, judge_version: str) -> CalibrationProfile | None:
        """The newest calibration profile of exactly ``judge`` at ``judge_version``, or ``None``."""
        ...


class Store(RunStore, Protocol):
    """The whole result store the CLI and the HTTP API open (:class:`~ragpulse.store.PostgresStore`)."""

    async def ping(self) -> bool:
        """True when the database answers."""
        ...

    async def info(self, *, exact_below: int | None = 1_000_000) -> dict[str, Any]:
        """Server and schema versions, size and row counts (tables estimated above ``exact_below`` rows give
        the planner's estimate, named in ``estimated``; ``None``: every count exact)."""
        ...

    async def prune(self, older_than: timedelta) -> int:
        """Delete traces (and dead letters) older than ``older_than``; the number of traces deleted."""
        ...


@runtime_checkable
class FinalJudgementLookup(Protocol):
    """Optional store capability (``PostgresStore`` has it): which judgements are final for a content.

    ``final_judgements(keys)`` maps ``(trace_id, content_hash)`` pairs to the ``(judge, version)`` pairs of
    their stored ``ok``/``skipped`` judgements, in one query (see :func:`ragpulse.model.judged_content_hash`).
    """

    async def final_judgements(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], frozenset[tuple[str, str]]]: ...


@runtime_checkable
class ShadowReuseLookup(Protocol):
    """Optional store capability (``PostgresStore`` has it): stored shadow judgements a promoted judge reuses.

    ``shadow_versions(pairs)``: which ``(judge, version)`` pairs have at least one reusable (``ok``, with a
    content hash) shadow judgement. ``reusable_shadows(keys, pairs)``: for ``(trace_id, content_hash)`` keys,
    ``{key: {(judge, version): judgement}}`` of those shadow judgements (keys without any are absent), each
    judgement as stored plus ``flags.judged_at`` (ISO time the shadow judged it), in one query.
    """

    async def shadow_versions(self, pairs: Sequence[tuple[str, str]]) -> frozenset[tuple[str, str]]: ...

    async def reusable_shadows(
        self, keys: Sequence[tuple[str, str]], pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[tuple[str, str], Judgement]]: ...


class Exporter(Protocol):
    """Receives judgements that the store inserted or changed. Must not block or raise.

    ``force_flush`` sends what it buffered (``True`` when all of it went out within ``timeout_s`` seconds);
    ``shutdown`` flushes and stops it (idempotent). Neither raises; an exporter that buffers nothing returns
    ``True`` / does nothing.

    Optional method (not part of the structural check): ``on_stored_many(items)`` with the
    ``(result, changed)`` pairs of one store write; when present the engine calls it once per batch instead of
    ``on_stored`` per trace (the metrics exporter sums its counters per batch). ``on_traces_inserted(results)``
    with the results whose trace row the write inserted (never a redelivery's): trace-level facts counted once,
    such as the app's own token usage.
    """

    def on_stored(self, result: TraceResult, changed: Sequence[Judgement]) -> None: ...

    def force_flush(self, timeout_s: float = 5.0) -> bool: ...

    def shutdown(self, timeout_s: float = 5.0) -> None: ...


#: Called by the engine once a trace's result is stored (``ok=True``) or failed for good (``ok=False``); while
#: an ``ok=False`` ack runs, :data:`STORE_FAILURE` holds why (:func:`not_stored_reason`).
AckCallback = Callable[[TraceResult, bool], Awaitable[None]]

#: While the engine awaits an ``ack(result, False)``: the store error's message (a
#: :class:`~ragpulse.errors.StoreError` text: the error type and PostgreSQL's primary message, never row values
#: or connection details), else ``None``. A context variable so every source's ack reads it without a new
#: callback signature.
STORE_FAILURE: ContextVar[str | None] = ContextVar("ragpulse_store_failure", default=None)


def not_stored_reason() -> str:
    """The dead-letter reason of a trace whose result the store refused: ``not_stored: <store error>`` inside a
    failed ack (:data:`STORE_FAILURE`), else ``not_stored: the engine could not store the result``."""
    return f"not_stored: {STORE_FAILURE.get() or 'the engine could not store the result'}"


@runtime_checkable
class TokenLedger(Protocol):
    """The daily judge-model token budget shared by every process on one database (the store).

    ``day`` is the UTC date (``YYYY-MM-DD``); totals are prompt + completion tokens of ``judge`` that day.
    """

    async def reserve_tokens(self, judge: str, day: str, tokens: int, budget: int | None) -> int | None:
        """Add ``tokens`` unless the day's total already reached ``budget`` (``None``: no budget); returns the
        new total, or ``None`` when refused (nothing added). Atomic across processes."""
        ...

    async def charge_tokens(self, judge: str, day: str, tokens: int) -> int:
        """Add ``tokens`` (negative to give back a reservation); returns the new total."""
        ...


class TraceSink(Protocol):
    """Where sources put traces: the engine.

    ``submit`` waits while the engine's bounded queue is full (back-pressure) and returns once the trace is
    queued. ``ack`` is awaited after the trace's result is stored (``ok=True``) or failed for good
    (``ok=False``); Kafka commits offsets from it.

    Optional (not part of the structural check): ``async prefetch(traces)`` — told about a batch of traces
    about to be submitted (a Kafka poll batch), so that the engine looks up their final judgements in one store
    query and a redelivery of identical content is not judged again (:class:`ragpulse.engine.Engine`).
    """

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None: ...

    def has_room(self) -> bool:
        """True while the queue has free slots (sources pause/resume partitions on it)."""
        ...


class DeadLetterSink(Protocol):
    """Where sources keep what they could not turn into a trace (the store's ``dead_letters`` table).

    ``source`` is ``kafka``/``otlp``; ``reason`` one line; ``payload`` the raw input (``str`` is stored UTF-8);
    ``meta`` JSON-able details (topic, partition, offset, transport…). May raise ``StoreError``; sources log
    that and go on (Kafka also has its dead-letter topic).
    """

    async def write_dead_letter(
        self, source: str, reason: str, payload: bytes | str, meta: dict[str, Any] | None = None
    ) -> None: ...


class Source(Protocol):
    """A long-running input of ``ragpulse serve`` (the Kafka consumer, the OTLP receivers).

    ``start`` connects or binds (raises ``IngestError``/``ConfigError`` when it cannot); ``ready`` is what
    ``/readyz`` reports (listening / connected and running); ``wait_failed`` returns the error once the source
    died on its own (it never returns while the source is healthy); ``aclose`` stops it gracefully (drains what
    it holds within its deadline) and is idempotent.
    """

    async def start(self) -> None: ...

    @property
    def ready(self) -> bool: ...

    async def wait_failed(self) -> BaseException: ...

    async def aclose(self) -> None: ...
