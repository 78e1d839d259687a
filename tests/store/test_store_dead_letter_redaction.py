"""Issue 25 item 4: under ``store.redact_text`` a dead letter keeps only metadata (size and SHA-256 of the
payload), never the production text; retention prunes dead letters like traces (tests/store/test_store_retention.py,
``test_prune_deletes_old_traces_with_judgements``)."""

from __future__ import annotations

import hashlib
import json

import asyncpg

from ragpulse.portal.deadletters import list_dead_letters
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f

SECRET = '{"question": "What is the salary of Jane Roe?", "answer": "120k"}'


async def _rows(url: str) -> list[tuple[bytes, dict[str, object]]]:
    conn = await asyncpg.connect(url)
    try:
        await conn.set_type_codec("jsonb", encoder=str, decoder=json.loads, schema="pg_catalog")
        rows = await conn.fetch("SELECT payload, meta FROM dead_letters ORDER BY id")
        return [(bytes(r["payload"]), dict(r["meta"])) for r in rows]
    finally:
        await conn.close()


async def test_redacted_dead_letters_keep_size_and_hash_only(pg_url: str) -> None:
    plain = await PostgresStore.connect(pg_url, f.store_settings(pg_url).store)
    try:  # written before redaction was turned on: kept as it is in the database
        await plain.write_dead_letter("kafka", "schema: /question: …", SECRET.encode(), {"offset": 1})
    finally:
        await plain.close()
    store = await PostgresStore.connect(pg_url, f.store_settings(pg_url, store_redact_text=True).store)
    try:
        await store.write_dead_letter("kafka", "schema: /question: …", SECRET.encode(), {"offset": 2})
        await store.add_pending("otlp", [("k1", b"part one, "), ("k1", SECRET.encode())])
        await store.dead_letter_pending("otlp", "k1", "bad_span")
        digest = hashlib.sha256(SECRET.encode()).hexdigest()
        joined = b"part one, " + SECRET.encode()
        assert await _rows(pg_url) == [
            (SECRET.encode(), {"offset": 1}),
            (
                b"",
                {
                    "offset": 2,
                    "redacted": True,
                    "payload_bytes": len(SECRET.encode()),
                    "payload_sha256": digest,
                },
            ),
            (
                b"",
                {
                    "key": "k1",
                    "redacted": True,
                    "payload_bytes": len(joined),
                    "payload_sha256": hashlib.sha256(joined).hexdigest(),
                },
            ),
        ]
        page = await list_dead_letters(store, redact_text=True)
        assert [(d.payload, d.payload_encoding, d.payload_bytes, d.redacted) for d in page.items] == [
            ("", "redacted", len(joined), True),
            ("", "redacted", len(SECRET.encode()), True),
            ("", "redacted", len(SECRET.encode()), True),  # the old row: stored, never served
        ]
        assert all("Jane" not in d.model_dump_json() for d in page.items)
    finally:
        await store.close()
