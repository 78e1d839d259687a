"""Run comparison: deltas, flipped cases, and runs of different test sets compared on shared cases only."""

from __future__ import annotations

import pytest

from ragpulse.judges.frame import ok
from ragpulse.model import Backend, Trace, TraceOutcome, TraceResult
from ragpulse.runs import CaseResult
from ragpulse.runs.compare import compare_reports
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import build_report


def _case(cid: str, score: float) -> CaseResult:
    j = ok(judge="keyword", version="v1", backend=Backend.HEURISTIC, score=score, threshold=0.5, reason="r")
    tr = TraceResult(trace=Trace(trace_id=f"t{cid}"), outcome=TraceOutcome.EVALUATED, judgements=(j,))
    return CaseResult(case_id=cid, result=tr, judges=("keyword",))


def _run(run_id: str, test_set: str, **scores: float) -> RunReport:
    cases = [_case(cid, s) for cid, s in scores.items()]
    return build_report(run_id=run_id, test_set=test_set, cases=cases, judges=["keyword"], wall_seconds=0)


def test_same_cases_use_the_reports_numbers() -> None:
    a = _run("a", "kb", c1=0.9, c2=0.8, c3=0.1)
    b = _run("b", "kb", c1=0.2, c2=0.8, c3=0.7)
    cmp = compare_reports(a, b)
    assert cmp.warning is None
    assert cmp.shared_cases == 3
    assert cmp.metrics["pass_rate"].delta == pytest.approx(0.0)
    assert cmp.metrics["keyword"].a == pytest.approx(0.6)
    assert cmp.metrics["keyword"].b == pytest.approx(0.566667)
    assert [f.case_id for f in cmp.pass_to_fail] == ["c1"]
    assert [f.case_id for f in cmp.fail_to_pass] == ["c3"]


def test_different_test_sets_compare_shared_cases_with_a_warning() -> None:
    a = _run("a", "kb_v1", c1=0.9, c2=0.2, old=0.0)
    b = _run("b", "kb_v2", c1=0.9, c2=0.9, new=1.0)
    cmp = compare_reports(a, b)
    assert cmp.warning is not None
    assert "different test sets (kb_v1 and kb_v2)" in cmp.warning
    assert "2 shared case(s) only (1 only in a, 1 only in b)" in cmp.warning
    # over c1, c2 only: a passes 1 of 2 (mean 0.55), b passes 2 of 2 (mean 0.9)
    assert (cmp.metrics["pass_rate"].a, cmp.metrics["pass_rate"].b) == (0.5, 1.0)
    assert cmp.metrics["keyword"].a == pytest.approx(0.55)
    assert cmp.metrics["keyword"].b == pytest.approx(0.9)
    assert [f.case_id for f in cmp.fail_to_pass] == ["c2"]
