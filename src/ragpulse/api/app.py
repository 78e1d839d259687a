"""The portal app: REST API under ``/api/v1`` and the web UI at ``/`` on one listener."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from ragpulse import __version__
from ragpulse.api import routes_catalog, routes_runs, routes_traces
from ragpulse.api.auth import require_token
from ragpulse.api.context import PortalContext
from ragpulse.api.docs import docs_page
from ragpulse.api.problems import BodyLimit, install_problem_handlers

__all__ = ["API_PREFIX", "build_app"]

API_PREFIX = "/api/v1"


def build_app(ctx: PortalContext) -> Any:
    """The ASGI app of the portal for ``ctx`` (FastAPI wrapped in the body-size limit)."""
    from ragpulse.web import mount_ui

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
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_token)])
    api.include_router(routes_catalog.router, tags=["test sets"])
    api.include_router(routes_runs.router, tags=["runs"])
    api.include_router(routes_traces.router, tags=["traces"])

    @api.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @api.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(docs_page(app.openapi()))

    app.include_router(api)
    html_error = mount_ui(app, ctx)
    install_problem_handlers(app, html_error)
    return BodyLimit(app, ctx.options.max_upload_bytes)
