"""``/api/v1/review``: the human review queue, labels and the judges' agreement with reviewers (thin adapters
over :mod:`ragpulse.portal.review`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ragpulse.portal import review
from ragpulse.portal.auth import get_ctx, trusted_reviewer
from ragpulse.portal.context import PortalContext
from ragpulse.query import DEFAULT_LIMIT, Page, window

__all__ = ["router"]

router = APIRouter()

Ctx = Annotated[PortalContext, Depends(get_ctx)]


class LabelBody(BaseModel):
    """A reviewer's verdict on one judgement version. ``reviewer`` is needed unless the single-sign-on proxy
    names the reviewer (``api.reviewer_header`` from a trusted proxy), which then wins."""

    model_config = ConfigDict(extra="forbid")
    trace_id: str = Field(min_length=1)
    judge: str = Field(min_length=1)
    version: str = Field(min_length=1)
    verdict: review.Verdict
    reviewer: str | None = Field(default=None, max_length=review.MAX_REVIEWER_CHARS)


def versions(ctx: PortalContext) -> dict[str, str]:
    """``{judge: version}`` of the judges ``serve`` runs."""
    return {name: j.version for name, j in ctx.judges.items()}


@router.get("/review/queue", summary="Traces waiting for a reviewer, newest first")
async def review_queue(
    ctx: Ctx,
    since: Annotated[str | None, Query(description="ISO-8601 time or a span before now; default 7d")] = None,
    until: Annotated[str | None, Query()] = None,
    judge: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query()] = None,
) -> Page[review.QueueItem]:
    start, end = window(since, until, timedelta(days=7))
    api = ctx.settings.api
    return await review.queue(
        ctx.store,
        versions(ctx),
        since=start,
        until=end,
        margin=api.review_borderline,
        share=api.review_sample_share,
        judge=judge,
        limit=limit,
        cursor=cursor,
    )


@router.post("/review/labels", status_code=201, summary="Label a judgement: agree or disagree")
async def add_label(ctx: Ctx, request: Request, body: LabelBody) -> dict[str, Any]:
    who = trusted_reviewer(request, ctx.settings.api.reviewer_header) or body.reviewer or ""
    return await review.label_judgement(ctx.store, body.trace_id, body.judge, body.version, body.verdict, who)


@router.get(
    "/review/agreement", summary="Judges against review labels: sensitivity, specificity, corrected pass rate"
)
async def review_agreement(ctx: Ctx) -> dict[str, Any]:
    rows = await review.agreement(
        ctx.store, versions(ctx), timedelta(seconds=ctx.settings.export.corrected_window_s)
    )
    return {"window_s": ctx.settings.export.corrected_window_s, "items": [r.model_dump() for r in rows]}
