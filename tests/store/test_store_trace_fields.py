"""Typed trace fields (not evaluable, labels, reference contexts, answer span, time flag, error) round-trip
through PostgreSQL, and rows written before they were columns are moved into them by the migration."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.model import TraceOutcome
from ragpulse.store.migrate import load_migrations, migrate
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f

TYPED: dict[str, Any] = dict(
    not_evaluable="ambiguous_answer",
    reference_contexts=("Claims are filed in the finance portal.",),
    context_labels=(True, False),
    labelled_contexts=("c1", "c2"),
    labelled_doc_ids=("d1", "d2"),
    answer_span_id="c" * 16,
    answer_candidates=("c" * 16, "d" * 16),
    time_replaced=True,
    error="upstream timeout",
)


async def test_typed_trace_fields_round_trip(store: PostgresStore) -> None:
    t = f.trace(**TYPED)
    await store.write_results(
        [f.result(t, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="ambiguous_answer")]
    )
    got = await store.get_trace(t.trace_id)
    assert got is not None
    assert got.trace == t
    assert got.trace.attributes == {"user.tier": "gold", "n": 3}


async def test_typed_text_fields_are_redacted(store_url: str) -> None:
    store = await PostgresStore.connect(store_url, Settings(store_redact_text=True, store_pool_max=2).store)
    try:
        t = f.trace(**TYPED)
        await store.write_results([f.result(t)])
        got = await store.get_trace(t.trace_id)
        assert got is not None
        assert got.trace.reference_contexts[0].startswith("sha256:")
        assert got.trace.labelled_contexts is not None
        assert all(c.startswith("sha256:") for c in got.trace.labelled_contexts)
        assert got.trace.context_labels == (True, False)
        assert got.trace.labelled_doc_ids == ("d1", "d2")
    finally:
        await store.close()


async def test_rows_from_before_the_columns_are_moved_out_of_attributes(pg_url: str) -> None:
    first = load_migrations()[0]
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(first.sql)
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            first.version,
            first.name,
            first.checksum,
        )
        old_attributes = {
            "test_set": "kb",
            "ragpulse.not_evaluable": "rag_endpoint_failed: HTTP 500",
            "reference_contexts": ["ref"],
            "context_labels": [1, 0],
            "labelled_doc_ids": ["d1", "d2"],
        }
        await conn.execute(
            "INSERT INTO traces (trace_id, source, outcome, attributes) VALUES ('old', 'replay', 'not_evaluable', $1)",
            json.dumps(old_attributes),
        )
        applied = await migrate(conn)
        assert applied[0] == 2
        row = await conn.fetchrow("SELECT * FROM traces WHERE trace_id = 'old'")
        assert row is not None
        assert row["not_evaluable"] == "rag_endpoint_failed: HTTP 500"
        assert json.loads(row["attributes"]) == {"test_set": "kb"}
        assert json.loads(row["context_labels"]) == [1, 0]
    finally:
        await conn.close()
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        got = await store.get_trace("old")
        assert got is not None
        assert got.trace.not_evaluable == "rag_endpoint_failed: HTTP 500"
        assert got.trace.reference_contexts == ("ref",)
        assert got.trace.context_labels == (True, False)
        assert got.trace.labelled_doc_ids == ("d1", "d2")
        assert got.trace.labelled_contexts is None
    finally:
        await store.close()
