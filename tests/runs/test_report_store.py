"""The run report folded case by case and its case rows read back from PostgreSQL (issue 13 "Scale"): the
numbers equal the in-memory computation (``build_report`` over every case) on a known test set, pages return
every case exactly once in test-set order, and the streamed JSON parses and matches."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.model import TestCase, TestSet, Trace
from ragpulse.runs.diagnosis import diagnose
from ragpulse.runs.replay import run_replay
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import build_report, case_rows_page, iter_case_rows, stored_case
from ragpulse.runs.stored import report_of, run_report
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge
from testsupport import report_json

RECALL = {"q0": 0.9, "q1": 0.2, "q2": 0.8, "q3": 0.7, "q5": 0.6, "q6": 0.3, "q7": 1.0}
FAITH = {"q0": 0.8, "q1": 0.9, "q2": 0.1, "q5": 0.6, "q6": 0.2, "q7": 0.7}


def _ts() -> TestSet:
    # ids sort differently from their trace ids, so the order checks test the position order
    return TestSet(
        name="paging",
        cases=tuple(
            TestCase(id=f"c{i}", question=f"q{i}", answer=None if i == 4 else f"a{i}", contexts=("ctx",))
            for i in range(8)
        ),
    )


def _judges() -> dict[str, ScriptedJudge]:
    def score(table: dict[str, float]) -> Any:
        return lambda t: table.get(t.question or "", 0.0)

    return {
        "context_recall": ScriptedJudge("context_recall", score(RECALL), tokens=(10, 2)),
        "faithfulness": ScriptedJudge("faithfulness", score(FAITH), errors=["q3"], tokens=(20, 4)),
    }


def _aggregates(r: RunReport) -> dict[str, Any]:
    doc = r.to_json()
    for key in ("cases", "case_source", "diagnosis", "wall_seconds", "wall_until", "status"):
        doc.pop(key, None)
    return doc


async def test_folded_report_equals_in_memory_report_and_pages_cover_every_case(pg_url: str) -> None:
    settings = Settings(store_database_url=pg_url)
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        live = await run_replay(_ts(), judges=_judges(), store=store, settings=settings, run_id="p1")
        # the old path: every case's result in memory, one report with every row
        results = await store.get_run_results("p1")
        old = build_report(
            run_id="p1",
            test_set="paging",
            cases=[stored_case(r, list(_judges())) for r in results],
            judges=list(_judges()),
            wall_seconds=0.0,
        )
        run = await store.get_run("p1")
        assert run is not None
        from_store = await report_of(store, run.model_copy(update={"report": None}))  # folded from the store
        for r in (live, from_store):
            assert _aggregates(r) == _aggregates(old)
            assert r.case_source == "store"
            assert r.cases == []
            assert r.diagnosis is not None
            assert old.diagnosis is not None
            assert r.diagnosis.overall == old.diagnosis.overall
        # the specific numbers (hand-computed)
        assert live.cases_total == 8
        assert live.cases_passed == 3  # c0, c5, c7
        assert live.pass_rate == 0.375
        assert live.coverage == 0.875  # all but c4 (no answer)
        assert live.counts.model_dump(by_alias=True) == {
            "pass": 9,
            "fail": 4,
            "error": 1,
            "abstained": 0,
            "skipped": 2,
        }
        assert live.averages == {
            "context_recall": pytest.approx(4.5 / 7),
            "faithfulness": pytest.approx(0.55),
        }
        rec, fai = live.judges["context_recall"], live.judges["faithfulness"]
        assert (rec.scored, rec.pass_, rec.fail, rec.error, rec.skipped) == (7, 5, 2, 0, 1)
        assert (fai.scored, fai.pass_, fai.fail, fai.error, fai.skipped) == (6, 4, 2, 1, 1)
        assert live.tokens.model_dump() == {"prompt": 7 * 10 + 6 * 20, "completion": 7 * 2 + 6 * 4}
        assert live.status.value == "completed_with_errors"
        assert live.diagnosis is not None
        assert live.diagnosis.overall.cases == {"retrieval": 2, "generation": 1, "none": 3, "undetermined": 2}
        assert live.diagnosis.overall.weak_side == "retrieval"
        # c3 (faithfulness error, recall passed) and c4 (no answer: not evaluable) are not judged
        assert (live.cases_failing, live.cases_not_judged) == (3, 2)

        # pages: every case exactly once, in test-set order; failing ones and those not judged likewise
        for verdict, want in (
            (None, [f"c{i}" for i in range(8)]),
            ("fail", ["c1", "c2", "c6"]),
            ("not_judged", ["c3", "c4"]),
        ):
            seen: list[str] = []
            after = None
            pages = 0
            while True:
                rows, after = await case_rows_page(
                    store,
                    live,
                    after=after,
                    limit=2,
                    failing=verdict == "fail",
                    not_judged=verdict == "not_judged",
                )
                seen += [r.case_id for r in rows]
                pages += 1
                if after is None:
                    break
            assert seen == want
            assert pages == (len(want) + 1) // 2
        offset_page, _ = await case_rows_page(store, live, offset=3, limit=2)
        assert [r.case_id for r in offset_page] == ["c3", "c4"]
        assert [r.case_id async for r in iter_case_rows(store, live)] == [f"c{i}" for i in range(8)]

        # the streamed JSON parses and has every row and case diagnosis of the in-memory report
        doc = await report_json(store, live)
        old_doc = old.to_json()
        assert doc["cases"] == old_doc["cases"]
        assert doc["diagnosis"] == old_doc["diagnosis"]
        assert doc["diagnosis"]["cases"] == [d.model_dump(mode="json") for d in diagnose(old.cases).cases]
        assert "case_source" not in doc
        assert {k: v for k, v in doc.items() if k not in ("cases", "diagnosis")} == {
            k: v for k, v in live.to_json().items() if k not in ("cases", "diagnosis", "case_source")
        }
        # a run id known only from its traces is folded from them too
        assert (await run_report(store, "p1")).pass_rate == 0.375
    finally:
        await store.close()


async def test_unstored_case_rows_come_last() -> None:
    """Rows of cases that are not in the store are carried by the report and come after the stored ones."""
    from ragpulse.model import TraceOutcome, TraceResult
    from ragpulse.runs.reports import ReportBuilder
    from ragpulse.runs.runner import CaseResult
    from ragpulse.testing.fakes import MemoryStore

    store = MemoryStore()
    b = ReportBuilder(["keyword"], keep_rows=False)
    lost = TraceResult(trace=Trace(trace_id="t9"), outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="lost")
    b.add(CaseResult(case_id="c9", result=lost, stored=False, note="store_failed: f.jsonl:10"))
    report = b.report(run_id="none", test_set="x", wall_seconds=0.0)
    assert [r.case_id for r in report.cases] == ["c9"]
    assert report.status.value == "completed_with_errors"
    rows, nxt = await case_rows_page(store, report, limit=5)
    assert ([r.case_id for r in rows], nxt) == (["c9"], None)
    assert rows[0].reason == "store_failed: f.jsonl:10"
    doc = await report_json(store, report)
    assert [c["case_id"] for c in doc["cases"]] == ["c9"]


async def test_pages_of_cases_not_in_the_test_set_come_last_by_trace_id(pg_url: str) -> None:
    """Cases whose test case is no longer in the run's test set (replaced since) follow the placed ones, by
    trace id; keyset pages and offsets cross the boundary without losing or repeating a case."""
    from ragpulse.runs import case_trace_id

    settings = Settings(store_database_url=pg_url)
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        live = await run_replay(_ts(), judges=_judges(), store=store, settings=settings, run_id="p2")
        kept = TestSet(name="paging", cases=_ts().cases[4:])  # c4..c7 keep a position (0..3), c0..c3 lose it
        await store.upsert_test_set(kept)
        unplaced = sorted((f"c{i}" for i in range(4)), key=lambda c: case_trace_id("p2", c))
        want = ["c4", "c5", "c6", "c7", *unplaced]
        for limit in (1, 3, 5, 8, 20):
            seen: list[str] = []
            after = None
            while True:
                rows, after = await case_rows_page(store, live, after=after, limit=limit)
                seen += [r.case_id for r in rows]
                if after is None:
                    break
            assert seen == want, limit
        for offset in range(9):
            rows, _ = await case_rows_page(store, live, offset=offset, limit=3)
            assert [r.case_id for r in rows] == want[offset : offset + 3], offset
        failing, _ = await case_rows_page(store, live, failing=True, limit=10)
        assert [r.case_id for r in failing] == [c for c in want if c in ("c1", "c2", "c6")]
        unjudged, _ = await case_rows_page(store, live, not_judged=True, limit=10)
        assert [r.case_id for r in unjudged] == [c for c in want if c in ("c3", "c4")]
        assert [r.case_id async for r in iter_case_rows(store, live)] == want
    finally:
        await store.close()


async def test_an_abstained_case_is_not_judged_in_the_stored_pages(pg_url: str) -> None:
    """The SQL verdict filter agrees with ``CaseRow.verdict`` on the demo's abstained case: ``a1`` (the answer
    abstained: ``abstained`` skip, and a failing recall 0.0) is not judged, not failing; ``a0`` fails on recall
    0.2; ``a2`` passes. The page filters of the store give the same lists as the report's rows."""
    from ragpulse.judges.frame import skipped
    from ragpulse.model import Judgement

    class Abstaining(ScriptedJudge):
        async def judge(self, trace: Trace) -> Judgement:
            if trace.question == "q1":
                return skipped(
                    judge=self.name,
                    version=self.version,
                    backend=self.backend,
                    reason="abstained: the answer declines",
                )
            return await super().judge(trace)

    ts = TestSet(
        name="abstain",
        cases=tuple(
            TestCase(id=f"a{i}", question=f"q{i}", answer=f"a{i}", contexts=("c",)) for i in range(3)
        ),
    )
    judges = {
        "context_recall": ScriptedJudge(
            "context_recall", lambda t: {"q0": 0.2, "q1": 0.0}.get(t.question or "", 1.0)
        ),
        "faithfulness": Abstaining("faithfulness", 0.9),
    }
    settings = Settings(store_database_url=pg_url)
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        live = await run_replay(ts, judges=judges, store=store, settings=settings, run_id="ab1")
        assert (live.cases_passed, live.cases_failing, live.cases_not_judged, live.cases_abstained) == (
            1,
            1,
            1,
            1,
        )
        assert live.pass_rate == 0.5  # a2 of a0, a2: a1 abstained
        failing, _ = await case_rows_page(store, live, failing=True)
        unjudged, _ = await case_rows_page(store, live, not_judged=True)
        assert [r.case_id for r in failing] == ["a0"]
        assert [(r.case_id, r.verdict) for r in unjudged] == [("a1", "not_judged")]
        assert unjudged[0].reason == (
            "faithfulness: abstained: the answer declines; context_recall: scripted 0.00"
        )
    finally:
        await store.close()
