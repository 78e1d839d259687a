"""Replay a test set: each case becomes a synthetic trace that goes through the same :class:`Engine`.

A case's trace id is ``sha256(run_id + "\\x1f" + case_id)`` cut to 32 hex characters, so replaying with the
same run id re-judges the same traces and the store's upserts keep one judgement per (trace, judge, version).
Recorded answers are judged as they are; a case without one is sent to the RAG endpoint when a
:class:`~ragpulse.runs.rag_client.RagClient` is given; without an endpoint only the judges that need no
answer (the retrieval judges) judge it, and when none applies it is not evaluable (``no_answer``) and still
appears in the report. Sampling does not apply to replays (every case is judged).

This module judges the cases (:func:`judge_cases`, one :class:`CaseResult` per case); the run around it —
creating the run, the report, finishing or failing the run — is :mod:`ragpulse.runs.replay`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ragpulse.aio import cancel_and_wait
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.errors import ConfigError
from ragpulse.logging import get_logger
from ragpulse.model import (
    RUN_HEARTBEAT_S,
    Document,
    RunRecord,
    RunStatus,
    Source,
    TestCase,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.owner import OWNER_HOST
from ragpulse.protocols import CaseSource, Exporter, Judge, RunStore
from ragpulse.runs.rag_client import RagAnswer, RagClient, RagEndpointError

__all__ = [
    "CaseResult",
    "ProgressCallback",
    "case_to_trace",
    "case_trace_id",
    "heartbeat",
    "judge_cases",
    "new_run_id",
    "open_run",
    "run_settings",
    "start_run",
    "storing_test_set",
]

log = get_logger("ragpulse.runs")

#: ``progress(done, total)``: called each time a case's result is stored (or failed).
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class CaseResult:
    """What happened to one test case in a run.

    Attributes:
        case_id: the test case id.
        result: the trace result the engine produced.
        stored: False when the store write failed for good (the run then has errors).
        judges: judges the engine routed the case to (counted as ``skipped`` when it was not evaluable).
        note: a problem before judging, e.g. ``rag_endpoint_error: HTTP 500`` (the case's reason).
    """

    case_id: str
    result: TraceResult
    stored: bool = True
    judges: tuple[str, ...] = ()
    note: str | None = None


def case_trace_id(run_id: str, case_id: str) -> str:
    """The trace id of a case in a run: first 32 hex chars of ``sha256(run_id + "\\x1f" + case_id)``."""
    return hashlib.sha256(f"{run_id}\x1f{case_id}".encode()).hexdigest()[:32]


def new_run_id(test_set: str) -> str:
    """A fresh run id: ``<test set>-<UTC time>-<6 hex>``, e.g. ``kestrel_kb-20261130T064500Z-1a2b3c`` — always
    a valid run id (:data:`~ragpulse.runs.testsets.NAME_PATTERN`), whatever the test set is called: the ASCII
    letters, digits, ``.``, ``_``, ``-`` of its name (starting with a letter or digit, at most 40), else (a
    Chinese name, say) ``ts-`` and 8 hex of its SHA-256, so runs of different sets stay apart."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", test_set)
    slug = re.sub(r"^[^A-Za-z0-9]+", "", slug)[:40].rstrip("-._")
    if not slug:
        slug = "ts-" + hashlib.sha256(test_set.encode("utf-8")).hexdigest()[:8]
    return f"{slug}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


async def start_run(
    store: RunStore,
    test_set: CaseSource,
    judges: Mapping[str, Judge],
    *,
    run_id: str | None,
    settings: dict[str, Any],
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> str:
    """Store ``test_set`` (when the store does not hold these cases yet) and create its run: :func:`open_run`,
    then :meth:`~ragpulse.protocols.RunStore.upsert_test_set`. Returns the run id.

    Raises:
        ConfigError: see :func:`open_run`.
        StoreError: the store failed.
    """
    run_id, store_cases = await open_run(
        store,
        test_set,
        judges,
        run_id=run_id,
        settings=settings,
        replace_run=replace_run,
        replace_test_set=replace_test_set,
    )
    if store_cases:
        await store.upsert_test_set(test_set)
    return run_id


@asynccontextmanager
async def storing_test_set(
    store: RunStore, test_set: CaseSource, run_id: str, store_cases: bool
) -> AsyncIterator[None]:
    """Store ``test_set``'s cases (``store_cases``, from :func:`open_run`) in a task while the block runs — a
    batch replay judges its cases meanwhile, instead of waiting for thousands of case rows first — and wait for
    it at the end of the block. Judging reads no stored case, but a result write links a trace to its run only
    when its case is in the run's stored test set (:data:`ragpulse.store.sql.RUN_CASES_UPSERT`), so the traces
    written before the cases were stored are linked at the end of the block
    (:meth:`~ragpulse.protocols.RunStore.link_run_cases`), before the run's report is built.

    Raises:
        StoreError: storing the cases failed (the block is cancelled: a replay whose test set cannot be stored
            fails as before, when the cases were stored first).
    """
    if not store_cases:
        yield
        return
    body = asyncio.current_task()
    failed: list[BaseException] = []

    async def upsert() -> None:
        try:
            await store.upsert_test_set(test_set)
        except Exception as e:  # handed to the block's owner, which is cancelled so it stops judging
            failed.append(e)
            if body is not None:
                body.cancel()

    log.debug("test_set_store_started", test_set=test_set.name, cases=test_set.case_count)
    task = asyncio.create_task(upsert(), name=f"ragpulse-store-test-set-{test_set.name}")
    try:
        yield
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if failed and body is not None:
            body.uncancel()  # the cancel was ours: the store's error is what ends the block
            raise failed[0] from None
        raise
    finally:
        if not task.done():
            await cancel_and_wait(task)
    if failed:
        raise failed[0]
    linked = await store.link_run_cases(run_id)
    log.debug("test_set_stored", test_set=test_set.name, run_id=run_id, linked_after=linked)


async def open_run(
    store: RunStore,
    test_set: CaseSource,
    judges: Mapping[str, Judge],
    *,
    run_id: str | None,
    settings: dict[str, Any],
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> tuple[str, bool]:
    """Check ``test_set`` against the stored one and create its run (status ``running``, the judges' versions,
    ``settings`` plus ``judge_order`` (the judges' names in configured order), the hash of its cases, owned by
    this process). Nothing stored is overwritten unless asked:

    - a stored test set of the same name with other cases (:func:`~ragpulse.model.cases_hash` differs) is an
      error unless ``replace_test_set``; an identical one is not rewritten;
    - an existing run ``run_id`` of another test set (or of other cases) is an error unless ``replace_run``
      (then its old trace links are dropped); of the same cases it is re-run as before. A run id still
      ``running`` in another live process is an error either way (a run this process claimed from the
      portal's queue is its own).

    Returns the run id (``run_id``, or a new one from :func:`new_run_id`) and whether ``test_set``'s cases still
    have to be stored (the stored set of that name has other cases, or there is none): :func:`start_run` stores
    them at once, a batch replay while it judges (:func:`storing_test_set`).

    Raises:
        ConfigError: one of the conflicts above (the message names the way out).
        StoreError: the store failed.
    """
    digest = test_set.content_hash()
    stored = await store.test_set_hash(test_set.name)
    if stored is not None and stored != digest and not replace_test_set:
        raise ConfigError(
            f"test set {test_set.name!r} is already stored with other cases ({_short(stored)}, this file "
            f"{_short(digest)}); give --name NEW to store this one under another name, or --replace-test-set "
            "to replace the stored cases (older runs keep their cases hash)"
        )
    replace = False
    if run_id is not None:
        old = await store.get_run(run_id)
        mine = old is not None and (old.owner_host, old.owner_pid) == (OWNER_HOST, os.getpid())
        if old is not None and old.status is RunStatus.RUNNING and not mine:  # mine: claimed from the queue
            raise ConfigError(
                f"run {run_id!r} is still running (pid {old.owner_pid} on {old.owner_host}); wait for it or "
                "use another --run-id"
            )
        same = old is None or (old.test_set == test_set.name and old.cases_hash in (None, digest))
        if not same and not replace_run:
            assert old is not None
            raise ConfigError(
                f"run {run_id!r} already exists for test set {old.test_set!r} ({old.status.value}, started "
                f"{old.started_at:%Y-%m-%d %H:%M} UTC) with other cases; use another --run-id, or --replace-run "
                "to replace it"
            )
        replace = not same
    run_id = run_id or new_run_id(test_set.name)
    await store.create_run(
        RunRecord(
            run_id=run_id,
            test_set=test_set.name,
            judges={name: j.version for name, j in judges.items()},
            settings={**settings, "judge_order": list(judges)},  # jsonb keeps no key order of ``judges``
            cases_hash=digest,
        ),
        replace=replace,
    )
    return run_id, stored != digest


def _short(digest: str) -> str:
    """``sha256:1a2b3c4d5e6f`` — enough of a cases hash to tell two apart in a message."""
    return digest[: len("sha256:") + 12]


@asynccontextmanager
async def heartbeat(store: RunStore, run_id: str, interval_s: float = RUN_HEARTBEAT_S) -> AsyncIterator[None]:
    """While the block runs, tell the store every ``interval_s`` seconds that run ``run_id``'s process is alive
    (:meth:`~ragpulse.protocols.RunStore.heartbeat_run`), so a run left ``running`` by a killed process reads
    as ``interrupted`` once the beats stop. A failed beat is logged and retried at the next interval."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await store.heartbeat_run(run_id)
            except Exception as e:  # the store may be briefly down; the replay itself will notice
                log.warning("run_heartbeat_failed", run_id=run_id, error=str(e)[:200])

    task = asyncio.create_task(beat(), name=f"ragpulse-heartbeat-{run_id}")
    try:
        yield
    finally:
        await cancel_and_wait(task)


def _for_report(result: TraceResult) -> TraceResult:
    """What the run report needs of a stored result, kept per case until the run ends: the trace's ids and the
    judgements without their raw model output and prompt. The texts (question, answer, contexts: ~1.5 KB a
    case, more with a RAG endpoint), raw outputs and prompts (up to 32 KB each) are already in the store, so a
    100,000-case replay does not hold them all in memory."""
    judgements = tuple(
        j.model_copy(update={"raw_output": None, "prompt": None}) if j.raw_output or j.prompt else j
        for j in result.judgements
    )
    return result.model_copy(update={"trace": _slim_trace(result.trace), "judgements": judgements})


def _slim_trace(t: Trace) -> Trace:
    """The trace's ids and routing fields only."""
    return Trace(
        trace_id=t.trace_id,
        source=t.source,
        app=t.app,
        scenario=t.scenario,
        run_id=t.run_id,
        test_case_id=t.test_case_id,
        incomplete=t.incomplete,
    )


def case_to_trace(case: TestCase, *, run_id: str, test_set: str, rag: RagAnswer | None = None) -> Trace:
    """Build the synthetic trace of ``case`` (``source=replay``).

    The recorded answer and contexts are used unless ``rag`` (the RAG endpoint's reply) is given. The case's
    ``metadata`` ``app``/``scenario`` route the trace; ``reference_contexts`` and ``context_labels`` go to the
    trace's typed fields and the rest of the metadata to ``attributes["case_metadata"]``; with an endpoint
    reply the labels' own chunks go along as ``labelled_contexts``/``labelled_doc_ids`` (see
    :mod:`ragpulse.judges.retrieval.labels`).
    """
    md = dict(case.metadata)
    app = md.pop("app", None)
    scenario = md.pop("scenario", None)
    attributes: dict[str, Any] = {"test_set": test_set}
    labels: dict[str, Any] = {}
    if case.context_labels is not None:
        labels["context_labels"] = tuple(bool(x) for x in case.context_labels)
        if rag is not None:  # the endpoint's chunks may differ: say which chunks the labels belong to
            labels["labelled_contexts"] = tuple(case.contexts)
            if case.doc_ids:
                labels["labelled_doc_ids"] = tuple(case.doc_ids)
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
        reference_contexts=tuple(case.reference_contexts),
        **labels,
        **timing,
    )


def run_settings(settings: Settings) -> dict[str, Any]:
    """Non-secret settings worth comparing between runs (stored with the run)."""
    return {
        "judge_model": settings.judge.model,
        "judge_language": settings.judge.language,
        "judges": settings.judge.options,
        "rag_endpoint": bool(settings.rag.endpoint_url),
    }


async def judge_cases(
    test_set: CaseSource,
    *,
    run_id: str,
    judges: Mapping[str, Judge],
    store: RunStore,
    settings: Settings,
    on_case: Callable[[CaseResult], object],
    exporters: Sequence[Exporter] = (),
    rag_client: RagClient | None = None,
    progress: ProgressCallback | None = None,
) -> None:
    """Judge every case of ``test_set`` as run ``run_id`` through an :class:`Engine` (sampling off) that
    stores the results, calling ``on_case`` with each case's :class:`CaseResult` as it is stored (in the
    order the engine finishes them; a case the engine never finished comes last, not stored).

    Cases are read from ``test_set`` one at a time as the engine's bounded queue takes them, and a result is
    handed over without its texts (they are in the store), so memory does not grow with the number of cases.
    A case without an answer is sent to ``rag_client`` when given (``engine_workers`` cases at a time); a
    failed endpoint call makes the case not evaluable with the reason.

    Raises:
        StoreError: the store broke (results that could not be written for good are ``stored=False``).
    """
    total = test_set.case_count
    done = 0
    notes: dict[str, str] = {}
    pending: dict[str, TestCase] = {}  # submitted, not yet stored: what a lost case is reported with
    async with Engine(
        judges,
        store,
        settings.engine.model_copy(update={"sampling_rate": 1.0}),
        exporters,
        routes=settings.judge.routes,
    ) as eng:

        async def ack(result: TraceResult, ok: bool) -> None:
            nonlocal done
            cid = result.trace.test_case_id or ""
            case = pending.pop(cid, None)
            note = notes.pop(cid, None)
            if not ok:  # reported with where the case came from; the other cases went on
                origin = case.origin if case is not None else None
                if origin and note is None:
                    note = f"store_failed: {origin}"
                log.warning("replay_case_not_stored", case_id=cid, origin=origin)
            on_case(
                CaseResult(
                    case_id=cid,
                    result=_for_report(result),
                    stored=ok,
                    judges=eng.route(result.trace),
                    note=note,
                )
            )
            done += 1
            if progress is not None:
                progress(done, total)

        cases = test_set.iter_cases()

        async def feed() -> None:
            for case in cases:  # one shared iterator: each case is taken by exactly one feeder
                rag = None
                failed: str | None = None
                pending[case.id] = _slim_case(case)
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
                    trace = trace.model_copy(update={"not_evaluable": f"rag_endpoint_failed: {failed}"[:500]})
                await eng.submit(trace, ack)

        feeders = settings.engine.workers if rag_client is not None else 1
        async with asyncio.TaskGroup() as tg:
            for _ in range(feeders):
                tg.create_task(feed())
        await eng.drain(None)
    for cid, case in list(
        pending.items()
    ):  # cannot happen after a full drain; keep the case visible if it does
        trace = _slim_trace(case_to_trace(case, run_id=run_id, test_set=test_set.name))
        lost = TraceResult(trace=trace, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="lost")
        note = notes.pop(cid, None) or (f"store_failed: {case.origin}" if case.origin else None)
        log.warning("replay_case_not_stored", case_id=cid, origin=case.origin)
        on_case(CaseResult(case_id=cid, result=lost, stored=False, note=note))


def _slim_case(case: TestCase) -> TestCase:
    """What a case in flight is remembered by (id, routing metadata, origin), not its texts."""
    md = {k: case.metadata[k] for k in ("app", "scenario") if k in case.metadata}
    return TestCase(id=case.id, metadata=md, origin=case.origin)
