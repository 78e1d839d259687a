"""Store fixtures: a migrated ``PostgresStore`` on a private database of the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ragpulse.config import Settings
from ragpulse.store.postgres import PostgresStore


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.connect(pg_url, Settings(database_url=pg_url, database_pool_max=4))
    try:
        yield s
    finally:
        await s.close()
