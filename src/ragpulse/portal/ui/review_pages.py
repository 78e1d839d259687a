"""The UI's Review page: the human review queue with agree/disagree per judgement (keyboard: j/k, a/d in
``static/portal.js``), the reviewer's name (from the single-sign-on proxy's header, else typed once per browser
session), and the judges' agreement with the reviewers beside their corrected pass rates."""

from __future__ import annotations

from datetime import timedelta
from typing import cast
from urllib.parse import quote, unquote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ragpulse.errors import NotFoundError, ServiceError
from ragpulse.portal import review
from ragpulse.portal.auth import REVIEWER_COOKIE, cookie_name, trusted_reviewer
from ragpulse.portal.ui.pages import Ui, UiDep, set_cookie
from ragpulse.query import window

__all__ = ["reviewer_of", "router"]

router = APIRouter(include_in_schema=False)


def reviewer_of(ui: Ui, request: Request) -> str | None:
    """Who reviews: the trusted proxy's header (``api.reviewer_header``), else the name typed this session."""
    named = trusted_reviewer(request, ui.ctx.settings.api.reviewer_header)
    if named:
        return named
    typed = request.cookies.get(cookie_name(request, REVIEWER_COOKIE))
    return unquote(typed) if typed else None


def _back(url: str) -> str:
    """``url`` when it is a Review page address, else the Review page."""
    return url if url.startswith("/review") and not url.startswith(("//", "/\\")) else "/review"


async def review_page(ui: Ui, request: Request) -> HTMLResponse:
    q = request.query_params
    f = {"since": q.get("since") or "7d", "judge": q.get("judge") or None}
    start, end = window(f["since"], None, timedelta(days=7))
    versions = {name: j.version for name, j in ui.ctx.judges.items()}
    api = ui.ctx.settings.api
    page = await review.queue(
        ui.ctx.store,
        versions,
        since=start,
        until=end,
        margin=api.review_borderline,
        share=api.review_sample_share,
        judge=f["judge"],
        limit=20,
        cursor=q.get("cursor"),
    )
    rows = await review.agreement(
        ui.ctx.store, versions, timedelta(seconds=ui.ctx.settings.export.corrected_window_s)
    )
    here = "/review" + (f"?{request.url.query}" if request.url.query else "")
    more = None
    if page.next_cursor:
        more = "/review?" + urlencode({k: v for k, v in {**f, "cursor": page.next_cursor}.items() if v})
    return ui.render(
        request,
        "review.html",
        section="review",
        f=f,
        judge_names=sorted(versions),
        items=page.items,
        more_url=more,
        agreement=rows,
        reviewer=reviewer_of(ui, request),
        here=here,
    )


@router.get("/review")
async def review_queue(ui: UiDep, request: Request) -> HTMLResponse:
    ui.guard(request)
    return await review_page(ui, request)


@router.post("/review/reviewer")
async def set_reviewer(ui: UiDep, request: Request) -> Response:
    form = await ui.form(request)
    nxt = _back(str(form.get("next", "/review")))
    try:
        name = review.check_reviewer(str(form.get("reviewer", "")))
    except ServiceError as e:
        return ui.back(request, nxt, err=str(e))
    resp = RedirectResponse(nxt, status_code=303)
    set_cookie(request, resp, REVIEWER_COOKIE, quote(name, safe=""))  # no max_age: this browser session only
    return resp


@router.post("/review/label")
async def label(ui: UiDep, request: Request) -> Response:
    form = await ui.form(request)
    who = reviewer_of(ui, request)
    verdict = str(form.get("verdict", ""))
    try:
        if who is None:
            review.check_reviewer(None)
        await review.label_judgement(
            ui.ctx.store,
            str(form.get("trace_id", "")),
            str(form.get("judge", "")),
            str(form.get("version", "")),
            cast("review.Verdict", verdict),  # anything but agree/disagree is refused there
            who or "",
        )
    except (ServiceError, NotFoundError) as e:
        return ui.back(request, _back(str(form.get("next", "/review"))), err=str(e))
    return RedirectResponse(_back(str(form.get("next", "/review"))), status_code=303)
