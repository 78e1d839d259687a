"""Exactly once for real (issue 11 item 13): a real broker, PostgreSQL, the LLM relevancy judge against the
scripted judge model answering YES/NO in turn (1.0/0.0), and forced redeliveries after a restart."""

from __future__ import annotations

import itertools
import json
import uuid
from contextlib import AsyncExitStack

from export.helpers import value
from ingest.kafka_testutil import create_topic, produce
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.export import MetricsExporter, install_metrics, render_metrics
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.judges.selection import open_judges
from ragpulse.store import PostgresStore
from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer
from testsupport import pg_count, wait_until


def _event(tid: str, answer: str = "Twenty-five days a year.") -> bytes:
    return json.dumps(
        {
            "traceId": tid,
            "question": f"{tid} question: how many leave days?",
            "answer": answer,
            "app": "eo-app",
        }
    ).encode()


async def _run_until(settings: Settings, store: PostgresStore, group: str, stored: int) -> Engine:
    """One ``serve`` life: fresh judges (no client cache carried over), engine and consumer in ``group``."""
    s = settings.replaced(kafka_group_id=group)
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, s, ["relevancy"])
        engine = await stack.enter_async_context(
            Engine(judges, store, s.engine, [MetricsExporter()], redelivering=True)
        )
        await stack.enter_async_context(KafkaSource(s.kafka, engine, commit_interval_s=0.2))
        await wait_until(lambda: engine.stats.stored >= stored, 60, f"{stored} stored traces")
    return engine


async def _scores(url: str) -> dict[str, tuple[str, float | None]]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT trace_id, status, score FROM judgements WHERE judge = 'relevancy'")
        return {r["trace_id"]: (r["status"], r["score"]) for r in rows}
    finally:
        await conn.close()


def _judgements_total() -> float:
    text = render_metrics().decode()
    return sum(
        value(text, "ragpulse_judgements_total", judge="relevancy", app="eo-app", outcome=o) or 0.0
        for o in ("pass", "fail", "error", "skipped")
    )


async def test_redelivery_neither_rejudges_nor_reexports(
    kafka_bootstrap: str, topic: str, pg_url: str
) -> None:
    install_metrics(Settings().export)
    turn = itertools.cycle(["YES\nIt answers the question.", "NO\nIt does not answer the question."])

    def alternating(_: RecordedRequest) -> Reply:
        return Reply(next(turn))  # a non-deterministic judge: 1.0, 0.0, 1.0, …

    with ScriptedOpenAIServer(alternating) as server:
        server.on(
            Reply(status=400, error_message="model overloaded"),
            contains="err-1 question",
            times=1,
        )
        settings = Settings(
            kafka_bootstrap_servers=kafka_bootstrap,
            kafka_topics=[topic],
            store_database_url=pg_url,
            judge_base_url=server.base_url,
            judge_model="m",
            judge_api_key="k",
            judge_max_retries=0,
            engine_shutdown_deadline_s=5.0,
        )
        await create_topic(kafka_bootstrap, topic, 2)
        ids = [f"eo-{i}" for i in range(8)]
        await produce(kafka_bootstrap, topic, [*(_event(t) for t in ids), _event("err-1")])
        store = await PostgresStore.connect(pg_url, settings.store)
        try:
            before_total = _judgements_total()
            await _run_until(settings, store, f"g-{uuid.uuid4().hex[:8]}", 9)
            first = await _scores(pg_url)
            assert first["err-1"] == ("error", None)
            assert sorted({s for st, s in first.values() if st == "ok" and s is not None}) == [
                0.0,
                1.0,
            ]  # both occur
            requests = server.request_count
            assert requests == 9
            total = _judgements_total()
            assert total - before_total == 9

            # Forced redelivery of everything (a new consumer group after a "restart"): identical content.
            engine = await _run_until(settings, store, f"g-{uuid.uuid4().hex[:8]}", 9)
            assert server.request_count == requests + 1  # only the error judgement was retried
            again = await _scores(pg_url)
            assert {t: again[t] for t in ids} == {t: first[t] for t in ids}  # no verdict flipped
            assert again["err-1"][0] == "ok"  # the error was replaced by the retry's verdict
            assert _judgements_total() == total + 1  # only the replaced error was exported
            assert engine.stats.already_judged == 8
            assert await pg_count(pg_url, "SELECT count(*) FROM judgement_history") == 0

            # The same trace id with different content (a re-run answering differently) is judged again,
            # the earlier judgement kept as superseded history.
            await produce(kafka_bootstrap, topic, [_event("eo-0", answer="I cannot say.")])
            await _run_until(settings, store, f"g-{uuid.uuid4().hex[:8]}", 10)
            assert server.request_count == requests + 2
            assert (
                await pg_count(pg_url, "SELECT count(*) FROM judgement_history WHERE trace_id = 'eo-0'") == 1
            )
            assert await pg_count(pg_url, "SELECT count(*) FROM judgements WHERE trace_id = 'eo-0'") == 1
        finally:
            await store.close()
