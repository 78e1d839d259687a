"""Replay a test set — in process through an engine, or through a running ``ragpulse serve`` via Kafka/OTLP —
and return its :class:`~ragpulse.runs.report_model.RunReport`.

Entry points (the CLI and the HTTP API call these, with a store they opened):

- :func:`replay_test_set` — pick the judges (``enabled_judges`` plus the retrieval judges the test set can
  feed, :func:`ragpulse.judges.selection.default_replay_judges`), open them and the RAG endpoint client,
  then :func:`run_replay`.
- :func:`replay_via` — open the judges (for their versions), then :func:`run_replay_via`.
- :func:`run_replay` / :func:`run_replay_via` — the same with judges the caller built.
- :func:`stored_test_set` — a test set stored under a name (``replay --test-set NAME``).

A run's life: stored test set and run record (status ``running``, :func:`ragpulse.runs.runner.start_run`);
the cases judged (:func:`ragpulse.runs.runner.judge_cases`, or published and awaited in the store for
``--via``); then one assembly for both paths (:func:`_finish`): report built, stored with status ``completed``
or ``completed_with_errors``, returned. If the replay itself breaks, the run is marked ``failed`` when possible
and the exception propagates.

``--via``: each case's synthetic trace (same trace ids as a direct replay) is published as a Kafka event
(:func:`ragpulse.ingest.events.trace_to_event`, carrying ``runId``, ``testCaseId``, ``expectedAnswer``,
``keywords``) or as OTLP OpenInference spans; the store is polled until every case's trace is stored or
``wait_s`` passes. Cases not stored in time count as not stored (reason ``timeout``), so the run ends
``completed_with_errors``. The serving side must consume the same topic / listen on the OTLP endpoint and write
to the same database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from enum import StrEnum

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, NotFoundError
from ragpulse.judges.selection import check_runnable, open_judges, run_judges
from ragpulse.logging import get_logger
from ragpulse.model import RunStatus, Trace, TraceOutcome, TraceResult
from ragpulse.protocols import CaseSource, Exporter, Judge, RunStore
from ragpulse.runs.rag_client import RagClient
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import ReportBuilder, stored_case, with_corrected
from ragpulse.runs.runner import (
    CaseResult,
    ProgressCallback,
    case_to_trace,
    heartbeat,
    judge_cases,
    open_run,
    run_settings,
    start_run,
    storing_test_set,
)
from ragpulse.runs.testset_files import SpooledTestSet, spool_test_set

__all__ = [
    "Via",
    "check_serve_database",
    "replay_test_set",
    "replay_via",
    "run_replay",
    "run_replay_via",
    "serve_readyz_url",
    "stored_test_set",
]

log = get_logger("ragpulse.runs")

#: Seconds between two polls of the store while waiting for ``--via`` results.
POLL_INTERVAL_S = 0.5


class Via(StrEnum):
    """The source a ``--via`` replay goes through."""

    KAFKA = "kafka"
    OTLP = "otlp"


async def stored_test_set(store: RunStore, name: str) -> SpooledTestSet:
    """The test set stored as ``name`` (by an earlier replay or the portal), read once through a cursor into a
    temporary file (:class:`~ragpulse.runs.testset_files.SpooledTestSet`: not held in memory; ``close()`` it when
    done).

    Raises:
        NotFoundError: no test set of that name.
        StoreError: the store failed.
    """
    head = await store.test_set_head(name)
    if head is None:
        raise NotFoundError(f"no test set {name[:100]!r} in the store (replay a file once to store it)")
    async with contextlib.aclosing(store.iter_test_cases(name)) as cases:
        return await spool_test_set(name, head[0], head[1], cases)


async def _finish(
    store: RunStore,
    *,
    run_id: str,
    test_set: str,
    builder: ReportBuilder,
    started: float,
    judges_added: Sequence[str] = (),
    via: Via | None = None,
) -> RunReport:
    """Build the report of a judged run from ``builder`` (its cases folded in), store it with the run's final
    status, and return it (per-case rows stay in the store: ``case_source="store"``)."""
    report = builder.report(
        run_id=run_id,
        test_set=test_set,
        wall_seconds=time.perf_counter() - started,
        judges_added=judges_added,
        via=via.value if via else None,
    )
    run = await store.get_run(run_id)
    report = await with_corrected(store, report, run.judges if run else {})
    await store.finish_run(run_id, report.status, report.to_json())
    log.info(
        "replay_finished",
        run_id=run_id,
        via=via.value if via else None,
        status=report.status.value,
        pass_rate=report.pass_rate,
        coverage=report.coverage,
        wall_seconds=report.wall_seconds,
    )
    return report


async def _mark_failed(store: RunStore, run_id: str, test_set: str, e: BaseException) -> None:
    interrupted = isinstance(e, asyncio.CancelledError | KeyboardInterrupt)
    error = "interrupted (SIGINT or SIGTERM)" if interrupted else f"{type(e).__name__}: {e}"[:500]
    log.warning("replay_failed", run_id=run_id, test_set=test_set, error=error)
    failed = {
        "run_id": run_id,
        "test_set": test_set,
        "status": RunStatus.FAILED.value,
        "error": error,
    }
    try:
        await asyncio.shield(store.finish_run(run_id, RunStatus.FAILED, failed))
    except BaseException:  # the store may be the reason we failed
        log.warning("replay_mark_failed_failed", run_id=run_id)


async def run_replay(
    test_set: CaseSource,
    *,
    judges: Mapping[str, Judge],
    store: RunStore,
    settings: Settings,
    run_id: str | None = None,
    exporters: Sequence[Exporter] = (),
    rag_client: RagClient | None = None,
    progress: ProgressCallback | None = None,
    judges_added: Sequence[str] = (),
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> RunReport:
    """Replay ``test_set`` through an in-process engine with ``judges`` and return the run report.

    Creates the run (status ``running``; see :func:`ragpulse.runs.runner.open_run` for ``replace_run`` /
    ``replace_test_set``), judges every case while the run's heartbeat beats and — when the store does not hold
    these cases yet — the test set is stored alongside (:func:`ragpulse.runs.runner.storing_test_set`), then
    finishes the run with status ``completed`` or ``completed_with_errors`` (an error judgement, a RAG endpoint failure
    or a failed store write) and the report. ``judges_added`` names the judges added to the default list for
    this test set.

    Raises:
        ConfigError: the run id or test set name is taken by other cases (see ``start_run``).
        StoreError: creating/finishing the run failed (the run is marked ``failed`` when possible).
    """
    started = time.perf_counter()
    run_id, store_cases = await open_run(
        store,
        test_set,
        judges,
        run_id=run_id,
        settings=run_settings(settings),
        replace_run=replace_run,
        replace_test_set=replace_test_set,
    )
    log.info(
        "replay_started",
        run_id=run_id,
        test_set=test_set.name,
        cases=test_set.case_count,
        judges=list(judges),
    )
    builder = ReportBuilder(list(judges), keep_rows=False)
    try:
        async with heartbeat(store, run_id), storing_test_set(store, test_set, run_id, store_cases):
            await judge_cases(
                test_set,
                run_id=run_id,
                judges=judges,
                store=store,
                settings=settings,
                on_case=builder.add,
                exporters=exporters,
                rag_client=rag_client,
                progress=progress,
            )
    except BaseException as e:
        await _mark_failed(store, run_id, test_set.name, e)
        raise
    return await _finish(
        store,
        run_id=run_id,
        test_set=test_set.name,
        builder=builder,
        started=started,
        judges_added=judges_added,
    )


async def replay_test_set(
    settings: Settings,
    store: RunStore,
    test_set: CaseSource,
    *,
    judge_names: Sequence[str] | None = None,
    run_id: str | None = None,
    exporters: Sequence[Exporter] = (),
    progress: ProgressCallback | None = None,
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> RunReport:
    """Build the judges (``judge_names``, default: ``enabled_judges`` plus the retrieval judges the test set
    can feed) and the RAG endpoint client (when ``rag_endpoint_url`` is set), replay (:func:`run_replay`),
    close them, and return the report.

    Everything asyncio-bound is created inside the running loop, so several calls (each in its own
    ``asyncio.run``) work in one process.

    Raises:
        BadRequest: the test set has no cases or no judge would run (:func:`~ragpulse.judges.selection.run_judges`).
        ConfigError: unknown judge name or bad judge configuration.
        StoreError: the store failed.
    """
    selection = run_judges(settings, test_set, judge_names)
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, selection.names, ledger=store)
        rag = None
        if settings.rag.endpoint_url:
            rag = await stack.enter_async_context(RagClient(settings))
        return await run_replay(
            test_set,
            judges=judges,
            store=store,
            settings=settings,
            run_id=run_id,
            exporters=exporters,
            rag_client=rag,
            progress=progress,
            judges_added=selection.added,
            replace_run=replace_run,
            replace_test_set=replace_test_set,
        )


async def run_replay_via(
    test_set: CaseSource,
    via: Via,
    *,
    judges: Mapping[str, Judge],
    store: RunStore,
    settings: Settings,
    run_id: str | None = None,
    wait_s: float = 300.0,
    topic: str | None = None,
    endpoint: str | None = None,
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> RunReport:
    """Send ``test_set``'s synthetic traces through ``via`` and return the run report once they are judged.

    Args:
        judges: the judges the serving side runs (for the run record's versions and the report's judge list).
        store: the serving side's database.
        wait_s: how long to wait for every case's judgements, seconds.
        topic / endpoint: Kafka topic (default: first of ``kafka_topics``) / OTLP/HTTP base URL (default:
            ``otlp_http_address``).

    Raises:
        ConfigError: the chosen source is not configured (no bootstrap servers / no OTLP endpoint).
        IngestError: publishing failed.
        StoreError: the store failed.
    """
    started = time.perf_counter()
    run_id = await start_run(
        store,
        test_set,
        judges,
        run_id=run_id,
        settings={"via": via.value, "judge_model": settings.judge.model},
        replace_run=replace_run,
        replace_test_set=replace_test_set,
    )
    log.info("replay_via_started", run_id=run_id, via=via.value, cases=test_set.case_count)
    try:
        async with heartbeat(store, run_id):
            await _publish(test_set, via, settings=settings, run_id=run_id, topic=topic, endpoint=endpoint)
            await _wait_stored(store, run_id, test_set.case_count, wait_s)
    except BaseException as e:
        await _mark_failed(store, run_id, test_set.name, e)
        raise
    builder = ReportBuilder(list(judges), keep_rows=False)
    wanted = {c.id for c in test_set.iter_cases()}
    seen: set[str] = set()
    async with contextlib.aclosing(store.iter_run_results(run_id)) as results:
        async for r in results:
            cid = r.trace.test_case_id
            if cid in wanted and cid not in seen:
                seen.add(cid)
                builder.add(stored_case(r, judges))
    for case in test_set.iter_cases():  # not stored in time: not stored, reason timeout
        if case.id not in seen:
            trace = case_to_trace(case, run_id=run_id, test_set=test_set.name)
            missing = TraceResult(trace=trace, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="timeout")
            builder.add(CaseResult(case_id=case.id, result=missing, stored=False, note="timeout"))
    return await _finish(
        store, run_id=run_id, test_set=test_set.name, builder=builder, started=started, via=via
    )


#: Synthetic traces per OTLP publish call of ``--via otlp``.
VIA_CHUNK = 1000


async def _publish(
    test_set: CaseSource,
    via: Via,
    *,
    settings: Settings,
    run_id: str,
    topic: str | None,
    endpoint: str | None,
) -> None:
    """Publish each case's synthetic trace through ``via``, built as the cases are read (Kafka: one producer for
    all; OTLP: :data:`VIA_CHUNK` traces per sender). The publishers (aiokafka, the event schema) are imported
    here: a replay without ``--via`` never loads them."""
    from ragpulse.ingest.events import trace_to_event
    from ragpulse.ingest.publish import publish_kafka, publish_otlp

    traces = (case_to_trace(c, run_id=run_id, test_set=test_set.name) for c in test_set.iter_cases())
    if via is Via.KAFKA:
        values = (json.dumps(trace_to_event(t), ensure_ascii=False).encode("utf-8") for t in traces)
        await publish_kafka(settings.kafka, values, topic)
        return
    chunk: list[Trace] = []
    for t in traces:
        chunk.append(t)
        if len(chunk) >= VIA_CHUNK:
            await publish_otlp(settings.otlp, chunk, endpoint)
            chunk = []
    if chunk:
        await publish_otlp(settings.otlp, chunk, endpoint)


async def _wait_stored(store: RunStore, run_id: str, total: int, wait_s: float) -> None:
    """Poll how many of run ``run_id``'s traces are stored until ``total`` are, or ``wait_s`` passed."""
    deadline = time.monotonic() + wait_s
    while True:
        if await store.count_run_results(run_id) >= total or time.monotonic() >= deadline:
            return
        await asyncio.sleep(POLL_INTERVAL_S)


#: Seconds ``replay --via`` waits for serve's ``/readyz`` before giving up the database check.
READYZ_TIMEOUT_S = 5.0


def serve_readyz_url(settings: Settings, serve_url: str | None = None) -> str:
    """``<serve_url>/readyz``, default ``http://<http_address>/readyz`` (serve's health port from the same
    settings; a wildcard host ``0.0.0.0``/``::``/empty means this machine, ``127.0.0.1``)."""
    if serve_url:
        return serve_url.rstrip("/") + "/readyz"
    host, _, port = settings.http.address.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{port}/readyz" if ":" not in host else f"http://[{host}]:{port}/readyz"


async def check_serve_database(
    store: RunStore, url: str, *, timeout_s: float = READYZ_TIMEOUT_S
) -> str | None:
    """Compare serve's database (``database`` on its ``/readyz`` at ``url``) with ``store``'s.

    Returns serve's database identity, or ``None`` when it could not be asked (no answer within ``timeout_s``,
    or a serve that does not report one): the replay then waits as before, with a warning in the log.

    Raises:
        ConfigError: serve writes to another database than ``store`` (the replay would wait for nothing).
    """
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            body = (await http.get(url)).json()
    except (httpx.HTTPError, ValueError) as e:
        log.warning("serve_database_unchecked", url=url, error=f"{type(e).__name__}: {e}"[:200])
        return None
    theirs = body.get("database") if isinstance(body, dict) else None
    if not isinstance(theirs, str):
        log.warning("serve_database_unchecked", url=url, error="no 'database' in the /readyz answer")
        return None
    ours = await store.database_identity()
    if theirs != ours:
        raise ConfigError(
            f"serve ({url}) writes to another database ({theirs}) than this replay reads ({ours}): its "
            "judgements would never arrive; give serve and replay the same RAGPULSE_STORE_DATABASE_URL (or pass "
            "--serve-url for the serve that uses this database)"
        )
    return theirs


async def replay_via(
    settings: Settings,
    store: RunStore,
    test_set: CaseSource,
    via: Via,
    *,
    judge_names: Sequence[str] | None = None,
    run_id: str | None = None,
    wait_s: float = 300.0,
    serve_url: str | None = None,
    replace_run: bool = False,
    replace_test_set: bool = False,
) -> RunReport:
    """Check that serve writes to this store's database (:func:`check_serve_database`, within seconds), open
    the judges (for their versions), then :func:`run_replay_via`.

    ``judge_names`` must be ``None``: serve judges with its own configured judges (``enabled_judges``,
    ``judge_routes``), which the events cannot change, so asking for others would silently not happen.

    Raises:
        BadRequest: the test set has no cases or no judge is enabled.
        ConfigError: ``judge_names`` given, or serve writes to another database.
        IngestError / StoreError: see :func:`run_replay_via`.
    """
    if judge_names is not None:
        raise ConfigError(
            "--judges cannot be used with --via: serve runs its own configured judges (enabled_judges, "
            "judge_routes); set them on serve, or replay without --via"
        )
    check_runnable(test_set, settings.judge.enabled)  # before anything is published
    await check_serve_database(store, serve_readyz_url(settings, serve_url))
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, None, ledger=store)
        return await run_replay_via(
            test_set,
            via,
            judges=judges,
            store=store,
            settings=settings,
            run_id=run_id,
            wait_s=wait_s,
            replace_run=replace_run,
            replace_test_set=replace_test_set,
        )
