from ragpulse.judges.frame import precheck
from ragpulse.model import Backend, JudgementStatus, Trace

KW = {"judge": "j", "version": "v1", "backend": Backend.HEURISTIC, "threshold": 0.5}


def test_precheck_rules_in_order() -> None:
    assert precheck(Trace(trace_id="t", question="q", answer=" "), **KW).reason == "no_answer"  # type: ignore[union-attr]
    j = precheck(Trace(trace_id="t", question="q", answer="x"), needs_reference=True, **KW)
    assert j is not None
    assert j.status is JudgementStatus.SKIPPED
    assert j.reason == "no_reference"
    j = precheck(Trace(trace_id="t", question="q", answer="根据现有资料无法回答。", context="c"), **KW)
    assert j is not None
    assert j.reason == "abstained"
    assert j.score is None
    j = precheck(Trace(trace_id="t", question="q", answer="I don't know."), needs_context=True, **KW)
    assert j is not None
    assert j.reason == "abstained"
    j = precheck(Trace(trace_id="t", question="q", answer="Two days."), needs_context=True, **KW)
    assert j is not None
    assert j.status is JudgementStatus.OK
    assert j.score == 0.0
    assert j.passed is False
    assert j.reason_code == "no_context"
    assert j.flags.decided_by == "no_context"
    assert (
        precheck(Trace(trace_id="t", question="q", answer="Two days.", context="c"), needs_context=True, **KW)
        is None
    )
