"""``runs compare`` and ``gate --junit`` hold a bounded number of a run's rows at once, whatever its size: two
2,500-case runs in PostgreSQL compared a page of 100 at a time never have more than two pages of case rows (and
of the store's results) alive; JUnit written from a cursor of 100 holds one case row and one chunk of results.
The previous code (every row of both runs in memory) is measured the same way, so the count is known to see
them. Objects are counted as they are made (``reports.case_row``, ``run_rows._result``) and as they are freed
(weak-reference finalizers), not by timing or RSS."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ragpulse.config import Settings
from ragpulse.judges.frame import ok
from ragpulse.model import Backend, RunRecord, TestCase, TestSet, Trace, TraceOutcome, TraceResult
from ragpulse.runs import reports
from ragpulse.runs.compare import FlippedSpool, compare_reports, compare_stored
from ragpulse.runs.gate import evaluate_gate, gate_thresholds
from ragpulse.runs.junit import write_junit
from ragpulse.runs.stored import run_report
from ragpulse.store import PostgresStore, run_rows

N = 2_500
PAGE = 100

_T = TypeVar("_T")


class Live:
    """Objects made by the wrapped factories that are still alive (``now``), and the most at once (``most``)."""

    def __init__(self) -> None:
        self.now = self.most = 0

    def wrap(self, make: Callable[..., _T]) -> Callable[..., _T]:
        def made(*args: Any, **kwargs: Any) -> _T:
            obj = make(*args, **kwargs)
            self.now += 1
            self.most = max(self.most, self.now)
            weakref.finalize(obj, self._freed)
            return obj

        return made

    def _freed(self) -> None:
        self.now -= 1

    def reset(self) -> None:
        self.most = self.now


def _result(run_id: str, i: int) -> TraceResult:
    # run b fails every 10th case that run a passed, and passes every 15th that run a failed
    score = 0.2 if i % 7 == 0 else 0.9
    if run_id == "b" and i % 10 == 0:
        score = 0.1
    if run_id == "b" and i % 15 == 0:
        score = 0.95
    j = ok(
        judge="keyword", version="v1", backend=Backend.HEURISTIC, score=score, threshold=0.5, reason=f"r{i}"
    )
    trace = Trace(
        trace_id=f"{run_id}-{(i * 7919) % N:05d}", question="q", run_id=run_id, test_case_id=f"c{i:05d}"
    )
    return TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=(j,))


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    pg = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        await pg.upsert_test_set(
            TestSet(name="big", cases=tuple(TestCase(id=f"c{i:05d}", question="q") for i in range(N)))
        )
        for run_id in ("a", "b"):
            await pg.create_run(RunRecord(run_id=run_id, test_set="big", judges={"keyword": "v1"}))
            for start in range(0, N, 500):
                await pg.write_results([_result(run_id, i) for i in range(start, start + 500)])
        yield pg
    finally:
        await pg.close()


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> tuple[Live, Live]:
    """(case rows, store results) alive."""
    rows, results = Live(), Live()
    monkeypatch.setattr(reports, "case_row", rows.wrap(reports.case_row))
    monkeypatch.setattr(run_rows, "_result", results.wrap(run_rows._result))
    return rows, results


async def test_compare_holds_two_pages_of_rows(store: PostgresStore, live: tuple[Live, Live]) -> None:
    rows, results = live
    a, b = await run_report(store, "a"), await run_report(store, "b")
    assert (a.cases_total, b.cases_total, a.case_source) == (N, N, "store")
    for cursor in (False, True):  # keyset pages, then through cursors
        rows.reset()
        results.reset()
        with FlippedSpool() as spool:
            got = await compare_stored(store, a, b, spool, page=PAGE, cursor=cursor)
            flips = spool.counts
        assert PAGE <= rows.most <= 2 * PAGE + 2, (cursor, rows.most)
        assert results.most <= 2 * PAGE + 2, (cursor, results.most)
    assert got.shared_cases == N
    passed = {r: [bool(_result(r, i).judgements[0].passed) for i in range(N)] for r in ("a", "b")}
    scores = {r: [_result(r, i).judgements[0].score or 0.0 for i in range(N)] for r in ("a", "b")}
    assert flips == {
        "pass_to_fail": sum(pa and not pb for pa, pb in zip(passed["a"], passed["b"], strict=True)),
        "fail_to_pass": sum(pb and not pa for pa, pb in zip(passed["a"], passed["b"], strict=True)),
        # failed in both, score down by ≥ 0.1 (0.2 → 0.1: every 70th case but every 210th)
        "score_drops": sum(
            not passed["a"][i] and not passed["b"][i] and scores["a"][i] - scores["b"][i] >= 0.1 - 1e-9
            for i in range(N)
        ),
    }
    assert flips["score_drops"] == len([i for i in range(N) if i % 70 == 0 and i % 210 != 0])
    assert min(flips.values()) > 0

    # the previous code, counted the same way: every row of both runs at once
    rows.reset()
    want = compare_reports(await reports.full_report(store, a), await reports.full_report(store, b))
    assert rows.most >= 2 * N
    assert want.model_copy(update={"pass_to_fail": [], "fail_to_pass": [], "score_drops": []}) == got
    assert (len(want.pass_to_fail), len(want.fail_to_pass), len(want.score_drops)) == (
        flips["pass_to_fail"],
        flips["fail_to_pass"],
        flips["score_drops"],
    )


async def test_junit_holds_one_row_and_one_chunk(
    store: PostgresStore, live: tuple[Live, Live], tmp_path: Path
) -> None:
    rows, results = live
    report = await run_report(store, "b")
    outcome = evaluate_gate(report, gate_thresholds({}, ["pass_rate=0.5"], 0.9))
    rows.reset()
    results.reset()
    await write_junit(tmp_path / "b.xml", store, report, outcome.thresholds, chunk=PAGE)
    assert rows.most <= 2, rows.most
    assert PAGE <= results.most <= PAGE + 1, results.most
    assert (tmp_path / "b.xml").read_text(encoding="utf-8").count("<testcase ") == N + 2
