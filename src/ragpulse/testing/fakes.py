"""In-memory stand-ins for fast unit tests: a result store and a scripted judge.

``MemoryStore`` keeps the store contract that the engine and replay rely on (idempotent upserts keyed by
(trace id, judge, version), ``WriteReport.changed`` holding only inserted/changed judgements, runs) and can
inject failures. ``ScriptedJudge`` returns scores from a function or mapping and can raise or sleep.
Integration tests use the real PostgreSQL store instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ragpulse.errors import StoreError
from ragpulse.judges.frame import compute_version, error, ok, skipped
from ragpulse.model import (
    ABSTAINED,
    NO_ANSWER,
    Backend,
    CalibrationProfile,
    Judgement,
    JudgementStatus,
    RunRecord,
    RunStatus,
    TestCase,
    TestSet,
    Trace,
    TraceResult,
)
from ragpulse.owner import OWNER_HOST
from ragpulse.protocols import CaseSource, WriteReport

__all__ = ["MemoryExporter", "MemoryStore", "ScriptedJudge"]

_VOLATILE = ("latency_s",)


def _comparable(j: Judgement) -> dict[str, Any]:
    return j.model_dump(exclude=set(_VOLATILE))


def _verdict(r: TraceResult) -> str:
    """The report's verdict of a case (``runs.report_model.CaseRow.verdict``): ``pass``, ``fail`` or
    ``not_judged``."""
    scored = [j for j in r.judgements if j.status is JudgementStatus.OK]
    errored = any(j.status is JudgementStatus.ERROR for j in r.judgements)
    skips = {j.reason_code for j in r.judgements if j.status is JudgementStatus.SKIPPED}
    if bool(scored) and all(j.passed for j in scored) and not errored and not skips & {ABSTAINED, NO_ANSWER}:
        return "pass"
    if ABSTAINED not in skips and any(not j.passed for j in scored):
        return "fail"
    return "not_judged"


class MemoryStore:
    """A :class:`~ragpulse.protocols.ResultStore` (plus the run methods replay uses) held in dicts.

    Failure injection: ``fail_next(n, retriable=True)`` makes the next ``n`` ``write_results`` calls raise
    :class:`StoreError`; ``write_delay_s`` sleeps inside every write. ``writes`` records the batch sizes and
    ``max_concurrent_writes`` the most writes seen in flight at once.
    """

    def __init__(self) -> None:
        self.traces: dict[str, TraceResult] = {}
        self.judgements: dict[tuple[str, str, str], Judgement] = {}
        self.test_sets: dict[str, TestSet] = {}
        self.runs: dict[str, RunRecord] = {}
        self.run_judgements: dict[tuple[str, str], tuple[Judgement, ...]] = {}
        """``(run_id, trace_id)`` → the judgements pinned as that run's case row while it ran."""
        self.calibrations: list[CalibrationProfile] = []
        self.writes: list[int] = []
        self.write_delay_s = 0.0
        self._fail: list[bool] = []
        self._in_flight = 0
        self.max_concurrent_writes = 0
        self.closed = False

    def fail_next(self, n: int, *, retriable: bool = True) -> None:
        """Make the next ``n`` writes raise ``StoreError(retriable=retriable)``."""
        self._fail.extend([retriable] * n)

    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport:
        """Upsert ``results``; see :class:`~ragpulse.protocols.ResultStore`."""
        self._in_flight += 1
        self.max_concurrent_writes = max(self.max_concurrent_writes, self._in_flight)
        try:
            if self.write_delay_s:
                await asyncio.sleep(self.write_delay_s)
        finally:
            self._in_flight -= 1
        if self._fail:
            retriable = self._fail.pop(0)
            raise StoreError("injected store failure", retriable=retriable)
        self.writes.append(len(results))
        changed: set[tuple[str, str, str]] = set()
        inserted: set[str] = set()
        by_trace: dict[str, TraceResult] = {}
        for r in results:  # the higher version rank wins, else the later copy in the batch, as in PostgreSQL
            had = by_trace.get(r.trace.trace_id)
            if had is None or r.trace.replaces(had.trace):
                by_trace[r.trace.trace_id] = r
        outranked: set[str] = set()
        for tid, r in by_trace.items():
            stored = self.traces.get(tid)
            if stored is not None and not r.trace.replaces(stored.trace):
                outranked.add(tid)  # the stored version ranks higher: nothing of this one is written
                continue
            if stored is None:
                inserted.add(tid)
            self.traces[tid] = r
            for j in r.judgements:
                key = (tid, j.judge, j.version)
                old = self.judgements.get(key)
                if old is None or _comparable(old) != _comparable(j):
                    changed.add(key)
                self.judgements[key] = j
            run = self.runs.get(r.trace.run_id or "")
            if r.trace.run_id and (run is None or run.status is RunStatus.RUNNING):
                self.run_judgements[(r.trace.run_id, tid)] = self._latest(tid)
        return WriteReport(
            changed=frozenset(changed), trace_inserted=frozenset(inserted), outranked=frozenset(outranked)
        )

    async def upsert_test_set(self, ts: CaseSource) -> None:
        """Keep ``ts``'s cases by name."""
        self.test_sets[ts.name] = TestSet(
            name=ts.name,
            knowledge_base=ts.knowledge_base,
            description=ts.description,
            cases=tuple(ts.iter_cases()),
        )

    async def link_run_cases(self, run_id: str) -> int:
        """Nothing to link: a run's results are the traces carrying its run id (0)."""
        return 0

    async def get_test_set(self, name: str) -> TestSet | None:
        """The test set kept as ``name``, or ``None``."""
        return self.test_sets.get(name)

    async def test_set_head(self, name: str) -> tuple[str | None, str | None, int] | None:
        """``(knowledge_base, description, case count)`` of the kept test set, or ``None``."""
        ts = self.test_sets.get(name)
        return None if ts is None else (ts.knowledge_base, ts.description, len(ts.cases))

    async def iter_test_cases(self, name: str, *, chunk: int = 1000) -> AsyncGenerator[TestCase, None]:
        """The kept test set's cases in order."""
        ts = self.test_sets.get(name)
        for c in ts.cases if ts else ():
            yield c

    async def test_set_hash(self, name: str) -> str | None:
        """The stored set's :func:`~ragpulse.model.cases_hash`, or ``None``."""
        ts = self.test_sets.get(name)
        return ts.content_hash() if ts is not None else None

    async def create_run(self, run: RunRecord, *, replace: bool = False) -> None:
        """Insert or reset a run (status back to running, owned by this process)."""
        self.runs[run.run_id] = run.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "finished_at": None,
                "report": None,
                "owner_host": run.owner_host or OWNER_HOST,
                "owner_pid": run.owner_pid if run.owner_pid is not None else os.getpid(),
                "heartbeat_at": datetime.now(UTC),
            }
        )

    async def scored_judges(self, trace_ids: Sequence[str]) -> set[tuple[str, str]]:
        """``(trace_id, judge)`` pairs with an ``ok`` judgement among ``trace_ids``."""
        wanted = set(trace_ids)
        return {
            (tid, j.judge)
            for (tid, _, _), j in self.judgements.items()
            if tid in wanted and j.status is JudgementStatus.OK
        }

    async def database_identity(self) -> str:
        """``memory/<id of this store>``."""
        return f"memory/{id(self):x}"

    async def heartbeat_run(self, run_id: str) -> bool:
        """Record a heartbeat of a running run."""
        run = self.runs.get(run_id)
        if run is None or run.status is not RunStatus.RUNNING:
            return False
        self.runs[run_id] = run.model_copy(update={"heartbeat_at": datetime.now(UTC)})
        return True

    async def finish_run(self, run_id: str, status: RunStatus, report: dict[str, Any]) -> None:
        """Set a run's final status and report."""
        self.runs[run_id] = self.runs[run_id].model_copy(
            update={"status": status, "report": report, "finished_at": datetime.now(UTC)}
        )

    async def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """Runs, newest first."""
        return sorted(self.runs.values(), key=lambda r: r.started_at, reverse=True)[:limit]

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        return self.runs.get(run_id)

    def _latest(self, tid: str) -> tuple[Judgement, ...]:
        by_name: dict[str, Judgement] = {}
        for (t, name, _), j in self.judgements.items():
            if t == tid:
                by_name[name] = j
        return tuple(by_name.values())

    async def save_calibration_profile(self, profile: CalibrationProfile) -> None:
        key = (profile.judge, profile.judge_version, profile.name)
        self.calibrations = [p for p in self.calibrations if (p.judge, p.judge_version, p.name) != key]
        self.calibrations.append(profile)

    async def latest_calibration_profile(self, judge: str, judge_version: str) -> CalibrationProfile | None:
        mine = [p for p in self.calibrations if (p.judge, p.judge_version) == (judge, judge_version)]
        return max(mine, key=lambda p: p.created_at) if mine else None

    async def get_run_results(self, run_id: str) -> list[TraceResult]:
        """Traces of the run, each with the judgements pinned while it ran (else the latest per judge name)."""
        return [
            r.model_copy(update={"judgements": self._pinned(run_id, tid)})
            for tid, r in self.traces.items()
            if r.trace.run_id == run_id
        ]

    def _run_order(self, run_id: str) -> list[tuple[tuple[int, str], TraceResult]]:
        run = self.runs.get(run_id)
        ts = self.test_sets.get(run.test_set) if run else None
        pos = {c.id: i for i, c in enumerate(ts.cases)} if ts else {}
        keyed = [
            ((pos.get(r.trace.test_case_id or "", 2147483647), r.trace.trace_id), r)
            for r in self.traces.values()
            if r.trace.run_id == run_id
        ]
        keyed.sort(key=lambda x: x[0])
        return [(k, r.model_copy(update={"judgements": self._pinned(run_id, k[1])})) for k, r in keyed]

    def _pinned(self, run_id: str, tid: str) -> tuple[Judgement, ...]:
        got = self.run_judgements.get((run_id, tid))
        return self._latest(tid) if got is None else got

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
        """A page of the run's results in run order (see the protocol)."""
        rows = [(k, r) for k, r in self._run_order(run_id) if after is None or k > after]
        if failing or not_judged:
            wanted = "fail" if failing else "not_judged"
            rows = [(k, r) for k, r in rows if _verdict(r) == wanted]
        return rows[offset : offset + limit]

    async def run_results_by_case(self, run_id: str, case_ids: Sequence[str]) -> list[TraceResult]:
        """The run's results of cases ``case_ids`` in run order (see the protocol)."""
        wanted = set(case_ids)
        return [r for _, r in self._run_order(run_id) if (r.trace.test_case_id or r.trace.trace_id) in wanted]

    async def run_case_keys(self, run_id: str, case_ids: Sequence[str]) -> list[tuple[str, str]]:
        """``(case id, trace id)`` of :meth:`run_results_by_case`."""
        got = await self.run_results_by_case(run_id, case_ids)
        return [(r.trace.test_case_id or r.trace.trace_id, r.trace.trace_id) for r in got]

    async def count_run_results(self, run_id: str) -> int:
        """How many traces of the run are stored."""
        return sum(1 for r in self.traces.values() if r.trace.run_id == run_id)

    async def iter_run_results(self, run_id: str, *, chunk: int = 1000) -> AsyncGenerator[TraceResult, None]:
        """Every result of the run in run order."""
        for _, r in self._run_order(run_id):
            yield r

    async def stored_version_ranks(self, trace_ids: Sequence[str]) -> dict[str, int]:
        """``{trace_id: version rank}`` of the stored traces among ``trace_ids`` (as ``PostgresStore``)."""
        return {t: self.traces[t].trace.version_rank for t in trace_ids if t in self.traces}

    async def get_trace(self, trace_id: str) -> TraceResult | None:
        """The trace with all its judgements (all versions)."""
        r = self.traces.get(trace_id)
        if r is None:
            return None
        js = tuple(j for (t, _, _), j in self.judgements.items() if t == trace_id)
        return r.model_copy(update={"judgements": js})

    async def traces_for_rejudge(
        self, app: str | None, since: datetime, limit: int | None
    ) -> AsyncIterator[Trace]:
        """Stored traces of ``app`` (any when ``None``) received since ``since``."""
        n = 0
        for r in list(self.traces.values()):
            if (app is None or r.trace.app == app) and r.received_at >= since:
                if limit is not None and n >= limit:
                    return
                n += 1
                yield r.trace

    async def ping(self) -> bool:
        """Always reachable."""
        return True

    async def close(self) -> None:
        """Mark closed."""
        self.closed = True


class ScriptedJudge:
    """A :class:`~ragpulse.protocols.Judge` whose verdicts come from a script.

    Args:
        name: judge name.
        score: a fixed score, or ``trace → score`` (``None`` → ``skipped`` ``no_answer``-like reason
            ``scripted_skip``); a callable may raise to test the engine's defence.
        threshold: ``passed = score >= threshold``.
        delay_s: sleep before answering (to build back-pressure).
        errors: trace ids (or ``question`` strings) for which an ``error`` judgement is returned.
        raises: trace ids (or questions) for which ``judge`` raises ``RuntimeError`` (contract breach).
        tokens: ``(prompt, completion)`` tokens reported on ``ok`` judgements.
    """

    def __init__(
        self,
        name: str,
        score: float | Callable[[Trace], float | None] = 1.0,
        *,
        threshold: float = 0.5,
        delay_s: float = 0.0,
        errors: Sequence[str] = (),
        raises: Sequence[str] = (),
        tokens: tuple[int, int] = (0, 0),
        backend: Backend = Backend.HEURISTIC,
    ) -> None:
        self.name = name
        self.threshold = threshold
        self.backend = backend
        self.version = compute_version(name, backend, {"scripted": True, "threshold": threshold})
        self._score = score
        self._delay = delay_s
        self._errors = frozenset(errors)
        self._raises = frozenset(raises)
        self._tokens = tokens
        self.calls = 0
        self.active = 0
        self.max_active = 0

    def _hit(self, keys: frozenset[str], trace: Trace) -> bool:
        return trace.trace_id in keys or (trace.question or "") in keys

    async def judge(self, trace: Trace) -> Judgement:
        """Return the scripted verdict for ``trace``."""
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self._delay:
                await asyncio.sleep(self._delay)
            common: dict[str, Any] = {"judge": self.name, "version": self.version, "backend": self.backend}
            if self._hit(self._raises, trace):
                raise RuntimeError("scripted judge blew up")
            if self._hit(self._errors, trace):
                return error(reason="judge_unavailable: scripted", threshold=self.threshold, **common)
            s = self._score(trace) if callable(self._score) else self._score
            if s is None:
                return skipped(reason="scripted_skip", threshold=self.threshold, **common)
            return ok(
                score=s,
                threshold=self.threshold,
                reason=f"scripted {s:.2f}",
                prompt_tokens=self._tokens[0],
                completion_tokens=self._tokens[1],
                **common,
            )
        finally:
            self.active -= 1


class GatedJudge(ScriptedJudge):
    """A :class:`ScriptedJudge` that waits for ``gate`` before each verdict (builds back-pressure on demand)."""

    def __init__(self, name: str, gate: asyncio.Event, score: float = 1.0) -> None:
        super().__init__(name, score)
        self.gate = gate
        #: set once a worker is inside :meth:`judge` (held at the gate): tests wait for it instead of sleeping
        self.waiting = asyncio.Event()

    async def judge(self, trace: Trace) -> Judgement:
        """Wait for the gate, then return the scripted verdict."""
        self.waiting.set()
        await self.gate.wait()
        return await super().judge(trace)


class MemoryExporter:
    """An :class:`~ragpulse.protocols.Exporter` that records every ``on_stored`` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[TraceResult, list[Judgement]]] = []

    def on_stored(self, result: TraceResult, changed: Sequence[Judgement]) -> None:
        """Record the call."""
        self.calls.append((result, list(changed)))

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Nothing is buffered."""
        return True

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Nothing to stop."""
