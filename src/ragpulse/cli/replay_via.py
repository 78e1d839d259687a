"""``ragpulse replay TESTSET --via kafka|otlp``: replay a test set through a real source of a running
``ragpulse serve``, instead of straight into an in-process engine.

Steps: store the test set and create the run (status ``running``); build each case's synthetic trace
(:func:`ragpulse.replay.runner.case_to_trace`, same trace ids as a direct replay); publish them as Kafka events
(:func:`ragpulse.ingest.events.trace_to_event`, carrying ``runId``, ``testCaseId``, ``expectedAnswer``,
``keywords``) or as OTLP OpenInference spans (carrying ``ragpulse.run.id`` …); poll the store until every case's
trace is stored (``get_run_results``) or ``wait_s`` passes; then build, store and return the same run report.
Cases not stored in time count as not stored (reason ``timeout``), so the run ends ``completed_with_errors``.

The serving side (``ragpulse serve``) must consume the same topic / listen on the OTLP endpoint and write to
the same database.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ragpulse.config import Settings
from ragpulse.engine import Router
from ragpulse.ingest.events import trace_to_event
from ragpulse.ingest.publish import publish_kafka, publish_otlp
from ragpulse.logging import get_logger
from ragpulse.model import RunStatus, TestSet, TraceOutcome, TraceResult
from ragpulse.protocols import Judge
from ragpulse.replay.report import CaseResult, build_report
from ragpulse.replay.runner import case_to_trace, start_run

__all__ = ["Via", "run_replay_via"]

#: Seconds between two polls of the store.
POLL_INTERVAL_S = 0.5


class Via(StrEnum):
    """The source a replay goes through."""

    KAFKA = "kafka"
    OTLP = "otlp"


async def run_replay_via(
    test_set: TestSet,
    via: Via,
    *,
    judges: Mapping[str, Judge],
    store: Any,
    settings: Settings,
    run_id: str | None = None,
    wait_s: float = 300.0,
    topic: str | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Send ``test_set``'s synthetic traces through ``via`` and return the run report once they are judged.

    Args:
        judges: the judges the serving side runs (for the run record's versions and the report's judge list).
        store: a :class:`~ragpulse.store.PostgresStore` on the serving side's database.
        wait_s: how long to wait for every case's judgements, seconds.
        topic / endpoint: Kafka topic (default: first of ``kafka_topics``) / OTLP/HTTP base URL (default:
            ``otlp_http_address``).

    Raises:
        ConfigError: the chosen source is not configured (no bootstrap servers / no OTLP endpoint).
        IngestError: publishing failed.
        StoreError: the store failed.
    """
    log = get_logger("ragpulse.replay.via")
    started = time.perf_counter()
    run_id = await start_run(
        store,
        test_set,
        judges,
        run_id=run_id,
        settings={"via": via.value, "judge_model": settings.judge.model},
    )
    traces = [case_to_trace(c, run_id=run_id, test_set=test_set.name) for c in test_set.cases]
    log.info("replay_via_started", run_id=run_id, via=via.value, cases=len(traces))
    if via is Via.KAFKA:
        values = [json.dumps(trace_to_event(t), ensure_ascii=False).encode("utf-8") for t in traces]
        await publish_kafka(settings.kafka, values, topic)
    else:
        await publish_otlp(settings.otlp, traces, endpoint)
    wanted = {c.id for c in test_set.cases}
    got: dict[str, TraceResult] = {}
    deadline = time.monotonic() + wait_s
    while True:
        for r in await store.get_run_results(run_id):
            if r.trace.test_case_id in wanted:
                got[r.trace.test_case_id] = r
        if len(got) >= len(wanted) or time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_INTERVAL_S)
    router = Router(judges, settings.judge.routes)
    cases: list[CaseResult] = []
    for case, trace in zip(test_set.cases, traces, strict=True):
        result = got.get(case.id)
        if result is None:
            missing = TraceResult(trace=trace, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="timeout")
            cases.append(CaseResult(case_id=case.id, result=missing, stored=False, note="timeout"))
            continue
        cases.append(
            CaseResult(
                case_id=case.id, result=result, judges=tuple(j.name for j in router.select(result.trace))
            )
        )
    report = build_report(
        run_id=run_id,
        test_set=test_set.name,
        cases=cases,
        judges=list(judges),
        wall_seconds=time.perf_counter() - started,
    )
    report["via"] = via.value
    await store.finish_run(run_id, RunStatus(report["status"]), report)
    log.info(
        "replay_via_finished", run_id=run_id, status=report["status"], stored=len(got), cases=len(wanted)
    )
    return report


async def replay_via_async(
    settings: Settings,
    test_set: TestSet,
    via: Via,
    *,
    judge_names: list[str] | None = None,
    run_id: str | None = None,
    wait_s: float = 300.0,
) -> dict[str, Any]:
    """Open the store and judges (for versions), then :func:`run_replay_via`.

    Raises:
        ConfigError / IngestError / StoreError: see :func:`run_replay_via`.
    """
    from contextlib import AsyncExitStack

    from ragpulse.cli.replay_cmd import open_judges
    from ragpulse.store import open_store

    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, judge_names)
        store = await stack.enter_async_context(open_store(settings.store))
        return await run_replay_via(
            test_set, via, judges=judges, store=store, settings=settings, run_id=run_id, wait_s=wait_s
        )
