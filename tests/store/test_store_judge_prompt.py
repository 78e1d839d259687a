"""The judge's prompt is stored beside its raw reply (migration 220, issue 31), dropped under redact_text, and
a database from before the column is upgraded with its judgements kept (prompt NULL)."""

from __future__ import annotations

import asyncpg

from ragpulse.config import Settings
from ragpulse.store.migrate import load_migrations, migrate
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f

PROMPT = "[user]\nIs the answer supported?\nAnswer: " + f.ANSWER


async def test_prompt_round_trips(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        t = f.trace()
        await store.write_results([f.result(t, f.ok(prompt=PROMPT, raw_output="YES"))])
        got = await store.get_trace(t.trace_id)
        assert got is not None
        (j,) = got.judgements
        assert (j.prompt, j.raw_output) == (PROMPT, "YES")
    finally:
        await store.close()


async def test_prompt_is_not_stored_when_texts_are_redacted(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_redact_text=True, store_pool_max=2).store)
    try:
        t = f.trace()
        await store.write_results([f.result(t, f.ok(prompt=PROMPT))])
        got = await store.get_trace(t.trace_id)
        assert got is not None
        assert got.judgements[0].prompt is None
    finally:
        await store.close()


async def test_upgrade_from_before_the_prompt_column(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        for mig in (m for m in load_migrations() if m.version < 220):
            await conn.execute(mig.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"
                if mig.version > 1
                else "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
                "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (1, 'initial', 'x')",
                *((mig.version, mig.name, mig.checksum) if mig.version > 1 else ()),
            )
        await conn.execute(
            "INSERT INTO traces (trace_id, source, outcome) VALUES ('old', 'kafka', 'evaluated');"
            "INSERT INTO judgements (trace_id, judge, version, backend, status, score, passed, raw_output) "
            "VALUES ('old', 'faithfulness', 'v0', 'llm', 'ok', 0.9, true, 'YES')"
        )
        applied = await migrate(conn)
        assert applied[0] == 220
    finally:
        await conn.close()
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        got = await store.get_trace("old")
        assert got is not None
        (j,) = got.judgements
        assert (j.raw_output, j.prompt, j.score) == ("YES", None, 0.9)
    finally:
        await store.close()
