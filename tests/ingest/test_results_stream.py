"""The results stream (ragpulse.sidecar.results_stream) against a real tansu broker and real PostgreSQL:
every stored judgement published once per change, keyed ``trace_id:judge:version``, valid against the shipped
JSON Schema; a crash between store and publish republishes; a redelivery of identical content publishes
nothing new; a replaced error judgement is published again."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
from aiokafka import AIOKafkaProducer

from ingest.kafka_testutil import create_topic, read_topic
from ragpulse.config import Settings
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    ModelPrice,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.sidecar.results_stream import publish_batch, run_results_stream
from ragpulse.store.postgres import PostgresStore
from testsupport import wait_until

SCHEMA = json.loads(resources.files("ragpulse.export").joinpath("judgement_event.schema.json").read_text())


def _judgement(judge: str, status: JudgementStatus, score: float | None = None) -> Judgement:
    if status is JudgementStatus.OK:
        assert score is not None
        return Judgement(judge=judge, version="v1", backend=Backend.HEURISTIC, status=status, score=score,
                         passed=score >= 0.5, threshold=0.5, flags=JudgementFlags(decided_by="sentence_support"))  # fmt: skip
    return Judgement(
        judge=judge, version="v1", backend=Backend.LLM, status=status, reason="judge_unavailable: 503"
    )


def _results(faithfulness_status: JudgementStatus = JudgementStatus.ERROR) -> list[TraceResult]:
    out = []
    for i in range(3):
        trace = Trace(trace_id=f"{i:032x}", app="shop", scenario="refunds", question=f"q{i}?", answer=f"a{i}.",
                      source=Source.KAFKA)  # fmt: skip
        faith = (
            _judgement("faithfulness", JudgementStatus.OK, 0.9)
            if faithfulness_status is JudgementStatus.OK or i
            else _judgement("faithfulness", JudgementStatus.ERROR)
        )
        out.append(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED,
                               judgements=[_judgement("relevancy", JudgementStatus.OK, 0.2 * i), faith]))  # fmt: skip
    return out


class CrashAfterSend:
    """A producer that sends, then dies before the store marks the batch published (a SIGKILL there)."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any:
        return await self.producer.send(topic, value=value, key=key)


async def test_results_stream_publishes_each_stored_judgement(
    kafka_bootstrap: str, pg_url: str, topic: str
) -> None:
    await create_topic(kafka_bootstrap, topic)
    store = await PostgresStore.connect(pg_url, results_outbox=True)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
    await producer.start()
    try:
        await store.write_results(_results())
        stored = {(f"{i:032x}", j, "v1") for i in range(3) for j in ("relevancy", "faithfulness")}

        # crash after sending, before marking: the rows stay in the outbox and are offered again
        async def crash(rows: list[dict[str, Any]]) -> None:
            await publish_batch(CrashAfterSend(producer), topic, rows)
            raise RuntimeError("killed between publish and mark")

        with pytest.raises(RuntimeError):
            await store.publish_pending(crash)
        assert await store.publish_pending(lambda rows: publish_batch(producer, topic, rows)) == 6
        assert await store.publish_pending(lambda rows: publish_batch(producer, topic, rows)) == 0

        records = await read_topic(kafka_bootstrap, topic, expect=12)
        keys = {r.key.decode() for r in records if r.key}
        assert keys == {f"{t}:{j}:{v}" for t, j, v in stored}  # at least once: each key, duplicates allowed
        events = [json.loads(r.value) for r in records if r.value]
        for ev in events:
            jsonschema.validate(ev, SCHEMA)
        first = next(e for e in events if e["trace_id"] == f"{1:032x}" and e["judge"] == "relevancy")
        assert (first["app"], first["scenario"], first["status"], first["score"], first["passed"]) == (
            "shop", "refunds", "ok", 0.2, False,
        )  # fmt: skip
        assert first["decided_by"] == "sentence_support"
        assert first["time"].endswith("Z")
        err = next(e for e in events if e["trace_id"] == f"{0:032x}" and e["judge"] == "faithfulness")
        assert (err["status"], err["score"], err["passed"]) == ("error", None, None)

        # redelivery of identical content: nothing written, nothing new to publish
        await store.write_results(_results())
        assert await store.publish_pending(lambda rows: publish_batch(producer, topic, rows)) == 0
        # the error judgement retried successfully replaces the stored one and is published again
        await store.write_results(_results(JudgementStatus.OK)[:1])
        assert await store.publish_pending(lambda rows: publish_batch(producer, topic, rows)) == 1
        final = [json.loads(r.value) for r in await read_topic(kafka_bootstrap, topic, expect=13) if r.value]
        history = [
            (e["status"], e["score"])
            for e in final
            if e["trace_id"] == f"{0:032x}" and e["judge"] == "faithfulness"
        ]
        assert sorted(history, key=str) == [
            ("error", None),
            ("error", None),
            ("ok", 0.9),
        ]  # crash dup, error, retry
    finally:
        await producer.stop()
        await store.close()


async def test_stream_off_stores_judgements_as_published(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url)  # results_outbox off: the default

    async def never(rows: list[dict[str, Any]]) -> None:
        raise AssertionError(rows)

    try:
        await store.write_results(_results())
        assert await store.publish_pending(never) == 0
    finally:
        await store.close()


async def test_stream_loop_waits_out_an_unreachable_broker(pg_url: str) -> None:
    """With the topic unreachable the loop keeps retrying and the outbox keeps its rows."""
    import asyncio

    class Down:
        calls = 0

        async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any:
            Down.calls += 1
            raise ConnectionError("broker unreachable")

    store = await PostgresStore.connect(pg_url, results_outbox=True)
    try:
        await store.write_results(_results())
        task = asyncio.create_task(
            run_results_stream(store, Down(), "results", idle_s=0.01, max_backoff_s=0.05)
        )
        await wait_until(lambda: Down.calls >= 3, what="three failed publish attempts")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        sent: list[dict[str, Any]] = []

        async def keep(rows: list[dict[str, Any]]) -> None:
            sent.extend(rows)

        assert await store.publish_pending(keep) == 6
    finally:
        await store.close()


async def test_events_carry_the_session_and_the_apps_usage(
    kafka_bootstrap: str, pg_url: str, topic: str
) -> None:
    """Each judgement event names the trace's session and the app's model, tokens and cost at the price table
    (``null`` for a model missing from it, never 0); redaction keeps the session id and every number."""
    await create_topic(kafka_bootstrap, topic)
    store = await PostgresStore.connect(pg_url, Settings(store_redact_text=True).store, results_outbox=True)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
    await producer.start()
    prices = {"gpt-4o-mini": ModelPrice(prompt=0.15, completion=0.60)}
    try:
        priced = Trace(trace_id="conv-1", app="chat", question="Is it paid in full?", answer="Yes.",
                       model="gpt-4o-mini", session_id="sess-9", prompt_tokens=120, completion_tokens=17,
                       total_prompt_tokens=160, total_completion_tokens=25, source=Source.OTLP)  # fmt: skip
        unpriced = Trace(trace_id="conv-2", app="chat", question="q?", answer="a.", model="in-house",
                         prompt_tokens=9, completion_tokens=1, source=Source.OTLP)  # fmt: skip
        await store.write_results(
            [
                TraceResult(
                    trace=t,
                    outcome=TraceOutcome.EVALUATED,
                    judgements=[_judgement("relevancy", JudgementStatus.OK, 0.9)],
                )
                for t in (priced, unpriced)
            ]
        )
        assert await store.publish_pending(lambda rows: publish_batch(producer, topic, rows, prices)) == 2
        events = {
            e["trace_id"]: e
            for e in (
                json.loads(r.value) for r in await read_topic(kafka_bootstrap, topic, expect=2) if r.value
            )
        }
        for ev in events.values():
            jsonschema.validate(ev, SCHEMA)
        one = events["conv-1"]
        assert (one["session_id"], one["model"], one["prompt_tokens"], one["completion_tokens"]) == (
            "sess-9", "gpt-4o-mini", 120, 17,
        )  # fmt: skip
        assert (one["total_prompt_tokens"], one["total_completion_tokens"]) == (160, 25)
        assert one["app_cost"] == pytest.approx((160 * 0.15 + 25 * 0.60) / 1e6)
        two = events["conv-2"]
        assert (two["session_id"], two["prompt_tokens"], two["app_cost"]) == (None, 9, None)
    finally:
        await producer.stop()
        await store.close()
