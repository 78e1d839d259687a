"""Retention (prune, retention_loop) and dead letters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from ragpulse.store.postgres import PostgresStore
from ragpulse.store.retention import retention_loop
from store import store_factories as f
from testsupport import wait_until


async def _counts(url: str) -> tuple[int, int, int, int]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            """SELECT (SELECT count(*) FROM traces), (SELECT count(*) FROM judgements),
                      (SELECT count(*) FROM run_cases), (SELECT count(*) FROM dead_letters)"""
        )
        assert row is not None
        return (row[0], row[1], row[2], row[3])
    finally:
        await conn.close()


async def _age_dead_letters(url: str, days: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("UPDATE dead_letters SET created_at = now() - $1::interval", timedelta(days=days))
    finally:
        await conn.close()


async def test_prune_deletes_old_traces_with_judgements(store: PostgresStore, store_url: str) -> None:
    now = datetime.now(UTC)
    old = now - timedelta(days=10)
    await store.write_results(
        [
            f.result(
                f.trace("old1", run_id="r", test_case_id="c"), f.ok(), f.ok("keyword", 1.0), received_at=old
            ),
            f.result(f.trace("old2"), f.ok(), received_at=old),
            f.result(f.trace("new1"), f.ok(), received_at=now),
        ]
    )
    await store.write_dead_letter("kafka", "bad json", b"{oops", {"offset": 1})
    await _age_dead_letters(store_url, 30)
    await store.write_dead_letter("otlp", "no spans", "payload", {})
    assert await _counts(store_url) == (3, 4, 1, 2)
    assert await store.prune(timedelta(days=7)) == 2
    assert await _counts(store_url) == (1, 1, 0, 1)
    assert await store.get_trace("new1") is not None
    assert await store.prune(timedelta(days=7)) == 0


async def test_redelivery_keeps_first_received_at(store: PostgresStore) -> None:
    old = datetime.now(UTC) - timedelta(days=10)
    await store.write_results([f.result(f.trace("t"), f.ok(), received_at=old)])
    await store.write_results([f.result(f.trace("t", model="changed"), f.ok())])
    got = await store.get_trace("t")
    assert got is not None
    assert got.received_at == old
    assert got.trace.model == "changed"
    assert await store.prune(timedelta(days=7)) == 1


async def test_dead_letters_round_trip(store: PostgresStore) -> None:
    await store.write_dead_letter(
        "kafka", "invalid: missing trace_id", b"\x00\xffraw", {"topic": "t", "offset": 7}
    )
    await store.write_dead_letter("otlp", "decode", "文本", {})
    got = await store.list_dead_letters()
    assert [(d["source"], d["reason"], d["payload"], d["meta"]) for d in got] == [
        ("otlp", "decode", "文本".encode(), {}),
        ("kafka", "invalid: missing trace_id", b"\x00\xffraw", {"topic": "t", "offset": 7}),
    ]


async def test_retention_loop_prunes_periodically(store: PostgresStore, store_url: str) -> None:
    old = datetime.now(UTC) - timedelta(days=3)
    await store.write_results([f.result(f.trace("x"), f.ok(), received_at=old)])
    settings = f.store_settings(store_url, store_retention_days=1, store_retention_interval_s=0.05)
    task = asyncio.create_task(retention_loop(store, settings.store))

    async def pruned(trace_id: str) -> bool:
        return await store.get_trace(trace_id) is None

    await wait_until(lambda: pruned("x"), what="the first prune")
    await store.write_results([f.result(f.trace("y"), f.ok(), received_at=old)])
    await wait_until(lambda: pruned("y"), what="a later prune")
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_retention_loop_off_without_retention_days(store: PostgresStore, store_url: str) -> None:
    await asyncio.wait_for(retention_loop(store, f.store_settings(store_url).store), 1)


async def test_retention_loop_survives_store_errors(store_url: str) -> None:
    store = await PostgresStore.connect(store_url, f.store_settings(store_url).store)
    await store.close()  # every prune now fails with a StoreError
    settings = f.store_settings(store_url, store_retention_days=1, store_retention_interval_s=0.05)
    task = asyncio.create_task(retention_loop(store, settings.store))
    await asyncio.sleep(0.3)
    assert not task.done()  # logged and retried, never raised
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
