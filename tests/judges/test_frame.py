"""The judge frame: shared precheck rules, the error-code table, deprecated re-exports."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.frame import Decision, JudgeBase, precheck
from ragpulse.model import Backend, JudgementStatus, Trace

KW: dict[str, Any] = {"judge": "j", "version": "v1", "backend": Backend.HEURISTIC, "threshold": 0.5}


def test_precheck_rules_in_order() -> None:
    j = precheck(Trace(trace_id="t", question="q", answer=" "), **KW)
    assert j is not None
    assert j.reason == "no_answer"
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


class _Boom(JudgeBase):
    """A judge whose decision raises what it is told to (the frame's error-code table and contract)."""

    name = "boom"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        super().__init__(Settings())

    def version_settings(self) -> dict[str, Any]:
        return {"rule": "boom"}

    def decide_now(self, trace: Trace) -> Decision:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "status", "reason"),
    [
        (JudgeError("over_budget", "daily token budget of 50 spent"), "skipped", "over_budget: daily token"),
        (JudgeError("unsupported_language", "Thai"), "skipped", "unsupported_language: Thai"),
        (JudgeError("unparseable", "no verdict"), "error", "unparseable: no verdict"),
        (KeyError("x"), "error", "internal_error: KeyError"),
    ],
)
async def test_one_table_maps_error_codes_to_statuses(exc: Exception, status: str, reason: str) -> None:
    j = await _Boom(exc).judge(Trace(trace_id="t", question="q", answer="a"))
    assert (j.status.value, j.reason[: len(reason)]) == (status, reason)
    assert (j.judge, j.backend, j.threshold) == ("boom", Backend.HEURISTIC, 0.5)
