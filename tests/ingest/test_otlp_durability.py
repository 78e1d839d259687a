"""Issue 11 item 10: accepted means kept — OTLP traces answered 200 are in PostgreSQL before the answer, are
judged from there, survive a SIGTERM with a slow judge (the shutdown deadline holds) and are resumed on
start; a full backlog refuses or partially accepts, and never evicts another client's complete trace.

Real parts: ``ragpulse serve`` as a subprocess, OTLP/HTTP on a real socket, PostgreSQL, the scripted
OpenAI-compatible judge server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx

from ingest.serve_testutil import ServeProcess
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.store.postgres import PostgresStore
from ragpulse.testing.fakes import GatedJudge, ScriptedJudge
from ragpulse.testing.openai_server import Phase, ScriptedOpenAIServer, judge_responder
from testsupport import free_port, pg_count, wait_until

T0 = 1_764_590_000_000_000_000  # 2025-12-01, Unix ns


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _trace_spans(i: int, tid: str | None = None) -> list[dict[str, Any]]:
    """One complete one-span OpenInference trace (question, answer, one document)."""
    return [
        {
            "traceId": tid or f"{i + 1:032x}",
            "spanId": f"{i + 1:016x}",
            "name": "rag",
            "startTimeUnixNano": str(T0 + i * 1_000_000),
            "endTimeUnixNano": str(T0 + i * 1_000_000 + 500_000),
            "attributes": [
                _kv("openinference.span.kind", "CHAIN"),
                _kv("input.value", f"What is rule {i}?"),
                _kv("output.value", f"Rule {i} says yes."),
            ],
        }
    ]


def _body(spans: list[dict[str, Any]]) -> bytes:
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", "hr-assistant")]},
                "scopeSpans": [{"scope": {"name": "openinference"}, "spans": spans}],
            }
        ]
    }
    return json.dumps(doc).encode()


JSON = {"Content-Type": "application/json"}


async def _wait_db(url: str, sql: str, want: int, timeout: float = 60.0) -> int:  # noqa: ASYNC109
    """Wait until ``sql`` counts ``want`` (``TimeoutError`` naming the query otherwise); return the count."""

    async def reached() -> bool:
        return await pg_count(url, sql) == want

    await wait_until(reached, timeout, f"{sql} = {want}", interval_s=0.2)
    return want


def _serve_env(pg_url: str, http_port: int, otlp_port: int, judge_url: str) -> dict[str, str]:
    return {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
        "RAGPULSE_OTLP_HTTP_ADDRESS": f"127.0.0.1:{otlp_port}",
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_ROOT_GRACE_S": "0.1",
        "RAGPULSE_JUDGE_ENABLED": "relevancy",
        "RAGPULSE_JUDGE_BASE_URL": judge_url,
        "RAGPULSE_JUDGE_MODEL": "scripted",
        "RAGPULSE_JUDGE_API_KEY": "test",
        "RAGPULSE_JUDGE_TIMEOUT_S": "120",
        "RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S": "5",
        "RAGPULSE_LOG_LEVEL": "INFO",
    }


def test_sigterm_with_a_slow_judge_keeps_accepted_traces_and_judges_them_after_restart(pg_url: str) -> None:
    """The judge holds every call for an hour, so serve can only stop by its shutdown deadline: it exits 0
    after logging that the deadline passed with the 5 traces in flight, nothing judged, all 5 still pending.
    Asserted on those events and counts, not on how long the stop took (the 120 s wait only bounds a hang)."""
    http_port, otlp_port = free_port(), free_port()
    with ScriptedOpenAIServer(judge_responder) as judge:
        judge.set_schedule(Phase(latency_s=3600.0))  # no judge reply while this serve runs
        proc = ServeProcess(_serve_env(pg_url, http_port, otlp_port, judge.base_url))
        try:
            proc.start()
            with httpx.Client(base_url=f"http://127.0.0.1:{otlp_port}") as client:
                for i in range(5):
                    resp = client.post("/v1/traces", content=_body(_trace_spans(i)), headers=JSON)
                    assert resp.status_code == 200
            # accepted = recorded before the answer
            assert asyncio.run(pg_count(pg_url, "SELECT count(DISTINCT key) FROM pending_inputs")) == 5
            judge.wait_for_requests(1, timeout_s=30)  # judging has started (and will not finish)
            rc = proc.terminate(timeout=120)
        finally:
            proc.close()
        assert rc == 0
        assert [e["deadline_s"] for e in proc.events("stopping")] == [5.0]
        passed = proc.events("engine_shutdown_deadline_passed")
        assert [(e["pending"], e["deadline_s"]) for e in passed] == [(5, 5.0)]
        assert asyncio.run(pg_count(pg_url, "SELECT count(*) FROM judgements")) == 0
        assert asyncio.run(pg_count(pg_url, "SELECT count(DISTINCT key) FROM pending_inputs")) == 5

        judge.set_schedule(Phase())
        proc = ServeProcess(_serve_env(pg_url, http_port, otlp_port, judge.base_url))
        try:
            proc.start()
            assert proc.events("otlp_pending_resumed")[0]["traces"] == 5
            stored = asyncio.run(
                _wait_db(
                    pg_url, "SELECT count(*) FROM judgements WHERE judge = 'relevancy' AND status = 'ok'", 5
                )
            )
            assert stored == 5
            assert asyncio.run(_wait_db(pg_url, "SELECT count(*) FROM pending_inputs", 0)) == 0
            assert proc.terminate(timeout=30) == 0
        finally:
            proc.close()
    questions = asyncio.run(_questions(pg_url))
    assert questions == [f"What is rule {i}?" for i in range(5)]


async def _questions(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT question FROM traces ORDER BY question")
    finally:
        await conn.close()
    return [r["question"] for r in rows]


def _settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "otlp_grpc_address": "",
        "otlp_http_address": "127.0.0.1:0",
        "otlp_root_grace_s": 0.05,
        "otlp_max_request_bytes": 64 * 1024 * 1024,
    }
    base.update(over)
    return Settings(**base)


async def test_a_huge_request_is_partially_accepted_and_evicts_no_other_clients_trace(pg_url: str) -> None:
    """15,000 one-span traces against a limit of 10,000, after another client's complete trace: the request
    answers 200 with partial_success for the 5,001 spans that found no room; the other client's trace is
    judged; every trace taken is stored."""
    settings = _settings(otlp_max_pending_traces=10_000, engine_queue_size=100)
    store = await PostgresStore.connect(pg_url, settings.store)
    gate = asyncio.Event()  # holds the judge so the backlog fills
    other = "f" * 32
    try:
        async with (
            Engine({"relevancy": GatedJudge("relevancy", gate)}, store, settings.engine) as engine,
            OtlpReceivers(settings.otlp, engine, pending=store) as r,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}", timeout=120) as client,
        ):
            resp = await client.post("/v1/traces", content=_body(_trace_spans(99_999, other)), headers=JSON)
            assert resp.status_code == 200
            big = _body([s for i in range(15_000) for s in _trace_spans(i)])
            resp = await client.post("/v1/traces", content=big, headers=JSON)
            assert resp.status_code == 200
            ps = resp.json()["partialSuccess"]
            assert ps["rejectedSpans"] == "5001"
            assert "pending-trace limit" in ps["errorMessage"]
            assert r.assembler.backlog == 10_000
            busy = await client.post("/v1/traces", content=_body(_trace_spans(20_000)), headers=JSON)
            assert busy.status_code == 503  # full: refused, retryable
            assert busy.headers["retry-after"] == "1"
            assert await pg_count(pg_url, "SELECT count(DISTINCT key) FROM pending_inputs") == 10_000
            gate.set()
            assert await _wait_db(pg_url, "SELECT count(*) FROM traces", 10_000, timeout=300) == 10_000
            assert await pg_count(pg_url, f"SELECT count(*) FROM traces WHERE trace_id = '{other}'") == 1
            assert await _wait_db(pg_url, "SELECT count(*) FROM pending_inputs", 0) == 0
    finally:
        await store.close()


async def test_journal_unavailable_answers_503_and_takes_nothing(pg_url: str) -> None:
    settings = _settings()
    store = await PostgresStore.connect(pg_url, settings.store)
    conn = await asyncpg.connect(pg_url)
    try:
        async with (
            Engine({"relevancy": ScriptedJudge("relevancy")}, store, settings.engine) as engine,
            OtlpReceivers(settings.otlp, engine, pending=store) as r,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client,
        ):
            await conn.execute("ALTER TABLE pending_inputs RENAME TO pending_inputs_gone")
            resp = await client.post("/v1/traces", content=_body(_trace_spans(1)), headers=JSON)
            assert resp.status_code == 503
            assert r.assembler.backlog == 0
            await conn.execute("ALTER TABLE pending_inputs_gone RENAME TO pending_inputs")
            resp = await client.post("/v1/traces", content=_body(_trace_spans(1)), headers=JSON)
            assert resp.status_code == 200
            assert await _wait_db(pg_url, "SELECT count(*) FROM traces", 1) == 1
    finally:
        await conn.close()
        await store.close()


async def test_pending_traces_of_a_previous_run_are_resumed(pg_url: str) -> None:
    settings = _settings()
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        # accepted by a receiver whose engine is gone (every submit fails): the traces stay pending
        async with (
            OtlpReceivers(settings.otlp, _NeverSink(), pending=store) as r,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client,
        ):
            for i in range(3):
                resp = await client.post("/v1/traces", content=_body(_trace_spans(i)), headers=JSON)
                assert resp.status_code == 200
        assert await pg_count(pg_url, "SELECT count(DISTINCT key) FROM pending_inputs") == 3
        async with (
            Engine({"relevancy": ScriptedJudge("relevancy")}, store, settings.engine) as engine,
            OtlpReceivers(settings.otlp, engine, pending=store),
        ):
            assert await _wait_db(pg_url, "SELECT count(*) FROM judgements", 3) == 3
            assert await _wait_db(pg_url, "SELECT count(*) FROM pending_inputs", 0) == 0
    finally:
        await store.close()


class _NeverSink:
    """A sink whose engine is already gone: every submit raises (the traces stay pending)."""

    async def submit(self, trace: Any, ack: Any = None) -> None:
        raise RuntimeError("engine closed")

    def has_room(self) -> bool:
        return False


async def test_errored_and_multi_llm_traces_are_stored_right(pg_url: str) -> None:
    """Items 1 and 4 end to end: a root with status ERROR is stored not_evaluable/trace_error with no
    judgement; with two LLM calls and no root output, the stored answer is the call that read the document."""
    errored = _trace_spans(1)
    errored[0]["status"] = {"code": 2}
    errored[0]["events"] = [
        {
            "name": "exception",
            "timeUnixNano": str(T0),
            "attributes": [
                _kv("exception.type", "TimeoutError"),
                _kv("exception.message", "upstream timeout"),
            ],
        }
    ]
    tid = "a" * 32
    root = {
        "traceId": tid,
        "spanId": "1" * 16,
        "name": "chain",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 10_000_000),
        "attributes": [_kv("openinference.span.kind", "CHAIN"), _kv("input.value", "How long is probation?")],
    }

    def llm(sid: str, start: int, end: int, prompt: str, output: str) -> dict[str, Any]:
        return {
            "traceId": tid,
            "spanId": sid * 16,
            "parentSpanId": "1" * 16,
            "name": "llm",
            "startTimeUnixNano": str(T0 + start),
            "endTimeUnixNano": str(T0 + end),
            "attributes": [
                _kv("openinference.span.kind", "LLM"),
                _kv("llm.input_messages.0.message.role", "user"),
                _kv("llm.input_messages.0.message.content", prompt),
                _kv("llm.output_messages.0.message.role", "assistant"),
                _kv("llm.output_messages.0.message.content", output),
            ],
        }

    retriever = {
        "traceId": tid,
        "spanId": "2" * 16,
        "parentSpanId": "1" * 16,
        "name": "retriever",
        "startTimeUnixNano": str(T0 + 100),
        "endTimeUnixNano": str(T0 + 200),
        "attributes": [
            _kv("openinference.span.kind", "RETRIEVER"),
            _kv("retrieval.documents.0.document.content", "Probation lasts 90 days."),
        ],
    }
    spans = [
        root,
        retriever,
        llm("3", 300, 5_000_000, "Context: Probation lasts 90 days. Question: How long?", "90 days."),
        llm("4", 5_000_100, 9_000_000, "Suggest follow-up questions for: 90 days.", "1. Why? 2. Who?"),
    ]
    settings = _settings()
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        async with (
            Engine({"relevancy": ScriptedJudge("relevancy")}, store, settings.engine) as engine,
            OtlpReceivers(settings.otlp, engine, pending=store) as r,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client,
        ):
            for body in (_body(errored), _body(spans)):
                assert (await client.post("/v1/traces", content=body, headers=JSON)).status_code == 200
            assert await _wait_db(pg_url, "SELECT count(*) FROM traces", 2) == 2
        conn = await asyncpg.connect(pg_url)
        try:
            rows = {r["trace_id"]: r for r in await conn.fetch("SELECT * FROM traces")}
            judged = {r["trace_id"] for r in await conn.fetch("SELECT trace_id FROM judgements")}
        finally:
            await conn.close()
    finally:
        await store.close()
    bad = rows[f"{2:032x}"]
    assert (bad["outcome"], bad["outcome_reason"]) == ("not_evaluable", "trace_error")
    assert f"{2:032x}" not in judged
    good = rows[tid]
    assert (good["outcome"], good["answer"]) == ("evaluated", "90 days.")
    assert tid in judged
