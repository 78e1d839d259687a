"""A late or duplicate started/partial version of a trace (same trace id, no answer yet, or an OTLP trace released
``incomplete``) arriving after the complete trace is not judged again: no judge call, no judgement written, and
the stored complete trace keeps every field (docs/ingestion.md, "Delivery"; docs/storage.md, "Versions of one
trace"). The store kept the complete trace before too; the engine judged the late version anyway (a retrieval
judge ran twice, tokens were spent on a result the store then refused)."""

from __future__ import annotations

from typing import Any

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.engine.engine import OUTRANKED
from ragpulse.model import JudgementStatus, Source, Trace, TraceOutcome, TraceResult
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge


class RetrievalJudge(ScriptedJudge):
    """Decides without the answer: the judge a started event would run."""

    needs_answer = False


QUESTION = "How many days of annual leave do new employees get?"
CONTEXT = "New employees get 25 days of annual leave per year."
KAFKA = Source.KAFKA  # a replay's version always replaces (Trace.replaces); the default source is replay
COMPLETE = Trace(
    trace_id="leave-1", app="hr", question=QUESTION, context=CONTEXT, answer="25 days.", source=KAFKA
)
STARTED = Trace(
    trace_id="leave-1", app="hr", question=QUESTION, context=CONTEXT, source=KAFKA
)  # no answer yet
#: rank 1: an OTLP trace released after the idle timeout without its root span
INCOMPLETE = COMPLETE.model_copy(update={"incomplete": True, "answer": "25", "source": Source.OTLP})


async def _one(conn: Any, sql: str) -> Any:
    row = await conn.fetchrow(sql)
    assert row is not None
    return row


def _settings() -> Settings:
    return Settings(engine_workers=1, engine_flush_interval_s=0.01, engine_shutdown_deadline_s=5.0)


def _judges() -> tuple[RetrievalJudge, ScriptedJudge]:
    return RetrievalJudge("context_relevance", 0.9), ScriptedJudge("faithfulness", 0.8)


async def _submit_in_order(store: Any, traces: list[Trace]) -> tuple[Engine, RetrievalJudge, ScriptedJudge]:
    ctx, faith = _judges()
    engine = Engine({"context_relevance": ctx, "faithfulness": faith}, store, _settings().engine)
    acked: list[TraceResult] = []

    async def ack(r: TraceResult, ok: bool) -> None:
        assert ok
        acked.append(r)

    async with engine:
        for t in traces:  # one at a time: the arrival order is the order under test
            await engine.submit(t, ack)
            assert await engine.drain(10)
    assert len(acked) == len(traces)
    return engine, ctx, faith


async def test_started_event_after_the_complete_trace_is_not_judged_again() -> None:
    store = MemoryStore()
    engine, ctx, faith = await _submit_in_order(store, [COMPLETE, STARTED, STARTED])
    assert (ctx.calls, faith.calls) == (1, 1)  # was (3, 1): the retrieval judge ran on each started event
    assert (engine.stats.outranked_unjudged, engine.stats.outranked) == (2, 2)
    kept = store.traces["leave-1"]
    assert (kept.trace.answer, kept.outcome, kept.outcome_reason) == (
        "25 days.",
        TraceOutcome.EVALUATED,
        None,
    )
    assert sorted((j.judge, j.status, j.score) for j in kept.judgements) == [
        ("context_relevance", JudgementStatus.OK, 0.9),
        ("faithfulness", JudgementStatus.OK, 0.8),
    ]


async def test_incomplete_version_after_the_complete_trace_is_not_judged_again() -> None:
    store = MemoryStore()
    engine, ctx, faith = await _submit_in_order(store, [COMPLETE, INCOMPLETE])
    assert (ctx.calls, faith.calls) == (1, 1)
    assert engine.stats.outranked_unjudged == 1
    assert store.traces["leave-1"].trace.answer == "25 days."


async def test_the_complete_trace_after_a_started_event_is_judged() -> None:
    """The other order: the started event is judged by the retrieval judge, the complete trace replaces it."""
    store = MemoryStore()
    engine, ctx, faith = await _submit_in_order(store, [STARTED, COMPLETE])
    assert (ctx.calls, faith.calls) == (2, 1)
    assert (engine.stats.outranked_unjudged, engine.stats.outranked) == (0, 0)
    assert store.traces["leave-1"].trace.answer == "25 days."


async def test_a_replay_version_is_always_judged() -> None:
    """A replay re-run writes its case again whatever the RAG endpoint answers (``Trace.replaces``)."""
    store = MemoryStore()
    replayed = STARTED.model_copy(update={"source": Source.REPLAY})
    engine, ctx, _ = await _submit_in_order(store, [COMPLETE, replayed])
    assert ctx.calls == 2
    assert engine.stats.outranked_unjudged == 0
    assert store.traces["leave-1"].trace.answer is None


async def test_outranked_reason_is_what_the_ack_carries() -> None:
    store = MemoryStore()
    ctx, faith = _judges()
    got: list[TraceResult] = []

    async def ack(r: TraceResult, ok: bool) -> None:
        got.append(r)

    async with Engine({"context_relevance": ctx, "faithfulness": faith}, store, _settings().engine) as engine:
        await engine.submit(COMPLETE, ack)
        assert await engine.drain(10)
        await engine.submit(STARTED, ack)
    assert [(r.outcome, r.outcome_reason, r.judgements) for r in got[1:]] == [
        (TraceOutcome.NOT_EVALUABLE, OUTRANKED, ())
    ]


async def test_late_started_event_leaves_the_stored_complete_trace_untouched(pg_url: str) -> None:
    """Through PostgreSQL: the stored row and judgements of the complete trace are unchanged (same
    ``updated_at``), nothing was judged for the started event, and the store reports the ranks it holds."""
    import asyncpg

    store = await PostgresStore.connect(pg_url, _settings().store)
    try:
        engine, ctx, faith = await _submit_in_order(store, [COMPLETE])
        assert await store.stored_version_ranks(["leave-1", "unknown"]) == {"leave-1": 2}
        conn = await asyncpg.connect(pg_url)
        try:
            q_row = "SELECT answer, outcome, context, question FROM traces WHERE trace_id = 'leave-1'"
            q_js = "SELECT judge, status, score, updated_at FROM judgements WHERE trace_id = 'leave-1' ORDER BY judge"
            row_before, js_before = (
                dict(await _one(conn, q_row)),
                [dict(r) for r in await conn.fetch(q_js)],
            )
            engine, ctx, faith = await _submit_in_order(store, [STARTED, INCOMPLETE])
            assert (ctx.calls, faith.calls) == (0, 0)
            assert (engine.stats.outranked_unjudged, engine.stats.outranked) == (2, 2)
            assert (
                dict(await _one(conn, q_row))
                == row_before
                == {
                    "answer": "25 days.",
                    "outcome": "evaluated",
                    "context": CONTEXT,
                    "question": QUESTION,
                }
            )
            assert [dict(r) for r in await conn.fetch(q_js)] == js_before
            assert [(j["judge"], j["status"], j["score"]) for j in js_before] == [
                ("context_relevance", "ok", 0.9),
                ("faithfulness", "ok", 0.8),
            ]
        finally:
            await conn.close()
    finally:
        await store.close()
