"""Fixtures of the API tests: one ``ragpulse serve`` with the portal per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from portal_testutil import Portal, started_portal


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    """``ragpulse serve`` with the portal, offline judges, no token, a 64 KiB upload limit."""
    with started_portal(RAGPULSE_API_MAX_UPLOAD_MB="0.0625") as p:
        yield p
