"""Replay a test set: each case becomes a synthetic trace that goes through the same :class:`Engine`.

A case's trace id is ``sha256(run_id + "\\x1f" + case_id)`` cut to 32 hex characters, so replaying with the
same run id re-judges the same traces and the store's upserts keep one judgement per (trace, judge, version).
Recorded answers are judged as they are; a case without one is sent to the RAG endpoint when a
:class:`~ragpulse.replay.rag_client.RagClient` is given; without an endpoint only the judges that need no
answer (the retrieval judges) judge it, and when none applies it is not evaluable (``no_answer``) and still
appears in the report. Sampling does not apply to replays (every case is judged).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ragpulse.config import Settings
from ragpulse.engine import Engine, Router
from ragpulse.engine.engine import NOT_EVALUABLE_ATTRIBUTE
from ragpulse.logging import get_logger
from ragpulse.model import (
    Document,
    RunRecord,
    RunStatus,
    Source,
    TestCase,
    TestSet,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.protocols import Exporter, Judge, ResultStore
from ragpulse.replay.rag_client import RagAnswer, RagClient, RagEndpointError
from ragpulse.replay.report import CaseResult, build_report

__all__ = [
    "ProgressCallback",
    "ReplayStore",
    "case_to_trace",
    "case_trace_id",
    "new_run_id",
    "run_replay",
    "start_run",
]

log = get_logger("ragpulse.replay")

#: ``progress(done, total)``: called each time a case's result is stored (or failed).
ProgressCallback = Callable[[int, int], None]


class ReplayStore(ResultStore, Protocol):
    """The store methods a replay needs (``PostgresStore`` and ``MemoryStore`` have them)."""

    async def upsert_test_set(self, ts: TestSet) -> None: ...

    async def create_run(self, run: RunRecord) -> None: ...

    async def finish_run(self, run_id: str, status: RunStatus, report: dict[str, Any]) -> None: ...


def case_trace_id(run_id: str, case_id: str) -> str:
    """The trace id of a case in a run: first 32 hex chars of ``sha256(run_id + "\\x1f" + case_id)``."""
    return hashlib.sha256(f"{run_id}\x1f{case_id}".encode()).hexdigest()[:32]


def new_run_id(test_set: str) -> str:
    """A fresh run id: ``<test set>-<UTC time>-<6 hex>``, e.g. ``kestrel_kb-20261130T064500Z-1a2b3c``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", test_set).strip("-")[:40] or "run"
    return f"{slug}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


async def start_run(
    store: ReplayStore,
    test_set: TestSet,
    judges: Mapping[str, Judge],
    *,
    run_id: str | None,
    settings: dict[str, Any],
) -> str:
    """Store ``test_set`` and create its run (status ``running``, the judges' versions, ``settings``).

    Returns the run id (``run_id``, or a new one from :func:`new_run_id`).

    Raises:
        StoreError: the store failed.
    """
    run_id = run_id or new_run_id(test_set.name)
    await store.upsert_test_set(test_set)
    await store.create_run(
        RunRecord(
            run_id=run_id,
            test_set=test_set.name,
            judges={name: j.version for name, j in judges.items()},
            settings=settings,
        )
    )
    return run_id


def case_to_trace(case: TestCase, *, run_id: str, test_set: str, rag: RagAnswer | None = None) -> Trace:
    """Build the synthetic trace of ``case`` (``source=replay``).

    The recorded answer and contexts are used unless ``rag`` (the RAG endpoint's reply) is given. The case's
    ``metadata`` ``app``/``scenario`` route the trace; ``reference_contexts``, ``context_labels`` and the rest
    of the metadata go to ``attributes`` (``reference_contexts``, ``context_labels``, ``case_metadata``); with
    an endpoint reply the labels' own chunks go along as ``labelled_contexts``/``labelled_doc_ids``
    (see :mod:`ragpulse.judges.labels`).
    """
    md = dict(case.metadata)
    app = md.pop("app", None)
    scenario = md.pop("scenario", None)
    attributes: dict[str, Any] = {"test_set": test_set}
    if case.reference_contexts:
        attributes["reference_contexts"] = list(case.reference_contexts)
    if case.context_labels is not None:
        attributes["context_labels"] = list(case.context_labels)
        if rag is not None:  # the endpoint's chunks may differ: say which chunks the labels belong to
            attributes["labelled_contexts"] = list(case.contexts)
            if case.doc_ids:
                attributes["labelled_doc_ids"] = list(case.doc_ids)
    if md:
        attributes["case_metadata"] = md
    answer: str | None
    if rag is not None:
        answer, contexts, doc_ids = rag.answer, rag.contexts, rag.doc_ids
        end = datetime.now(UTC)
        timing: dict[str, Any] = {
            "latency_s": rag.latency_s,
            "start_time": end - timedelta(seconds=rag.latency_s),
            "end_time": end,
        }
    else:
        answer, contexts, doc_ids = case.answer, case.contexts, case.doc_ids
        timing = {}
    docs = [
        Document(id=doc_ids[i] if i < len(doc_ids) else None, content=c, rank=i)
        for i, c in enumerate(contexts)
    ]
    return Trace(
        trace_id=case_trace_id(run_id, case.id),
        app=app if isinstance(app, str) else None,
        scenario=scenario if isinstance(scenario, str) else None,
        question=case.question,
        documents=tuple(docs),
        answer=answer,
        attributes=attributes,
        source=Source.REPLAY,
        run_id=run_id,
        test_case_id=case.id,
        expected_answer=case.expected_answer,
        keywords=case.keywords,
        **timing,
    )


def _run_settings(settings: Settings) -> dict[str, Any]:
    """Non-secret settings worth comparing between runs."""
    return {
        "judge_model": settings.judge_model,
        "judge_language": settings.judge_language,
        "judges": settings.judges,
        "rag_endpoint": bool(settings.rag_endpoint_url),
    }


async def run_replay(
    test_set: TestSet,
    *,
    judges: Mapping[str, Judge],
    store: ReplayStore,
    settings: Settings,
    run_id: str | None = None,
    exporters: Sequence[Exporter] = (),
    rag_client: RagClient | None = None,
    progress: ProgressCallback | None = None,
    judges_added: Sequence[str] = (),
) -> dict[str, Any]:
    """Replay ``test_set`` through an engine and return the run report (see :mod:`ragpulse.replay.report`).

    Stores the test set, creates the run (status ``running``), judges every case, then finishes the run with
    status ``completed`` or ``completed_with_errors`` (an error judgement, a RAG endpoint failure or a failed
    store write) and the report. If the replay itself breaks (e.g. the store is gone), the run is marked
    ``failed`` when possible and the exception propagates.

    ``judges_added`` names the judges added to the default list for this test set (report key
    ``judges_added``, see :func:`ragpulse.replay.judge_defaults.default_replay_judges`).

    Raises:
        StoreError: creating/finishing the run failed.
    """
    started = time.perf_counter()
    run_id = await start_run(store, test_set, judges, run_id=run_id, settings=_run_settings(settings))
    total = len(test_set.cases)
    done: dict[str, tuple[TraceResult, bool]] = {}
    notes: dict[str, str] = {}

    async def ack(result: TraceResult, ok: bool) -> None:
        done[result.trace.test_case_id or ""] = (result, ok)
        if progress is not None:
            progress(len(done), total)

    log.info("replay_started", run_id=run_id, test_set=test_set.name, cases=total, judges=list(judges))
    try:
        async with Engine(
            judges, store, settings.model_copy(update={"sampling_rate": 1.0}), exporters
        ) as eng:
            cases = iter(test_set.cases)

            async def feed() -> None:
                for case in cases:  # one shared iterator: each case is taken by exactly one feeder
                    rag = None
                    failed: str | None = None
                    if case.answer is None and rag_client is not None and case.question:
                        try:
                            rag = await rag_client.ask(case.question)
                        except RagEndpointError as e:
                            failed = notes[case.id] = str(e)
                            log.warning("rag_endpoint_failed", case_id=case.id, error=str(e)[:200])
                    trace = case_to_trace(case, run_id=run_id, test_set=test_set.name, rag=rag)
                    if failed is not None:
                        # Stored as not evaluable with the reason; no judge scores the case's recorded contexts
                        # in place of the endpoint's reply.
                        trace = trace.model_copy(
                            update={
                                "attributes": {
                                    **trace.attributes,
                                    NOT_EVALUABLE_ATTRIBUTE: f"rag_endpoint_failed: {failed}"[:500],
                                }
                            }
                        )
                    await eng.submit(trace, ack)

            feeders = settings.engine_workers if rag_client is not None else 1
            async with asyncio.TaskGroup() as tg:
                for _ in range(feeders):
                    tg.create_task(feed())
            await eng.drain(None)
    except BaseException as e:
        await _mark_failed(store, run_id, test_set.name, e)
        raise
    router = Router(judges, settings.judge_routes)
    results: list[CaseResult] = []
    for case in test_set.cases:
        got = done.get(case.id)
        if got is None:  # cannot happen after a full drain; keep the case visible if it does
            trace = case_to_trace(case, run_id=run_id, test_set=test_set.name)
            got = (TraceResult(trace=trace, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="lost"), False)
        result, ok = got
        if not ok:  # reported with where the case came from; the other cases went on
            if case.origin:
                notes.setdefault(case.id, f"store_failed: {case.origin}")
            log.warning("replay_case_not_stored", case_id=case.id, origin=case.origin)
        results.append(
            CaseResult(
                case_id=case.id,
                result=result,
                stored=ok,
                judges=tuple(j.name for j in router.select(result.trace)),
                note=notes.get(case.id),
            )
        )
    report = build_report(
        run_id=run_id,
        test_set=test_set.name,
        cases=results,
        judges=list(judges),
        wall_seconds=time.perf_counter() - started,
        judges_added=judges_added,
    )
    await store.finish_run(run_id, RunStatus(report["status"]), report)
    log.info(
        "replay_finished",
        run_id=run_id,
        status=report["status"],
        pass_rate=report["pass_rate"],
        coverage=report["coverage"],
        wall_seconds=report["wall_seconds"],
    )
    return report


async def _mark_failed(store: ReplayStore, run_id: str, test_set: str, e: BaseException) -> None:
    try:
        await asyncio.shield(
            store.finish_run(
                run_id,
                RunStatus.FAILED,
                {"run_id": run_id, "test_set": test_set, "error": f"{type(e).__name__}: {e}"[:500]},
            )
        )
    except BaseException:  # the store may be the reason we failed
        log.warning("replay_mark_failed_failed", run_id=run_id)
