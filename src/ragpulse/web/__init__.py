"""The portal's web UI (server-rendered Jinja2 templates with htmx; every asset shipped in the package)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

__all__ = ["mount_ui"]


def mount_ui(app: FastAPI, ctx: Any) -> Any:
    """Add the UI's routes to ``app``; return the HTML error page renderer (``None``: problem+json)."""
    return None
