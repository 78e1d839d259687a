"""Replay against the real PostgreSQL store (private database per test)."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.model import RunStatus, TestCase, TestSet
from ragpulse.runs import case_trace_id
from ragpulse.runs.replay import run_replay
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge
from testsupport import pg_count, report_json


async def _replay(ts: TestSet, **kw: Any) -> dict[str, Any]:
    """Replay and return the report's JSON form as ``--json`` writes it (case rows read from the store)."""
    return await report_json(kw["store"], await run_replay(ts, **kw))


def _ts() -> TestSet:
    return TestSet(
        name="pg-mini",
        cases=tuple(
            TestCase(id=f"c{i}", question=f"question {i}", answer=f"answer {i}", keywords=("answer",))
            for i in range(6)
        ),
    )


async def test_same_run_id_twice_leaves_no_duplicate_judgements(pg_url: str) -> None:
    settings = Settings(store_database_url=pg_url)
    judges = {
        "relevancy": ScriptedJudge("relevancy", lambda t: 0.2 if t.question == "question 3" else 0.8),
        "keyword": ScriptedJudge("keyword", 1.0),
    }
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        first = await _replay(_ts(), judges=judges, store=store, settings=settings, run_id="same")
        second = await _replay(_ts(), judges=judges, store=store, settings=settings, run_id="same")
        assert await pg_count(pg_url, "SELECT count(*) FROM judgements") == 12
        assert await pg_count(pg_url, "SELECT count(*) FROM traces") == 6
        for r in (first, second):
            assert r["pass_rate"] == pytest.approx(5 / 6)
            assert r["averages"]["relevancy"] == pytest.approx((0.8 * 5 + 0.2) / 6)
        run = await store.get_run("same")
        assert run is not None
        assert run.status is RunStatus.COMPLETED
        assert run.report is not None
        assert run.report["pass_rate"] == pytest.approx(5 / 6)
        stored = await store.get_run_results("same")
        assert sorted(r.trace.trace_id for r in stored) == sorted(
            case_trace_id("same", f"c{i}") for i in range(6)
        )
        assert all(len(r.judgements) == 2 for r in stored)
        t = await store.get_trace(case_trace_id("same", "c3"))
        assert t is not None
        assert {j.judge: j.passed for j in t.judgements} == {
            "relevancy": False,
            "keyword": True,
        }
    finally:
        await store.close()


async def test_judge_error_on_one_case_leaves_others_judged(pg_url: str) -> None:
    settings = Settings(store_database_url=pg_url)
    judges = {
        "faithfulness": ScriptedJudge("faithfulness", 0.9, errors=["question 2"]),
        "relevancy": ScriptedJudge("relevancy", 0.9, raises=["question 4"]),
    }
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        report = await _replay(_ts(), judges=judges, store=store, settings=settings, run_id="errs")
        run = await store.get_run("errs")
        assert run is not None
        assert run.status is RunStatus.COMPLETED_WITH_ERRORS
        assert report["counts"] == {"pass": 10, "fail": 0, "error": 2, "abstained": 0, "skipped": 0}
        # the cases with an error judgement keep their other judge's score (covered) but never pass on it
        assert report["pass_rate"] == pytest.approx(4 / 6)
        assert report["coverage"] == pytest.approx(1.0)
        errored = {c["case_id"]: c for c in report["cases"] if not c["passed"]}
        assert sorted(errored) == ["c2", "c4"]
        assert errored["c2"]["scored"] == 1
        assert errored["c2"]["reason"].startswith("faithfulness:")
        assert errored["c4"]["scored"] == 1
        assert errored["c4"]["reason"].startswith("relevancy:")
        assert errored["c2"]["judgements"]["faithfulness"]["status"] == "error"
        assert await pg_count(pg_url, "SELECT count(*) FROM judgements WHERE status = 'error'") == 2
        assert await pg_count(pg_url, "SELECT count(*) FROM judgements WHERE status = 'ok'") == 10
    finally:
        await store.close()


async def test_a_stored_test_set_is_spooled_with_the_same_cases_and_hash(pg_url: str) -> None:
    """``replay --test-set NAME`` reads the stored set through a cursor into a temporary file: the same cases
    in order and the same hash as the set read whole, so the replay does not see "other cases"."""
    from ragpulse.runs.replay import stored_test_set

    settings = Settings(store_database_url=pg_url)
    ts = TestSet(
        name="spool",
        knowledge_base="kb",
        description="d",
        cases=(
            TestCase(
                id="z", question="q\u2028?", keywords=("k",), context_labels=(1, 0), contexts=("a", "b")
            ),
            TestCase(id="a", answer="x", doc_ids=("d1", None), metadata={"app": "hr", "n": [1, {"x": None}]}),
            *(TestCase(id=f"c{i}", question=f"q{i}") for i in range(2500)),
        ),
    )
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        await store.upsert_test_set(ts)
        spooled = await stored_test_set(store, "spool")
        try:
            assert (spooled.name, spooled.knowledge_base, spooled.description) == ("spool", "kb", "d")
            assert spooled.case_count == 2502
            assert list(spooled.iter_cases()) == list(ts.cases)
            assert next(spooled.iter_cases()) == ts.cases[0]  # each pass starts over
            assert spooled.content_hash() == ts.content_hash() == await store.test_set_hash("spool")
        finally:
            spooled.close()
    finally:
        await store.close()
