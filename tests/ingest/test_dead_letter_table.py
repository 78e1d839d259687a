"""Dead letters of both sources reach the store's ``dead_letters`` table (Kafka also keeps its dead-letter topic),
``list_dead_letters`` lists them and ``ragpulse db info`` counts them."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx

from ingest.kafka_testutil import RecordingSink, create_topic, event, produce, read_topic
from ragpulse.config import Settings
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.ingest.otlp import OtlpReceivers
from ragpulse.store.postgres import PostgresStore
from testsupport import free_port

REPO = Path(__file__).resolve().parents[2]


async def _wait_rows(store: PostgresStore, n: int, wait_s: float = 30.0) -> list[dict[str, object]]:
    async with asyncio.timeout(wait_s):
        while len(rows := await store.list_dead_letters()) < n:  # noqa: ASYNC110 - polling the database
            await asyncio.sleep(0.1)
    return rows


async def test_a_kafka_dead_letter_is_in_the_topic_and_the_table(
    kafka_bootstrap: str, topic: str, pg_url: str
) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, [b"{not json", event(1)], keys=[b"k-bad", b"k-good"])
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        store_database_url=pg_url,
        store_pool_max=2,
    )
    store = await PostgresStore.connect(pg_url, s.store)
    sink = RecordingSink()
    try:
        async with KafkaSource(s.kafka, sink, commit_interval_s=0.2, dead_letters=store) as src:
            rows = await _wait_rows(store, 1)
            async with asyncio.timeout(30):
                while len(sink.acked) < 1:  # noqa: ASYNC110 - state of the source's tasks
                    await asyncio.sleep(0.05)
            assert src.stats["dead_lettered"] == 1
        await sink.close()
        in_topic = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)
        assert [r.value for r in in_topic] == [b"{not json"]
        assert len(rows) == 1
        row = rows[0]
        assert row["source"] == "kafka"
        assert row["payload"] == b"{not json"
        assert str(row["reason"]).startswith("not_json: ")
        meta = row["meta"]
        assert isinstance(meta, dict)
        assert meta["topic"] == topic
        assert meta["partition"] == 0
        assert meta["offset"] == 0
        assert meta["dlq_topic"] == f"{topic}.dlq"
        assert meta["key"] == "k-bad"
        assert [t.trace_id for t in sink.acked] == ["trace-000001"]
    finally:
        await store.close()


async def test_otlp_rejections_are_in_the_table_and_db_info_counts_them(pg_url: str) -> None:
    port = free_port()
    s = Settings(otlp_grpc_address="", otlp_http_address=f"127.0.0.1:{port}", store_pool_max=2)
    store = await PostgresStore.connect(pg_url, s.store)
    sink = RecordingSink()
    try:
        async with OtlpReceivers(s.otlp, sink, dead_letters=store):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                bad = await http.post(
                    "/v1/traces",
                    content=b"\x0a\xff\xff garbage",
                    headers={"Content-Type": "application/x-protobuf"},
                )
                assert bad.status_code == 400
                bad_span = {
                    "resourceSpans": [
                        {
                            "scopeSpans": [
                                {"spans": [{"traceId": "zz-not-hex", "spanId": "also-bad", "name": "x"}]}
                            ]
                        }
                    ]
                }
                partial = await http.post(
                    "/v1/traces",
                    content=gzip.compress(json.dumps(bad_span).encode()),
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                )
                assert partial.status_code == 200
                assert partial.json()["partialSuccess"]["rejectedSpans"] == "1"
            rows = await _wait_rows(store, 2)
        assert {r["source"] for r in rows} == {"otlp"}
        malformed = next(r for r in rows if str(r["reason"]).startswith("malformed"))
        assert malformed["payload"] == b"\x0a\xff\xff garbage"
        assert malformed["meta"] == {
            "transport": "http",
            "format": "protobuf",
            "encoding": None,
            "bytes": 11,
            "truncated": False,
        }
        spans = next(r for r in rows if r["reason"] == "bad_span")
        assert spans["meta"] == {"transport": "http", "rejected_spans": 1, "accepted_spans": 0}
        assert spans["payload"]  # the decoder's reason for the rejected span
    finally:
        await store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_"))}
    env |= {"RAGPULSE_STORE_DATABASE_URL": pg_url, "PYTHONPATH": str(REPO / "src")}
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ragpulse", "db", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["dead_letters"] == 2
