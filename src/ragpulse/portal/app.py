"""The portal app: REST API under ``/api/v1`` (routers in :mod:`ragpulse.portal.rest`) and the web UI at ``/``
(:mod:`ragpulse.portal.ui`: server-rendered Jinja2 templates with htmx, English and Chinese) on one listener.

Every UI asset is package data (``ui/static/``: the stylesheet and the vendored htmx; charts are server-rendered
SVG), so nothing is loaded from the internet and nothing is built with Node at install time.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from ragpulse import __version__
from ragpulse.portal.auth import Access, require_token
from ragpulse.portal.context import PortalContext
from ragpulse.portal.problems import BodyLimit, install_problem_handlers, refuse_nul
from ragpulse.portal.rest import review as rest_review
from ragpulse.portal.rest import runs as rest_runs
from ragpulse.portal.rest import testsets as rest_testsets
from ragpulse.portal.rest import traces as rest_traces
from ragpulse.portal.rest.docs import docs_page
from ragpulse.portal.security import PortalGuard
from ragpulse.portal.ui import review_pages, run_pages
from ragpulse.portal.ui.pages import mount as mount_ui

__all__ = ["API_PREFIX", "build_app"]

API_PREFIX = "/api/v1"


def build_app(ctx: PortalContext) -> Any:
    """The ASGI app of the portal for ``ctx`` (FastAPI in the body-size limit in
    :class:`~ragpulse.portal.security.PortalGuard`)."""
    app = FastAPI(
        title="ragpulse portal API",
        version=__version__,
        description="Test sets, runs, traces and score statistics of ragpulse. Lists answer "
        '{"items": [...], "next_cursor": ...}; errors are application/problem+json.',
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.ctx = ctx
    app.state.access = access = Access(ctx)
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_token), Depends(refuse_nul)])
    api.include_router(rest_testsets.router, tags=["test sets"])
    api.include_router(rest_runs.router, tags=["runs"])
    api.include_router(rest_traces.router, tags=["traces"])
    api.include_router(rest_review.router, tags=["review"])

    @api.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @api.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(docs_page(app.openapi()))

    app.include_router(api)
    html_error = mount_ui(app, ctx, access, routers=(run_pages.router, review_pages.router))
    install_problem_handlers(app, html_error)
    return PortalGuard(BodyLimit(app, ctx.options.max_upload_bytes), ctx, access)
