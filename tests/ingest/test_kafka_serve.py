"""End to end: real ``ragpulse serve`` processes, a real tansu broker and a real PostgreSQL database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import asyncpg
import httpx
import pytest

from ingest.kafka_testutil import committed, create_topic, produce, read_topic
from ingest.serve_testutil import ServeProcess, TcpProxy, db_counts
from testsupport import free_port, pg_server, pg_url_with, shared_dir, wait_until

JUDGES = ["relevancy", "faithfulness", "keyword"]


def _env(bootstrap: str, topic: str, pg_url: str, group: str, http_port: int, **extra: str) -> dict[str, str]:
    env = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "RAGPULSE_KAFKA_TOPICS": topic,
        "RAGPULSE_KAFKA_GROUP_ID": group,
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
        "RAGPULSE_API_ADDRESS": "",  # no portal (its default port may be taken by another test)
        "RAGPULSE_JUDGE_ENABLED": ",".join(JUDGES),
        "RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S": "20",
        "RAGPULSE_LOG_LEVEL": "INFO",
    }
    env.update(extra)
    return env


@pytest.fixture
def procs() -> Iterator[list[ServeProcess]]:
    made: list[ServeProcess] = []
    yield made
    for p in made:
        p.close()


async def _wait_for(cond: Callable[[], Awaitable[bool]], wait_s: float) -> None:
    await wait_until(cond, wait_s, interval_s=0.25)


async def test_serve_judges_fixture_events_once_with_dlq_and_endpoints(
    kafka_bootstrap: str, topic: str, pg_url: str, procs: list[ServeProcess]
) -> None:
    fx = shared_dir() / "fixtures" / "kafka-events.jsonl"
    lines = fx.read_bytes().splitlines()
    await create_topic(kafka_bootstrap, topic, 3)
    port = free_port()
    group = f"g-{uuid.uuid4().hex[:8]}"
    proc = ServeProcess(
        _env(kafka_bootstrap, topic, pg_url, group, port, RAGPULSE_STORE_RETENTION_DAYS="3650")
    )
    procs.append(proc)
    proc.start()
    assert len(proc.events("ready")) == 1
    ready_line = proc.events("ready")[0]
    assert ready_line["http_port"] == port
    assert ready_line["kafka_topics"] == [topic]
    assert ready_line["judges"] == sorted(JUDGES)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {
            "store": True,
            "running": True,
            "kafka": True,
        }
        await produce(kafka_bootstrap, topic, lines, keys=[b"k"] * len(lines))  # one partition, in order
        expected_ids = {
            "4a1f7c2e9b3d4e8fa0c1d2e3f4a5b6c7",
            "5b2e8d3fa04c4f90b1d2e3f405a6b7c8",
            "6c3f9e40b15d40a1c2e3f40516a7b8d9",
            "7d4a0f51c26e41b2d3f4051627b8c9ea",
            "8e5b1062d37f42c3e4051627384c9dfb",
            "9f6c2173e4804d3f8516273849ad0e1c",
            "b18e4395a6a24f6fa738495a6bcf2031",
        }

        async def all_in() -> bool:
            c = await committed(kafka_bootstrap, group, topic)
            return sum(v or 0 for v in c.values()) == len(lines)

        await _wait_for(all_in, 60)
        conn = await asyncpg.connect(pg_url)
        try:
            rows = await conn.fetch("SELECT trace_id, outcome, outcome_reason, source, documents FROM traces")
            judged = await conn.fetch("SELECT trace_id, judge FROM judgements")
        finally:
            await conn.close()
        by_id = {r["trace_id"]: r for r in rows}
        assert set(by_id) == expected_ids  # line 8 (a redelivery of line 1) adds nothing
        assert {r["source"] for r in rows} == {"kafka"}
        assert by_id["9f6c2173e4804d3f8516273849ad0e1c"]["outcome"] == "not_evaluable"
        assert by_id["9f6c2173e4804d3f8516273849ad0e1c"]["outcome_reason"] == "no_question"
        docs = json.loads(by_id["4a1f7c2e9b3d4e8fa0c1d2e3f4a5b6c7"]["documents"])
        assert [d["id"] for d in docs] == [
            "hr-remote-work-policy-v3#s4.2",
            "hr-remote-work-policy-v3#s4.1",
            "it-security-standard#s7.3",
        ]
        evaluated = expected_ids - {"9f6c2173e4804d3f8516273849ad0e1c"}
        pairs = [(r["trace_id"], r["judge"]) for r in judged]
        assert len(pairs) == len(set(pairs)) == len(evaluated) * len(JUDGES)
        assert {t for t, _ in pairs} == evaluated
        dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)
        assert len(dlq) == 1
        assert dlq[0].value == lines[6]
        h = dict(dlq[0].headers)
        assert h["ragpulse.dlq.reason"].startswith(b"not_json: ")
        assert h["ragpulse.dlq.offset"] == b"6"
        metrics = (await http.get("/metrics")).text
        assert 'ragpulse_traces_rejected_total{reason="not_json",source="kafka"} 1.0' in metrics
        assert 'ragpulse_traces_received_total{source="kafka"} 8.0' in metrics
        assert "ragpulse_kafka_consumer_lag{" in metrics
    assert proc.terminate() == 0
    assert proc.events("stopped")
    assert proc.events("retention_pruned")[0]["traces"] == 0  # retention ran; nothing is 10 years old
    assert len(proc.events("ready")) == 1


def _stream(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield json.dumps(
            {
                "traceId": f"t{i:06d}",
                "question": f"q{i} leave days?",
                "contexts": [f"c{i} 5 days"],
                "answer": "5 days",
            }
        ).encode()


@pytest.mark.slow
async def test_sigkill_mid_stream_then_restart_judges_every_trace_exactly_once(
    kafka_bootstrap: str, topic: str, pg_url: str, procs: list[ServeProcess]
) -> None:
    n = 20_000
    await create_topic(kafka_bootstrap, topic, 3)
    await produce(kafka_bootstrap, topic, _stream(n))
    port = free_port()
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = _env(kafka_bootstrap, topic, pg_url, group, port, RAGPULSE_JUDGE_ENABLED="keyword,relevancy")
    first = ServeProcess(env)
    procs.append(first)
    first.start()
    started = time.monotonic()

    async def some_stored() -> bool:
        return bool((await db_counts(pg_url))["traces"] >= n // 4)

    await _wait_for(some_stored, 120)
    first.kill()  # SIGKILL: no drain, no final commit
    at_kill = await db_counts(pg_url)
    assert 0 < at_kill["traces"] < n
    second = ServeProcess(env)
    procs.append(second)
    second.start()

    async def all_stored() -> bool:
        return bool((await db_counts(pg_url))["traces"] >= n)

    await _wait_for(all_stored, 180)

    async def all_committed() -> bool:
        c = await committed(kafka_bootstrap, group, topic)
        return sum(v or 0 for v in c.values()) == n

    await _wait_for(all_committed, 30)
    elapsed = time.monotonic() - started
    counts = await db_counts(pg_url)
    assert counts["traces"] == n
    assert counts["judgements"] == 2 * n
    assert set(counts["per_trace"].values()) == {2}
    assert len(counts["per_trace"]) == n
    assert second.terminate() == 0
    print(f"20k stream with SIGKILL+restart: {elapsed:.1f}s, {at_kill['traces']} stored at kill")


async def test_postgres_outage_pauses_work_and_loses_nothing(
    kafka_bootstrap: str, topic: str, pg_url: str, procs: list[ServeProcess]
) -> None:
    proxy = TcpProxy(pg_server(pg_url))  # the configured server, by TCP or unix socket
    try:
        proxied = pg_url_with(pg_url, tcp=("127.0.0.1", proxy.port))
        await create_topic(kafka_bootstrap, topic, 2)
        port = free_port()
        group = f"g-{uuid.uuid4().hex[:8]}"
        env = _env(
            kafka_bootstrap,
            topic,
            proxied,
            group,
            port,
            RAGPULSE_JUDGE_ENABLED="keyword",
            RAGPULSE_ENGINE_QUEUE_SIZE="50",
            RAGPULSE_ENGINE_STORE_BACKOFF_S="0.2",
            RAGPULSE_ENGINE_STORE_RETRIES="30",
        )
        proc = ServeProcess(env)
        procs.append(proc)
        proc.start()
        await produce(kafka_bootstrap, topic, _stream(200))

        async def first_batch() -> bool:
            return bool((await db_counts(pg_url))["traces"] >= 200)

        await _wait_for(first_batch, 60)
        proxy.cut()
        await produce(
            kafka_bootstrap,
            topic,
            (json.dumps({"traceId": f"o{i}", "question": "q", "answer": "a"}).encode() for i in range(1000)),
        )
        await asyncio.sleep(6.0)  # the outage
        during = await db_counts(pg_url)
        assert during["traces"] == 200  # nothing could be written
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            r = await http.get("/readyz")
            assert r.status_code == 503
            assert r.json()["checks"]["store"] is False
            c = await committed(kafka_bootstrap, group, topic, 2)
            assert sum(v or 0 for v in c.values()) <= 200  # nothing past the outage was committed
            proxy.restore()

            async def all_stored() -> bool:
                return bool((await db_counts(pg_url))["traces"] >= 1200)

            await _wait_for(all_stored, 90)
            assert (await http.get("/readyz")).status_code == 200
        counts = await db_counts(pg_url)
        assert counts["traces"] == 1200
        assert counts["judgements"] == 1200
        assert proc.terminate() == 0
        c = await committed(kafka_bootstrap, group, topic, 2)
        assert sum(v or 0 for v in c.values()) == 1200
    finally:
        proxy.close()


@pytest.mark.slow
async def test_database_cut_for_90_s_loses_nothing_and_dead_letters_nothing(
    kafka_bootstrap: str, topic: str, pg_url: str, procs: list[ServeProcess]
) -> None:
    """Issue 11 item 8: with the default retry budget (8 attempts, ~55 s) a 90 s outage used to dead-letter
    traces as not_stored and commit their offsets. serve now waits the outage out: paused, /readyz 503, nothing
    committed, and everything stored within 60 s after the database is back."""
    proxy = TcpProxy(pg_server(pg_url))  # the configured server, by TCP or unix socket
    try:
        proxied = pg_url_with(pg_url, tcp=("127.0.0.1", proxy.port))
        await create_topic(kafka_bootstrap, topic, 2)
        port = free_port()
        group = f"g-{uuid.uuid4().hex[:8]}"
        env = _env(
            kafka_bootstrap, topic, proxied, group, port,
            RAGPULSE_JUDGE_ENABLED="keyword", RAGPULSE_ENGINE_QUEUE_SIZE="50",
        )  # fmt: skip
        proc = ServeProcess(env)
        procs.append(proc)
        proc.start()
        await produce(kafka_bootstrap, topic, _stream(200))

        async def first_batch() -> bool:
            return bool((await db_counts(pg_url))["traces"] >= 200)

        await _wait_for(first_batch, 60)

        async def committed_total() -> int:
            return sum(v or 0 for v in (await committed(kafka_bootstrap, group, topic, 2)).values())

        async def first_committed() -> bool:
            return await committed_total() >= 200

        await _wait_for(first_committed, 30)
        proxy.cut()
        cut_at = time.monotonic()
        await produce(
            kafka_bootstrap,
            topic,
            (json.dumps({"traceId": f"o{i}", "question": "q", "answer": "a"}).encode() for i in range(1000)),
        )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            not_ready_seen = False
            while time.monotonic() - cut_at < 90.0:  # the outage: 90 s, checked every 5 s
                assert await committed_total() == 200  # no offset advanced during the outage
                assert not proc.events("kafka_dead_lettered")  # the dead-letter topic stays empty
                r = await http.get("/readyz")
                not_ready_seen = not_ready_seen or r.status_code == 503
                await asyncio.sleep(5.0)
            assert not_ready_seen
            assert (await http.get("/readyz")).status_code == 503
            assert (await db_counts(pg_url))["traces"] == 200
            proxy.restore()
            restored_at = time.monotonic()

            async def all_stored() -> bool:
                return bool((await db_counts(pg_url))["traces"] >= 1200)

            await _wait_for(all_stored, 60)
            print(f"all 1,200 stored {time.monotonic() - restored_at:.1f}s after the 90 s outage")
            assert (await http.get("/readyz")).status_code == 200
        counts = await db_counts(pg_url)
        assert counts["traces"] == 1200
        assert counts["judgements"] == 1200
        assert not proc.events("kafka_dead_lettered")
        with pytest.raises(TimeoutError):  # nothing ever reached the dead-letter topic
            await read_topic(kafka_bootstrap, f"{topic}.dlq", 1, wait_s=3)
        assert proc.terminate() == 0
        assert await committed_total() == 1200
    finally:
        proxy.close()


async def test_serve_exits_3_when_kafka_is_unreachable(pg_url: str, procs: list[ServeProcess]) -> None:
    proc = ServeProcess(_env(f"127.0.0.1:{free_port()}", "t", pg_url, "g", free_port()))
    procs.append(proc)
    with pytest.raises(RuntimeError, match="exited with 3"):  # a runtime failure (docs/cli.md)
        await asyncio.to_thread(proc.start, 60.0)
    failed = proc.events("serve_failed")
    assert failed
    assert failed[0]["error"].startswith("cannot connect to Kafka at 127.0.0.1:")


@pytest.mark.slow
async def test_broker_gone_readiness_json_logs_and_bounded_shutdown(
    pg_url: str, procs: list[ServeProcess]
) -> None:
    """Issue 11 item 11: with the broker killed, /readyz follows it within seconds, aiokafka's errors are
    rate-limited JSON lines (not ~48 plain-text lines a second) and SIGTERM stops serve within the deadline."""
    from ingest.conftest import _broker_bin
    from testsupport import tansu_broker

    broker = contextlib.ExitStack()
    bootstrap = broker.enter_context(tansu_broker(_broker_bin(), cluster_prefix="gone", start_timeout=15))
    try:
        topic = f"gone-{uuid.uuid4().hex[:8]}"
        await create_topic(bootstrap, topic, 1)
        port = free_port()
        env = _env(bootstrap, topic, pg_url, f"g-{uuid.uuid4().hex[:8]}", port,
                   RAGPULSE_JUDGE_ENABLED="keyword", RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S="5")  # fmt: skip
        proc = ServeProcess(env)
        procs.append(proc)
        proc.start()
        await produce(bootstrap, topic, _stream(20))

        async def stored() -> bool:
            return bool((await db_counts(pg_url))["traces"] >= 20)

        await _wait_for(stored, 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/readyz")).json()["checks"]["kafka"] is True
            broker.close()  # the broker is gone
            gone_at = time.monotonic()

            async def not_ready() -> bool:
                r = await http.get("/readyz")
                return r.status_code == 503 and r.json()["checks"]["kafka"] is False

            await _wait_for(not_ready, 15)
            print(f"/readyz 503 {time.monotonic() - gone_at:.1f}s after the broker died")
        await asyncio.sleep(10.0)  # let aiokafka retry for a while: its errors must stay few and JSON
        assert not [e for e in proc.logs if e.get("event") == "_raw"]  # every line is JSON
        kafka_lines = [e for e in proc.logs if str(e.get("logger", "")).startswith("aiokafka")]
        elapsed = time.monotonic() - gone_at
        assert len(kafka_lines) <= 10 * (elapsed / 10.0 + 1)  # ≤ one line per message kind per 10 s
        stop_at = time.monotonic()
        rc = proc.terminate(timeout=60)
        assert rc == 0, "\n".join(json.dumps(e)[:300] for e in proc.logs[-12:])
        took = time.monotonic() - stop_at
        print(f"SIGTERM → exit in {took:.1f}s with the broker gone (deadline 5 s)")
        assert took < 25.0
        assert proc.events("kafka_stopped")
    finally:
        broker.close()
