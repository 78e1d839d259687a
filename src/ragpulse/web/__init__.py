"""The portal's web UI: server-rendered Jinja2 templates with htmx, English and Chinese.

Every asset is package data (``static/``: the stylesheet and the vendored htmx; charts are server-rendered SVG),
so nothing is loaded from the internet and nothing is built with Node at install time.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ragpulse.api.context import PortalContext

__all__ = ["mount_ui"]


def mount_ui(app: FastAPI, ctx: PortalContext) -> Callable[[Request, int, str], Response]:
    """Add the UI's routes and static files to ``app``; return the HTML error page renderer."""
    from ragpulse.web.runs_views import build_runs_router
    from ragpulse.web.views import mount

    return mount(app, ctx, extra=(build_runs_router,))
