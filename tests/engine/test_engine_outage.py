"""A store outage longer than the retry budget (issue 11 item 8): redelivering engines wait it out."""

from __future__ import annotations

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.model import Trace, TraceResult
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge


def _settings() -> Settings:
    # backoff doubles per attempt: 12 attempts from 0.1 ms sleep ~0.4 s in all (from 1 ms it was ~4 s)
    return Settings(engine_store_retries=3, engine_store_backoff_s=0.0001, engine_batch_size=10)


async def test_redelivering_engine_retries_a_connection_outage_beyond_the_retry_budget() -> None:
    store = MemoryStore()
    store.fail_next(12, retriable=True)  # four times engine_store_retries=3
    acks: list[bool] = []

    async def ack(_: TraceResult, ok: bool) -> None:
        acks.append(ok)

    async with Engine({"k": ScriptedJudge("k", 1.0)}, store, _settings().engine, redelivering=True) as engine:
        for i in range(5):
            await engine.submit(Trace(trace_id=f"t{i}", question="q", answer="a"), ack)
        assert await engine.drain(30)
    assert acks == [True] * 5
    assert engine.stats.failed == 0
    assert engine.stats.store_retries == 12
    assert sorted(store.traces) == [f"t{i}" for i in range(5)]


async def test_redelivering_engine_fails_a_data_error_at_once() -> None:
    store = MemoryStore()
    store.fail_next(1, retriable=False)
    acks: list[bool] = []

    async def ack(_: TraceResult, ok: bool) -> None:
        acks.append(ok)

    async with Engine({"k": ScriptedJudge("k", 1.0)}, store, _settings().engine, redelivering=True) as engine:
        await engine.submit(Trace(trace_id="bad", question="q", answer="a"), ack)
        assert await engine.drain(30)
    assert acks == [False]
    assert engine.stats.store_retries == 0


async def test_in_process_engine_keeps_its_bounded_retries() -> None:
    store = MemoryStore()
    store.fail_next(25, retriable=True)
    acks: list[bool] = []

    async def ack(_: TraceResult, ok: bool) -> None:
        acks.append(ok)

    async with Engine({"k": ScriptedJudge("k", 1.0)}, store, _settings().engine) as engine:
        await engine.submit(Trace(trace_id="t", question="q", answer="a"), ack)
        assert await engine.drain(30)
    assert acks == [False]
    assert engine.stats.store_retries == 2  # 3 attempts
