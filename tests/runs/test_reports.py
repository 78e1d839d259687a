"""Report numbers hand-computed on a small set of results."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.judges.frame import error, ok, skipped
from ragpulse.model import Backend, Judgement, JudgementFlags, RunStatus, Trace, TraceOutcome, TraceResult
from ragpulse.runs import CaseResult
from ragpulse.runs.report_model import ClaimCauses, RunReport
from ragpulse.runs.reports import REPORT_KEYS, build_report


def _j(judge: str, score: float | None, *, status: str = "ok", tokens: int = 0) -> Judgement:
    common: dict[str, Any] = {"judge": judge, "version": "v1", "backend": Backend.LLM}
    if status == "error":
        return error(reason="judge_unavailable: HTTP 503", **common)
    if status == "skipped":
        return skipped(reason="no_reference", **common)
    assert score is not None
    return ok(
        score=score, threshold=0.5, reason="r", prompt_tokens=tokens, completion_tokens=tokens // 5, **common
    )


def _case(
    cid: str, *js: Judgement, outcome: TraceOutcome = TraceOutcome.EVALUATED, why: str | None = None
) -> CaseResult:
    tr = TraceResult(trace=Trace(trace_id=f"t{cid}"), outcome=outcome, outcome_reason=why, judgements=js)
    return CaseResult(case_id=cid, result=tr, judges=("relevancy", "faithfulness"))


def test_report_numbers() -> None:
    cases = [
        _case("A", _j("relevancy", 0.8, tokens=10), _j("faithfulness", 0.6, tokens=10)),  # passes
        _case("B", _j("relevancy", 0.9), _j("faithfulness", 0.2)),  # fails on faithfulness
        _case("C", _j("relevancy", None, status="error"), _j("faithfulness", None, status="skipped")),
        _case("D", outcome=TraceOutcome.NOT_EVALUABLE, why="no_answer"),
        _case("E", _j("relevancy", 0.4, tokens=20), _j("faithfulness", 1.0, tokens=20)),
    ]
    report = build_report(
        run_id="run1", test_set="ts", cases=cases, judges=["relevancy", "faithfulness"], wall_seconds=1.23456
    )
    r = report.to_json()  # the --json / stored form keeps the report's keys
    assert RunReport.from_json(r) == report
    assert report.counts.pass_ == 4
    assert report.judges["relevancy"].scored == 3
    # C (an error and a skip) and D (not evaluable) are not judged, not failing
    assert [c.case_id for c in report.failing_cases] == ["B", "E"]
    assert [c.case_id for c in report.not_judged_cases] == ["C", "D"]
    assert (report.cases_passed, report.cases_failing, report.cases_not_judged) == (1, 2, 2)
    assert [row["verdict"] for row in r["cases"]] == ["pass", "fail", "not_judged", "not_judged", "fail"]
    assert set(REPORT_KEYS) <= set(r)
    assert r["run_id"] == "run1"
    assert r["test_set"] == "ts"
    assert r["cases_total"] == 5
    assert r["pass_rate"] == pytest.approx(1 / 5)  # only A
    assert r["coverage"] == pytest.approx(3 / 5)  # A, B, E scored
    assert r["averages"] == {
        "relevancy": pytest.approx((0.8 + 0.9 + 0.4) / 3),
        "faithfulness": pytest.approx((0.6 + 0.2 + 1.0) / 3),
    }
    # pass: A.r A.f B.r E.f; fail: B.f E.r; error: C.r; skipped: C.f + D×2 (not evaluable, two judges)
    assert r["counts"] == {"pass": 4, "fail": 2, "error": 1, "abstained": 0, "skipped": 3}
    assert r["tokens"] == {"prompt": 60, "completion": 12}
    assert r["wall_seconds"] == 1.235
    assert r["status"] == RunStatus.COMPLETED_WITH_ERRORS.value
    rel = r["judges"]["relevancy"]
    assert (rel["scored"], rel["pass"], rel["fail"], rel["error"], rel["skipped"]) == (3, 2, 1, 1, 1)
    assert rel["pass_rate"] == pytest.approx(2 / 3)
    assert rel["coverage"] == pytest.approx(3 / 5)
    rows = {row["case_id"]: row for row in r["cases"]}
    assert rows["A"]["passed"] is True
    assert rows["A"]["reason"] is None
    assert rows["B"]["passed"] is False
    assert rows["B"]["reason"] == "faithfulness: r"
    assert rows["C"]["scored"] == 0
    assert rows["C"]["reason"] == "relevancy: judge_unavailable: HTTP 503; faithfulness: no_reference"
    assert rows["D"]["reason"] == "no_answer"
    assert rows["D"]["outcome"] == "not_evaluable"
    assert rows["E"]["judgements"]["relevancy"] == {
        "score": 0.4,
        "passed": False,
        "status": "ok",
        "reason": "r",
    }


def test_empty_and_clean_runs() -> None:
    r = build_report(run_id="x", test_set="t", cases=[], judges=["keyword"], wall_seconds=0).to_json()
    assert (r["pass_rate"], r["coverage"], r["averages"], r["status"]) == (
        0.0,
        0.0,
        {"keyword": None},
        "completed",
    )
    r2 = build_report(
        run_id="x", test_set="t", cases=[_case("A", _j("keyword", 1.0))], judges=["keyword"], wall_seconds=0
    ).to_json()
    assert (r2["pass_rate"], r2["coverage"], r2["status"]) == (1.0, 1.0, "completed")


def test_reports_stored_by_earlier_versions_still_load() -> None:
    # A report as the first releases stored it: no status, judges, judges_added or diagnosis keys.
    old = {
        "run_id": "old1",
        "test_set": "kb",
        "cases_total": 2,
        "pass_rate": 0.5,
        "coverage": 1.0,
        "averages": {"keyword": 0.75},
        "counts": {"pass": 1, "fail": 1, "error": 0, "skipped": 0},
        "tokens": {"prompt": 0, "completion": 0},
        "wall_seconds": 0.4,
        "cases": [
            {
                "case_id": "a",
                "trace_id": "t1",
                "outcome": "evaluated",
                "passed": True,
                "scored": 1,
                "reason": None,
                "judgements": {"keyword": {"score": 1.0, "passed": True, "status": "ok", "reason": None}},
            },
            {
                "case_id": "b",
                "trace_id": "t2",
                "outcome": "evaluated",
                "passed": False,
                "scored": 1,
                "reason": "keyword: missing",
                "judgements": {
                    "keyword": {"score": 0.5, "passed": False, "status": "ok", "reason": "missing"}
                },
            },
        ],
        "some_future_key": 1,
    }
    r = RunReport.from_json(old)
    assert r.status is RunStatus.COMPLETED
    assert r.counts.fail == 1
    assert r.diagnosis is None
    assert [c.case_id for c in r.failing_cases] == ["b"]
    assert r.cases[1].judgements["keyword"].outcome == "fail"


def test_all_errors_means_no_judge_answered() -> None:
    errs = [
        _case("A", _j("relevancy", None, status="error")),
        _case("B", _j("relevancy", None, status="error")),
    ]
    r = build_report(run_id="x", test_set="t", cases=errs, judges=["relevancy"], wall_seconds=0)
    assert r.all_errors is True
    mixed = [*errs, _case("C", _j("relevancy", 0.9))]
    assert (
        build_report(run_id="x", test_set="t", cases=mixed, judges=["relevancy"], wall_seconds=0).all_errors
        is False
    )


def test_a_run_with_a_case_that_was_not_sampled_never_ends_completed() -> None:
    """Issue 11 item 14: replay cases are always judged; one that was not (not_sampled) marks the run."""
    from ragpulse.runs.reports import run_status

    judged = _case("A", _j("relevancy", 0.8), _j("faithfulness", 0.9))
    assert run_status([judged]) is RunStatus.COMPLETED
    unjudged = _case("B", outcome=TraceOutcome.NOT_SAMPLED)
    assert run_status([judged, unjudged]) is RunStatus.COMPLETED_WITH_ERRORS


def test_claim_cause_counts_per_claim_checking_judge_and_in_total() -> None:
    """``retrieval_misses`` / ``generation_errors`` are summed from each judgement's ``flags.attribution``;
    judges without per-claim details have ``None``; old judgements without attribution add nothing."""

    def faith(score: float, misses: int | None, errors: int | None) -> Judgement:
        flags: dict[str, Any] = {
            "claims": [{"start": 0, "end": 1, "verdict": "unsupported", "evidence": None}]
        }
        if misses is not None:
            flags["attribution"] = {"retrieval_misses": misses, "generation_errors": errors, "undecided": 0}
        return ok(
            judge="faithfulness",
            version="v1",
            backend=Backend.LLM,
            score=score,
            threshold=0.8,
            reason="r",
            flags=JudgementFlags.model_validate(flags),
        )

    cases = [
        _case("A", _j("relevancy", 0.9), faith(0.2, 2, 1)),
        _case("B", _j("relevancy", 0.9), faith(0.5, 0, 3)),
        _case("C", _j("relevancy", 0.9), faith(0.5, None, None)),  # judged before claim causes existed
        _case("D", _j("relevancy", 0.9), faith(1.0, None, None)),  # passed: nothing attributed
    ]
    r = build_report(
        run_id="r", test_set="ts", cases=cases, judges=["relevancy", "faithfulness"], wall_seconds=1
    )
    assert (r.retrieval_misses, r.generation_errors) == (2, 4)
    f = r.judges["faithfulness"]
    assert (f.retrieval_misses, f.generation_errors) == (2, 4)
    assert (r.judges["relevancy"].retrieval_misses, r.judges["relevancy"].generation_errors) == (None, None)
    doc = r.to_json()
    assert (doc["retrieval_misses"], doc["generation_errors"]) == (2, 4)
    assert RunReport.from_json(doc) == r
    # each case row carries its own causes (the diagnosis reads them); rows with none leave the key out
    rows = {c.case_id: c for c in r.cases}
    assert rows["A"].claim_causes == ClaimCauses(retrieval_misses=2, generation_errors=1)
    assert rows["B"].claim_causes == ClaimCauses(retrieval_misses=0, generation_errors=3)
    assert (rows["C"].claim_causes, rows["D"].claim_causes) == (None, None)
    assert rows["A"].model_dump(mode="json")["claim_causes"] == {
        "retrieval_misses": 2,
        "generation_errors": 1,
    }
    assert "claim_causes" not in rows["C"].model_dump(mode="json")
    assert r.diagnosis is not None
    diag = {c.case_id: c.weak_side for c in r.diagnosis.cases}
    assert (diag["A"], diag["B"]) == ("retrieval", "generation")  # no retrieval metric: the claims decide


def test_an_abstained_case_is_not_judged_in_text_json_and_junit() -> None:
    """The demo's case ``reimb-zh-03`` (examples/kestrel_kb.jsonl, offline judges): the answer abstained
    (relevancy, faithfulness, keyword skipped ``abstained``), context_recall skipped ``no_reference`` and
    context_precision scored 0.0. It is left out of the pass rate, so it is not a failing case: the report, the
    CLI text, the JSON rows and JUnit list it as not judged, with the abstention first in its reason; a case
    with only a judge error is not judged too; a plain failure stays failing."""
    import io
    import xml.etree.ElementTree as ET

    from rich.console import Console

    from ragpulse.cli._render import print_report
    from ragpulse.runs.junit import junit_xml

    common: dict[str, Any] = {"version": "v1", "backend": Backend.HEURISTIC}
    abstained = _case(
        "reimb-zh-03",
        *(
            skipped(judge=n, reason="abstained: the answer declines", **common)
            for n in ("relevancy", "keyword")
        ),
        ok(judge="context_precision", score=0.0, threshold=0.5, reason="0 of 1 chunks useful", **common),
        skipped(judge="context_recall", reason="no_reference: no chunk is labelled relevant", **common),
    )
    report = build_report(
        run_id="demo",
        test_set="kestrel_kb",
        cases=[
            _case("fine", _j("relevancy", 0.9)),
            _case("bad", _j("relevancy", 0.1)),
            abstained,
            _case("down", _j("relevancy", None, status="error")),
        ],
        judges=["relevancy", "keyword", "context_precision", "context_recall"],
        wall_seconds=1.0,
    )
    assert (report.cases_passed, report.cases_failing, report.cases_not_judged) == (1, 1, 2)
    assert report.pass_rate == pytest.approx(1 / 3)  # the abstained case is out of the pass rate
    assert [c.case_id for c in report.failing_cases] == ["bad"]
    assert [c.case_id for c in report.not_judged_cases] == ["reimb-zh-03", "down"]
    row = report.not_judged_cases[0]
    assert row.reason == (
        "relevancy: abstained: the answer declines; keyword: abstained: the answer declines; "
        "context_recall: no_reference: no chunk is labelled relevant; context_precision: 0 of 1 chunks useful"
    )
    doc = report.to_json()
    assert (doc["cases_not_judged"], [c["verdict"] for c in doc["cases"]]) == (
        2,
        ["pass", "fail", "not_judged", "not_judged"],
    )
    out = io.StringIO()
    print_report(report, console=Console(file=out, width=200))
    text = out.getvalue()
    failing_table = text.split("failing cases (1 of 4)")[1].split("not judged (2 of 4; not failures)")[0]
    assert "bad" in failing_table
    assert "reimb-zh-03" not in failing_table
    assert "reimb-zh-03" in text.split("not judged (2 of 4; not failures)")[1]
    suite = junit_xml(report, [])[0]
    results = {tc.get("name"): [child.tag for child in tc] for tc in suite.iter("testcase")}
    assert results == {"fine": [], "bad": ["failure"], "reimb-zh-03": ["skipped"], "down": ["error"]}
    assert [suite.get(k) for k in ("failures", "errors", "skipped")] == ["1", "1", "1"]
    assert ET.tostring(suite).count(b"<failure") == 1
