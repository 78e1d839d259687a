"""``/api/v1``: traces, score statistics, dead letters and ``POST /evaluate`` (thin adapters over
:mod:`ragpulse.portal.traces`, :mod:`ragpulse.portal.stats`, :mod:`ragpulse.portal.deadletters`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ragpulse.export.otel_setup import SCORE_BUCKETS
from ragpulse.portal import deadletters, stats, traces
from ragpulse.portal.auth import get_ctx
from ragpulse.portal.context import PortalContext
from ragpulse.portal.evaluate import EvaluateResult, evaluate
from ragpulse.portal.traces import MAX_BULK, BulkItem
from ragpulse.query import DEFAULT_LIMIT, Page, bounds, parse_span, window
from ragpulse.runs.testsets import TestSetName

__all__ = ["router"]

router = APIRouter()

Ctx = Annotated[PortalContext, Depends(get_ctx)]
Since = Annotated[
    str | None,
    Query(
        description="ISO-8601 time, epoch milliseconds, or a span (24h, 7d) before until (before now without one)"
    ),
]
Until = Annotated[
    str | None, Query(description="ISO-8601 time, epoch milliseconds, or a span before now; default now")
]
SourceParam = Annotated[
    str | None,
    Query(description="live (default: kafka and otlp), kafka, otlp, replay, api (POST /evaluate) or all"),
]


class CopyToTestSet(BaseModel):
    """Where to copy a trace: the test set, optionally the case id, an expected answer, and whether to keep the
    recorded answer (``false``: replay asks the RAG endpoint)."""

    model_config = ConfigDict(extra="forbid")
    test_set: TestSetName
    case_id: str | None = Field(default=None, min_length=1, max_length=200)
    expected_answer: str | None = None
    keep_answer: bool = True


class BulkCopy(BaseModel):
    """Traces to add to a test set as cases (at most 500), each with an optional case id and expected answer,
    and whether to keep their recorded answers (``false``: replay asks the RAG endpoint)."""

    model_config = ConfigDict(extra="forbid")
    traces: list[BulkItem] = Field(min_length=1, max_length=MAX_BULK)
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
    outcome: Annotated[
        traces.JudgementOutcome | None,
        Query(description="a judgement of judge has this outcome (of any judge without judge)"),
    ] = None,
    min_score: Annotated[float | None, Query(ge=0, le=1, description="of judge (any judge without)")] = None,
    max_score: Annotated[float | None, Query(ge=0, le=1, description="of judge (any judge without)")] = None,
    since: Since = None,
    until: Until = None,
    run_id: Annotated[str | None, Query()] = None,
    session: Annotated[str | None, Query(description="the traces of this session (session_id)")] = None,
    source: SourceParam = None,
    q: Annotated[str | None, Query(description="text in the question", max_length=500)] = None,
    text: Annotated[
        str | None,
        Query(description="words (at most 8) each in the question or the answer", max_length=500),
    ] = None,
    model: Annotated[str | None, Query(description="the app's model")] = None,
    min_latency_s: Annotated[float | None, Query(ge=0, description="trace latency, seconds")] = None,
    max_latency_s: Annotated[float | None, Query(ge=0, description="trace latency, seconds")] = None,
    include_api: Annotated[bool, Query(description="without source: all sources (older switch)")] = False,
    limit: Annotated[int, Query(ge=1, le=traces.MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[traces.TraceSummary]:
    start, end = bounds(since, until)
    f = traces.TraceFilters(
        app=app,
        scenario=scenario,
        trace_outcome=trace_outcome,
        judge=judge,
        outcome=outcome,
        min_score=min_score,
        max_score=max_score,
        since=start,
        until=end,
        run_id=run_id,
        session=session,
        source=source,
        q=q,
        text=text,
        model=model,
        min_latency_s=min_latency_s,
        max_latency_s=max_latency_s,
        include_api=include_api,
    )
    return await traces.list_traces(
        ctx.store,
        f,
        limit=limit,
        cursor=cursor,
        redact_text=ctx.redact_text,
        prices=ctx.settings.export.model_prices,
    )


@router.get("/traces/{trace_id:path}", summary="One trace with every judgement and its per-claim details")
async def get_trace(ctx: Ctx, trace_id: str) -> traces.TraceDetail:
    return await traces.get_trace(ctx.store, trace_id, prices=ctx.settings.export.model_prices)


@router.get(
    "/sessions/{session_id:path}", summary="A session's traces in turn order, with the app's tokens and cost"
)
async def get_session(ctx: Ctx, session_id: str) -> traces.SessionDetail:
    return await traces.get_session(ctx.store, session_id, prices=ctx.settings.export.model_prices)


@router.post(
    "/traces/{trace_id:path}/copy-to-test-set", status_code=201, summary="Add a trace to a test set as a case"
)
async def copy_to_test_set(ctx: Ctx, trace_id: str, body: CopyToTestSet) -> dict[str, Any]:
    return await traces.copy_to_test_set(
        ctx.store,
        trace_id,
        body.test_set,
        case_id=body.case_id,
        expected_answer=body.expected_answer,
        keep_answer=body.keep_answer,
        max_cases=ctx.options.max_test_set_cases,
    )


@router.post(
    "/test-sets/{name}/cases/from-traces",
    summary="Add traces to a test set as cases (each its own write, within the case limit)",
)
async def copy_traces_to_test_set(ctx: Ctx, name: str, body: BulkCopy) -> traces.BulkResult:
    return await traces.copy_traces_to_test_set(
        ctx.store, name, body.traces, keep_answer=body.keep_answer, max_cases=ctx.options.max_test_set_cases
    )


@router.get("/stats/scores", summary="Score histogram, pass rate and counts per judge (and app)")
async def score_stats(
    ctx: Ctx,
    since: Since = None,
    until: Until = None,
    judge: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
    source: SourceParam = None,
    include_api: Annotated[bool, Query(description="without source: all sources (older switch)")] = False,
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
        since=start.isoformat(), until=end.isoformat(), buckets=list(SCORE_BUCKETS), items=items
    )


@router.get("/stats/timeseries", summary="Pass rate and mean score per judge per interval")
async def score_timeseries(
    ctx: Ctx,
    since: Since = None,
    until: Until = None,
    interval: Annotated[str | None, Query(description="e.g. 5m, 1h; default: about 48 intervals")] = None,
    judge: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
    source: SourceParam = None,
    include_api: Annotated[bool, Query(description="without source: all sources (older switch)")] = False,
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
    return await deadletters.list_dead_letters(
        ctx.store, source=source, limit=limit, cursor=cursor, redact_text=ctx.redact_text
    )


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
