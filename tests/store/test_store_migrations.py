"""Schema migrations: from empty, re-run (idempotent), concurrent runs serialised by the advisory lock."""

from __future__ import annotations

import asyncio

import asyncpg

from ragpulse.store.migrate import MIGRATION_LOCK_KEY, load_migrations, migrate

TABLES = {
    "dead_letters",
    "judgements",
    "run_cases",
    "runs",
    "schema_migrations",
    "test_cases",
    "test_sets",
    "traces",
}


async def _tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {r["tablename"] for r in rows}


#: Every packaged migration version, ascending (other issues add theirs; each test below applies all of them).
ALL = [m.version for m in load_migrations()]


def test_packaged_migrations_are_numbered() -> None:
    migs = load_migrations()
    assert sorted(set(ALL)) == ALL
    assert (migs[0].version, migs[0].name) == (1, "initial")
    assert {m.name for m in migs if m.version == 13} == {"runs"}
    assert all(len(m.checksum) == 64 for m in migs)


async def test_from_empty_then_rerun(store_url: str) -> None:
    conn = await asyncpg.connect(store_url)
    try:
        assert await _tables(conn) == set()
        assert await migrate(conn) == ALL
        assert await _tables(conn) == TABLES
        assert await migrate(conn) == []
        assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(ALL)
        # the lock is released after migrating
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )
            == 0
        )
    finally:
        await conn.close()


async def test_concurrent_migrations_apply_once(store_url: str) -> None:
    a, b = await asyncpg.connect(store_url), await asyncpg.connect(store_url)
    try:
        done = await asyncio.gather(migrate(a), migrate(b))
        assert sorted(done) == [[], ALL]
        assert await a.fetchval("SELECT count(*) FROM schema_migrations") == len(ALL)
    finally:
        await a.close()
        await b.close()


async def test_migrate_waits_for_advisory_lock(store_url: str) -> None:
    holder, runner = await asyncpg.connect(store_url), await asyncpg.connect(store_url)
    try:
        await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        task = asyncio.create_task(migrate(runner))
        await asyncio.sleep(0.3)
        assert not task.done()
        assert await _tables(holder) == set()  # nothing ran while another replica held the lock
        await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        assert await asyncio.wait_for(task, 10) == ALL
    finally:
        await holder.close()
        await runner.close()


async def test_two_replicas_connect_at_once(store_url: str) -> None:
    from ragpulse.config import Settings
    from ragpulse.store.postgres import PostgresStore

    settings = Settings(database_url=store_url, database_pool_max=2)
    a, b = await asyncio.gather(
        PostgresStore.connect(store_url, settings), PostgresStore.connect(store_url, settings)
    )
    try:
        assert await a.ping()
        assert await b.ping()
        assert await a.migrate() == []
        assert await b.migrate() == []
    finally:
        await a.close()
        await b.close()
