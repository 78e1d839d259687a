"""``/api/v1``: runs — start (queued in PostgreSQL, run by ``serve``'s worker), history, one run with progress
and report, cancel, and comparisons (thin adapters over :mod:`ragpulse.runs.queue`,
:mod:`ragpulse.runs.stored` and :mod:`ragpulse.portal.run_history`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel

from ragpulse.portal import run_history
from ragpulse.portal.auth import get_ctx
from ragpulse.portal.context import PortalContext
from ragpulse.query import DEFAULT_LIMIT, Page
from ragpulse.runs import queue as run_queue
from ragpulse.runs.compare import DEFAULT_SCORE_DROP
from ragpulse.runs.report_model import CaseRow
from ragpulse.runs.stored import compare_runs

__all__ = ["router"]

router = APIRouter()

Ctx = Annotated[PortalContext, Depends(get_ctx)]


class RunOptions(BaseModel):
    """What a run may choose: every judge ``replay --judges`` accepts (retrieval judges and checklists too),
    the configured judge models and RAG endpoints (names only)."""

    judges: list[str]
    judge_models: list[str]
    rag_endpoints: list[str]


class Cancelled(BaseModel):
    """The run's status after a cancel (``cancelled``, or ``running`` until its worker has stopped it)."""

    run_id: str
    status: str


@router.get("/run-options", summary="Judges, judge models and RAG endpoints a run may choose")
async def run_options(ctx: Ctx) -> RunOptions:
    return RunOptions(
        judges=run_queue.choosable_judges(ctx.settings, ctx.judges), **run_queue.run_options(ctx.settings)
    )


@router.post("/runs", status_code=202, summary="Start a run (queued; see status_url)")
async def start_run(ctx: Ctx, body: run_queue.RunRequest, response: Response) -> run_queue.RunAccepted:
    known = run_queue.choosable_judges(ctx.settings, ctx.judges)
    accepted = await run_queue.enqueue_run(ctx.store, ctx.settings, known, body)
    if ctx.runs is not None:
        ctx.runs.wake()
    response.headers["Location"] = accepted.status_url
    return accepted


@router.get("/runs", summary="Run history, newest first")
async def list_runs(
    ctx: Ctx,
    test_set: Annotated[str | None, Query()] = None,
    status: Annotated[str | None, Query(description="queued, running, completed, … cancelled")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[run_history.RunItem]:
    return await run_history.list_runs(
        ctx.store, test_set=test_set, status=status, limit=limit, cursor=cursor
    )


@router.get(
    "/runs/{run_id}",
    summary="One run: status, progress, report and the first page of cases (all and failing) with their judgements",
)
async def get_run(ctx: Ctx, run_id: str) -> run_history.RunDetail:
    return await run_history.get_run(ctx.store, run_id)


@router.get(
    "/runs/{run_id}/cases", summary="A run's cases with their judgements, in run order, a page at a time"
)
async def run_cases(
    ctx: Ctx,
    run_id: str,
    failing: Annotated[bool, Query(description="only the failing cases (verdict fail)")] = False,
    not_judged: Annotated[
        bool, Query(description="only the cases not judged (abstained, judge errors, skips)")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = run_history.CASES_PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[CaseRow]:
    return await run_history.case_page(
        ctx.store, run_id, failing=failing, not_judged=not_judged, limit=limit, cursor=cursor
    )


@router.post("/runs/{run_id}/cancel", summary="Cancel a queued or running run (a finished one → 409)")
async def cancel(ctx: Ctx, run_id: str) -> Cancelled:
    return Cancelled(run_id=run_id, status=await run_queue.cancel_run(ctx.store, run_id))


@router.get(
    "/run-comparisons",
    summary="Compare run a (baseline) with run b: deltas per judge, flipped cases, score drops",
)
async def compare(
    ctx: Ctx,
    a: Annotated[str, Query(description="baseline run id")],
    b: Annotated[str, Query(description="candidate")],
    score_drop: Annotated[
        float,
        Query(
            gt=0,
            le=1,
            description="a case that failed in both runs is listed in score_drops when a judge's score dropped "
            "by this much or more",
        ),
    ] = DEFAULT_SCORE_DROP,
) -> dict[str, Any]:
    return (await compare_runs(ctx.store, a, b, score_drop=score_drop)).to_json()
