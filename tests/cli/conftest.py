"""Fixtures of the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def db(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A private database as the CLI's ``RAGPULSE_STORE_DATABASE_URL`` (every other ``RAGPULSE_*`` variable is already
    removed by ``tests/conftest.py``, so the offline judges and no RAG endpoint are used)."""
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    return pg_url
