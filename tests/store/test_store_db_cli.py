"""``ragpulse db info`` / ``ragpulse db prune`` against real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.store.migrate import load_migrations
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f


async def _seed(url: str) -> None:
    store = await PostgresStore.connect(url, f.store_settings(url).store)
    try:
        old = datetime.now(UTC) - timedelta(days=40)
        await store.write_results(
            [
                f.result(f.trace("old"), f.ok(), f.ok("keyword", 1.0), received_at=old),
                f.result(f.trace("new"), f.ok()),
            ]
        )
    finally:
        await store.close()


def test_db_info_and_prune(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_STORE_RETENTION_DAYS", raising=False)
    asyncio.run(_seed(pg_url))
    runner = CliRunner()
    res = runner.invoke(app, ["db", "info", "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.stdout.strip().splitlines()[-1])
    assert (facts["traces"], facts["judgements"], facts["schema_version"], facts["embedded"]) == (
        2,
        3,
        max(m.version for m in load_migrations()),
        False,
    )
    assert facts["estimated"] == []  # small tables are counted
    res = runner.invoke(app, ["db", "info"])
    assert res.exit_code == 0, res.output
    assert "     judgements: 3\n" in res.stdout
    res = runner.invoke(app, ["db", "prune"])
    assert res.exit_code == 2  # no age given, no retention_days
    res = runner.invoke(app, ["db", "prune", "--older-than-days", "30", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"traces_deleted": 1, "older_than_days": 30.0}
    monkeypatch.setenv("RAGPULSE_STORE_RETENTION_DAYS", "0.5")
    res = runner.invoke(app, ["db", "prune"])
    assert res.exit_code == 0
    assert "deleted 0 traces older than 0.5 days" in res.stdout


def test_db_info_gives_the_planner_estimate_for_large_tables(pg_url: str) -> None:
    """A table estimated above ``exact_below`` rows is not counted: its ``pg_class.reltuples`` is given and
    named in ``estimated``; ``exact_below=None`` counts it. The estimate is set by hand here (ANALYZE of a
    5-row table gives 5): what is checked is which number is reported."""

    async def go() -> None:
        await _seed(pg_url)
        store = await PostgresStore.connect(pg_url, f.store_settings(pg_url).store)
        try:
            conn = await asyncpg.connect(pg_url)
            try:
                await conn.execute("ANALYZE traces, judgements")
                await conn.execute("UPDATE pg_class SET reltuples = 12345678 WHERE relname = 'judgements'")
            finally:
                await conn.close()
            facts = await store.info(exact_below=1_000_000)
            assert (facts["judgements"], facts["traces"], facts["estimated"]) == (12345678, 2, ["judgements"])
            facts = await store.info(exact_below=None)
            assert (facts["judgements"], facts["estimated"]) == (3, [])
        finally:
            await store.close()

    asyncio.run(go())
