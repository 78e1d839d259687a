"""Redaction stores no text; database failures map to StoreError with the right ``retriable`` flag."""

from __future__ import annotations

import asyncio
import hashlib
import socket

import asyncpg
import pytest

from ragpulse.errors import StoreError
from ragpulse.model import JudgementStatus
from ragpulse.store.errors import is_retriable
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f


async def test_redaction_stores_no_text(store_url: str) -> None:
    long_attr = "user prompt: " + f.QUESTION * 3
    expected = "File it in the finance portal."
    store = await PostgresStore.connect(store_url, f.store_settings(store_url, store_redact_text=True).store)
    try:
        t = f.trace(
            "r1", expected_answer=expected, context="ctx " + f.CONTEXT_1, attributes={"p": long_attr, "k": 1}
        )
        await store.write_results(
            [
                f.result(
                    t,
                    f.ok(reason=f"The answer repeats '{f.ANSWER}'", raw_output=f.ANSWER),
                    f.not_ok("keyword", JudgementStatus.SKIPPED, f"no_reference: {f.QUESTION}"),
                )
            ]
        )
        got = await store.get_trace("r1")
    finally:
        await store.close()
    conn = await asyncpg.connect(store_url)
    try:
        dump = "\n".join(
            [str(r[0]) for r in await conn.fetch("SELECT t::text FROM traces t")]
            + [str(r[0]) for r in await conn.fetch("SELECT j::text FROM judgements j")]
        )
        chars = await conn.fetchrow(
            "SELECT question_chars, answer_chars, context_chars, redacted FROM traces"
        )
    finally:
        await conn.close()
    for text in (f.QUESTION, f.ANSWER, f.CONTEXT_1, f.CONTEXT_2, expected, "user prompt"):
        assert text not in dump
    assert got is not None
    sha = "sha256:" + hashlib.sha256(f.QUESTION.encode()).hexdigest()
    assert got.trace.question == sha
    assert got.trace.documents[0].content == "sha256:" + hashlib.sha256(f.CONTEXT_1.encode()).hexdigest()
    assert got.trace.attributes["k"] == 1
    assert chars is not None
    assert tuple(chars) == (len(f.QUESTION), len(f.ANSWER), len("ctx " + f.CONTEXT_1), True)
    reasons = {j.judge: (j.reason, j.raw_output) for j in got.judgements}
    assert reasons == {"faithfulness": ("", None), "keyword": ("no_reference", None)}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connect_to_closed_port_is_retriable() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    with pytest.raises(StoreError) as ei:
        await PostgresStore.connect(url, f.store_settings(url).store)
    assert ei.value.retriable is True


async def _backend_waiting_on_lock(conn: asyncpg.Connection) -> int:
    for _ in range(100):
        pid = await conn.fetchval(
            """SELECT pid FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"""
        )
        if pid:
            return int(pid)
        await asyncio.sleep(0.05)
    raise AssertionError("the store never waited on the lock")


async def test_terminated_backend_is_retriable_and_store_recovers(
    store: PostgresStore, store_url: str
) -> None:
    blocker = await asyncpg.connect(store_url)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE traces IN ACCESS EXCLUSIVE MODE")
        write = asyncio.create_task(store.write_results([f.result(f.trace("k1"), f.ok())]))
        pid = await _backend_waiting_on_lock(blocker)
        assert await blocker.fetchval("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(StoreError) as ei:
            await asyncio.wait_for(write, 10)
        assert ei.value.retriable is True
        await tx.rollback()
    finally:
        await blocker.close()
    # nothing of the failed batch was written; a retry on a fresh pooled connection succeeds
    assert await store.get_trace("k1") is None
    rep = await store.write_results([f.result(f.trace("k1"), f.ok())])
    assert rep.trace_inserted == frozenset({"k1"})


async def test_statement_timeout_is_retriable(store_url: str) -> None:
    # migrate with the normal timeouts first: under load, connecting and migrating can take longer than the
    # short statement timeout this test is about
    await (await PostgresStore.connect(store_url, f.store_settings(store_url).store)).close()
    store = await PostgresStore.connect(
        store_url, f.store_settings(store_url, store_command_timeout_s=1.0).store, run_migrations=False
    )
    blocker = await asyncpg.connect(store_url)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE traces IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreError) as ei:
            await store.write_results([f.result(f.trace("k2"), f.ok())])
        assert ei.value.retriable is True
        await tx.rollback()
    finally:
        await blocker.close()
        await store.close()


@pytest.mark.parametrize(
    ("exc", "retriable"),
    [
        (asyncpg.exceptions.SerializationError("could not serialize"), True),
        (asyncpg.exceptions.DeadlockDetectedError("deadlock"), True),
        (asyncpg.exceptions.CannotConnectNowError("starting up"), True),
        (asyncpg.exceptions.AdminShutdownError("terminating"), True),
        (asyncpg.exceptions.ConnectionDoesNotExistError("gone"), True),
        (asyncpg.exceptions.TooManyConnectionsError("too many"), True),
        (asyncpg.InterfaceError("cannot perform operation: connection is closed"), True),
        (ConnectionResetError(104, "reset"), True),
        (TimeoutError(), True),
        (asyncpg.exceptions.UniqueViolationError("dup"), False),
        (asyncpg.exceptions.CheckViolationError("check"), False),
        (asyncpg.exceptions.InvalidTextRepresentationError("bad"), False),
        (asyncpg.exceptions.UndefinedTableError("no table"), False),
        (asyncpg.InterfaceError("the server expects 2 arguments"), False),
        (ValueError("bad"), False),
    ],
)
def test_error_classification(exc: BaseException, retriable: bool) -> None:
    assert is_retriable(exc) is retriable
