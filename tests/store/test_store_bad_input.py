"""Bad input loses no trace in PostgreSQL (fix-ingest): an implausible token count, an impossible span time and a
session id that is a path segment are stored as unknown / dropped with a note, a count at the limit fits the
``integer`` columns, and a trace the store still refuses is dead-lettered with the store error's message."""

from __future__ import annotations

import json
from typing import Any

from ingest.test_bad_input_limits import LLM, TID, _build, _llm, _root, _span
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.ingest.events import parse_event
from ragpulse.ingest.otlp.journal import PendingJournal
from ragpulse.model import TOKEN_COUNT_MAX, Trace, TraceResult
from ragpulse.protocols import STORE_FAILURE, not_stored_reason
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f


async def _round_trip(store: PostgresStore, t: Trace) -> Trace:
    await store.write_results([f.result(t)])
    got = await store.get_trace(t.trace_id)
    assert got is not None
    return got.trace


async def test_a_token_count_at_the_limit_fits_the_store(store: PostgresStore) -> None:
    t = parse_event(
        json.dumps(
            {
                "traceId": "tok-max",
                "question": "q?",
                "answer": "a",
                "promptTokens": TOKEN_COUNT_MAX,
                "completionTokens": 0,
            }
        ).encode()
    )
    got = await _round_trip(store, t)
    assert (got.prompt_tokens, got.total_prompt_tokens) == (TOKEN_COUNT_MAX, TOKEN_COUNT_MAX)


async def test_otlp_trace_with_an_implausible_token_count_is_stored_with_the_note(
    store: PostgresStore,
) -> None:
    # was: OverflowError: value out of int32 range → dead letter not_stored, the whole trace lost
    got = await _round_trip(store, _build([_root(), _llm(LLM, 2**31)]))
    assert got.trace_id == TID
    assert got.answer == "Sixteen weeks."
    assert got.prompt_tokens is None
    assert got.total_prompt_tokens is None
    assert "llm.token_count.prompt" in got.attributes["token_count_refused"]


async def test_otlp_trace_with_impossible_times_is_stored_without_a_latency(store: PostgresStore) -> None:
    root = _span("a" * 16, None, {"openinference.span.kind": "CHAIN", "input.value": "q?"}, 1, 2**64 - 1)
    got = await _round_trip(store, _build([root, _llm(LLM, 10)]))
    assert got.latency_s is None  # was 18446744073.7 s
    assert got.time_replaced
    assert {s["span_id"]: s for s in got.attributes["spans"]}["a" * 16]["duration_ms"] is None


async def test_a_refused_session_id_is_never_stored(store: PostgresStore) -> None:
    otlp = await _round_trip(store, _build([_root(**{"session.id": ".."}), _llm(LLM, 10)]))
    kafka = await _round_trip(
        store,
        parse_event(
            json.dumps({"traceId": "k-1", "question": "q?", "answer": "a", "sessionId": "."}).encode()
        ),
    )
    for got in (otlp, kafka):
        assert got.session_id is None
        assert "session_id" in got.attributes["id_refused"]


async def test_a_trace_the_store_refuses_is_acked_with_the_store_errors_message(pg_url: str) -> None:
    settings = Settings(store_database_url=pg_url, store_pool_max=2, engine_store_retries=1)
    store = await PostgresStore.connect(pg_url, settings.store)
    reasons: list[tuple[bool, str]] = []

    async def ack(result: TraceResult, ok: bool) -> None:
        reasons.append((ok, not_stored_reason()))

    # a count past every intake check (built without validation): the store write itself fails
    bad = Trace.model_construct(**{**f.trace("over-1").__dict__, "prompt_tokens": 2**31})
    try:
        async with Engine({}, store, settings.engine) as eng:
            await eng.submit(bad, ack)
            await eng.submit(f.trace("fine-1"), ack)
            assert await eng.drain(10)
        assert await store.get_trace("fine-1") is not None  # its neighbour is stored
    finally:
        await store.close()
    assert sorted(reasons) == [
        (False, "not_stored: write_results failed: OverflowError: value out of int32 range"),
        (True, "not_stored: the engine could not store the result"),
    ]


async def test_otlp_dead_letter_carries_the_store_errors_message(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        journal = PendingJournal(store)
        await journal.record({TID: b"payload"})
        token = STORE_FAILURE.set("write_results failed: OverflowError: value out of int32 range")
        try:
            await journal.done(TID, False)
        finally:
            STORE_FAILURE.reset(token)
        rows: list[dict[str, Any]] = await store.list_dead_letters()
    finally:
        await store.close()
    assert [(r["source"], r["reason"]) for r in rows] == [
        ("otlp", "not_stored: write_results failed: OverflowError: value out of int32 range")
    ]
