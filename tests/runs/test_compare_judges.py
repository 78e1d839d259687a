"""Runs that ran different judges are compared on the judges both ran (in-memory reports, the fast lane).

Run ``a`` ran faithfulness, keyword and relevancy; run ``b`` faithfulness and keyword (pass at 0.5):

| case | faithfulness a → b | keyword a → b | relevancy a | verdict a → b (shared judges) | listed |
|---|---|---|---|---|---|
| c1 | 0.9 → 0.9 | 1.0 → 1.0 | 0.2 | pass → pass | — (failed only on relevancy in a) |
| c2 | 0.9 → 0.9 | 1.0 → 0.0 | 0.9 | pass → fail | pass → fail |
| c3 | 0.3 → 0.9 | 1.0 → 1.0 | 0.1 | fail → pass | fail → pass |
| c4 | 0.4 → 0.2 | 1.0 → 1.0 | 0.9 | fail → fail | score drop (faithfulness −0.2) |
"""

from __future__ import annotations

import pytest

from ragpulse.judges.frame import ok
from ragpulse.model import Backend, Trace, TraceOutcome, TraceResult
from ragpulse.runs import CaseResult
from ragpulse.runs.compare import compare_reports
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import build_report, shared_judges_row


def _case(cid: str, scores: dict[str, float]) -> CaseResult:
    js = tuple(
        ok(judge=n, version="v1", backend=Backend.HEURISTIC, score=s, threshold=0.5, reason=f"{n} {s}")
        for n, s in scores.items()
    )
    tr = TraceResult(trace=Trace(trace_id=f"t{cid}"), outcome=TraceOutcome.EVALUATED, judgements=js)
    return CaseResult(case_id=cid, result=tr, judges=tuple(scores))


def _run(
    run_id: str, judges: list[str], cases: dict[str, dict[str, float]], test_set: str = "kb"
) -> RunReport:
    rows = [_case(cid, {n: s for n, s in scores.items() if n in judges}) for cid, scores in cases.items()]
    return build_report(run_id=run_id, test_set=test_set, cases=rows, judges=judges, wall_seconds=0)


_A = {
    "c1": {"faithfulness": 0.9, "keyword": 1.0, "relevancy": 0.2},
    "c2": {"faithfulness": 0.9, "keyword": 1.0, "relevancy": 0.9},
    "c3": {"faithfulness": 0.3, "keyword": 1.0, "relevancy": 0.1},
    "c4": {"faithfulness": 0.4, "keyword": 1.0, "relevancy": 0.9},
}
_B = {
    "c1": {"faithfulness": 0.9, "keyword": 1.0},
    "c2": {"faithfulness": 0.9, "keyword": 0.0},
    "c3": {"faithfulness": 0.9, "keyword": 1.0},
    "c4": {"faithfulness": 0.2, "keyword": 1.0},
}


def test_a_judge_only_one_run_ran_decides_no_flip() -> None:
    a = _run("a", ["faithfulness", "keyword", "relevancy"], _A)
    b = _run("b", ["faithfulness", "keyword"], _B)
    assert a.pass_rate == 0.25  # c2 only, with relevancy: the reports themselves are unchanged
    cmp = compare_reports(a, b)
    assert cmp.warning == "judges differ: relevancy only in a; compared on faithfulness, keyword"
    assert (cmp.judges_compared, cmp.judges_only_a, cmp.judges_only_b) == (
        ["faithfulness", "keyword"],
        ["relevancy"],
        [],
    )
    assert cmp.comparable
    assert [(f.case_id, f.reason_a, f.reason_b) for f in cmp.pass_to_fail] == [
        ("c2", None, "keyword: keyword 0.0")
    ]
    # c3's reason in a no longer names relevancy; c1 (failed on relevancy only) is not listed
    assert [(f.case_id, f.reason_a, f.reason_b) for f in cmp.fail_to_pass] == [
        ("c3", "faithfulness: faithfulness 0.3", None)
    ]
    assert [
        (d.case_id, d.reason_a, {k: (v.a, v.b, v.delta) for k, v in d.judges.items()})
        for d in cmp.score_drops
    ] == [("c4", "faithfulness: faithfulness 0.4", {"faithfulness": (0.4, 0.2, -0.2)})]
    # pass rate over the shared judges: a passes c1, c2 (2 of 4), b passes c1, c3 (2 of 4)
    assert (cmp.metrics["pass_rate"].a, cmp.metrics["pass_rate"].b, cmp.metrics["pass_rate"].delta) == (
        0.5,
        0.5,
        0.0,
    )
    assert (cmp.metrics["coverage"].a, cmp.metrics["coverage"].b) == (1.0, 1.0)
    # each judge's mean is its own; relevancy is n/a in b
    assert cmp.metrics["relevancy"].a == pytest.approx(0.525)
    assert (cmp.metrics["relevancy"].b, cmp.metrics["relevancy"].delta) == (None, None)
    assert cmp.metrics["faithfulness"].a == pytest.approx(0.625)
    assert cmp.metrics["faithfulness"].b == pytest.approx(0.725)
    doc = cmp.to_json()
    assert doc["judges_only_a"] == ["relevancy"]
    assert doc["judges_compared"] == ["faithfulness", "keyword"]


def test_judges_only_in_either_run_are_named_both_ways() -> None:
    a = _run("r1", ["keyword", "relevancy"], {"c1": {"keyword": 1.0, "relevancy": 0.1}})
    b = _run("r2", ["faithfulness", "keyword"], {"c1": {"faithfulness": 0.1, "keyword": 1.0}})
    cmp = compare_reports(a, b)
    assert cmp.warning == "judges differ: relevancy only in r1; faithfulness only in r2; compared on keyword"
    assert cmp.pass_to_fail == cmp.fail_to_pass == []
    assert (cmp.metrics["pass_rate"].a, cmp.metrics["pass_rate"].b) == (1.0, 1.0)


def test_runs_without_a_shared_judge_compare_nothing() -> None:
    a = _run("r1", ["relevancy"], {"c1": {"relevancy": 0.9}, "c2": {"relevancy": 0.1}})
    b = _run("r2", ["keyword"], {"c1": {"keyword": 0.0}, "c2": {"keyword": 1.0}})
    cmp = compare_reports(a, b)
    assert cmp.warning == (
        "no shared judges: runs r1 and r2 ran no judge in common (relevancy only in r1; keyword only in r2): "
        "nothing to compare"
    )
    assert not cmp.comparable
    assert cmp.shared_cases == 2
    assert cmp.judges_compared == []
    assert cmp.pass_to_fail == cmp.fail_to_pass == cmp.score_drops == []
    for name in ("pass_rate", "coverage"):
        assert (cmp.metrics[name].a, cmp.metrics[name].b, cmp.metrics[name].delta) == (None, None, None)
    assert (cmp.metrics["relevancy"].a, cmp.metrics["keyword"].b) == (0.5, 0.5)


def test_other_cases_and_other_judges_warn_about_both() -> None:
    a = _run(
        "a",
        ["keyword", "relevancy"],
        {"c1": {"keyword": 1.0, "relevancy": 0.1}, "old": {"keyword": 1.0}},
        "v1",
    )
    b = _run("b", ["keyword"], {"c1": {"keyword": 1.0}}, "v2")
    cmp = compare_reports(a, b)
    assert cmp.warning == (
        "runs a and b replayed different test sets (v1 and v2): comparing the 1 shared case(s) only "
        "(1 only in a, 0 only in b); judges differ: relevancy only in a; compared on keyword"
    )
    assert cmp.fail_to_pass == []
    assert (cmp.metrics["pass_rate"].a, cmp.metrics["pass_rate"].b) == (1.0, 1.0)


def test_same_judges_keep_the_reports_figures() -> None:
    a = _run("a", ["faithfulness", "keyword"], _B)
    b = _run("b", ["faithfulness", "keyword"], _B)
    cmp = compare_reports(a, b)
    assert cmp.warning is None
    assert cmp.judges_compared == ["faithfulness", "keyword"]
    assert not cmp.judges_differ
    assert cmp.metrics["pass_rate"].a == a.pass_rate == 0.5


def test_a_row_cut_to_shared_judges_is_decided_again() -> None:
    row = _run("a", ["faithfulness", "keyword", "relevancy"], _A).cases[0]
    assert (row.passed, row.scored, row.reason) == (False, 3, "relevancy: relevancy 0.2")
    cut = shared_judges_row(row, ["faithfulness", "keyword"])
    assert (cut.passed, cut.scored, cut.reason, list(cut.judgements)) == (
        True,
        2,
        None,
        ["faithfulness", "keyword"],
    )
    assert shared_judges_row(row, ["faithfulness", "keyword", "relevancy", "x"]) is row
    none = shared_judges_row(row, ["other"])
    assert (none.passed, none.scored, none.reason) == (False, 0, "no_judgements")
