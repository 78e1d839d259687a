"""Stored runs: list them, read one's report, compare two, and re-judge stored traces.

Every function takes an open store (``RunStore``/``Store`` protocol) and returns typed values; nothing prints.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from ragpulse.config import Settings
from ragpulse.engine import REUSED_FROM_SHADOW, Engine
from ragpulse.errors import BadRequest, ConfigError, NotFoundError
from ragpulse.judges.selection import check_judges_named, open_judges
from ragpulse.model import Judgement, JudgementStatus, RunRecord, RunStatus, Trace, TraceResult
from ragpulse.protocols import Exporter, FinalJudgementLookup, RunStore, ShadowReuseLookup, WriteReport
from ragpulse.runs.compare import DEFAULT_SCORE_DROP, FlipKind, FlippedCase, RunComparison, compare_stored
from ragpulse.runs.report_model import Counts, RunReport
from ragpulse.runs.reports import ReportBuilder, stored_case

__all__ = [
    "RejudgeSummary",
    "RunSummary",
    "compare_runs",
    "get_run",
    "list_runs",
    "parse_since",
    "rejudge",
    "report_of",
    "run_from_traces",
    "run_report",
]

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """``24h``/``30m``/``7d``/``90s``/``2w`` before ``now``, or an ISO-8601 time (UTC when no zone).

    Raises:
        ConfigError: neither a duration nor an ISO time.
    """
    m = _DURATION_RE.match(value)
    if m:
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
        except (OverflowError, ValueError) as e:  # beyond timedelta, or before year 1
            raise ConfigError(f"--since {value[:100]!r}: too long a duration") from e
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError as e:
        raise ConfigError(
            f"--since {value[:100]!r}: expected a duration like 24h, 30m, 7d or an ISO time"
        ) from e
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class RunSummary(RunRecord):
    """A run as listed: its record (without the report) plus the report's headline numbers (``None`` while
    the run has no report)."""

    cases_total: int | None = None
    pass_rate: float | None = None
    coverage: float | None = None

    @classmethod
    def of(cls, run: RunRecord) -> RunSummary:
        """The summary of ``run``."""
        rep = run.report or {}
        return cls(
            **{**run.model_dump(), "report": None},
            cases_total=rep.get("cases_total"),
            pass_rate=rep.get("pass_rate"),
            coverage=rep.get("coverage"),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``runs list --json``): every run field but ``report``."""
        return self.model_dump(mode="json", exclude={"report"})


async def list_runs(store: RunStore, limit: int = 50) -> list[RunSummary]:
    """The ``limit`` most recently started runs, newest first.

    Raises:
        StoreError: the store failed.
    """
    return [RunSummary.of(r) for r in await store.list_runs(limit)]


async def get_run(store: RunStore, run_id: str) -> RunRecord:
    """Run ``run_id``: its stored record, or — for a run id that only arrived on traces (``runId`` on Kafka
    events, ``ragpulse.run.id`` on OTLP spans, no ``replay`` created it) — one made from those traces
    (:func:`run_from_traces`).

    Raises:
        NotFoundError: no run record and no trace with that run id.
        StoreError: the store failed.
    """
    run = await store.get_run(run_id)
    if run is None:
        run = run_from_traces(run_id, await store.get_run_results(run_id))
    if run is None:
        raise NotFoundError(f"no run {run_id[:100]!r}")
    return run


def run_from_traces(run_id: str, results: Sequence[TraceResult]) -> RunRecord | None:
    """The run record of a run id known only from its traces: test set from the traces' ``test_set``
    attribute (``-`` when none says), started/finished at the first/last trace received, status ``completed``,
    judges = ``{judge: version}`` of the judgements (the newest version per judge). ``None`` without traces."""
    if not results:
        return None
    names = {r.trace.attributes.get("test_set") for r in results} - {None}
    judges: dict[str, str] = {}
    for r in sorted(results, key=lambda r: r.received_at):
        for j in r.judgements:
            judges[j.judge] = j.version
    return RunRecord(
        run_id=run_id,
        test_set=str(names.pop()) if len(names) == 1 else "-",
        started_at=min(r.received_at for r in results),
        finished_at=max(r.received_at for r in results),
        status=RunStatus.COMPLETED,
        judges=judges,
    )


async def report_of(store: RunStore, run: RunRecord) -> RunReport:
    """The run's stored report; for a run without a complete one (still running, failed, or traces sent with
    a run id through Kafka/OTLP) a report computed from the run's stored results, read through the store's
    cursor (the run's status, the failure's ``error`` when it failed, and ``wall_seconds`` the time it ran:
    ``started_at`` → ``finished_at``, or → ``heartbeat_at`` while it has no finish time (interrupted, running),
    said by ``wall_until``; 0 when neither is known; its case rows stay in the store, ``case_source="store"``).

    Raises:
        StoreError: the store failed.
    """
    if run.report and "cases" in run.report:
        return RunReport.from_json(run.report)
    order = run.settings.get("judge_order")
    names = [n for n in order if n in run.judges] if isinstance(order, list) else []
    names += [n for n in run.judges if n not in names]  # in the configured order (runs from before: stored)
    report = await _computed(store, run.run_id, run.test_set, names, run.status)
    update: dict[str, object] = {}
    error = (run.report or {}).get("error")
    if isinstance(error, str):
        update["error"] = error
    end, until = (
        (run.finished_at, "finished") if run.finished_at is not None else (run.heartbeat_at, "last heartbeat")
    )
    if end is not None:
        update["wall_seconds"] = round(max(0.0, (end - run.started_at).total_seconds()), 3)
        update["wall_until"] = until
    return report.model_copy(update=update) if update else report


async def _computed(
    store: RunStore, run_id: str, test_set: str | None, judges: list[str], status: RunStatus | None
) -> RunReport:
    """The report of run ``run_id`` folded from its stored results (:class:`ReportBuilder`, rows not kept);
    ``test_set`` ``None``: the results' ``test_set`` attribute, else ``-``."""
    b = ReportBuilder(judges, keep_rows=False)
    async with contextlib.aclosing(store.iter_run_results(run_id)) as results:
        async for r in results:
            if test_set is None:
                name = r.trace.attributes.get("test_set")
                test_set = name if isinstance(name, str) else None
            b.add(stored_case(r, judges))
    return b.report(run_id=run_id, test_set=test_set or "-", wall_seconds=0.0, status=status)


async def run_report(store: RunStore, run_id: str) -> RunReport:
    """The report of run ``run_id`` (see :func:`report_of`).

    A run id that only arrived with traces (``runId`` on Kafka events or ``ragpulse.run.id`` on OTLP spans,
    no run record) is reported from those traces: test set from their ``test_set`` attribute (else ``-``),
    status ``completed`` or ``completed_with_errors`` from the judgements.

    Raises:
        NotFoundError: no run record and no trace with that run id.
        StoreError: the store failed.
    """
    run = await store.get_run(run_id)
    if run is not None:
        return await report_of(store, run)
    report = await _computed(store, run_id, None, [], None)
    if report.cases_total == 0:
        raise NotFoundError(f"no run {run_id[:100]!r}")
    return report


async def compare_runs(
    store: RunStore,
    run_a: str,
    run_b: str,
    flipped: Callable[[FlipKind, FlippedCase], None] | None = None,
    *,
    cursor: bool = True,
    score_drop: float = DEFAULT_SCORE_DROP,
) -> RunComparison:
    """Compare run ``run_a`` (baseline) with run ``run_b`` (candidate), their case rows read from the store a
    page at a time (:func:`~ragpulse.runs.compare.compare_stored`: memory does not grow with the runs; it
    uses two pooled connections at once unless not ``cursor``). With ``flipped`` (e.g. a
    :class:`~ragpulse.runs.compare.FlippedSpool`) the flipped cases go there and the result's lists stay
    empty. A case that failed in both runs is listed in ``score_drops`` when a judge's score dropped by
    ``score_drop`` (0 < x ≤ 1) or more. Runs that ran different judges are compared on the judges both ran
    (``judges_compared``; the others in ``judges_only_a`` / ``judges_only_b`` and ``warning``).

    Raises:
        BadRequest: ``score_drop`` is not in (0, 1].
        NotFoundError: either run does not exist.
        StoreError: the store failed.
    """
    if not 0 < score_drop <= 1:
        raise BadRequest(f"score drop must be > 0 and ≤ 1 (a score difference), not {score_drop:g}")
    a = await run_report(store, run_a)
    b = await run_report(store, run_b)
    return await compare_stored(store, a, b, flipped, cursor=cursor, score_drop=score_drop)


class RejudgeSummary(BaseModel):
    """What a re-judge did: traces submitted, results stored / failed for good, stored judgements by outcome,
    error judgements not stored because the trace already has a scored judgement by that judge
    (``kept_good``), and the judge versions used (judge → version).

    ``already_judged``: traces per judge that this judge version had already judged (a stored ``ok``/``skipped``
    judgement of the same content): not judged again, nothing spent (unless ``force``).

    ``reused``: judgements per judge copied from stored shadow judgements of the same version and content
    (a promoted shadow; no model call); ``judged``: judgements per judge the judges made (judge called)."""

    traces: int = 0
    stored: int = 0
    failed: int = 0
    kept_good: int = 0
    counts: Counts = Field(default_factory=Counts)
    judges: dict[str, str] = Field(default_factory=dict)
    reused: dict[str, int] = Field(default_factory=dict)
    judged: dict[str, int] = Field(default_factory=dict)
    already_judged: dict[str, int] = Field(default_factory=dict)

    @property
    def all_errors(self) -> bool:
        """True when judges were asked and none answered (errors, stored or not, and no scored judgement): the
        judge model is down or rejects every call."""
        c = self.counts
        return c.error + self.kept_good > 0 and c.pass_ == 0 and c.fail == 0

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``rejudge --json``)."""
        return self.model_dump(mode="json", by_alias=True)


async def rejudge(
    settings: Settings,
    store: RunStore,
    *,
    app: str | None,
    since: datetime,
    judge_names: Sequence[str] | None = None,
    limit: int | None = None,
    exporters: Sequence[Exporter] = (),
    force: bool = False,
) -> RejudgeSummary:
    """Re-evaluate stored traces of ``app`` (any when ``None``) received since ``since`` with the current
    judge versions (at most ``limit`` traces).

    New judgements are stored next to the old ones (keyed by version). A judge whose current version already
    has a final (``ok``/``skipped``) judgement of the trace's content is not run: nothing is spent, and the
    summary counts it in ``already_judged`` (the engine's final-judgement lookup, one query per batch of
    traces); ``force`` judges them again. A judge whose version has stored shadow judgements (its shadow was
    promoted) reuses the ``ok`` ones of the same trace content instead of calling the model (:func:`ragpulse.engine.reused_shadow`;
    counted in ``reused``). An ``error`` judgement never replaces or shadows a good one: when the trace already has a
    scored (``ok``) judgement by that judge, of any version, the error is not stored (counted in
    ``kept_good``), so the judge model being down during a backfill leaves the stored scores as they were.

    Raises:
        BadRequest: ``judge_names`` is empty (:data:`~ragpulse.judges.selection.NO_JUDGES`).
        ConfigError: unknown judge or bad judge configuration.
        StoreError: the store could not be read.
    """
    check_judges_named(judge_names)
    counts = {"pass": 0, "fail": 0, "error": 0, "abstained": 0, "skipped": 0}
    tally = {"traces": 0, "stored": 0, "failed": 0}
    reused: dict[str, int] = {}
    judged: dict[str, int] = {}

    async def ack(result: TraceResult, ok: bool) -> None:
        tally["stored" if ok else "failed"] += 1
        for j in result.judgements:
            if (result.trace.trace_id, j.judge) in keep_good.dropped:
                continue  # an error not stored (a scored judgement stays): never reported as a result
            counts[j.outcome] += 1
            made = reused if (j.flags.model_extra or {}).get("reused_from") == REUSED_FROM_SHADOW else judged
            made[j.judge] = made.get(j.judge, 0) + 1

    engine_settings = settings.engine.model_copy(update={"sampling_rate": 1.0})
    keep_good = _KeepGoodJudgements(store)
    already: dict[str, int] = {}
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, judge_names, ledger=store)
        engine = await stack.enter_async_context(
            Engine(judges, keep_good, engine_settings, exporters, routes=settings.judge.routes)
        )
        versions = {(n, j.version) for n, j in judges.items()}
        batch: list[Trace] = []

        async def submit_batch() -> None:
            if not force and isinstance(store, FinalJudgementLookup):
                finals = await store.final_judgements([(t.trace_id, t.content_hash) for t in batch])
                for pairs in finals.values():
                    for name, _ in pairs & versions:
                        already[name] = already.get(name, 0) + 1
                await engine.prefetch(batch)
            for t in batch:
                await engine.submit(t, ack)
                tally["traces"] += 1
            batch.clear()

        async for t in store.traces_for_rejudge(app, since, limit):
            batch.append(t)
            if len(batch) >= _REJUDGE_BATCH:
                await submit_batch()
        await submit_batch()
        await engine.drain(None)
    return RejudgeSummary(
        **tally,
        kept_good=keep_good.kept,
        counts=Counts(**counts),
        judges={n: j.version for n, j in judges.items()},
        reused=reused,
        judged=judged,
        already_judged=already,
    )


#: Traces looked up together for their final judgements before ``rejudge`` submits them.
_REJUDGE_BATCH = 200


class _KeepGoodJudgements:
    """The result store as ``rejudge`` writes to it: an ``error`` judgement for a (trace, judge) that already
    has a scored judgement (any version) is dropped from the batch, so it can neither replace it (same
    version) nor shadow it as the newest (another version). ``kept`` counts the dropped errors."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self.kept = 0
        #: ``(trace_id, judge)`` of the error judgements dropped.
        self.dropped: set[tuple[str, str]] = set()

    async def final_judgements(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], frozenset[tuple[str, str]]]:
        """The store's final judgements (the engine skips the judges whose version already judged the
        content); none when it cannot say."""
        if not isinstance(self._store, FinalJudgementLookup):
            return {}
        return await self._store.final_judgements(keys)

    async def shadow_versions(self, pairs: Sequence[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """The store's (a promoted judge's stored shadow judgements are reused); none when it cannot say."""
        if not isinstance(self._store, ShadowReuseLookup):
            return frozenset()
        return await self._store.shadow_versions(pairs)

    async def reusable_shadows(
        self, keys: Sequence[tuple[str, str]], pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[tuple[str, str], Judgement]]:
        """The store's reusable shadow judgements (see :class:`~ragpulse.protocols.ShadowReuseLookup`)."""
        if not isinstance(self._store, ShadowReuseLookup):
            return {}
        return await self._store.reusable_shadows(keys, pairs)

    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport:
        has_error = [
            r.trace.trace_id for r in results if any(j.status is JudgementStatus.ERROR for j in r.judgements)
        ]
        good = await self._store.scored_judges(has_error) if has_error else set()
        batch: list[TraceResult] = []
        for r in results:
            keep = tuple(
                j
                for j in r.judgements
                if not (j.status is JudgementStatus.ERROR and (r.trace.trace_id, j.judge) in good)
            )
            self.kept += len(r.judgements) - len(keep)
            self.dropped.update((r.trace.trace_id, j.judge) for j in r.judgements if j not in keep)
            batch.append(r if len(keep) == len(r.judgements) else r.model_copy(update={"judgements": keep}))
        return await self._store.write_results(batch)
