"""write_results against the real PostgreSQL server: upserts, idempotency, change reports, NULL scores."""

from __future__ import annotations

import asyncpg

from ragpulse.model import JudgementStatus, TraceOutcome, TraceResult
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f
from testsupport import pg_count


async def test_first_write_reports_all_inserted(store: PostgresStore, store_url: str) -> None:
    r = f.result(f.trace(), f.ok("faithfulness", 0.8), f.ok("relevancy", 0.4))
    rep = await store.write_results([r])
    assert rep.trace_inserted == frozenset({"a" * 32})
    assert rep.changed == frozenset({("a" * 32, "faithfulness", "v1"), ("a" * 32, "relevancy", "v1")})
    assert await pg_count(store_url, "SELECT count(*) FROM judgements") == 2


async def test_same_batch_twice_changes_nothing(store: PostgresStore, store_url: str) -> None:
    batch = [
        f.result(f.trace("t1"), f.ok("faithfulness", 0.8), f.ok("keyword", 1.0)),
        f.result(f.trace("t2"), f.ok("faithfulness", 0.3)),
    ]
    first = await store.write_results(batch)
    assert len(first.changed) == 3
    # a redelivery re-judged: same verdicts, different latency/tokens/raw output/reason wording
    again = [
        f.result(
            f.trace("t1"),
            f.ok("faithfulness", 0.8, latency_s=9.0, prompt_tokens=1, reason="other words", raw_output="x"),
            f.ok("keyword", 1.0),
        ),
        f.result(f.trace("t2"), f.ok("faithfulness", 0.3)),
    ]
    rep = await store.write_results(again)
    assert rep.changed == frozenset()
    assert rep.trace_inserted == frozenset()
    assert await pg_count(store_url, "SELECT count(*) FROM judgements") == 3
    assert await pg_count(store_url, "SELECT count(*) FROM traces") == 2
    # first stored values are kept
    got = await store.get_trace("t1")
    assert got is not None
    fa = next(j for j in got.judgements if j.judge == "faithfulness")
    assert (fa.latency_s, fa.prompt_tokens, fa.reason) == (0.2, 120, "faithfulness looks fine")


async def test_final_judgement_kept_for_same_content_replaced_for_new_content(
    store: PostgresStore, store_url: str
) -> None:
    """Issue 11 item 13: an ok/skipped judgement is final for its judged content."""
    await store.write_results([f.result(f.trace(), f.ok("faithfulness", 0.8), f.ok("relevancy", 0.9))])
    # a redelivery judged differently by a non-deterministic judge: nothing changes
    rep = await store.write_results([f.result(f.trace(), f.ok("faithfulness", 0.5), f.ok("relevancy", 0.9))])
    assert rep.changed == frozenset()
    got = await store.get_trace("a" * 32)
    assert got is not None
    assert next(j for j in got.judgements if j.judge == "faithfulness").score == 0.8
    # the same trace id with another answer is judged again; the replaced row is kept as history
    rep = await store.write_results(
        [f.result(f.trace(answer="Another answer."), f.ok("faithfulness", 0.5), f.ok("relevancy", 0.9))]
    )
    assert rep.changed == frozenset({("a" * 32, "faithfulness", "v1"), ("a" * 32, "relevancy", "v1")})
    got = await store.get_trace("a" * 32)
    assert got is not None
    fa = next(j for j in got.judgements if j.judge == "faithfulness")
    assert fa.score == 0.5
    assert fa.passed is False
    assert await pg_count(store_url, "SELECT count(*) FROM judgement_history WHERE score = 0.8") == 1
    assert await pg_count(store_url, "SELECT count(*) FROM judgement_history") == 2


async def test_error_judgement_is_replaced_on_retry(store: PostgresStore, store_url: str) -> None:
    err = f.not_ok("faithfulness", JudgementStatus.ERROR, "judge_unavailable: HTTP 503")
    await store.write_results([f.result(f.trace(), err)])
    rep = await store.write_results([f.result(f.trace(), f.ok("faithfulness", 0.7))])
    assert rep.changed == frozenset({("a" * 32, "faithfulness", "v1")})
    got = await store.get_trace("a" * 32)
    assert got is not None
    assert got.judgements[0].score == 0.7
    assert await pg_count(store_url, "SELECT count(*) FROM judgement_history") == 0  # errors are not history
    finals = await store.final_judgements([("a" * 32, f.trace().content_hash), ("a" * 32, "other")])
    assert finals == {("a" * 32, f.trace().content_hash): frozenset({("faithfulness", "v1")})}


async def test_duplicates_inside_one_batch_last_wins(store: PostgresStore, store_url: str) -> None:
    rep = await store.write_results(
        [f.result(f.trace(), f.ok("faithfulness", 0.1)), f.result(f.trace(), f.ok("faithfulness", 0.9))]
    )
    assert rep.changed == frozenset({("a" * 32, "faithfulness", "v1")})
    assert await pg_count(store_url, "SELECT count(*) FROM judgements") == 1
    got = await store.get_trace("a" * 32)
    assert got is not None
    assert got.judgements[0].score == 0.9


async def test_skipped_and_error_store_null_score(store: PostgresStore, store_url: str) -> None:
    r = f.result(
        f.trace(),
        f.not_ok("keyword", JudgementStatus.SKIPPED, "no_reference: no keywords"),
        f.not_ok("faithfulness", JudgementStatus.ERROR, "judge_unavailable: HTTP 429 after 3 attempts"),
    )
    await store.write_results([r])
    conn = await asyncpg.connect(store_url)
    try:
        rows = await conn.fetch("SELECT judge, score, passed, status, reason FROM judgements ORDER BY judge")
    finally:
        await conn.close()
    assert [tuple(x) for x in rows] == [
        ("faithfulness", None, None, "error", "judge_unavailable: HTTP 429 after 3 attempts"),
        ("keyword", None, None, "skipped", "no_reference: no keywords"),
    ]


async def test_not_evaluable_trace_without_judgements(store: PostgresStore) -> None:
    t = f.trace("n1", question=None)
    rep = await store.write_results(
        [f.result(t, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="no_question")]
    )
    assert rep.trace_inserted == frozenset({"n1"})
    assert rep.changed == frozenset()
    got = await store.get_trace("n1")
    assert got is not None
    assert got.outcome is TraceOutcome.NOT_EVALUABLE
    assert got.outcome_reason == "no_question"
    assert got.trace.question is None
    assert got.judgements == ()


async def test_trace_round_trip(store: PostgresStore) -> None:
    t = f.trace(run_id=None, keywords=("portal", "30 days"), expected_answer="Use the portal.")
    r = f.result(t, f.ok())
    await store.write_results([r])
    got = await store.get_trace("A" * 32)  # normalised like the model does
    assert got is not None
    assert got.trace == t
    assert got.judgements == r.judgements
    assert got.received_at == r.received_at


async def test_nul_and_nan_do_not_fail_batch(store: PostgresStore) -> None:
    t = f.trace("z1", answer="bad\x00byte", attributes={"x": float("nan"), "s": "a\x00b"})
    await store.write_results([f.result(t, f.ok())])
    got = await store.get_trace("z1")
    assert got is not None
    assert got.trace.answer == "badbyte"
    assert got.trace.attributes == {"x": None, "s": "ab"}


async def test_naive_received_at_means_utc(store: PostgresStore) -> None:
    from datetime import UTC, datetime

    await store.write_results([f.result(f.trace("nv"), f.ok(), received_at=datetime(2026, 1, 1, 12, 0))])
    got = await store.get_trace("nv")
    assert got is not None
    assert got.received_at == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def test_concurrent_overlapping_batches(store: PostgresStore, store_url: str) -> None:
    """Batches sharing traces, written concurrently in opposite orders, all succeed (no deadlock)."""
    import asyncio

    ids = [f"c{i:03d}" for i in range(300)]

    def batch(order: list[str], score: float) -> list[TraceResult]:
        # each round answers differently, so each round's judgements replace the last (same content is final)
        return [
            f.result(
                f.trace(t, answer=f"answer {score}"), f.ok("faithfulness", score), f.ok("keyword", score)
            )
            for t in order
        ]

    for round_ in range(2):
        s = round_ / 10
        reports = await asyncio.gather(
            store.write_results(batch(ids, s)),
            store.write_results(batch(list(reversed(ids)), s)),
            store.write_results(batch(ids[::2] + ids[1::2], s)),
        )
        # every judgement of the round is reported changed by exactly one writer
        keys = [k for r in reports for k in r.changed]
        assert len(keys) == len(set(keys)) == 600
    assert await pg_count(store_url, "SELECT count(*) FROM judgements") == 600
