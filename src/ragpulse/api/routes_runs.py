"""``/api/v1``: runs (start, history, cancel, comparisons). Filled in on the services layer's run functions."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter()
