"""What a replay keeps per case for its report (``runs.runner._for_report``): no raw replies and no prompts
(issue 31 made judgements carry their prompt, up to 32 KB; a 100,000-case replay must not hold them)."""

from __future__ import annotations

from ragpulse.model import Backend, Judgement, JudgementStatus, Trace, TraceOutcome, TraceResult
from ragpulse.runs.runner import _for_report


def test_report_copy_drops_prompt_and_raw_output_and_keeps_the_verdict() -> None:
    j = Judgement(judge="faithfulness", version="v", backend=Backend.LLM, score=0.4, passed=False,
                  threshold=0.7, status=JudgementStatus.OK, raw_output="NO", prompt="[user]\n" + "x" * 30_000)  # fmt: skip
    r = TraceResult(
        trace=Trace(trace_id="t", question="q?", answer="a.", run_id="r", test_case_id="c"),
        outcome=TraceOutcome.EVALUATED,
        judgements=(j,),
    )
    (kept,) = _for_report(r).judgements
    assert (kept.prompt, kept.raw_output) == (None, None)
    assert (kept.score, kept.passed, kept.threshold) == (0.4, False, 0.7)
