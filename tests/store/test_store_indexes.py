"""Migration 180 drops three indexes that others already serve (issue 15 item 2); the queries that could use
them read the kept ones."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

import ragpulse.store.postgres as pg
from ragpulse.store.postgres import PostgresStore
from store.store_factories import store_settings

DROPPED = {"traces_received_idx", "traces_app_received_idx", "judgements_judge_created_idx"}


async def _plan(conn: asyncpg.Connection, sql: str, *args: object) -> str:
    return "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))


async def test_duplicate_indexes_are_gone_and_their_queries_read_the_kept_ones(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, store_settings(pg_url).store)
    await store.close()
    conn = await asyncpg.connect(pg_url)
    try:
        names = {r["indexname"] for r in await conn.fetch("SELECT indexname FROM pg_indexes")}
        assert not names & DROPPED
        # the planner would scan a table this small; forbid that to see which index it can use
        await conn.execute("SET enable_seqscan = off")
        prune = pg._PRUNE_TRACES.split("), gone AS")[0].split("WITH doomed AS (")[1]
        assert "traces_received_id_idx" in await _plan(conn, prune, datetime.now(UTC), 100, None, None)
        by_app = "SELECT trace_id FROM traces WHERE app = $1 AND received_at >= now() - interval '1 day'"
        assert "traces_app_received_id_idx" in await _plan(conn, by_app, "hr")
        by_judge = "SELECT score FROM judgements WHERE judge = $1 AND created_at >= now() - interval '1 day'"
        assert "judgements_judge_created_score_idx" in await _plan(conn, by_judge, "faithfulness")
    finally:
        await conn.close()
