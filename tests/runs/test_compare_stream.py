"""``runs compare`` without every row in memory: the comparison folded row by row (``ComparisonFold``) is the one
the previous code computed from two full reports, on random in-memory runs and on runs read from the store a page
at a time (PostgreSQL and the in-memory fake), for runs of the same test set, of a changed or another test set,
runs known only from their traces with a case id sent twice, rows not in the store and reports that still carry
their rows; the streamed JSON document is the one ``json.dumps`` gives."""

from __future__ import annotations

import io
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.judges.frame import error, ok, skipped
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementStatus,
    RunRecord,
    TestCase,
    TestSet,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.protocols import RunStore
from ragpulse.runs import CaseResult
from ragpulse.runs.compare import (
    FlippedCase,
    FlippedSpool,
    MetricDelta,
    RunComparison,
    ScoreDrop,
    _Sum,
    compare_reports,
    compare_stored,
    write_comparison_json,
)
from ragpulse.runs.report_model import CaseRow, RunReport
from ragpulse.runs.reports import build_report, case_row, full_report
from ragpulse.runs.stored import compare_runs, run_report
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import MemoryStore

JUDGES = ("keyword", "relevancy", "faithfulness")


# -- the comparison as computed before it streamed (two full reports in memory), kept as the reference ---------


def _legacy_over(rows: list[CaseRow]) -> tuple[float | None, float | None, dict[str, float | None]]:
    n = len(rows)
    scores: dict[str, list[float]] = {}
    for r in rows:
        for name, j in r.judgements.items():
            got = scores.setdefault(name, [])
            if j.status is JudgementStatus.OK and j.score is not None:
                got.append(j.score)
    means = {k: round(sum(v) / len(v), 6) if v else None for k, v in scores.items()}
    if not n:
        return None, None, means
    return round(sum(r.passed for r in rows) / n, 6), round(sum(r.scored > 0 for r in rows) / n, 6), means


def _legacy_delta(a: float | None, b: float | None) -> MetricDelta:
    return MetricDelta(a=a, b=b, delta=None if a is None or b is None else round(b - a, 6))


def legacy_compare(a: RunReport, b: RunReport) -> RunComparison:
    cases_a = {c.case_id: c for c in a.cases}
    ids_b = [c.case_id for c in b.cases]
    shared = [i for i in ids_b if i in cases_a]
    same_cases = a.test_set == b.test_set and set(cases_a) == set(ids_b)
    warning = None
    pa: float | None
    pb: float | None
    ca: float | None
    cb: float | None
    if same_cases:
        pa, ca, ma = a.pass_rate, a.coverage, dict(a.averages)
        pb, cb, mb = b.pass_rate, b.coverage, dict(b.averages)
    else:
        what = (
            f"different test sets ({a.test_set} and {b.test_set})"
            if a.test_set != b.test_set
            else f"different cases of test set {a.test_set}"
        )
        warning = (
            ("no shared cases: " if not shared else "")
            + f"runs {a.run_id} and {b.run_id} replayed {what}: comparing the {len(shared)} shared case(s) only "
            f"({len(cases_a) - len(shared)} only in {a.run_id}, {len(ids_b) - len(shared)} only in {b.run_id})"
        )
        keep = set(shared)
        pa, ca, ma = _legacy_over([c for c in a.cases if c.case_id in keep])
        pb, cb, mb = _legacy_over([c for c in b.cases if c.case_id in keep])
    metrics = {"pass_rate": _legacy_delta(pa, pb), "coverage": _legacy_delta(ca, cb)}
    for name in dict.fromkeys([*ma, *mb]):
        metrics[name] = _legacy_delta(ma.get(name), mb.get(name))
    p2f: list[FlippedCase] = []
    f2p: list[FlippedCase] = []
    score_drops: list[ScoreDrop] = []
    for cb_row in b.cases:
        ca_row = cases_a.get(cb_row.case_id)
        if ca_row is None:
            continue
        row = FlippedCase(case_id=cb_row.case_id, reason_a=ca_row.reason, reason_b=cb_row.reason)
        if ca_row.passed and not cb_row.passed:
            p2f.append(row)
        elif not ca_row.passed and cb_row.passed:
            f2p.append(row)
        elif not ca_row.passed and not cb_row.passed:  # issue 30 item 8: a judge's score down by ≥ 0.1
            drops = {
                name: _legacy_delta(round(ja.score, 6), round(jb.score, 6))
                for name, jb in cb_row.judgements.items()
                if (ja := ca_row.judgements.get(name)) is not None
                and ja.status is jb.status is JudgementStatus.OK
                and ja.score is not None
                and jb.score is not None
                and round(ja.score, 6) - round(jb.score, 6) >= 0.1 - 1e-9
            }
            if drops:
                drop = ScoreDrop(
                    case_id=cb_row.case_id, reason_a=ca_row.reason, reason_b=cb_row.reason, judges=drops
                )
                score_drops.append(drop)
    return RunComparison(
        run_a=a.run_id,
        run_b=b.run_id,
        test_set_a=a.test_set,
        test_set_b=b.test_set,
        shared_cases=len(shared),
        # the case-set fields added for the portal's warning (the previous code had only the warning text)
        cases_differ=not same_cases,
        cases_only_a=0 if same_cases else len(cases_a) - len(shared),
        cases_only_b=0 if same_cases else len(ids_b) - len(shared),
        warning=warning,
        judges_compared=[n for n in a.judges if n in b.judges],  # the runs ran the same judges
        metrics=metrics,
        pass_to_fail=p2f,
        fail_to_pass=f2p,
        score_drops=score_drops,
    )


def _dumped(cmp: RunComparison) -> str:
    """The ``runs compare --json`` line of a comparison holding its flipped cases."""
    return json.dumps(cmp.to_json(), ensure_ascii=False, default=str) + "\n"


# -- random runs in memory ---------------------------------------------------------------------------------------


def _judgement(rng: random.Random, judge: str) -> Judgement:
    common: dict[str, Any] = {"judge": judge, "version": "v1", "backend": Backend.HEURISTIC, "threshold": 0.5}
    kind = rng.random()
    if kind < 0.1:
        return error(reason="judge_unavailable: HTTP 500", **common)
    if kind < 0.2:
        return skipped(reason="no_answer", **common)
    return ok(score=round(rng.random(), 6), reason=f"{judge} ✓ {rng.randrange(100)}", **common)


def _random_run(rng: random.Random, run_id: str, test_set: str, ids: list[str]) -> RunReport:
    cases = []
    for n, cid in enumerate(ids):
        judges = rng.sample(JUDGES, rng.randrange(len(JUDGES) + 1))  # judge order varies from case to case
        outcome = TraceOutcome.NOT_EVALUABLE if not judges else TraceOutcome.EVALUATED
        trace = Trace(trace_id=f"{run_id}-{n}", run_id=run_id, test_case_id=cid)
        result = TraceResult(
            trace=trace, outcome=outcome, judgements=tuple(_judgement(rng, j) for j in judges)
        )
        cases.append(CaseResult(case_id=cid, result=result, judges=JUDGES))
    return build_report(run_id=run_id, test_set=test_set, cases=cases, judges=JUDGES, wall_seconds=0.0)


def _random_ids(rng: random.Random) -> list[str]:
    pool = [f"c{i}" for i in range(rng.randrange(1, 12))]
    ids = rng.sample(pool, rng.randrange(len(pool) + 1))
    if ids and rng.random() < 0.3:  # a case id sent twice
        ids.insert(rng.randrange(len(ids) + 1), rng.choice(ids))
    return ids


def test_folded_comparison_equals_the_previous_one_on_random_runs() -> None:
    rng = random.Random(13)
    kinds = set()
    for _ in range(400):
        ids_a = _random_ids(rng)
        ids_b = list(ids_a) if rng.random() < 0.4 else _random_ids(rng)
        rng.shuffle(ids_b)
        a = _random_run(rng, "a", "kb", ids_a)
        b = _random_run(rng, "b", "kb" if rng.random() < 0.7 else "kb2", ids_b)
        want = legacy_compare(a, b)
        got = compare_reports(a, b)
        assert got == want
        assert _dumped(got) == _dumped(want)
        kinds.add((want.warning is None, bool(want.shared_cases), bool(want.pass_to_fail)))
    assert len(kinds) >= 4  # same cases, shared subsets, nothing shared; with and without flips


def test_a_folded_mean_is_the_builtin_sum_to_the_last_bit() -> None:
    rng = random.Random(5)
    for n in (1, 2, 10, 1000):
        xs = [round(rng.random(), 6) for _ in range(n)]
        s = _Sum()
        for x in xs:
            s.add(x)
        assert (s.total, s.n) == (sum(xs), n)
    # Python 3.12's sum() compensates (Neumaier); before it adds plainly: both algorithms are folded exactly
    compensated, plain = _Sum(compensated=True), _Sum(compensated=False)
    for x in (1e100, 1.0, -1e100):
        compensated.add(x)
        plain.add(x)
    assert (compensated.total, plain.total) == (1.0, 0.0)


# -- runs read from the store a page at a time -------------------------------------------------------------------

SET_A = TestSet(name="kb", cases=tuple(TestCase(id=f"c{i}", question=f"q{i}") for i in range(10)))
SET_B = TestSet(name="kb2", cases=tuple(TestCase(id=f"c{i}", question=f"q{i}") for i in range(5, 15)))


def _result(run_id: str, trace_id: str, case_id: str | None, j: Judgement | None) -> TraceResult:
    trace = Trace(trace_id=trace_id, question="q", answer="a", run_id=run_id, test_case_id=case_id)
    outcome = TraceOutcome.EVALUATED if j else TraceOutcome.NOT_EVALUABLE
    return TraceResult(trace=trace, outcome=outcome, judgements=(j,) if j else ())


async def _seed(store: RunStore) -> None:
    """Runs ``r1``/``r2`` (test set kb, other verdicts), ``r3`` (test set kb2), ``r4`` (kb, some cases and one
    outside the set), ``ev`` (no run record: case c1 sent twice, a trace without a case id and another trace
    with that trace id as its case id, a trace whose id is another case's id)."""
    rng = random.Random(7)
    await store.upsert_test_set(SET_A)
    await store.upsert_test_set(SET_B)
    runs = {
        "r1": ("kb", [f"c{i}" for i in range(10)]),
        "r2": ("kb", [f"c{i}" for i in range(10)]),
        "r3": ("kb2", [f"c{i}" for i in range(5, 15)]),
        "r4": ("kb", ["c0", "c2", "c4", "c6", "c9", "zz-extra"]),
    }
    results = []
    for run_id, (test_set, ids) in runs.items():
        await store.create_run(
            RunRecord(run_id=run_id, test_set=test_set, judges=dict.fromkeys(JUDGES, "v1"))
        )
        # trace ids do not sort like the case ids: the store's run order is by test-set position
        for n, cid in enumerate(ids):
            j = None if rng.random() < 0.1 else _judgement(rng, rng.choice(JUDGES))
            results.append(_result(run_id, f"{run_id}-{(n * 7919) % 101:03d}", cid, j))
    sent: list[tuple[str, str | None]] = [
        ("ev-9", "c1"),
        ("ev-1", "c1"),
        ("ev-5", "c2"),
        ("ev-3", None),
        ("ev-7", "c8"),
        ("ev-2", "ev-3"),  # the case id of trace ev-3, which has none of its own
        ("c5", "c9"),  # a trace id that is another case's id
    ]
    for trace_id, sent_case in sent:
        results.append(_result("ev", trace_id, sent_case, _judgement(rng, rng.choice(JUDGES))))
    await store.write_results(results)


def _unstored(report: RunReport) -> RunReport:
    """``report`` with rows of cases that are not in the store (a replay that could not store them)."""
    lost = TraceResult(
        trace=Trace(trace_id="lost-1"), outcome=TraceOutcome.NOT_EVALUABLE, outcome_reason="lost"
    )
    rows = [
        case_row(CaseResult(case_id="c3", result=lost, stored=False, note="store_failed: f.jsonl:4")),
        case_row(CaseResult(case_id="c77", result=lost, stored=False, note="store_failed: f.jsonl:78")),
    ]
    return report.model_copy(update={"cases": rows})


@pytest.fixture(
    params=[
        # slow check (every pair of 8 reports compared 7 ways, ~1-2 s CPU): the integration lane, docs/dev/testing.md
        pytest.param("memory", marks=pytest.mark.integration),
        pytest.param("postgres", marks=pytest.mark.integration),
    ]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RunStore]:
    """The in-memory fake, or PostgreSQL (a private database; that case is in the integration lane: the fixture
    asks for ``pg_url`` at run time, which the lane marking in tests/conftest.py cannot see). Both cases are in
    the integration lane (the memory one as a slow check); the fast lane keeps the quicker comparisons above."""
    if request.param == "memory":
        yield MemoryStore()
        return
    url = request.getfixturevalue("pg_url")
    pg = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        yield pg
    finally:
        await pg.close()


async def test_stored_comparison_equals_the_previous_one(store: RunStore) -> None:
    await _seed(store)
    reports = {r: await run_report(store, r) for r in ("r1", "r2", "r3", "r4", "ev")}
    assert {r.case_source for r in reports.values()} == {"store"}
    reports["r1+lost"] = _unstored(reports["r1"])
    for name in ("r2", "ev"):  # reports that carry their rows (ev's with a case id twice)
        reports[f"{name} (rows)"] = await full_report(store, reports[name])
    seen = set()
    for name_a, a in reports.items():
        for name_b, b in reports.items():
            want = legacy_compare(await full_report(store, a), await full_report(store, b))
            for page, cursor in ((1, True), (3, True), (500, True), (1, False), (3, False), (500, False)):
                got = await compare_stored(store, a, b, page=page, cursor=cursor)
                assert got == want, (name_a, name_b, page, cursor)
            with FlippedSpool() as spool:
                head = await compare_stored(store, a, b, spool)
                assert (head.pass_to_fail, head.fail_to_pass, head.score_drops) == ([], [], [])
                assert spool.counts == {
                    "pass_to_fail": len(want.pass_to_fail),
                    "fail_to_pass": len(want.fail_to_pass),
                    "score_drops": len(want.score_drops),
                }
                assert list(spool.read("pass_to_fail")) == want.pass_to_fail
                assert list(spool.read("score_drops")) == want.score_drops
                out = io.StringIO()
                write_comparison_json(head, spool, out)
                assert out.getvalue() == _dumped(want)
            seen.add(
                (want.warning is None, bool(want.shared_cases), bool(want.pass_to_fail or want.fail_to_pass))
            )
    assert len(seen) >= 4
    # compare_runs reads the reports itself
    assert await compare_runs(store, "r1", "ev") == legacy_compare(
        await full_report(store, reports["r1"]), await full_report(store, reports["ev"])
    )


def test_streamed_json_is_the_dumped_document() -> None:
    rng = random.Random(3)
    a = _random_run(rng, "a", "kb", [f"c{i}" for i in range(40)])
    b = _random_run(rng, "b", "kb", [f"c{i}" for i in range(40)])
    want = compare_reports(a, b)
    assert want.pass_to_fail
    assert want.fail_to_pass
    assert want.score_drops
    with FlippedSpool() as spool:
        for c in want.pass_to_fail:
            spool("pass_to_fail", c)
        for c in want.fail_to_pass:
            spool("fail_to_pass", c)
        for d in want.score_drops:
            spool("score_drops", d)
        out = io.StringIO()
        emptied: dict[str, list[FlippedCase]] = {"pass_to_fail": [], "fail_to_pass": [], "score_drops": []}
        write_comparison_json(want.model_copy(update=emptied), spool, out)
    assert out.getvalue() == _dumped(want)
    assert json.loads(out.getvalue()) == want.to_json()
