"""Issue 23 item 12 end to end: a started/partial version of a trace (same trace id, no answer yet) never
replaces the complete trace, whatever the arrival order — through Kafka and through OTLP.

Real parts: the tansu broker (``KafkaSource``), the OTLP/HTTP receiver on a real socket, PostgreSQL, the
offline judges (faithfulness, relevancy, context_relevance: the last needs no answer, so the answerless version
is judged too and would replace the complete trace's judgements if it were written). For OTLP the second version
goes to a second receiver (another replica, or the same one after a restart): one receiver refuses spans of a
trace it already released.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from ingest.kafka_testutil import create_topic, produce
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.judges.selection import open_judges
from ragpulse.store.postgres import PostgresStore
from testsupport import wait_until

JUDGES = ["faithfulness", "relevancy", "context_relevance"]
QUESTION = "How many days of annual leave do new employees get?"
DOCUMENT = "New employees get 25 days of annual leave per year."
ANSWER = "New employees get 25 days of annual leave per year."
ORDERS = ["complete_then_started", "started_then_complete"]

#: What the complete trace is stored as, whatever came before or after it.
COMPLETE_ROW = {"answer": ANSWER, "outcome": "evaluated", "outcome_reason": None, "incomplete": False}
COMPLETE_JUDGEMENTS = {
    "context_relevance": ("ok", True),
    "faithfulness": ("ok", True),
    "relevancy": ("ok", True),
}


@contextlib.asynccontextmanager
async def _engine(pg_url: str, settings: Settings) -> AsyncIterator[tuple[Engine, PostgresStore]]:
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        async with contextlib.AsyncExitStack() as stack:
            judges = await open_judges(stack, settings, None, ledger=store)
            engine = await stack.enter_async_context(Engine(judges, store, settings.engine))
            yield engine, store
    finally:
        await store.close()


async def _stored(pg_url: str, tid: str) -> tuple[dict[str, Any], dict[str, tuple[str, bool | None]]]:
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow(
            "SELECT answer, outcome, outcome_reason, incomplete FROM traces WHERE trace_id = $1", tid
        )
        js = await conn.fetch("SELECT judge, status, passed FROM judgements WHERE trace_id = $1", tid)
    finally:
        await conn.close()
    assert row is not None
    return dict(row), {j["judge"]: (j["status"], j["passed"]) for j in js}


@pytest.mark.parametrize("order", ORDERS)
async def test_kafka_started_event_never_replaces_the_complete_trace(
    kafka_bootstrap: str, topic: str, pg_url: str, order: str
) -> None:
    tid = f"leave-{uuid.uuid4().hex[:8]}"
    complete = {"traceId": tid, "app": "hr", "question": QUESTION, "contexts": [DOCUMENT], "answer": ANSWER}
    started = {"traceId": tid, "app": "hr", "question": QUESTION}  # the request began: no answer yet
    events = [complete, started] if order == ORDERS[0] else [started, complete]
    await create_topic(kafka_bootstrap, topic, 1)
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        judge_enabled=JUDGES,
        engine_shutdown_deadline_s=5.0,
    )
    async with _engine(pg_url, s) as (engine, _), KafkaSource(s.kafka, engine, commit_interval_s=0.2):
        for n, ev in enumerate(events, 1):
            # one at a time: the arrival order is the order under test
            await produce(kafka_bootstrap, topic, [json.dumps(ev).encode()], keys=[b"k"])
            await wait_until(lambda n=n: engine.stats.stored == n, 60, f"{n} traces stored")  # type: ignore[misc]
            if n == 1 and order == ORDERS[1]:
                row, js = await _stored(pg_url, tid)
                assert row["answer"] is None
                assert (js["faithfulness"], js["relevancy"]) == (
                    ("skipped", None),
                    ("skipped", None),
                )  # no_answer
    assert await _stored(pg_url, tid) == (COMPLETE_ROW, COMPLETE_JUDGEMENTS)
    assert engine.stats.outranked == (1 if order == ORDERS[0] else 0)
    # the late started version is not judged at all (context_relevance ran on it before: judged, then refused)
    assert engine.stats.outranked_unjudged == (1 if order == ORDERS[0] else 0)


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


T0 = 1_764_590_000_000_000_000  # 2025-12-01, Unix ns


def _otlp(tid: str, *, complete: bool) -> bytes:
    """The complete trace (a CHAIN root with the question and answer, a RETRIEVER child with the document), or
    its started version: the same root with the question and no output, nothing else."""
    root_attrs = [_kv("openinference.span.kind", "CHAIN"), _kv("input.value", QUESTION)]
    if complete:
        root_attrs.append(_kv("output.value", ANSWER))
    spans: list[dict[str, Any]] = [
        {
            "traceId": tid,
            "spanId": "1" * 16,
            "name": "rag",
            "startTimeUnixNano": str(T0),
            "endTimeUnixNano": str(T0 + 900_000_000),
            "attributes": root_attrs,
        }
    ]
    if complete:
        spans.append(
            {
                "traceId": tid,
                "spanId": "2" * 16,
                "parentSpanId": "1" * 16,
                "name": "retrieve",
                "startTimeUnixNano": str(T0 + 1_000_000),
                "endTimeUnixNano": str(T0 + 9_000_000),
                "attributes": [
                    _kv("openinference.span.kind", "RETRIEVER"),
                    _kv("retrieval.documents.0.document.id", "leave-policy"),
                    _kv("retrieval.documents.0.document.content", DOCUMENT),
                ],
            }
        )
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", "hr")]},
                "scopeSpans": [
                    {"scope": {"name": "openinference.instrumentation.langchain"}, "spans": spans}
                ],
            }
        ]
    }
    return json.dumps(doc).encode()


@pytest.mark.parametrize("order", ORDERS)
async def test_otlp_started_version_never_replaces_the_complete_trace(pg_url: str, order: str) -> None:
    tid = uuid.uuid4().hex
    bodies = [_otlp(tid, complete=True), _otlp(tid, complete=False)]
    if order == ORDERS[1]:
        bodies.reverse()
    s = Settings(
        otlp_grpc_address="", otlp_http_address="127.0.0.1:0", otlp_root_grace_s=0.05, judge_enabled=JUDGES
    )
    async with _engine(pg_url, s) as (engine, store):
        for n, body in enumerate(bodies, 1):
            # each version through its own receiver: two replicas behind one load balancer
            async with (
                OtlpReceivers(s.otlp, engine, pending=store) as r,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client,
            ):
                resp = await client.post(
                    "/v1/traces", content=body, headers={"Content-Type": "application/json"}
                )
                assert resp.status_code == 200
                assert resp.json() == {}  # every span taken
                await wait_until(lambda n=n: engine.stats.stored == n, 60, f"{n} traces stored")  # type: ignore[misc]
            if n == 1 and order == ORDERS[1]:
                row, js = await _stored(pg_url, tid)
                assert row["answer"] is None
                assert (js["faithfulness"], js["relevancy"]) == (
                    ("skipped", None),
                    ("skipped", None),
                )  # no_answer
    assert await _stored(pg_url, tid) == (COMPLETE_ROW, COMPLETE_JUDGEMENTS)
    assert engine.stats.outranked == (1 if order == ORDERS[0] else 0)
    # the late started version is not judged at all (context_relevance ran on it before: judged, then refused)
    assert engine.stats.outranked_unjudged == (1 if order == ORDERS[0] else 0)
