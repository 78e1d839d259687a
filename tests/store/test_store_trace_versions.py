"""Issue 23 item 12 at the store: versions of one trace rank complete-with-answer (2) > incomplete (1) >
started/partial (0, no answer yet); a lower rank never replaces a higher one, whatever the arrival order, and
writes none of its judgements; equal ranks keep the usual "the newer wins"."""

from __future__ import annotations

import pytest

from ragpulse.model import JudgementStatus, Source, Trace, TraceOutcome, TraceResult
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f

TID = "c" * 32


def _complete() -> TraceResult:
    return f.result(f.trace(TID), f.ok("faithfulness", 0.9), f.ok("relevancy", 0.8))


def _started() -> TraceResult:
    """The started/partial event: same trace id, the question, no answer; the engine stores it not_evaluable
    with the answer-needing judges skipped (no_answer)."""
    return f.result(
        f.trace(TID, answer=None, documents=[]),
        f.not_ok("faithfulness", JudgementStatus.SKIPPED, "no_answer"),
        outcome=TraceOutcome.NOT_EVALUABLE,
        outcome_reason="no_answer",
    )


def _incomplete() -> TraceResult:
    """Released after the idle timeout with another (partial) answer, judged as such."""
    return f.result(
        f.trace(TID, answer="Submit the form.", incomplete=True),
        f.ok("faithfulness", 0.4),
        outcome=TraceOutcome.INCOMPLETE,
    )


def test_version_rank() -> None:
    assert [r.trace.version_rank for r in (_complete(), _incomplete(), _started())] == [2, 1, 0]
    assert Trace(trace_id="x", answer="").version_rank == 0
    assert Trace(trace_id="x", incomplete=True).version_rank == 1


async def _stored(store: PostgresStore) -> tuple[str | None, str, bool, dict[str, tuple[str, float | None]]]:
    got = await store.get_trace(TID)
    assert got is not None
    return (
        got.trace.answer,
        got.outcome.value,
        got.trace.incomplete,
        {j.judge: (j.status.value, j.score) for j in got.judgements},
    )


COMPLETE = (f.ANSWER, "evaluated", False, {"faithfulness": ("ok", 0.9), "relevancy": ("ok", 0.8)})


@pytest.mark.parametrize("lower", [_started, _incomplete], ids=["started", "incomplete"])
async def test_a_lower_version_after_the_complete_trace_changes_nothing(
    store: PostgresStore, lower: object
) -> None:
    assert callable(lower)
    await store.write_results([_complete()])
    rep = await store.write_results([lower()])
    assert rep.outranked == frozenset({TID})
    assert rep.changed == frozenset()
    assert rep.trace_inserted == frozenset()
    assert await _stored(store) == COMPLETE


async def test_the_complete_trace_replaces_a_started_one(store: PostgresStore) -> None:
    await store.write_results([_started()])
    assert await _stored(store) == (None, "not_evaluable", False, {"faithfulness": ("skipped", None)})
    rep = await store.write_results([_complete()])
    assert rep.outranked == frozenset()
    assert rep.changed == frozenset({(TID, "faithfulness", "v1"), (TID, "relevancy", "v1")})
    assert await _stored(store) == COMPLETE


async def test_incomplete_outranks_started_and_not_the_other_way(store: PostgresStore) -> None:
    await store.write_results([_incomplete()])
    assert (await store.write_results([_started()])).outranked == frozenset({TID})
    assert await _stored(store) == ("Submit the form.", "incomplete", True, {"faithfulness": ("ok", 0.4)})
    await store.write_results([_complete()])
    assert await _stored(store) == COMPLETE


async def test_in_one_batch_the_higher_rank_wins_in_either_order(store: PostgresStore) -> None:
    rep = await store.write_results([_complete(), _started()])
    assert rep.outranked == frozenset()
    assert await _stored(store) == COMPLETE
    other = "d" * 32
    await store.write_results([f.result(f.trace(other, answer=None)), f.result(f.trace(other))])
    got = await store.get_trace(other)
    assert got is not None
    assert got.trace.answer == f.ANSWER


async def test_equal_ranks_keep_the_newer_version(store: PostgresStore) -> None:
    await store.write_results([_complete()])
    newer = f.result(f.trace(TID, answer="File it in the finance portal."), f.ok("faithfulness", 0.7))
    rep = await store.write_results([newer])
    assert rep.outranked == frozenset()
    got = await store.get_trace(TID)
    assert got is not None
    assert got.trace.answer == "File it in the finance portal."


async def test_a_replay_rerun_replaces_whatever_it_answers(store: PostgresStore) -> None:
    """Re-running a run writes its cases again: a case whose RAG endpoint failed this time is stored as such."""
    await store.write_results([f.result(f.trace(TID, source=Source.REPLAY), f.ok("faithfulness", 0.9))])
    failed = f.result(
        f.trace(TID, source=Source.REPLAY, answer=None, not_evaluable="rag_endpoint_failed: HTTP 502"),
        outcome=TraceOutcome.NOT_EVALUABLE,
        outcome_reason="rag_endpoint_failed: HTTP 502",
    )
    rep = await store.write_results([failed])
    assert rep.outranked == frozenset()
    got = await store.get_trace(TID)
    assert got is not None
    assert (got.trace.answer, got.outcome) == (None, TraceOutcome.NOT_EVALUABLE)
