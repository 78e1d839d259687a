"""The PostgreSQL result store (asyncpg): schema migrations, bulk upserts, runs, retention, embedded default.

Entry point: :func:`open_store`. See ``docs/storage.md`` for the schema and useful queries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ragpulse.config import StoreSettings
from ragpulse.store.embedded import embedded_url
from ragpulse.store.postgres import PostgresStore

__all__ = ["PostgresStore", "open_store", "resolve_database_url"]


async def resolve_database_url(settings: StoreSettings) -> str:
    """``settings.database_url`` if set, else the URL of the embedded PostgreSQL (started if needed)."""
    if settings.database_url:
        return settings.database_url
    return await embedded_url(settings)


@asynccontextmanager
async def open_store(settings: StoreSettings) -> AsyncIterator[PostgresStore]:
    """Connect to the configured database (or start the embedded one), apply migrations, yield the store, and
    close its pool on exit.

    Raises:
        StoreError: cannot start/connect (``retriable=True`` for connection failures) or a migration failed.
    """
    url = await resolve_database_url(settings)
    store = await PostgresStore.connect(url, settings)
    try:
        yield store
    finally:
        await store.close()
