"""Builders of traces/judgements/results for the store tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ragpulse.config import Settings
from ragpulse.model import (
    Backend,
    Document,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)

QUESTION = "How do I file a travel reimbursement?"
ANSWER = "Submit the form in the finance portal within 30 days."
CONTEXT_1 = "Travel reimbursements are filed in the finance portal."
CONTEXT_2 = "Claims older than 30 days are rejected."


def trace(trace_id: str = "a" * 32, **kw: Any) -> Trace:
    base: dict[str, Any] = dict(
        trace_id=trace_id,
        span_id="b" * 16,
        app="helpdesk",
        scenario="finance",
        question=QUESTION,
        documents=[
            Document(id="d1", content=CONTEXT_1, score=0.91, rank=0, metadata={"src": "wiki"}),
            Document(id="d2", content=CONTEXT_2, score=0.75, rank=1),
        ],
        answer=ANSWER,
        model="gpt-x",
        latency_s=1.25,
        start_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        end_time=datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC),
        attributes={"user.tier": "gold", "n": 3},
        source=Source.KAFKA,
    )
    base.update(kw)
    return Trace(**base)


def ok(judge: str = "faithfulness", score: float = 0.8, version: str = "v1", **kw: Any) -> Judgement:
    base: dict[str, Any] = dict(
        judge=judge,
        version=version,
        backend=Backend.LLM,
        model="judge-m",
        score=score,
        passed=score >= 0.7,
        threshold=0.7,
        status=JudgementStatus.OK,
        reason=f"{judge} looks fine",
        flags=JudgementFlags(decided_by="whole_context"),
        raw_output='{"score": 4}',
        latency_s=0.2,
        prompt_tokens=120,
        completion_tokens=8,
    )
    base.update(kw)
    return Judgement(**base)


def not_ok(judge: str, status: JudgementStatus, reason: str, version: str = "v1") -> Judgement:
    return Judgement(
        judge=judge, version=version, backend=Backend.HEURISTIC, status=status, reason=reason, threshold=0.5
    )


def result(t: Trace | None = None, *judgements: Judgement, **kw: Any) -> TraceResult:
    return TraceResult(
        trace=t or trace(), outcome=kw.pop("outcome", TraceOutcome.EVALUATED), judgements=judgements, **kw
    )


def store_settings(url: str, **kw: Any) -> Settings:
    """Settings for a store on ``url`` (small pool)."""
    return Settings(store_database_url=url, store_pool_max=4, **kw)
