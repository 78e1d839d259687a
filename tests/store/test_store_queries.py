"""Reads: get_trace (all versions), get_run_results (latest per judge), runs, test sets, rejudge paging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ragpulse.errors import StoreError
from ragpulse.model import JudgementStatus, RunRecord, RunStatus, TestCase, TestSet, TraceOutcome
from ragpulse.store import postgres
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f


async def test_get_trace_returns_all_versions(store: PostgresStore) -> None:
    await store.write_results([f.result(f.trace(), f.ok("faithfulness", 0.8, version="v1"))])
    rep = await store.write_results([f.result(f.trace(), f.ok("faithfulness", 0.6, version="v2"))])
    assert rep.changed == frozenset({("a" * 32, "faithfulness", "v2")})
    got = await store.get_trace("a" * 32)
    assert got is not None
    assert [(j.version, j.score) for j in got.judgements] == [("v1", 0.8), ("v2", 0.6)]
    assert await store.get_trace("missing") is None


async def test_get_run_results_latest_per_judge_in_case_order(store: PostgresStore) -> None:
    await store.upsert_test_set(
        TestSet(name="ts", cases=(TestCase(id="c2", question="q2"), TestCase(id="c1", question="q1")))
    )
    await store.create_run(RunRecord(run_id="r1", test_set="ts"))
    t1 = f.trace("r1-c1", source="replay", run_id="r1", test_case_id="c1")
    t2 = f.trace("r1-c2", source="replay", run_id="r1", test_case_id="c2")
    other = f.trace("r2-c1", source="replay", run_id="r2", test_case_id="c1")
    await store.write_results(
        [
            f.result(t1, f.ok("faithfulness", 0.9, version="old"), f.ok("keyword", 1.0)),
            f.result(t2, f.not_ok("faithfulness", JudgementStatus.ERROR, "unparseable: no score")),
            f.result(other, f.ok("faithfulness", 0.1)),
        ]
    )
    await store.write_results([f.result(t1, f.ok("faithfulness", 0.4, version="new"))])
    res = await store.get_run_results("r1")
    assert [r.trace.trace_id for r in res] == ["r1-c2", "r1-c1"]  # test-set order
    assert [(j.judge, j.status.value, j.score) for j in res[0].judgements] == [
        ("faithfulness", "error", None)
    ]
    assert [(j.judge, j.version, j.score) for j in res[1].judgements] == [
        ("faithfulness", "new", 0.4),
        ("keyword", "v1", 1.0),
    ]
    assert [r.trace.trace_id for r in await store.get_run_results("r2")] == ["r2-c1"]
    assert await store.get_run_results("nope") == []


async def test_runs_life_cycle(store: PostgresStore) -> None:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    run = RunRecord(run_id="r1", test_set="ts", started_at=t0, judges={"keyword": "k1"}, settings={"m": "x"})
    await store.create_run(run)
    await store.create_run(RunRecord(run_id="r0", test_set="ts", started_at=t0 - timedelta(days=1)))
    await store.finish_run("r1", RunStatus.COMPLETED_WITH_ERRORS, {"pass_rate": 0.5})
    got = await store.get_run("r1")
    assert got is not None
    assert got.status is RunStatus.COMPLETED_WITH_ERRORS
    assert got.report == {"pass_rate": 0.5}
    assert got.finished_at is not None
    assert got.judges == {"keyword": "k1"}
    assert got.settings == {"m": "x"}
    assert [r.run_id for r in await store.list_runs()] == ["r1", "r0"]
    assert [r.run_id for r in await store.list_runs(limit=1)] == ["r1"]
    # re-using the id resets the run to running
    await store.create_run(RunRecord(run_id="r1", test_set="ts", started_at=t0 + timedelta(hours=1)))
    again = await store.get_run("r1")
    assert again is not None
    assert (again.status, again.finished_at, again.report) == (RunStatus.RUNNING, None, None)
    assert await store.get_run("nope") is None
    with pytest.raises(StoreError) as ei:
        await store.finish_run("nope", RunStatus.FAILED, {})
    assert ei.value.retriable is False


async def test_test_set_round_trip_and_replace(store: PostgresStore) -> None:
    ts = TestSet(
        name="kb",
        knowledge_base="company",
        description="d",
        cases=(
            TestCase(
                id="1",
                question="报销流程？",
                expected_answer="在财务系统提交。",
                keywords=("财务系统",),
                reference_contexts=("ref",),
                answer="a",
                contexts=("c1", "c2"),
                doc_ids=("d1", None),
                context_labels=(1, 0),
                metadata={"lang": "zh"},
            ),
            TestCase(id="2", question="q"),
        ),
    )
    await store.upsert_test_set(ts)
    assert await store.get_test_set("kb") == ts
    smaller = TestSet(name="kb", cases=(TestCase(id="2", question="q?"),))
    await store.upsert_test_set(smaller)
    assert await store.get_test_set("kb") == smaller
    assert await store.get_test_set("none") is None


async def test_traces_for_rejudge_filters_and_pages(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "PAGE_SIZE", 2)
    now = datetime.now(UTC)
    results = [
        f.result(f.trace(f"t{i}", app="a"), f.ok(), received_at=now - timedelta(minutes=10 - i))
        for i in range(5)
    ]
    results.append(f.result(f.trace("old", app="a"), f.ok(), received_at=now - timedelta(days=3)))
    results.append(f.result(f.trace("b1", app="b"), f.ok(), received_at=now))
    results.append(
        f.result(
            f.trace("ne", app="a", answer=None),
            outcome=TraceOutcome.NOT_EVALUABLE,
            outcome_reason="no_answer",
            received_at=now,
        )
    )
    await store.write_results(results)
    since = now - timedelta(hours=1)
    got = [t.trace_id async for t in store.traces_for_rejudge("a", since, None)]
    assert got == ["t0", "t1", "t2", "t3", "t4"]
    assert [t.trace_id async for t in store.traces_for_rejudge("a", since, 3)] == ["t0", "t1", "t2"]
    assert [t.trace_id async for t in store.traces_for_rejudge(None, since, None)] == [
        "t0",
        "t1",
        "t2",
        "t3",
        "t4",
        "b1",
    ]
    first = [t async for t in store.traces_for_rejudge("b", since, None)]
    assert first[0].question == f.QUESTION
    assert len(first[0].documents) == 2


async def test_documented_queries_run(store: PostgresStore, store_url: str) -> None:
    """Every query in docs/storage.md is valid SQL against the schema, with the expected shape."""
    import re
    from pathlib import Path

    import asyncpg

    doc = (Path(__file__).resolve().parents[2] / "docs" / "storage.md").read_text(encoding="utf-8")  # noqa: ASYNC240
    block = re.search(r"```sql\n(.*?)```", doc, re.S)
    assert block is not None
    statements = [s.strip() for s in block.group(1).split(";") if s.strip()]
    assert len(statements) == 7
    await store.write_results(
        [
            f.result(f.trace("4bf92f3577b34da6a3ce929d0e0e4736"), f.ok("faithfulness", 0.5)),
            f.result(f.trace("t2"), f.ok("faithfulness", 0.9)),
        ]
    )
    conn = await asyncpg.connect(store_url)
    try:
        first = await conn.fetch(statements[0])
        for sql in statements[1:]:
            await conn.fetch(sql)
    finally:
        await conn.close()
    assert [(r["app"], r["pass_rate"], r["mean_score"], r["scored"]) for r in first] == [
        ("helpdesk", pytest.approx(0.5), pytest.approx(0.7), 2)
    ]


async def test_unjudged_replay_case_is_in_run_results(store: PostgresStore) -> None:
    t = f.trace("r9-c1", source="replay", run_id="r9", test_case_id="c1", answer=None)
    await store.write_results([f.result(t, outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="no_answer")])
    res = await store.get_run_results("r9")
    assert [(r.trace.trace_id, r.outcome, r.outcome_reason, r.judgements) for r in res] == [
        ("r9-c1", TraceOutcome.NOT_EVALUABLE, "no_answer", ())
    ]


async def test_test_set_texts_with_nul_characters_are_stored_without_them(store: PostgresStore) -> None:
    """JSON allows "\\u0000"; PostgreSQL text, text[] and jsonb do not. The test set is stored NUL-free."""
    ts = TestSet(
        name="n\x00ul",
        description="d\x00",
        cases=(
            TestCase(
                id="c\x001",
                question="What\x00 is it?",
                expected_answer="x\x00",
                keywords=("k\x00",),
                reference_contexts=("r\x00",),
                answer="It is\x00 x.",
                contexts=("It is x.\x00",),
                doc_ids=("d\x00", None),
                metadata={"team\x00": "a\x00b"},
            ),
        ),
    )
    await store.upsert_test_set(ts)
    got = await store.get_test_set("nul")
    assert got is not None
    assert got.description == "d"
    (c,) = got.cases
    assert (c.id, c.question, c.expected_answer, c.answer) == ("c1", "What is it?", "x", "It is x.")
    assert c.keywords == ("k",)
    assert c.reference_contexts == ("r",)
    assert c.contexts == ("It is x.",)
    assert c.doc_ids == ("d", None)
    assert c.metadata == {"team": "ab"}
