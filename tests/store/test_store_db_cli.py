"""``ragpulse db info`` / ``ragpulse db prune`` against real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

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
    monkeypatch.setenv("RAGPULSE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_RETENTION_DAYS", raising=False)
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
    res = runner.invoke(app, ["db", "prune"])
    assert res.exit_code == 2  # no age given, no retention_days
    res = runner.invoke(app, ["db", "prune", "--older-than-days", "30", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"traces_deleted": 1, "older_than_days": 30.0}
    monkeypatch.setenv("RAGPULSE_RETENTION_DAYS", "0.5")
    res = runner.invoke(app, ["db", "prune"])
    assert res.exit_code == 0
    assert "deleted 0 traces older than 0.5 days" in res.stdout
