"""Session id, earlier turns and the app's token usage round-trip through PostgreSQL (redacted: texts hashed,
the session id and every number kept), and migration 200 upgrades a store of the previous schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge
from ragpulse.model import ModelUsage, Source, Trace, TraceResult, Turn
from ragpulse.store.migrate import load_migrations, migrate
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

CONVERSATION: dict[str, Any] = dict(
    session_id="sess-6e76fada",
    turns=(Turn(question="How long is parental leave?", answer="Sixteen weeks."), Turn(question="Paid?")),
    prompt_tokens=120,
    completion_tokens=17,
    total_prompt_tokens=160,
    total_completion_tokens=25,
    usage=(
        ModelUsage(model="gpt-4o-mini", prompt_tokens=120, completion_tokens=17),
        ModelUsage(model="rewriter", prompt_tokens=40, completion_tokens=8),
    ),
)


async def test_conversation_fields_round_trip(store: PostgresStore) -> None:
    t = f.trace(**CONVERSATION)
    await store.write_results([f.result(t)])
    got = await store.get_trace(t.trace_id)
    assert got is not None
    assert got.trace == t


async def test_redaction_hashes_turn_texts_and_keeps_ids_and_numbers(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_redact_text=True, store_pool_max=2).store)
    try:
        t = f.trace(**CONVERSATION)
        await store.write_results([f.result(t)])
        got = await store.get_trace(t.trace_id)
        assert got is not None
        g = got.trace
        assert g.session_id == "sess-6e76fada"
        assert [u.question[:7] for u in g.turns] == ["sha256:", "sha256:"]
        assert g.turns[0].answer is not None
        assert g.turns[0].answer.startswith("sha256:")
        assert g.turns[1].answer is None
        assert (g.prompt_tokens, g.completion_tokens, g.total_prompt_tokens, g.total_completion_tokens) == (
            120,
            17,
            160,
            25,
        )
        assert g.usage == t.usage
    finally:
        await store.close()


async def test_migration_200_upgrades_the_previous_schema(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            """CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
                   checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for mig in load_migrations():
            if mig.version < 200:
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    mig.version,
                    mig.name,
                    mig.checksum,
                )
        # what ingestion stored before: the session id in attributes, no token columns
        await conn.execute(
            """INSERT INTO traces (trace_id, question, answer, source, outcome, attributes) VALUES
               ('old-1', 'q1', 'a1', 'otlp', 'evaluated', $1),
               ('old-2', 'q2', 'a2', 'kafka', 'evaluated', '{"tier": "gold"}')""",
            json.dumps({"session_id": "sess-1", "conventions": ["openinference"]}),
        )
        assert await migrate(conn) == [m.version for m in load_migrations() if m.version >= 200]
        rows = {
            r["trace_id"]: r
            for r in await conn.fetch("SELECT trace_id, session_id, attributes, turns, usage FROM traces")
        }
        assert rows["old-1"]["session_id"] == "sess-1"
        assert json.loads(rows["old-1"]["attributes"]) == {"conventions": ["openinference"]}
        assert rows["old-2"]["session_id"] is None
        assert json.loads(rows["old-2"]["turns"]) == []
        assert json.loads(rows["old-2"]["usage"]) == []
        index = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'traces_session_idx'")
        assert "(session_id, start_time, received_at)" in index
    finally:
        await conn.close()
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        got = await store.get_trace("old-1")
        assert got is not None
        assert got.trace.session_id == "sess-1"
        assert (got.trace.prompt_tokens, got.trace.total_prompt_tokens, got.trace.usage) == (None, None, ())
    finally:
        await store.close()


async def _judge_follow_up(store: PostgresStore, history_turns: int, trace_id: str) -> TraceResult:
    """Turn 2 of session ``sess-pl`` (no turns of its own) through the engine with the offline relevancy judge."""
    settings = Settings(engine_sampling_rate=1.0)
    judge = HeuristicRelevancyJudge(settings, {})
    follow = Trace(
        trace_id=trace_id,
        session_id="sess-pl",
        question="And what about part-timers?",
        answer="Part-time employees get the same sixteen weeks of parental leave, paid pro rata.",
        documents=["Part-time employees get the same sixteen weeks of parental leave, paid pro rata."],
        start_time=T0 + timedelta(minutes=2),
        source=Source.OTLP,
    )
    async with Engine({"relevancy": judge}, store, settings.engine, history_turns=history_turns) as eng:
        await eng.submit(follow)
        assert await eng.drain(10)
    got = await store.get_trace(trace_id)
    assert got is not None
    return got


async def test_engine_gives_a_follow_up_the_sessions_earlier_turns(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        earlier = [
            Trace(
                trace_id=f"turn-{i}",
                session_id="sess-pl",
                question=q,
                answer=a,
                start_time=T0 + timedelta(minutes=i - 5),
                source=Source.OTLP,
            )
            for i, (q, a) in enumerate(
                [
                    ("Where is the canteen?", "On the ground floor."),
                    ("How long is parental leave?", "Sixteen weeks at full pay for permanent employees."),
                ]
            )
        ]
        other_session = Trace(
            trace_id="other", session_id="sess-other", question="Lunch?", answer="Noon.", start_time=T0
        )
        later = Trace(
            trace_id="later",
            session_id="sess-pl",
            question="Later?",
            answer="Yes.",
            start_time=T0 + timedelta(hours=1),
        )
        await store.write_results([f.result(t) for t in [*earlier, other_session, later]])
        with_history = await _judge_follow_up(store, 1, "follow-1")
        # the last one earlier turn of this session only: not the other session's, not a later one
        assert with_history.trace.turns == (
            Turn(
                question="How long is parental leave?",
                answer="Sixteen weeks at full pay for permanent employees.",
            ),
        )
        [j] = with_history.judgements
        assert j.passed is True
        without = await _judge_follow_up(store, 0, "follow-2")
        assert without.trace.turns == ()
        assert without.judgements[0].passed is False
    finally:
        await store.close()


async def test_retention_prunes_a_sessions_old_turns_with_their_fields(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        now = datetime.now(UTC)
        old = f.trace(
            "old-turn",
            session_id="sess-r",
            question="Old?",
            answer="Old.",
            start_time=now - timedelta(days=40),
        )
        new = f.trace(
            "new-turn",
            session_id="sess-r",
            question="New?",
            answer="New.",
            start_time=now,
            **{k: v for k, v in CONVERSATION.items() if k != "session_id"},
        )
        await store.write_results(
            [f.result(old).model_copy(update={"received_at": now - timedelta(days=40)}), f.result(new)]
        )
        assert await store.prune(timedelta(days=30)) == 1
        assert await store.session_turns("sess-r", before=None, exclude="none", limit=5) == [
            Turn(question="New?", answer="New.")
        ]
        kept = await store.get_trace("new-turn")
        assert kept is not None
        assert (kept.trace.session_id, kept.trace.total_prompt_tokens, kept.trace.turns) == (
            "sess-r",
            160,
            CONVERSATION["turns"],
        )
    finally:
        await store.close()


async def test_a_redelivery_without_turns_keeps_the_stored_turns(pg_url: str) -> None:
    """The engine took the turns from the session; a redelivery whose judgements are final is not looked up
    again and arrives without them: the stored turns stay. New turns replace them."""
    store = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        with_turns = f.trace("redelivered", **CONVERSATION)
        await store.write_results([f.result(with_turns)])
        report = await store.write_results([f.result(with_turns.model_copy(update={"turns": ()}))])
        assert report.trace_inserted == frozenset()
        got = await store.get_trace("redelivered")
        assert got is not None
        assert got.trace.turns == CONVERSATION["turns"]
        newer = (Turn(question="Other?", answer="Yes."),)
        await store.write_results([f.result(with_turns.model_copy(update={"turns": newer}))])
        got = await store.get_trace("redelivered")
        assert got is not None
        assert got.trace.turns == newer
    finally:
        await store.close()
