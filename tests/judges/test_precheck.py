from ragpulse.judges.base import precheck
from ragpulse.model import Backend, JudgementStatus, Trace

KW = {"judge": "j", "version": "v1", "backend": Backend.HEURISTIC, "threshold": 0.5}


def test_precheck_rules_in_order() -> None:
    assert precheck(Trace(trace_id="t", question="q", answer=" "), **KW).reason == "no_answer"  # type: ignore[union-attr]
    j = precheck(Trace(trace_id="t", question="q", answer="x"), needs_reference=True, **KW)
    assert j is not None and j.status is JudgementStatus.SKIPPED and j.reason == "no_reference"
    j = precheck(Trace(trace_id="t", question="q", answer="根据现有资料无法回答。", context="c"), **KW)
    assert j is not None and j.reason == "abstained" and j.score is None
    j = precheck(Trace(trace_id="t", question="q", answer="I don't know."), needs_context=True, **KW)
    assert j is not None and j.reason == "abstained"
    j = precheck(Trace(trace_id="t", question="q", answer="Two days."), needs_context=True, **KW)
    assert j is not None and j.status is JudgementStatus.OK and j.score == 0.0 and j.passed is False
    assert j.reason_code == "no_context" and j.flags.decided_by == "no_context"
    assert (
        precheck(Trace(trace_id="t", question="q", answer="Two days.", context="c"), needs_context=True, **KW)
        is None
    )
