"""The UI's run pages: Run evaluation (form, live progress, result), Run history (drawer, compare two)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter

if TYPE_CHECKING:
    from ragpulse.web.views import Ui

__all__ = ["build_runs_router"]


def build_runs_router(ui: Ui) -> APIRouter:
    """The run pages' routes."""
    return APIRouter(include_in_schema=False)
