"""Issue 27 item 1: after a database outage that cuts writes in flight, commits and the lag gauge move again.

A real ``ragpulse serve`` under load (4 partitions, a backlog) loses its database mid-write: the network first
freezes (queries hang until the command timeout, lookups are cancelled), then every connection is dropped and
new ones are refused, then the database is back. Before the fix the cut surfaced as asyncpg ``InterfaceError``/
``InternalClientError`` classified as bad data, and the committed offsets stayed at their pre-outage value
while the store kept growing.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import asyncpg
import httpx

from ingest.kafka_testutil import committed, create_topic, produce, read_topic
from ingest.serve_testutil import ServeProcess, TcpProxy, db_counts
from testsupport import free_port, pg_server, pg_url_with, wait_until

PARTITIONS = 4
N = 3000


def _events() -> list[bytes]:
    return [
        json.dumps(
            {"traceId": f"o{i:05d}", "question": f"q{i}?", "answer": "5 days", "keywords": ["days"]}
        ).encode()
        for i in range(N)
    ]


async def test_commits_and_lag_recover_after_a_database_cut_mid_write(
    kafka_bootstrap: str, topic: str, pg_url: str
) -> None:
    proxy = TcpProxy(pg_server(pg_url))  # the configured server, by TCP or unix socket
    proc: ServeProcess | None = None
    try:
        proxied = pg_url_with(pg_url, tcp=("127.0.0.1", proxy.port))
        await create_topic(kafka_bootstrap, topic, PARTITIONS)
        port = free_port()
        group = f"g-{uuid.uuid4().hex[:8]}"
        proc = ServeProcess(
            {
                "RAGPULSE_STORE_DATABASE_URL": proxied,
                "RAGPULSE_STORE_COMMAND_TIMEOUT_S": "2",
                "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
                "RAGPULSE_KAFKA_TOPICS": topic,
                "RAGPULSE_KAFKA_GROUP_ID": group,
                "RAGPULSE_OTLP_GRPC_ADDRESS": "",
                "RAGPULSE_OTLP_HTTP_ADDRESS": "",
                "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{port}",
                "RAGPULSE_API_ADDRESS": "",
                "RAGPULSE_JUDGE_ENABLED": "keyword",
                "RAGPULSE_ENGINE_QUEUE_SIZE": "200",
                "RAGPULSE_ENGINE_BATCH_SIZE": "20",
                "RAGPULSE_ENGINE_STORE_BACKOFF_S": "0.2",
                "RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S": "20",
                "RAGPULSE_LOG_LEVEL": "INFO",
            }
        )
        proc.start()
        await produce(kafka_bootstrap, topic, _events())

        async def stored() -> int:
            return int((await db_counts(pg_url))["traces"])

        async def committed_total() -> int:
            return sum(v or 0 for v in (await committed(kafka_bootstrap, group, topic, PARTITIONS)).values())

        async def some_stored() -> bool:
            return await stored() >= 300

        await wait_until(some_stored, 60, "300 traces stored before the outage", interval_s=0.05)
        proxy.freeze()  # writes and lookups in flight hang (command timeout 2 s, prefetch timeout 5 s)
        await asyncio.sleep(6.0)  # the outage itself: time is the subject
        proxy.cut()  # the frozen connections are dropped, new ones refused
        await asyncio.sleep(3.0)
        at_restore = await stored()
        assert at_restore < N, "the outage came while work was in flight"
        proxy.restore()

        async def all_stored() -> bool:
            return await stored() == N

        await wait_until(all_stored, 120, f"all {N} traces stored after the outage", interval_s=0.5)

        # Commits catch up with the store at once (commit interval 1 s), not after many more batches: nothing
        # is left unacknowledged by the cut.
        async def caught_up() -> bool:
            return await committed_total() == N

        await wait_until(caught_up, 20, "committed offsets reach the stored count", interval_s=0.5)
        # every committed offset is stored or dead-lettered (here: stored; nothing was bad data)
        dead = proc.events("kafka_dead_lettered")
        assert not dead, dead[:3]
        conn = await asyncpg.connect(pg_url)
        try:
            ids = {r["trace_id"] for r in await conn.fetch("SELECT trace_id FROM traces")}
            judged = await conn.fetchval("SELECT count(*) FROM judgements")
        finally:
            await conn.close()
        assert ids == {f"o{i:05d}" for i in range(N)}  # none of the traces in flight at the cut is missing
        assert judged == N
        # the lag gauge moved with the commits: 0 on every partition
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

            async def lag_zero() -> bool:
                text = (await http.get("/metrics")).text
                lags = [
                    float(v) for v in re.findall(r"^ragpulse_kafka_consumer_lag\{[^}]*\} (\S+)$", text, re.M)
                ]
                return len(lags) == PARTITIONS and not any(lags)

            await wait_until(lag_zero, 20, "the lag gauge back to 0", interval_s=0.5)
        assert not proc.events("store_batch_rejected_splitting")
        assert proc.terminate() == 0
        proc = None
        try:
            await read_topic(kafka_bootstrap, f"{topic}.dlq", 1, wait_s=2)
        except TimeoutError:
            pass
        else:
            raise AssertionError("a trace was dead-lettered")
    finally:
        if proc is not None:
            proc.close()
        proxy.close()
