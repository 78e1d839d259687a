"""A portal with something on every page: what the browser suite (``test_portal_browser_suite.py``) visits and
the screenshot script (``screenshots.py``) photographs.

:func:`seed_tour` fills a started portal (through its API, and the store for traces, as the engine would):
a test set of three cases with recorded answers, two finished runs of it, and live traces — a failing OTLP
trace whose unsupported sentence is highlighted (judged by an LLM judge), a passing Kafka trace and one whose
judge was skipped — plus a replay and an ``/evaluate`` trace, which live traffic leaves out by default.
:data:`SCREENSHOTS` names the pictures of ``docs/img`` and where each is taken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from portal_testutil import Portal, seed
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

REPO = Path(__file__).resolve().parents[2]
DOCS_IMG = REPO / "docs" / "img"

TEST_SET = "hr-faq"
FAILING_TRACE = f"{107:032x}"
ANSWER = "Refunds are paid within five days. Shipping is always free."


@dataclass(frozen=True)
class Tour:
    """What :func:`seed_tour` made: the run ids (older first) and every page to visit (name → path)."""

    runs: tuple[str, str]
    pages: dict[str, str]


@dataclass(frozen=True)
class Shot:
    """One picture of ``docs/img``: ``file``, the page ``path`` (a :class:`Tour` page name), language and size."""

    file: str
    page: str
    lang: str = "en"
    width: int = 1280
    height: int = 972


#: The pictures of ``docs/img`` that :mod:`screenshots` makes (and only those live there).
SCREENSHOTS = (
    Shot("portal-trace.png", "trace"),
    Shot("portal-traffic.png", "traffic", height=1100),
    Shot("portal-run.png", "run", height=1100),
    Shot("portal-run-zh-phone.png", "run", lang="zh", width=390, height=1400),
)


def _llm(judge: str, score: float, passed: bool, threshold: float, reason: str, **flags: object) -> Judgement:
    return Judgement(
        judge=judge,
        version=judge[0] + "1",
        backend=Backend.LLM,
        model="qwen-plus",
        score=score,
        passed=passed,
        threshold=threshold,
        status=JudgementStatus.OK,
        reason=reason,
        flags=JudgementFlags.model_validate(flags),
        prompt_tokens=400 if judge == "faithfulness" else 180,
        completion_tokens=70 if judge == "faithfulness" else 40,
        latency_s=0.9 if judge == "faithfulness" else 0.5,
    )


def _traces(now: datetime) -> list[TraceResult]:
    claims = [
        {"text": "Refunds are paid within five days.", "start": 0, "end": 34, "verdict": "supported"},
        {"text": "Shipping is always free.", "start": 35, "end": 59, "verdict": "unsupported"},
    ]
    doc = Document(
        id="policy-7", content="Refunds are paid within five days of receiving the item.", rank=0, score=0.82
    )
    failing = TraceResult(
        trace=Trace(
            trace_id=FAILING_TRACE,
            app="hr-helpdesk",
            scenario="refunds",
            question="Is shipping free?",
            documents=(doc,),
            answer=ANSWER,
            model="gpt-4o-mini",
            source=Source.OTLP,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=(
            _llm("faithfulness", 0.5, False, 0.8, "1/2 claims supported", decided_by="claims", claims=claims),
            _llm("relevancy", 0.8, True, 0.5, "answers the question"),
        ),
        received_at=now - timedelta(minutes=12),
    )
    out = [failing]
    for n, (source, minutes) in enumerate(
        ((Source.KAFKA, 55), (Source.KAFKA, 140), (Source.OTLP, 300), (Source.REPLAY, 30), (Source.API, 20)),
        start=108,
    ):
        skipped = n == 110
        out.append(
            TraceResult(
                trace=Trace(
                    trace_id=f"{n:032x}",
                    app="hr-helpdesk",
                    scenario="leave",
                    question=f"How many days of annual leave do I get? ({source.value})",
                    documents=(Document(id="leave-2", content="Staff get 25 days of annual leave.", rank=0),),
                    answer="You get 25 days of annual leave.",
                    source=source,
                ),
                outcome=TraceOutcome.EVALUATED,
                judgements=(
                    Judgement(
                        judge="faithfulness",
                        version="f1",
                        backend=Backend.LLM,
                        model="qwen-plus",
                        status=JudgementStatus.SKIPPED if skipped else JudgementStatus.OK,
                        score=None if skipped else 1.0,
                        passed=None if skipped else True,
                        threshold=0.8,
                        reason="over_budget" if skipped else "1/1 claims supported",
                    ),
                    _llm("relevancy", 0.9, True, 0.5, "answers the question"),
                ),
                received_at=now - timedelta(minutes=minutes),
            )
        )
    return out


def _wait_done(portal: Portal, run_id: str) -> None:
    with portal.client() as api:
        for _ in range(600):
            if api.get(f"/api/v1/runs/{run_id}").json()["status"] not in ("queued", "running"):
                return
            time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish")


def seed_tour(portal: Portal) -> Tour:
    """Fill ``portal`` (module docstring) and return its :class:`Tour`."""
    cases = [
        {
            "id": "refund-days",
            "question": "How long do refunds take?",
            "expected_answer": "Five days.",
            "answer": "Refunds are paid within five days.",
            "contexts": ["Refunds are paid within five days."],
        },
        {
            "id": "leave",
            "question": "How many days of annual leave?",
            "keywords": ["25", "days"],
            "answer": "You get 25 days.",
            "contexts": ["Staff get 25 days of annual leave."],
        },
        {
            "id": "shipping",
            "question": "Is shipping free?",
            "expected_answer": "Only above 50 euros.",
            "answer": "Shipping is always free.",
            "contexts": ["Shipping is free above 50 euros."],
        },
    ]
    with portal.client() as api:
        r = api.post(
            "/api/v1/test-sets", json={"name": TEST_SET, "knowledge_base": "hr", "description": "HR FAQ"}
        )
        assert r.status_code == 201, r.text
        for case in cases:
            assert api.post(f"/api/v1/test-sets/{TEST_SET}/cases", json=case).status_code == 201
        runs = ("tour-a", "tour-b")
        for rid in runs:
            assert api.post("/api/v1/runs", json={"test_set": TEST_SET, "run_id": rid}).status_code == 202
            _wait_done(portal, rid)
    seed(portal.db_url, _traces(datetime.now(UTC)))
    seg = quote(TEST_SET, safe="")
    pages = {
        "login": "/login",
        "test_sets": "/test-sets",
        "cases": f"/test-sets/{seg}",
        "case_edit": f"/test-sets/{seg}/cases/refund-days",
        "run_new": "/runs/new",
        "history": "/runs",
        "run": f"/runs/{runs[1]}",
        "compare": f"/runs/compare?a={runs[0]}&b={runs[1]}",
        "traffic": "/traffic",
        "traffic_all": "/traffic?source=all&since=7d",
        "trace": f"/traces/{FAILING_TRACE}",
        "traffic_find": "/traffic?text=refunds&min_latency_s=0&source=all&since=7d",
        "review": "/review?since=7d",
        "api_docs": "/api/v1/docs",
        "not_found": "/no-such-page",
    }
    return Tour(runs=runs, pages=pages)
