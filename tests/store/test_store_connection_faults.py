"""Issue 27 item 1: a connection error is a connection error whatever asyncpg exception carries it.

During a database outage under load asyncpg raised ``InterfaceError: cannot perform operation: another
operation is in progress`` and ``InternalClientError: cannot switch to state 15``; both were classified as bad
data, so the engine split batches and Kafka commits froze. The fault is injected with real asyncpg: a pooled
connection is given back while a query still runs on it (what a cut mid-write leaves behind), so the next
write on it meets the real error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from ragpulse.config import Settings, StoreSettings
from ragpulse.engine import Engine
from ragpulse.errors import StoreError
from ragpulse.model import Trace, TraceResult
from ragpulse.store.errors import is_connection_error, is_retriable
from ragpulse.store.postgres import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge
from store import store_factories as f
from testsupport import pg_count


async def _poison_the_pool(store: PostgresStore) -> asyncio.Task[Any]:
    """Give the pool's only connection back while a 1 s query still runs on it; returns that query."""
    conn = await store.pool.acquire()
    busy = asyncio.create_task(conn.fetchval("SELECT pg_sleep(1)"))
    await asyncio.sleep(0.05)  # the query is on the wire
    await store.pool.release(conn)  # the store's reset is a no-op: the pool takes it back busy
    return busy


async def _connect(pg_url: str) -> PostgresStore:
    return await PostgresStore.connect(pg_url, StoreSettings(pool_min=1, pool_max=1))


async def test_another_operation_in_progress_is_retriable_and_the_retry_gets_a_fresh_connection(
    pg_url: str,
) -> None:
    store = await _connect(pg_url)
    try:
        busy = await _poison_the_pool(store)
        with pytest.raises(StoreError) as caught:
            await store.write_results([f.result(f.trace("t1"), f.ok())])
        assert "another operation is in progress" in str(caught.value)
        assert caught.value.retriable
        with pytest.raises(asyncpg.ConnectionDoesNotExistError):
            await busy  # the broken connection was terminated, not given back to the pool
        await store.write_results([f.result(f.trace("t1"), f.ok())])  # the retry: a fresh connection
        assert await pg_count(pg_url, "SELECT count(*) FROM traces") == 1
    finally:
        await store.close()


async def test_engine_retries_the_whole_batch_instead_of_splitting_it(pg_url: str) -> None:
    store = await _connect(pg_url)
    acks: list[bool] = []

    async def ack(_: TraceResult, ok: bool) -> None:
        acks.append(ok)

    settings = Settings(engine_batch_size=10, engine_store_backoff_s=0.01, engine_flush_interval_s=0.5)
    try:
        async with Engine(
            {"k": ScriptedJudge("k", 1.0)}, store, settings.engine, redelivering=True
        ) as engine:
            busy = await _poison_the_pool(store)
            for i in range(10):
                await engine.submit(Trace(trace_id=f"t{i}", question="q", answer="a"), ack)
            assert await engine.drain(60)
            with pytest.raises(asyncpg.ConnectionDoesNotExistError):
                await busy
        assert acks == [True] * 10
        assert engine.stats.failed == 0
        assert engine.stats.store_retries >= 1
        # one write of the whole batch after the retry, not ten single-trace writes after a split
        assert engine.stats.batches <= 2
        assert await pg_count(pg_url, "SELECT count(*) FROM traces") == 10
    finally:
        await store.close()


async def test_a_real_concurrent_use_error_is_a_connection_error(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        first = asyncio.create_task(conn.fetchval("SELECT pg_sleep(0.2)"))
        await asyncio.sleep(0.02)
        with pytest.raises(asyncpg.InterfaceError) as caught:
            await conn.fetchval("SELECT 1")
        await first
    finally:
        await conn.close()
    assert is_connection_error(caught.value)
    assert is_retriable(caught.value)


@pytest.mark.parametrize(
    ("exc", "connection"),
    [
        (asyncpg.InterfaceError("cannot perform operation: another operation is in progress"), True),
        (
            asyncpg.InterfaceError(
                "cannot call Transaction.__aexit__(): the underlying connection is closed"
            ),
            True,
        ),
        (
            asyncpg.exceptions.InternalClientError(
                "cannot switch to state 15; another operation (14) is in progress"
            ),
            True,
        ),
        (asyncpg.exceptions.ProtocolError("unexpected message"), True),
        (asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"), True),
        (ConnectionResetError(104, "Connection reset by peer"), True),
        (TimeoutError(), True),
        (asyncpg.exceptions._base.DataError("invalid input for query argument $1"), False),
        (asyncpg.exceptions.DataError("invalid_text_representation"), False),
        (asyncpg.exceptions.ClientConfigurationError("bad dsn"), False),
        (asyncpg.UniqueViolationError("duplicate key"), False),
    ],
)
def test_connection_error_classification(exc: BaseException, connection: bool) -> None:
    assert is_connection_error(exc) is connection
    assert is_retriable(exc) is connection
