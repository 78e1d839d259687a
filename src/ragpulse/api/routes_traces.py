"""``/api/v1``: traces, score statistics, dead letters and ``POST /evaluate`` (thin adapters over
:mod:`ragpulse.services`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ragpulse.api.auth import get_ctx
from ragpulse.api.context import PortalContext
from ragpulse.services import deadletters, stats, traces
from ragpulse.services.evaluate import EvaluateResult, evaluate
from ragpulse.services.paging import DEFAULT_LIMIT, Page
from ragpulse.services.testsets import TestSetName
from ragpulse.services.timewindow import parse_span, parse_time, window

__all__ = ["router"]

router = APIRouter()

Ctx = Annotated[PortalContext, Depends(get_ctx)]
Since = Annotated[str | None, Query(description="ISO-8601 time or a span before now (24h, 7d)")]
Until = Annotated[str | None, Query(description="ISO-8601 time or a span before now; default now")]


class CopyToTestSet(BaseModel):
    """Where to copy a trace: the test set, optionally the case id, an expected answer, and whether to keep the
    recorded answer (``false``: replay asks the RAG endpoint)."""

    model_config = ConfigDict(extra="forbid")
    test_set: TestSetName
    case_id: str | None = Field(default=None, min_length=1, max_length=200)
    expected_answer: str | None = None
    keep_answer: bool = True


class ScoreStats(BaseModel):
    """Score statistics for a time window (UTC)."""

    since: str
    until: str
    buckets: list[float]
    items: list[stats.JudgeScores]


class Timeseries(BaseModel):
    """Pass rate and mean score per judge per interval."""

    since: str
    until: str
    interval_s: float
    items: list[stats.JudgeSeries]


@router.get("/traces", summary="Traces, newest first (keyset pagination)")
async def list_traces(
    ctx: Ctx,
    app: Annotated[str | None, Query()] = None,
    scenario: Annotated[str | None, Query()] = None,
    trace_outcome: Annotated[traces.TraceOutcomeName | None, Query()] = None,
    judge: Annotated[str | None, Query(description="filter on this judge's judgement")] = None,
    outcome: Annotated[traces.JudgementOutcome | None, Query(description="of judge")] = None,
    min_score: Annotated[float | None, Query(ge=0, le=1, description="of judge")] = None,
    max_score: Annotated[float | None, Query(ge=0, le=1, description="of judge")] = None,
    since: Since = None,
    until: Until = None,
    run_id: Annotated[str | None, Query()] = None,
    source: Annotated[str | None, Query(description="kafka, otlp, replay or api")] = None,
    q: Annotated[str | None, Query(description="text in the question", max_length=500)] = None,
    include_api: Annotated[bool, Query(description="include source=api traces")] = False,
    limit: Annotated[int, Query(ge=1, le=traces.MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[traces.TraceSummary]:
    f = traces.TraceFilters(
        app=app,
        scenario=scenario,
        trace_outcome=trace_outcome,
        judge=judge,
        outcome=outcome,
        min_score=min_score,
        max_score=max_score,
        since=parse_time(since),
        until=parse_time(until),
        run_id=run_id,
        source=source,
        q=q,
        include_api=include_api,
    )
    return await traces.list_traces(ctx.store, f, limit=limit, cursor=cursor, redact_text=ctx.redact_text)


@router.get("/traces/{trace_id}", summary="One trace with every judgement and its per-claim details")
async def get_trace(ctx: Ctx, trace_id: str) -> traces.TraceDetail:
    return await traces.get_trace(ctx.store, trace_id)


@router.post(
    "/traces/{trace_id}/copy-to-test-set", status_code=201, summary="Add a trace to a test set as a case"
)
async def copy_to_test_set(ctx: Ctx, trace_id: str, body: CopyToTestSet) -> dict[str, Any]:
    return await traces.copy_to_test_set(
        ctx.store,
        trace_id,
        body.test_set,
        case_id=body.case_id,
        expected_answer=body.expected_answer,
        keep_answer=body.keep_answer,
    )


@router.get("/stats/scores", summary="Score histogram, pass rate and counts per judge (and app)")
async def score_stats(
    ctx: Ctx,
    since: Since = None,
    until: Until = None,
    judge: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
    source: Annotated[str | None, Query()] = None,
    include_api: Annotated[bool, Query()] = False,
    by_app: Annotated[bool, Query(description="one item per judge and app")] = False,
) -> ScoreStats:
    start, end = window(since, until, timedelta(hours=24))
    items = await stats.score_stats(
        ctx.store,
        since=start,
        until=end,
        judge=judge,
        app=app,
        source=source,
        include_api=include_api,
        by_app=by_app,
    )
    return ScoreStats(
        since=start.isoformat(), until=end.isoformat(), buckets=list(stats.SCORE_BUCKETS), items=items
    )


@router.get("/stats/timeseries", summary="Pass rate and mean score per judge per interval")
async def score_timeseries(
    ctx: Ctx,
    since: Since = None,
    until: Until = None,
    interval: Annotated[str | None, Query(description="e.g. 5m, 1h; default: about 48 intervals")] = None,
    judge: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
    source: Annotated[str | None, Query()] = None,
    include_api: Annotated[bool, Query()] = False,
) -> Timeseries:
    start, end = window(since, until, timedelta(hours=24))
    step = parse_span(interval) if interval else stats.auto_interval(start, end)
    items = await stats.timeseries(
        ctx.store,
        since=start,
        until=end,
        interval=step,
        judge=judge,
        app=app,
        source=source,
        include_api=include_api,
    )
    return Timeseries(
        since=start.isoformat(), until=end.isoformat(), interval_s=step.total_seconds(), items=items
    )


@router.get("/dead-letters", summary="Dead-lettered inputs (Kafka, OTLP) with reason and origin")
async def list_dead_letters(
    ctx: Ctx,
    source: Annotated[str | None, Query(description="kafka or otlp")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[deadletters.DeadLetter]:
    return await deadletters.list_dead_letters(ctx.store, source=source, limit=limit, cursor=cursor)


@router.post(
    "/evaluate",
    summary="Judge one trace now (source=api) and answer with its judgements and feedback",
    responses={504: {"description": "not judged within timeout_s (still judged and stored)"}},
)
async def evaluate_trace(
    ctx: Ctx,
    request: Request,
    event: Annotated[
        dict[str, Any],
        Body(
            description="one trace in the Kafka event schema (traceId optional: every attempt gets its own)",
            examples=[{"question": "Q?", "answer": "A.", "contexts": ["ctx"], "app": "shop"}],
        ),
    ],
    timeout_s: Annotated[float, Query(gt=0, le=600)] = 30.0,
) -> EvaluateResult:
    if ctx.engine is None:
        raise HTTPException(503, "evaluation is not available on this server")
    return await evaluate(ctx.engine, await request.body(), timeout_s=timeout_s)
