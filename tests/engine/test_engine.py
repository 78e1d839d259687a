"""Engine behaviour with in-memory fakes: outcomes, back-pressure, batching, retries, shutdown, export."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import structlog

from ragpulse.config import JudgeRoute, Settings
from ragpulse.engine import Engine, EngineClosedError
from ragpulse.errors import ConfigError
from ragpulse.model import Backend, Judgement, JudgementStatus, Source, Trace, TraceOutcome, TraceResult
from ragpulse.testing.fakes import GatedJudge, MemoryExporter, MemoryStore, ScriptedJudge
from testsupport import wait_until


def _settings(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "engine_queue_size": 100,
        "engine_workers": 4,
        "engine_batch_size": 50,
        "engine_flush_interval_s": 0.05,
        "engine_store_retries": 3,
        "engine_store_backoff_s": 0.01,
        "engine_shutdown_deadline_s": 5.0,
    }
    base.update(kw)
    return Settings(**base)


def _trace(i: int | str, **kw: Any) -> Trace:
    fields: dict[str, Any] = {"trace_id": f"t-{i}", "question": f"q{i}", "answer": f"a{i}"}
    fields.update(kw)
    return Trace(**fields)


class Acks:
    def __init__(self) -> None:
        self.got: dict[str, tuple[TraceResult, bool]] = {}

    async def __call__(self, result: TraceResult, ok: bool) -> None:
        self.got[result.trace.trace_id] = (result, ok)


async def test_outcomes_are_stored_with_reasons() -> None:
    store, acks = MemoryStore(), Acks()
    judges = {"a": ScriptedJudge("a", 0.9), "b": ScriptedJudge("b", 0.2)}
    async with Engine(judges, store, _settings().engine) as eng:
        await eng.submit(_trace(1), acks)
        await eng.submit(_trace(2, question=None), acks)
        await eng.submit(_trace(3, answer="   "), acks)
        await eng.submit(_trace(4, incomplete=True), acks)
        assert await eng.drain(5)
    assert {k: ok for k, (_, ok) in acks.got.items()} == dict.fromkeys(["t-1", "t-2", "t-3", "t-4"], True)
    r1 = store.traces["t-1"]
    assert r1.outcome is TraceOutcome.EVALUATED
    assert [(j.judge, j.score, j.passed) for j in acks.got["t-1"][0].judgements] == [
        ("a", 0.9, True),
        ("b", 0.2, False),
    ]
    assert (store.traces["t-2"].outcome, store.traces["t-2"].outcome_reason) == (
        TraceOutcome.NOT_EVALUABLE,
        "no_question",
    )
    assert store.traces["t-2"].judgements == ()
    assert store.traces["t-3"].outcome_reason == "no_answer"
    assert store.traces["t-4"].outcome is TraceOutcome.INCOMPLETE
    assert len(store.traces["t-4"].judgements) == 2
    assert judges["a"].calls == 2  # only traces 1 and 4 were judged
    assert (eng.stats.evaluated, eng.stats.not_evaluable, eng.stats.incomplete, eng.stats.stored) == (
        1,
        2,
        1,
        4,
    )


async def test_not_sampled_traces_are_stored_without_judgements() -> None:
    store = MemoryStore()
    judge = ScriptedJudge("a")
    async with Engine({"a": judge}, store, _settings(engine_sampling_rate=0.0).engine) as eng:
        for i in range(5):
            await eng.submit(_trace(i, source=Source.KAFKA))
    assert judge.calls == 0
    assert {r.outcome for r in store.traces.values()} == {TraceOutcome.NOT_SAMPLED}
    assert len(store.traces) == 5
    assert not store.judgements
    assert eng.stats.not_sampled == 5


async def test_test_traffic_is_judged_whatever_the_sampling_rate() -> None:
    store = MemoryStore()
    judge = ScriptedJudge("a")
    async with Engine({"a": judge}, store, _settings(engine_sampling_rate=0.0).engine) as eng:
        await eng.submit(_trace(0, source=Source.REPLAY))
        await eng.submit(
            _trace(1, source=Source.KAFKA, run_id="nightly")
        )  # replay --via: a run id on the wire
        await eng.submit(_trace(2, source=Source.API))
        await eng.submit(_trace(3, source=Source.KAFKA))
    assert judge.calls == 3
    assert store.traces["t-3"].outcome is TraceOutcome.NOT_SAMPLED
    assert {store.traces[f"t-{i}"].outcome for i in range(3)} == {TraceOutcome.EVALUATED}


async def test_sampling_rate_half_follows_the_hash() -> None:
    from ragpulse.engine import is_sampled

    store = MemoryStore()
    async with Engine({"a": ScriptedJudge("a")}, store, _settings(engine_sampling_rate=0.5).engine) as eng:
        for i in range(200):
            await eng.submit(_trace(i, source=Source.OTLP))
    judged = {tid for tid, r in store.traces.items() if r.outcome is TraceOutcome.EVALUATED}
    assert judged == {f"t-{i}" for i in range(200) if is_sampled(f"t-{i}", 0.5)}
    assert 70 < len(judged) < 130


async def test_back_pressure_submit_blocks_while_queue_full() -> None:
    gate = asyncio.Event()

    store = MemoryStore()
    judge = GatedJudge("g", gate)
    s = _settings(engine_queue_size=2, engine_workers=1, engine_batch_size=1)
    async with Engine({"g": judge}, store, s.engine) as eng:
        await eng.submit(_trace(0))
        await asyncio.wait_for(judge.waiting.wait(), 5)  # taken by the single worker
        await eng.submit(_trace(1))
        await eng.submit(_trace(2))  # queue now full (2 slots)
        assert not eng.has_room()
        blocked = asyncio.create_task(eng.submit(_trace(3)))
        await wait_until(lambda: eng.in_flight == 4, what="the fourth submit to be counted")
        await asyncio.sleep(0)  # one more turn of the loop: a submit that could proceed would finish here
        assert not blocked.done(), "submit must wait while the queue is full"
        gate.set()
        await asyncio.wait_for(blocked, 2)
        assert await eng.drain(5)
    assert sorted(store.traces) == ["t-0", "t-1", "t-2", "t-3"]


async def test_results_are_written_in_batches() -> None:
    store = MemoryStore()
    s = _settings(engine_batch_size=5, engine_flush_interval_s=1.0, engine_workers=2)
    async with Engine({"a": ScriptedJudge("a")}, store, s.engine) as eng:
        for i in range(12):
            await eng.submit(_trace(i))
        assert await eng.drain(5)
    assert sum(store.writes) == 12
    assert max(store.writes) <= 5
    assert len(store.writes) >= 3
    # nothing left in flight → partial batch written at once, not after the 1 s flush interval
    assert eng.stats.batches == len(store.writes)


async def test_writers_overlap_store_latency() -> None:
    store = MemoryStore()
    store.write_delay_s = 0.1
    s = _settings(engine_batch_size=5, engine_writers=2, engine_workers=8, engine_flush_interval_s=0.01)
    async with Engine({"a": ScriptedJudge("a")}, store, s.engine) as eng:
        for i in range(20):
            await eng.submit(_trace(i))
        assert await eng.drain(5)
    assert sum(store.writes) == 20
    assert len(store.traces) == 20
    assert store.max_concurrent_writes == 2


async def test_partial_batch_is_flushed_without_waiting_for_the_timer() -> None:
    store = MemoryStore()
    s = _settings(engine_batch_size=100, engine_flush_interval_s=30.0)
    async with Engine({"a": ScriptedJudge("a")}, store, s.engine) as eng:
        t0 = time.perf_counter()
        await eng.submit(_trace(1))
        assert await eng.drain(5)
        assert time.perf_counter() - t0 < 1.0
    assert store.writes == [1]


async def test_store_retry_then_success() -> None:
    store, acks = MemoryStore(), Acks()
    store.fail_next(2, retriable=True)
    async with Engine({"a": ScriptedJudge("a")}, store, _settings(engine_store_retries=3).engine) as eng:
        await eng.submit(_trace(1), acks)
        assert await eng.drain(5)
    assert acks.got["t-1"][1] is True
    assert eng.stats.store_retries == 2
    assert eng.stats.stored == 1
    assert eng.stats.failed == 0
    assert "t-1" in store.traces


async def test_final_store_failure_acks_not_ok() -> None:
    store, acks = MemoryStore(), Acks()
    store.fail_next(3, retriable=True)
    exporter = MemoryExporter()
    async with Engine(
        {"a": ScriptedJudge("a")}, store, _settings(engine_store_retries=3).engine, [exporter]
    ) as eng:
        await eng.submit(_trace(1), acks)
        assert await eng.drain(5)
    assert acks.got["t-1"][1] is False
    assert eng.stats.failed == 1
    assert eng.stats.store_retries == 2
    assert exporter.calls == []
    assert store.traces == {}


async def test_non_retriable_batch_failure_is_split_per_trace() -> None:
    store, acks = MemoryStore(), Acks()
    s = _settings(engine_batch_size=3, engine_flush_interval_s=1.0, engine_workers=3)
    gate = asyncio.Event()

    store.fail_next(1, retriable=False)
    async with Engine({"a": GatedJudge("a", gate)}, store, s.engine) as eng:
        for i in range(3):
            await eng.submit(_trace(i), acks)
        gate.set()
        assert await eng.drain(5)
    assert all(ok for _, ok in acks.got.values())
    assert len(acks.got) == 3
    assert store.writes == [1, 1, 1]


async def test_judge_that_raises_becomes_error_judgement() -> None:
    store = MemoryStore()
    judges = {"bad": ScriptedJudge("bad", raises=["t-1"]), "good": ScriptedJudge("good", 0.7)}
    async with Engine(judges, store, _settings().engine) as eng:
        await eng.submit(_trace(1))
        await eng.submit(_trace(2))
    bad = {j.judge: j for j in store.traces["t-1"].judgements}
    assert bad["bad"].status is JudgementStatus.ERROR
    assert bad["bad"].reason.startswith("judge_exception: RuntimeError")
    assert bad["bad"].version == judges["bad"].version
    assert bad["good"].score == 0.7
    assert {j.status for j in store.traces["t-2"].judgements} == {JudgementStatus.OK}
    assert eng.stats.judge_exceptions == 1


async def test_exporters_get_only_changed_judgements() -> None:
    store, exporter = MemoryStore(), MemoryExporter()
    async with Engine({"a": ScriptedJudge("a", 0.9)}, store, _settings().engine, [exporter]) as eng:
        await eng.submit(_trace(1))
        assert await eng.drain(5)
        await eng.submit(_trace(1))  # redelivery: same verdict
        assert await eng.drain(5)
    assert len(exporter.calls) == 1
    result, changed = exporter.calls[0]
    assert result.trace.trace_id == "t-1"
    assert [j.judge for j in changed] == ["a"]


async def test_graceful_shutdown_drains_in_flight_work() -> None:
    store, acks = MemoryStore(), Acks()
    eng = Engine({"a": ScriptedJudge("a", delay_s=0.05)}, store, _settings(engine_workers=2).engine)
    await eng.start()
    for i in range(6):
        await eng.submit(_trace(i), acks)
    assert await eng.aclose() is True
    assert len(acks.got) == 6
    assert len(store.traces) == 6
    with pytest.raises(EngineClosedError):
        await eng.submit(_trace(99))


async def test_shutdown_deadline_cancels_and_does_not_ack() -> None:
    store, acks = MemoryStore(), Acks()
    eng = Engine(
        {"a": ScriptedJudge("a", delay_s=30)}, store, _settings(engine_shutdown_deadline_s=0.2).engine
    )
    await eng.start()
    await eng.submit(_trace(1), acks)
    t0 = time.perf_counter()
    assert await eng.aclose() is False
    assert time.perf_counter() - t0 < 2
    assert acks.got == {}
    assert store.traces == {}


async def test_blocked_submit_fails_when_engine_closes() -> None:
    gate = asyncio.Event()

    s = _settings(engine_queue_size=1, engine_workers=1, engine_shutdown_deadline_s=0.2)
    judge = GatedJudge("g", gate)
    eng = Engine({"g": judge}, MemoryStore(), s.engine)
    await eng.start()
    await eng.submit(_trace(0))
    await asyncio.wait_for(judge.waiting.wait(), 5)
    await eng.submit(_trace(1))
    blocked = asyncio.create_task(eng.submit(_trace(2)))
    await wait_until(lambda: eng.in_flight == 3, what="the blocked submit to be counted")
    await eng.aclose()
    with pytest.raises(EngineClosedError):
        await blocked


async def test_routes_pick_judges_per_app_and_scenario() -> None:
    store = MemoryStore()
    judges = {n: ScriptedJudge(n) for n in ("relevancy", "faithfulness", "keyword")}
    routes = [
        JudgeRoute(app="shop", scenario="orders", judges=["keyword"]),
        JudgeRoute(app="shop", judges=["relevancy", "faithfulness"]),
    ]
    async with Engine(judges, store, _settings().engine, routes=routes) as eng:
        await eng.submit(_trace(1, app="shop", scenario="orders"))
        await eng.submit(_trace(2, app="shop", scenario="faq"))
        await eng.submit(_trace(3, app="hr"))

    def names(tid: str) -> list[str]:
        return [j.judge for j in store.traces[tid].judgements]

    assert names("t-1") == ["keyword"]
    assert names("t-2") == ["relevancy", "faithfulness"]
    assert names("t-3") == ["relevancy", "faithfulness", "keyword"]


async def test_trace_id_is_bound_in_log_context_while_judging() -> None:
    seen: list[Any] = []

    class Peek(ScriptedJudge):
        async def judge(self, trace: Trace) -> Judgement:
            seen.append(structlog.contextvars.get_contextvars().get("trace_id"))
            return await super().judge(trace)

    async with Engine({"p": Peek("p"), "q": Peek("q")}, MemoryStore(), _settings().engine) as eng:
        await eng.submit(_trace("abc"))
    assert seen == ["t-abc", "t-abc"]
    assert structlog.contextvars.get_contextvars().get("trace_id") is None


async def test_ack_failure_does_not_stop_the_engine() -> None:
    store = MemoryStore()

    async def bad_ack(result: TraceResult, ok: bool) -> None:
        raise ValueError("ack blew up")

    async with Engine({"a": ScriptedJudge("a")}, store, _settings().engine) as eng:
        await eng.submit(_trace(1), bad_ack)
        await eng.submit(_trace(2))
        assert await eng.drain(5)
    assert sorted(store.traces) == ["t-1", "t-2"]


def test_judge_error_judgement_shape() -> None:
    # the defence-in-depth judgement keeps the status invariants of the model
    j = Judgement(
        judge="x", version="v", backend=Backend.LLM, status=JudgementStatus.ERROR, reason="judge_exception: E"
    )
    assert j.outcome == "error"
    assert j.score is None


async def test_cancelled_blocked_submit_gives_its_slot_back() -> None:
    gate = asyncio.Event()

    store = MemoryStore()
    s = _settings(engine_queue_size=1, engine_workers=1)
    judge = GatedJudge("g", gate)
    async with Engine({"g": judge}, store, s.engine) as eng:
        await eng.submit(_trace(0))
        await asyncio.wait_for(judge.waiting.wait(), 5)
        await eng.submit(_trace(1))
        blocked = asyncio.create_task(eng.submit(_trace(2)))
        await wait_until(lambda: eng.in_flight == 3, what="the blocked submit to be counted")
        assert not blocked.done()
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        assert eng.in_flight == 2
        gate.set()
        assert await eng.drain(5)
    assert sorted(store.traces) == ["t-0", "t-1"]


async def test_duplicate_trace_in_one_batch_is_exported_once() -> None:
    gate = asyncio.Event()

    store, exporter, acks = MemoryStore(), MemoryExporter(), []

    async def ack(result: TraceResult, ok: bool) -> None:
        acks.append(ok)

    s = _settings(engine_batch_size=10, engine_flush_interval_s=1.0, engine_writers=1)
    async with Engine({"g": GatedJudge("g", gate)}, store, s.engine, [exporter]) as eng:
        await eng.submit(_trace(1), ack)
        await eng.submit(_trace(1), ack)
        gate.set()
        assert await eng.drain(5)
    assert store.writes == [2]
    assert acks == [True, True]
    assert len(exporter.calls) == 1
    assert [j.judge for j in exporter.calls[0][1]] == ["g"]


async def test_sampling_rules_and_always_judge_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine.sampling_rules`` and ``engine.always_judge`` (here from the environment) drive the engine's policy:
    always-judge predicates > app/scenario rules > the global rate."""
    from ragpulse.config import load_settings

    monkeypatch.setenv("RAGPULSE_ENGINE_SAMPLING_RATE", "0")
    monkeypatch.setenv("RAGPULSE_ENGINE_SAMPLING_RULES", '[{"app": "shop", "rate": 1.0}, {"rate": 0.0}]')
    monkeypatch.setenv("RAGPULSE_ENGINE_ALWAYS_JUDGE", '["attributes.feedback == \\"negative\\""]')
    settings = load_settings()
    assert settings.engine.sampling_rules[0].app == "shop"
    store = MemoryStore()
    judge = ScriptedJudge("a")
    async with Engine({"a": judge}, store, settings.engine) as eng:
        await eng.submit(_trace(0, source=Source.KAFKA, app="shop"))  # rule: rate 1
        await eng.submit(_trace(1, source=Source.KAFKA, app="blog"))  # catch-all rule: rate 0
        await eng.submit(_trace(2, source=Source.KAFKA, app="blog", attributes={"feedback": "negative"}))
    assert judge.calls == 2
    outcomes = {tid: r.outcome for tid, r in store.traces.items()}
    assert outcomes == {
        "t-0": TraceOutcome.EVALUATED,
        "t-1": TraceOutcome.NOT_SAMPLED,
        "t-2": TraceOutcome.EVALUATED,
    }
    monkeypatch.setenv("RAGPULSE_ENGINE_ALWAYS_JUDGE", '["feedback is bad"]')
    with pytest.raises(ConfigError, match=r"always_judge: 'feedback is bad' is not"):
        Engine({"a": judge}, store, load_settings().engine)
