"""Sessions in the portal (issue 31 item 3, on issue 28's session ids, turns and app tokens): a conversation's
turns in order with their verdicts, tokens and cost; the trace page's session link, earlier turns and the app's
tokens and cost (no price for a model missing from the table, never 0); the session filter of Live traffic kept in
its URL. A real browser, English and Chinese."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser

from portal_browser import PortalPage
from portal_testutil import Portal, seed, started_portal
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementStatus,
    ModelUsage,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
    Turn,
)

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser

PRICES = {"gpt-app": {"prompt": 2.0, "completion": 8.0}}  # per 1,000,000 tokens
SESSION = "chat/42"  # ids are data: a '/' too


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    with started_portal(RAGPULSE_EXPORT_MODEL_PRICES=json.dumps(PRICES)) as p:
        yield p


def _turn(
    i: int, question: str, score: float, *, model: str = "gpt-app", turns: tuple[Turn, ...] = ()
) -> TraceResult:
    start = datetime.now(UTC) - timedelta(minutes=10 - i)
    return TraceResult(
        trace=Trace(
            trace_id=f"{i:032x}",
            app="chat-app",
            question=question,
            answer=f"Answer {i}.",
            session_id=SESSION,
            turns=turns,
            start_time=start,
            model=model,
            prompt_tokens=1000 * i,
            completion_tokens=100 * i,
            total_prompt_tokens=1000 * i,
            total_completion_tokens=100 * i,
            usage=(ModelUsage(model=model, prompt_tokens=1000 * i, completion_tokens=100 * i, calls=1),),
            source=Source.OTLP,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=(
            Judgement(
                judge="relevancy",
                version="r1",
                backend=Backend.HEURISTIC,
                score=score,
                passed=score >= 0.5,
                threshold=0.5,
                status=JudgementStatus.OK,
            ),
        ),
        received_at=start + timedelta(seconds=30),  # received after the span started: the page shows which
    )


@pytest.fixture(scope="module")
def conversation(portal: Portal) -> list[str]:
    first = _turn(1, "How many leave days do I get?", 0.9)
    second = _turn(2, "And what about part-timers?", 0.3,
                   turns=(Turn(question="How many leave days do I get?", answer="Answer 1."),))  # fmt: skip
    third = _turn(3, "Who approves it?", 0.8, model="unpriced-model")
    seed(portal.db_url, [third, first, second])  # arrival order is not turn order
    return [r.trace.trace_id for r in (first, second, third)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_session_view_lists_turns_in_order_with_verdicts_tokens_and_cost(
    browser: Browser, portal: Portal, conversation: list[str], lang: str
) -> None:
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        p = page.page
        page.goto(f"/traces/{conversation[1]}")
        # the trace page: the session link, the earlier turn, the app's tokens and cost
        assert p.inner_text("#app-tokens") == "2,000 / 200"
        assert p.inner_text("#app-cost") == "0.005600"  # 2,000 × 2 / 1e6 + 200 × 8 / 1e6
        assert "How many leave days do I get?" in p.inner_text("#turns")
        assert p.inner_text("#app-usage tr[data-model=gpt-app]").split() == ["gpt-app", "1", "2,000", "200"]
        p.click("#session-link")
        p.wait_for_url("**/sessions/chat%2F42")
        rows = p.query_selector_all("#session-turns tbody tr")
        assert [r.get_attribute("data-trace") for r in rows] == conversation
        assert [p.inner_text(f"#session-turns tbody tr:nth-child({i}) .pill") for i in (1, 2, 3)] == [
            "relevancy 0.90",
            "relevancy 0.30",
            "relevancy 0.80",
        ]
        assert p.get_attribute("#session-turns tbody tr:nth-child(2) .pill", "class") == "pill fail"
        # the time column is the time received, labelled so, as on the trace page (not the span's start)
        assert p.inner_text("#session-turns thead th:nth-child(2)") == (
            "Received" if lang == "en" else "接收时间"
        )
        with portal.client() as api:
            received = [api.get(f"/api/v1/traces/{tid}").json()["received_at"] for tid in conversation]
        shown = [
            el.get_attribute("datetime") for el in p.query_selector_all("#session-turns td.received time")
        ]
        assert shown == [datetime.fromisoformat(r).strftime("%Y-%m-%dT%H:%M:%SZ") for r in received]
        third_cost = p.inner_text("#session-turns tbody tr:nth-child(3) .cost")
        assert third_cost == (
            "no price (a model is not in export.model_prices)"
            if lang == "en"
            else "无价格（有模型不在 export.model_prices 中）"
        )
        totals = p.inner_text("#session-totals")
        if lang == "en":
            assert totals == (
                "App tokens over the session: 6,000 prompt, 600 completion; cost no price (a model is not in "
                "export.model_prices)."
            )
        else:
            assert totals.startswith("本会话的应用令牌数：提示 6,000，补全 600；")
        # back to Live traffic filtered by the session, the filter kept in the form and the address
        p.click("main p a")
        p.wait_for_url("**/traffic?session=chat%2F42")
        assert p.input_value("#traffic-filters input[name=session]") == SESSION
        listed = [r.get_attribute("data-trace") for r in p.query_selector_all("#traces tbody tr[data-trace]")]
        assert listed == list(reversed(conversation))  # newest first
    finally:
        page.close()


def test_unknown_session_is_a_404_page(portal: Portal) -> None:
    with portal.client() as c:
        r = c.get("/sessions/no-such-session")
    assert r.status_code == 404
    assert "no-such-session" in r.text
