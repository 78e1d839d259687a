"""Run reports for the JUnit tests (tests/runs/test_junit_stream.py) and their golden files: every kind of
test case (pass, failure, error, skipped, not evaluable), and ids, reasons and a test set name with characters
XML escapes (``&<>"``, a newline, non-ASCII). Only long-standing APIs, so the golden files can be written by an
older checkout: ``PYTHONPATH=<old>/src:tests python tests/runs/junit_reports.py DIR``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragpulse.judges.frame import error, ok, skipped
from ragpulse.model import Backend, Judgement, Trace, TraceOutcome, TraceResult
from ragpulse.runs import CaseResult
from ragpulse.runs.gate import ThresholdOutcome, evaluate_gate, gate_thresholds
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import build_report

JUDGES = ("faithfulness", "context_precision")


def _j(judge: str, score: float | None, *, status: str = "ok", reason: str | None = None) -> Judgement:
    common: dict[str, Any] = {"judge": judge, "version": "v1", "backend": Backend.HEURISTIC, "threshold": 0.5}
    if status == "error":
        return error(reason=reason or "judge_unavailable: HTTP 500", **common)
    if status == "skipped":
        return skipped(reason=reason or "abstained", **common)
    assert score is not None
    return ok(score=score, reason=reason or f"{judge} says {score}", **common)


def _case(
    run: str, case_id: str, *judgements: Judgement, outcome: TraceOutcome = TraceOutcome.EVALUATED
) -> CaseResult:
    trace = Trace(
        trace_id=f"t-{case_id.encode().hex()}", question="q", answer="a", run_id=run, test_case_id=case_id
    )
    return CaseResult(
        case_id=case_id,
        result=TraceResult(trace=trace, outcome=outcome, judgements=tuple(judgements)),
        judges=JUDGES,
    )


def plain_cases() -> list[CaseResult]:
    """The gate tests' run: 2 passing cases, 2 failures, an error, an abstention (``skipped``/``abstained``: left
    out of the pass rate, 2 / 5 = 0.4, since issue 30 item 2)."""
    run = "run-j"
    return [
        _case(run, "c1", _j("faithfulness", 1.0), _j("context_precision", 1.0)),
        _case(run, "c2", _j("faithfulness", 0.9), _j("context_precision", 0.8)),
        _case(run, "c3", _j("faithfulness", 0.2), _j("context_precision", 0.9)),
        _case(run, "c4", _j("faithfulness", 0.8), _j("context_precision", 0.25)),
        _case(
            run, "c5", _j("faithfulness", None, status="error"), _j("context_precision", None, status="error")
        ),
        _case(
            run,
            "c6",
            _j("faithfulness", None, status="skipped"),
            _j("context_precision", None, status="skipped"),
        ),
    ]


def plain() -> RunReport:
    return build_report(
        run_id="run-j", test_set="kestrel_kb", cases=plain_cases(), judges=JUDGES, wall_seconds=1.5
    )


def tricky_cases() -> list[CaseResult]:
    """Escaped characters everywhere, a case that was not evaluable (no judgement, no body) and a case whose
    error judgement sits next to a passing one."""
    run = "run-&"
    return [
        _case(run, 'a&b <c> "d"', _j("faithfulness", 0.1, reason="claim <1> & 'two'\nsecond line")),
        _case(run, "ünï-κ", _j("faithfulness", 0.95), _j("context_precision", 0.7)),
        _case(run, "no answer", outcome=TraceOutcome.NOT_EVALUABLE),
        _case(
            run,
            "half",
            _j("faithfulness", 0.9),
            _j("context_precision", None, status="error", reason="HTTP 5xx\t!"),
        ),
        _case(run, "quiet", _j("faithfulness", None, status="skipped", reason="no_answer")),
    ]


def tricky() -> RunReport:
    return build_report(
        run_id="run-&", test_set='kb&"1"', cases=tricky_cases(), judges=JUDGES, wall_seconds=12.3456
    )


def thresholds(report: RunReport) -> Sequence[ThresholdOutcome]:
    """One met and two breached thresholds (coverage among them)."""
    return evaluate_gate(report, gate_thresholds({}, ["pass_rate=0.9", "faithfulness=0.3"], 0.95)).thresholds


REPORTS = {"plain": plain, "tricky": tricky}
#: The case results behind each report.
CASES = {"plain": plain_cases, "tricky": tricky_cases}


def main(out: Path) -> None:
    """Write ``<name>.xml`` for each report with the checkout's ``write_junit`` (the pre-streaming signature)."""
    from ragpulse.runs import junit

    write: Any = junit.write_junit  # write_junit(path, report, thresholds) before it streamed
    out.mkdir(parents=True, exist_ok=True)
    for name, make in REPORTS.items():
        report = make()
        write(out / f"{name}.xml", report, thresholds(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
