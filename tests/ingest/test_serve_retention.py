"""``ragpulse serve`` prunes with the documented retention loop at ``RAGPULSE_STORE_RETENTION_INTERVAL_S``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import asyncpg
import pytest

from ingest.serve_testutil import ServeProcess
from testsupport import free_port


@pytest.fixture
def procs() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for p in started:
        p.close()


async def _insert_old_trace(url: str, trace_id: str, days_old: float) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO traces (trace_id, source, outcome, attributes, received_at) "
            "VALUES ($1, 'kafka', 'evaluated', $2, now() - make_interval(secs => $3))",
            trace_id,
            json.dumps({}),
            days_old * 86400.0,
        )
    finally:
        await conn.close()


async def _exists(url: str, trace_id: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        return bool(await conn.fetchval("SELECT count(*) FROM traces WHERE trace_id = $1", trace_id))
    finally:
        await conn.close()


@pytest.mark.parametrize("names", ["older", "newer"])
async def test_serve_prunes_every_retention_interval(
    pg_url: str, procs: list[ServeProcess], names: str
) -> None:
    """A trace that becomes prunable after serve's first pass is gone within a few intervals (0.3 s), not after
    the hour a hard-coded loop would wait; a recent trace stays. Both variable names (older and section) work."""
    env = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{free_port()}",
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        "RAGPULSE_JUDGE_ENABLED": "keyword",
    }
    if names == "older":
        env |= {"RAGPULSE_STORE_RETENTION_DAYS": "1", "RAGPULSE_STORE_RETENTION_INTERVAL_S": "0.3"}
    else:
        env |= {"RAGPULSE_STORE_RETENTION_DAYS": "1", "RAGPULSE_STORE_RETENTION_INTERVAL_S": "0.3"}
    proc = ServeProcess(env)
    procs.append(proc)
    proc.start()
    started = time.monotonic()
    while not proc.events("retention_pruned"):  # the first pass runs at start
        assert time.monotonic() - started < 30, proc.logs[-5:]
        await asyncio.sleep(0.05)
    await _insert_old_trace(pg_url, "old-trace", days_old=2)
    await _insert_old_trace(pg_url, "new-trace", days_old=0.5)
    inserted = time.monotonic()
    async with asyncio.timeout(30):
        while await _exists(pg_url, "old-trace"):  # noqa: ASYNC110 - polling another process
            await asyncio.sleep(0.1)
    assert time.monotonic() - inserted < 30
    assert await _exists(pg_url, "new-trace")
    passes = proc.events("retention_pruned")
    assert len(passes) >= 2
    assert passes[0]["older_than_days"] == 1
    assert any(p["traces"] == 1 for p in passes)
    assert proc.terminate() == 0
