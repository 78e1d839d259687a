"""Runs and test sets that cannot be overwritten unnoticed: content hashes, run owners, heartbeats, stale runs
(migration 013), on the test server and on the embedded PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import sys
from urllib.parse import urlsplit

import asyncpg

from ragpulse.model import RUN_STALE_AFTER_S, RunRecord, RunStatus, TestCase, TestSet, cases_hash
from ragpulse.owner import OWNER_HOST
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f
from store.store_factories import store_settings


def _set(*cases: TestCase, name: str = "bom") -> TestSet:
    return TestSet(name=name, cases=cases)


A = TestCase(id="c1", question="What is a BOM?", answer="A bill of materials.", keywords=("bill",))
B = TestCase(id="c2", question="Who signs it?", metadata={"team": "ops", "weight": 2})


def test_cases_hash_is_canonical() -> None:
    h = cases_hash([A, B])
    assert h.startswith("sha256:")
    assert len(h) == len("sha256:") + 64
    assert cases_hash([A, B]) == _set(A, B).content_hash()
    assert cases_hash([B, A]) != h  # order is part of the set
    assert cases_hash([A, B.model_copy(update={"question": "Who signs it ?"})]) != h
    assert cases_hash([A, B.model_copy(update={"metadata": {"weight": 2, "team": "ops"}})]) == h  # key order
    # NUL characters are dropped, as the store drops them
    nul = A.model_copy(update={"question": "What is\x00 a BOM?"})
    assert cases_hash([nul, B]) == h


async def test_stored_hash_and_changes_outside_the_store_clear_it(
    store: PostgresStore, store_url: str
) -> None:
    assert await store.test_set_hash("bom") is None
    ts = _set(A, B)
    await store.upsert_test_set(ts)
    assert await store.test_set_hash("bom") == ts.content_hash()
    conn = await asyncpg.connect(store_url)
    try:
        assert (
            await conn.fetchval("SELECT content_hash FROM test_sets WHERE name = 'bom'") == ts.content_hash()
        )
        # an edit outside the store (the portal, SQL) clears the hash …
        await conn.execute("UPDATE test_cases SET question = 'Who approves it?' WHERE case_id = 'c2'")
        assert await conn.fetchval("SELECT content_hash FROM test_sets WHERE name = 'bom'") is None
        edited = _set(A, B.model_copy(update={"question": "Who approves it?"}))
        # … and the next read hashes the stored cases again
        assert await store.test_set_hash("bom") == edited.content_hash()
        assert (
            await conn.fetchval("SELECT content_hash FROM test_sets WHERE name = 'bom'")
            == edited.content_hash()
        )
        await conn.execute("DELETE FROM test_cases WHERE case_id = 'c1'")
        assert await store.test_set_hash("bom") == _set(edited.cases[1]).content_hash()
    finally:
        await conn.close()


async def test_run_records_cases_hash_owner_and_heartbeat(store: PostgresStore, store_url: str) -> None:
    await store.create_run(RunRecord(run_id="r1", test_set="bom", cases_hash=cases_hash([A])))
    got = await store.get_run("r1")
    assert got is not None
    assert got.status is RunStatus.RUNNING
    assert (got.cases_hash, got.owner_host, got.owner_pid) == (cases_hash([A]), OWNER_HOST, os.getpid())
    assert got.heartbeat_at is not None
    conn = await asyncpg.connect(store_url)
    try:
        await conn.execute(
            "UPDATE runs SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE run_id = 'r1'"
        )
        assert await store.heartbeat_run("r1") is True
        age = await conn.fetchval(
            "SELECT extract(epoch FROM now() - heartbeat_at) FROM runs WHERE run_id = 'r1'"
        )
        assert age < 5
    finally:
        await conn.close()
    await store.finish_run("r1", RunStatus.COMPLETED, {"pass_rate": 1.0})
    assert await store.heartbeat_run("r1") is False  # a finished run has no heartbeat
    assert await store.heartbeat_run("nope") is False


async def test_run_of_a_dead_process_reads_as_interrupted(store: PostgresStore, store_url: str) -> None:
    dead = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import os; print(os.getpid())", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await dead.communicate()
    dead_pid = int(out)
    await store.create_run(RunRecord(run_id="gone", test_set="bom", owner_pid=dead_pid))
    await store.create_run(RunRecord(run_id="alive", test_set="bom"))
    await store.create_run(
        RunRecord(run_id="elsewhere", test_set="bom", owner_host="other-host/pid:[1]", owner_pid=1)
    )
    await store.create_run(RunRecord(run_id="done", test_set="bom", owner_pid=dead_pid))
    await store.finish_run("done", RunStatus.FAILED, {"error": "KeyboardInterrupt"})
    statuses = {r.run_id: r.status for r in await store.list_runs()}
    assert statuses == {
        "gone": RunStatus.INTERRUPTED,  # same host, pid gone
        "alive": RunStatus.RUNNING,  # this process
        "elsewhere": RunStatus.RUNNING,  # another host, heartbeat fresh
        "done": RunStatus.FAILED,
    }
    conn = await asyncpg.connect(store_url)
    try:  # another host's run whose heartbeat stopped RUN_STALE_AFTER_S + 30 s ago
        await conn.execute(
            "UPDATE runs SET heartbeat_at = now() - make_interval(secs => $1) WHERE run_id = 'elsewhere'",
            RUN_STALE_AFTER_S + 30,
        )
        # a run from before migration 013 (no owner) is left as it says
        await conn.execute("UPDATE runs SET owner_pid = NULL, owner_host = NULL WHERE run_id = 'gone'")
    finally:
        await conn.close()
    elsewhere = await store.get_run("elsewhere")
    assert elsewhere is not None
    assert elsewhere.status is RunStatus.INTERRUPTED
    legacy = await store.get_run("gone")
    assert legacy is not None
    assert legacy.status is RunStatus.RUNNING


async def test_replace_drops_the_old_runs_trace_links(store: PostgresStore) -> None:
    await store.upsert_test_set(_set(A, B))
    await store.create_run(RunRecord(run_id="r", test_set="bom"))
    t = f.trace("r-c1", source="replay", run_id="r", test_case_id="c1")
    await store.write_results([f.result(t, f.ok("keyword", 1.0))])
    assert [r.trace.trace_id for r in await store.get_run_results("r")] == ["r-c1"]
    await store.create_run(RunRecord(run_id="r", test_set="bom"))  # same set: re-run, links kept
    assert len(await store.get_run_results("r")) == 1
    await store.create_run(RunRecord(run_id="r", test_set="other"), replace=True)
    assert await store.get_run_results("r") == []
    assert await store.get_trace("r-c1") is not None  # the trace itself is history
    async with store.pool.acquire() as conn:  # the old run's pinned case rows went with its links
        assert await conn.fetchval("SELECT count(*) FROM run_judgements WHERE run_id = 'r'") == 0


async def test_database_identity_is_stable_and_differs_between_databases(
    store: PostgresStore, store_url: str, pg_url_session: str
) -> None:
    ident = await store.database_identity()
    uuid_part, _, name = ident.partition("/")
    assert len(uuid_part) == 36
    assert name == urlsplit(store_url).path.lstrip("/")
    again = await PostgresStore.connect(store_url, store_settings(store_url).store)
    try:
        assert await again.database_identity() == ident  # another connection, same database
    finally:
        await again.close()
    other = await PostgresStore.connect(pg_url_session, store_settings(pg_url_session).store)
    try:
        assert await other.database_identity() != ident
    finally:
        await other.close()
