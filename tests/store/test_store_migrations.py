"""Schema migrations: from empty, re-run (idempotent), concurrent runs serialised by the advisory lock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

import ragpulse.store
from ragpulse.store.migrate import MIGRATION_LOCK_KEY, load_migrations, migrate
from testsupport import wait_until

TABLES = {
    "calibration_profiles",
    "dead_letters",
    "judge_token_ledger",
    "judgement_history",
    "judgement_rollup",
    "judgement_rollup_state",
    "judgements",
    "pending_inputs",
    "portal_key",
    "portal_sessions",
    "review_labels",
    "run_cases",
    "run_judgements",
    "runs",
    "schema_migrations",
    "shadow_judgements",
    "store_identity",
    "test_cases",
    "test_sets",
    "traces",
}
#: Every packaged migration version, read from the file names (``NNN_name.sql``).
ALL = sorted(int(p.name[:3]) for p in (Path(ragpulse.store.__file__).parent / "migrations").glob("*.sql"))


async def _tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {r["tablename"] for r in rows}


def test_packaged_migrations_are_numbered() -> None:
    migs = load_migrations()
    assert [m.version for m in migs] == ALL
    assert ALL[0] == 1
    assert migs[0].name == "initial"
    assert len(migs[0].checksum) == 64
    assert {m.name for m in migs if m.version == 13} == {"runs"}


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

        async def runner_waits_on_the_lock() -> bool:
            waiting = await holder.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                runner.get_server_pid(),
            )
            return bool(waiting)

        await wait_until(runner_waits_on_the_lock, what="the migration to wait on the advisory lock")
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

    settings = Settings(store_database_url=store_url, store_pool_max=2)
    a, b = await asyncio.gather(
        PostgresStore.connect(store_url, settings.store), PostgresStore.connect(store_url, settings.store)
    )
    try:
        assert await a.ping()
        assert await b.ping()
        assert await a.migrate() == []
        assert await b.migrate() == []
    finally:
        await a.close()
        await b.close()


async def test_migration_240_pins_stored_runs_to_their_judge_versions(store_url: str) -> None:
    """Runs stored before migration 240 get their case rows pinned: the run's judge version where it recorded
    one (not a newer rejudge), every judge's newest for a run known only from events."""
    conn = await asyncpg.connect(store_url)
    try:
        await conn.execute(
            """CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
                   checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for mig in load_migrations():
            if mig.version < 240:
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    mig.version,
                    mig.name,
                    mig.checksum,
                )
        await conn.execute(
            """INSERT INTO traces (trace_id, question, source, outcome) VALUES
                 ('t1', 'q', 'replay', 'evaluated'), ('t2', 'q', 'kafka', 'evaluated');
               INSERT INTO runs (run_id, test_set, started_at, status, judges)
                 VALUES ('r1', 'set', now(), 'completed', '{"relevancy": "heur/v1"}');
               INSERT INTO run_cases (run_id, trace_id, test_case_id) VALUES ('r1', 't1', 'c1'), ('ev', 't2', 'c2');
               INSERT INTO judgements (trace_id, judge, version, backend, score, passed, status, reason, updated_at)
               VALUES ('t1', 'relevancy', 'heur/v1', 'heuristic', 0.2, false, 'ok', 'off topic', now() - interval '1 h'),
                      ('t1', 'relevancy', 'llm/v2', 'llm', 1, true, 'ok', 'rejudged', now()),
                      ('t1', 'keyword', 'k/v1', 'heuristic', 1, true, 'ok', 'not a judge of r1', now()),
                      ('t2', 'relevancy', 'heur/v1', 'heuristic', 0.2, false, 'ok', 'old', now() - interval '1 h'),
                      ('t2', 'relevancy', 'llm/v2', 'llm', 1, true, 'ok', 'newest', now())"""
        )
        assert await migrate(conn) == [v.version for v in load_migrations() if v.version >= 240]
        rows = await conn.fetch(
            "SELECT run_id, trace_id, judge, version, passed, reason FROM run_judgements ORDER BY run_id"
        )
        assert [tuple(r) for r in rows] == [
            ("ev", "t2", "relevancy", "llm/v2", True, "newest"),
            ("r1", "t1", "relevancy", "heur/v1", False, "off topic"),
        ]
        # migration 241 dropped the foreign key whose check cost a trigger call per pinned judgement
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = 'run_judgements'::regclass AND contype = 'f'"
            )
            == 0
        )
    finally:
        await conn.close()
