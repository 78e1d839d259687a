"""The trace explorer (issue 31): the trace view's span tree with its timeline, latency, the app's reasoning
and each judgement's exact prompt, raw reply and reasoning with a copy button; find (text in question or
answer, model and latency filters, every filter kept in the URL). API and a real browser, English and Chinese."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser

from portal_browser import PortalPage
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

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser

ROOT, RET, LLM = "a1" * 8, "b2" * 8, "c3" * 8
OUTLINE = [
    {"span_id": ROOT, "parent_span_id": None, "name": "rag.query", "kind": "server", "start_ms": 0.0,
     "duration_ms": 1250.0, "error": False},
    {"span_id": LLM, "parent_span_id": ROOT, "name": "ChatOpenAI", "kind": "LLM", "start_ms": 120.0,
     "duration_ms": 900.0, "error": True},
    {"span_id": RET, "parent_span_id": ROOT, "name": "retrieve", "kind": "RETRIEVER", "start_ms": 10.0,
     "duration_ms": 100.0, "error": False},
]  # fmt: skip
PROMPT = "[system]\nYou judge answers.\n\n[user]\nQuestion: How long do refunds take?\nAnswer: five days"
RAW = "<think>The policy says five days.</think>\nYES"


def _trace(
    tid: str,
    *,
    question: str = "How long do refunds take?",
    answer: str = "Refunds take five days.",
    model: str = "gpt-app",
    latency_s: float = 1.25,
    score: float = 0.9,
    received_at: datetime | None = None,
    app: str = "explorer-shop",
    spans: bool = True,
) -> TraceResult:
    attributes: dict[str, Any] = {"reasoning": "The user wants the refund delay; the policy says five days."}
    if spans:
        attributes["spans"] = OUTLINE
    return TraceResult(
        trace=Trace(
            trace_id=tid,
            app=app,
            question=question,
            documents=(Document(id="policy-7", content="Refunds are paid within five days.", rank=0),),
            answer=answer,
            model=model,
            latency_s=latency_s,
            attributes=attributes,
            source=Source.OTLP,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=(
            Judgement(
                judge="faithfulness",
                version="v-explorer",
                backend=Backend.LLM,
                model="judge-m",
                score=score,
                passed=score >= 0.8,
                threshold=0.8,
                status=JudgementStatus.OK,
                reason="supported",
                flags=JudgementFlags.model_validate({"reasoning": "The policy says five days."}),
                raw_output=RAW,
                prompt=PROMPT,
                prompt_tokens=120,
                completion_tokens=30,
            ),
        ),
        received_at=received_at or datetime.now(UTC),
    )


# -- item 1: the trace view ----------------------------------------------------------------------------------
def test_trace_api_returns_span_tree_reasoning_and_the_judge_prompt_and_reply(portal: Portal) -> None:
    tid = "e1" * 16
    seed(portal.db_url, [_trace(tid)])
    with portal.client() as c:
        body = c.get(f"/api/v1/traces/{tid}").json()
    assert [(s["name"], s["depth"]) for s in body["spans"]] == [
        ("rag.query", 0),
        ("retrieve", 1),
        ("ChatOpenAI", 1),
    ]
    llm = body["spans"][2]
    assert (llm["offset"], llm["width"], llm["error"]) == (120 / 1250, 900 / 1250, True)
    assert body["latency_s"] == 1.25
    assert body["reasoning"] == "The user wants the refund delay; the policy says five days."
    (j,) = body["judgements"]
    assert (j["prompt"], j["raw_output"], j["reasoning"]) == (PROMPT, RAW, "The policy says five days.")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_trace_page_shows_timeline_and_copies_the_exact_prompt(
    browser: Browser, portal: Portal, lang: str
) -> None:
    tid = ("e2" if lang == "en" else "e3") * 16
    seed(portal.db_url, [_trace(tid)])
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        page.ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=portal.url)
        p = page.page
        page.goto(f"/traces/{tid}")
        rows = p.query_selector_all("#spans tbody tr")
        assert [r.get_attribute("data-depth") for r in rows] == ["0", "1", "1"]
        assert [r.query_selector(".span-name").inner_text() for r in rows] == [  # type: ignore[union-attr]
            "rag.query",
            "retrieve",
            "ChatOpenAI",
        ]
        assert p.inner_text(f"#spans tr[data-span='{LLM}'] .span-duration") == "900.0 ms"
        bar = p.query_selector(f"#spans tr[data-span='{LLM}'] svg rect")
        assert bar is not None
        assert (bar.get_attribute("x"), bar.get_attribute("width"), bar.get_attribute("class")) == (
            "96.0",
            "720.0",
            "err",
        )
        assert p.inner_text("#trace-latency") == "1.250 s"
        assert "the policy says five days" in p.inner_text("#app-reasoning")
        io = "details.judge-io[data-judge=faithfulness]"
        assert p.inner_text(f"{io} [data-part=prompt] pre") == PROMPT
        assert p.inner_text(f"{io} [data-part=raw_output] pre") == RAW
        assert p.inner_text(f"{io} [data-part=reasoning] pre") == "The policy says five days."
        button = f"{io} [data-part=prompt] button.copy"
        assert p.inner_text(button) == ("Copy text" if lang == "en" else "复制文本")
        p.click(button)
        p.wait_for_function(
            "(s) => document.querySelector(s).textContent === document.querySelector(s).dataset.copied",
            arg=button,
        )
        assert p.inner_text(button) == ("Copied" if lang == "en" else "已复制")
        assert p.evaluate("navigator.clipboard.readText()") == PROMPT
        heading = "Prompt sent to the judge model" if lang == "en" else "发给评判模型的提示词"
        assert heading in p.inner_text(f"{io} [data-part=prompt] h3")
    finally:
        page.close()


def test_trace_without_spans_says_so_with_its_latency(portal: Portal) -> None:
    tid = "e4" * 16
    r = _trace(tid, spans=False, latency_s=0.5)
    keyword = Judgement(judge="keyword", version="k1", backend=Backend.HEURISTIC, score=1.0, passed=True,
                        threshold=0.5, status=JudgementStatus.OK)  # fmt: skip
    seed(portal.db_url, [r.model_copy(update={"judgements": (*r.judgements, keyword)})])
    with portal.client() as c:
        en = c.get(f"/traces/{tid}?lang=en").text
        zh = c.get(f"/traces/{tid}?lang=zh").text
    # a heuristic judgement asked no model: no prompt/reply block; the LLM one has its block
    assert 'class="judge-io card" data-judge="keyword"' not in en
    assert 'class="judge-io card" data-judge="faithfulness"' in en
    assert "No spans: this trace did not come through OpenTelemetry (latency as reported: 0.500 s)." in en
    assert "无 span：此追踪不是通过 OpenTelemetry 送来的（上报的耗时：0.500 s）。" in zh


# -- item 2: find --------------------------------------------------------------------------------------------
def _seed_find(portal: Portal) -> dict[str, str]:
    """Four traces of app ``find-shop``: words only in the answer, only in the question, in both; models and
    latencies apart. Returns their ids by name."""
    now = datetime.now(UTC)
    ids = {"answer_only": "f1" * 16, "question_only": "f2" * 16, "both": "f3" * 16, "other": "f4" * 16}
    seed(
        portal.db_url,
        [
            _trace(ids["answer_only"], question="Where is my parcel?", answer="The Courier left it at Depot 9.",
                   model="gpt-a", latency_s=0.4, received_at=now - timedelta(minutes=4), app="find-shop"),
            _trace(ids["question_only"], question="Which courier delivers to the depot?", answer="DHL does.",
                   model="gpt-b", latency_s=2.5, received_at=now - timedelta(minutes=3), app="find-shop"),
            _trace(ids["both"], question="Can the courier hold a parcel?", answer="Yes, at the depot.",
                   model="gpt-a", latency_s=1.5, received_at=now - timedelta(minutes=2), app="find-shop"),
            _trace(ids["other"], question="退货需要几天？", answer="退货在五天内处理。",
                   model="gpt-b", latency_s=0.9, received_at=now - timedelta(minutes=1), app="find-shop"),
        ],
    )  # fmt: skip
    return ids


def _ids(portal: Portal, **params: str) -> list[str]:
    with portal.client() as c:
        r = c.get("/api/v1/traces", params={"app": "find-shop", **params})
    assert r.status_code == 200, r.text
    return [t["trace_id"] for t in r.json()["items"]]


@pytest.fixture(scope="module")
def found(portal: Portal) -> Iterator[dict[str, str]]:
    yield _seed_find(portal)


def test_text_search_covers_question_and_answer_every_word(portal: Portal, found: dict[str, str]) -> None:
    a, q, b, zh = found["answer_only"], found["question_only"], found["both"], found["other"]
    assert _ids(portal, text="courier") == [b, q, a]  # newest first; any case, question or answer
    assert _ids(portal, text="COURIER depot") == [b, q, a]
    assert _ids(portal, text="courier depot parcel") == [b, a]  # each word somewhere in question or answer
    assert _ids(portal, text="depot 9") == [a]
    assert _ids(portal, text="五天") == [zh]
    assert _ids(portal, text="100%") == []  # LIKE characters are text
    assert _ids(portal, text="courier", q="hold") == [b]


def test_model_and_latency_filters(portal: Portal, found: dict[str, str]) -> None:
    a, q, b, zh = found["answer_only"], found["question_only"], found["both"], found["other"]
    assert _ids(portal, model="gpt-a") == [b, a]
    assert _ids(portal, min_latency_s="1.5") == [b, q]
    assert _ids(portal, max_latency_s="0.9") == [zh, a]
    assert _ids(portal, min_latency_s="0.5", max_latency_s="2") == [zh, b]
    assert _ids(portal, model="gpt-b", max_latency_s="1", text="退货") == [zh]
    with portal.client() as c:
        bad = c.get("/api/v1/traces", params={"min_latency_s": "3", "max_latency_s": "1"})
        many = c.get("/api/v1/traces", params={"text": "a b c d e f g h i"})
    assert bad.status_code == 422
    assert "min_latency_s is above max_latency_s" in bad.json()["detail"]
    assert many.status_code == 422
    assert "at most 8 words" in many.json()["detail"]
    # the Live traffic page refuses them as the API does (it used to list every trace without the text and
    # latency filters, answering 200), and a cursor it did not make
    with portal.client() as c:
        pages = [
            c.get("/traffic", params={"app": "find-shop", "text": "courier", **extra})
            for extra in (
                {"min_latency_s": "3", "max_latency_s": "1"},
                {"text": "a b c d e f g h i"},
                {"cursor": "not-a-cursor"},
            )
        ]
        zh_page = c.get("/traffic", params={"min_latency_s": "3", "max_latency_s": "1", "lang": "zh"})
    for page, why in zip(
        pages, ["min_latency_s is above max_latency_s", "at most 8 words", "cursor"], strict=True
    ):
        assert page.status_code == 422, why
        assert why in page.text
        assert not any(tid in page.text for tid in found.values()), why
    assert (zh_page.status_code, "min_latency_s 大于 max_latency_s" in zh_page.text) == (422, True)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_traffic_page_keeps_every_filter_in_its_url(
    browser: Browser, portal: Portal, found: dict[str, str], lang: str
) -> None:
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        p = page.page
        page.goto("/traffic?app=find-shop")
        p.fill("#traffic-filters input[name=text]", "courier depot")
        p.fill("#traffic-filters input[name=model]", "gpt-a")
        p.fill("#traffic-filters input[name=min_latency_s]", "1")
        p.select_option("#traffic-filters select[name=source]", "otlp")
        p.click("#traffic-filters button")
        p.wait_for_url("**text=courier+depot**")
        url = p.url
        for part in ("app=find-shop", "model=gpt-a", "min_latency_s=1", "source=otlp", "since=24h"):
            assert part in url
        rows = [r.get_attribute("data-trace") for r in p.query_selector_all("#traces tbody tr[data-trace]")]
        assert rows == [found["both"]]
        shared = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
        try:  # the same address in another browser shows the same view, filters filled in
            shared.page.goto(url)
            assert shared.page.input_value("#traffic-filters input[name=text]") == "courier depot"
            assert shared.page.input_value("#traffic-filters input[name=max_latency_s]") == ""
            got = shared.page.query_selector_all("#traces tbody tr[data-trace]")
            assert [r.get_attribute("data-trace") for r in got] == [found["both"]]
            label = "Words in question or answer" if lang == "en" else "问题或回答中的词"
            assert label in shared.page.inner_text("#traffic-filters")
        finally:
            shared.close()
        page.goto("/traffic?app=find-shop&min_latency_s=abc")
        want = "min_latency_s: 'abc' is not a number" if lang == "en" else "min_latency_s: 'abc' 不是数字"
        assert p.inner_text("[role=alert]") == want
    finally:
        page.close()


# -- item 5: bulk add to a test set --------------------------------------------------------------------------
def test_bulk_add_api(portal: Portal) -> None:
    now = datetime.now(UTC)
    seed(portal.db_url, [_trace(f"b{i}" * 16, app="bulk-api", received_at=now) for i in range(1, 3)])
    with portal.client() as c:
        assert c.post("/api/v1/test-sets", json={"name": "bulk-api-set"}).status_code == 201
        r = c.post(
            "/api/v1/test-sets/bulk-api-set/cases/from-traces",
            json={"traces": [{"trace_id": "b1" * 16, "expected_answer": "Five days."},
                             {"trace_id": "b2" * 16, "case_id": "refund-2"}, {"trace_id": "nope"}],
                  "keep_answer": False},
        )  # fmt: skip
        missing = c.post(
            "/api/v1/test-sets/no-such-set/cases/from-traces", json={"traces": [{"trace_id": "x"}]}
        )
        empty = c.post("/api/v1/test-sets/bulk-api-set/cases/from-traces", json={"traces": []})
        cases = c.get("/api/v1/test-sets/bulk-api-set/cases").json()["items"]
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["created"] == ["trace-" + "b1" * 16, "refund-2"]
    assert [x["trace_id"] for x in body["rejected"]] == ["nope"]
    assert missing.status_code == 404
    assert empty.status_code == 422
    by_id = {case["id"]: case for case in cases}
    assert by_id["trace-" + "b1" * 16]["expected_answer"] == "Five days."
    assert "answer" not in by_id["refund-2"]  # keep_answer false: replay asks the RAG endpoint
    assert by_id["refund-2"]["question"] == "How long do refunds take?"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bulk_add_from_the_filtered_trace_list(browser: Browser, portal: Portal, lang: str) -> None:
    now = datetime.now(UTC)
    app = f"bulk-ui-{lang}"
    ids = [f"{lang}{i}".ljust(32, "0") for i in range(3)]
    seed(
        portal.db_url,
        [_trace(tid, app=app, received_at=now - timedelta(seconds=i)) for i, tid in enumerate(ids)],
    )
    name = f"bulk-set-{lang}"
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": name})
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        p = page.page
        page.goto(f"/traffic?app={app}&text=refunds")
        p.check(f"#traces tr[data-trace='{ids[0]}'] input[name=pick]")
        p.check(f"#traces tr[data-trace='{ids[2]}'] input[name=pick]")
        p.fill(f"#traces tr[data-trace='{ids[2]}'] input[name=expected]", "五天内退款。")
        p.select_option("#bulk-form select[name=test_set]", name)
        p.click("#bulk-form button")
        p.wait_for_selector("[role=status]")
        want = (
            f"Added 2 case(s) to test set {name}." if lang == "en" else f"已向测试集 {name} 添加 2 个用例。"
        )
        assert p.inner_text("[role=status]") == want
        # the same filtered list again
        assert p.input_value("#traffic-filters input[name=text]") == "refunds"
        assert p.input_value("#traffic-filters input[name=app]") == app
    finally:
        page.close()
    with portal.client() as c:
        cases = {x["id"]: x for x in c.get(f"/api/v1/test-sets/{quote(name)}/cases").json()["items"]}
    assert set(cases) == {f"trace-{ids[0]}", f"trace-{ids[2]}"}
    assert cases[f"trace-{ids[2]}"]["expected_answer"] == "五天内退款。"
    assert "expected_answer" not in cases[f"trace-{ids[0]}"]


def test_explorer_pages_run_under_the_csp_without_a_violation(browser: Browser, portal: Portal) -> None:
    """The new pages and their script (copy buttons, review keys) under the portal's Content-Security-Policy:
    no inline script, style or handler is refused in the console."""
    tid = "e9" * 16
    seed(portal.db_url, [_trace(tid)])
    page = PortalPage(browser, portal, 1280, 900)
    violations: list[str] = []
    page.page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    try:
        page.ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=portal.url)
        for path in (
            f"/traces/{tid}",
            "/traffic?text=refunds&min_latency_s=1",
            "/review",
            "/review?since=30d",
        ):
            page.goto(path)
            page.page.wait_for_load_state("load")
        page.goto(f"/traces/{tid}")
        page.page.click("details.judge-io[data-judge=faithfulness] [data-part=raw_output] button.copy")
        page.page.wait_for_function(
            "() => document.querySelector('button.copy[data-copy$=raw_output]').textContent === 'Copied'"
        )
        assert page.page.evaluate("navigator.clipboard.readText()") == RAW
    finally:
        page.close()
    assert violations == []


def test_explorer_pages_fit_a_phone(browser: Browser, portal: Portal) -> None:
    tid = "ea" * 16
    seed(portal.db_url, [_trace(tid)])
    phone = PortalPage(browser, portal, 390, 844)
    try:
        for path in (f"/traces/{tid}", "/traffic?text=refunds", "/review"):
            phone.goto(path)
            assert phone.no_horizontal_scroll(), path
    finally:
        phone.close()


# -- the portal's new-user defects: refused filters, Chinese errors, the judgements table at 1440 px --------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_invalid_traffic_filter_is_refused_as_the_api_refuses_it(
    browser: Browser, portal: Portal, found: dict[str, str], lang: str
) -> None:
    zh = lang == "zh"
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if zh else "en-US")
    try:
        p = page.page
        cases = {
            "min_score=abc": ("min_score: 'abc' 不是数字" if zh else "min_score: 'abc' is not a number"),
            "max_score=nan": ("max_score: 'nan' 不是数字" if zh else "max_score: 'nan' is not a number"),
            "outcome=meh": (
                "outcome: 'meh' 不是以下之一：pass, fail, error, abstained, skipped"
                if zh
                else "outcome: 'meh' is not one of pass, fail, error, abstained, skipped"
            ),
            "trace_outcome=odd": (
                "trace_outcome: 'odd' 不是以下之一：evaluated, not_sampled, not_evaluable, incomplete"
                if zh
                else "trace_outcome: 'odd' is not one of evaluated, not_sampled, not_evaluable, incomplete"
            ),
            "source=moon": (
                "source: 'moon' 不是以下之一：live, kafka, otlp, replay, api, all"
                if zh
                else "source: 'moon' is not one of live, kafka, otlp, replay, api, all"
            ),
        }
        with portal.client() as api:
            for query, message in cases.items():
                assert api.get(f"/api/v1/traces?{query}").status_code == 422, query
                resp = p.goto(f"{portal.url}/traffic?app=find-shop&{query}&lang={lang}")
                assert resp is not None
                assert resp.status == 422, query
                assert p.inner_text("[role=alert]") == message
                assert p.query_selector_all("#traces tbody tr[data-trace]") == []  # not every trace
        assert p.input_value("#traffic-filters input[name=app]") == "find-shop"  # the form keeps the rest
        resp = p.goto(f"{portal.url}/traffic?since=abc&lang={lang}")
        assert resp is not None
        assert resp.status == 422
        assert p.inner_text(".msg.err") == (
            "无效的时间 'abc': 应为 ISO-8601（2026-12-01T10:00:00Z）或时间跨度（24h）"
            if zh
            else "invalid time 'abc': expected ISO-8601 (2026-12-01T10:00:00Z) or a span (24h)"
        )
        resp = p.goto(f"{portal.url}/traces/nope?lang={lang}")
        assert resp is not None
        assert resp.status == 404
        assert p.inner_text("h1") == ("未找到 (404)" if zh else "Not found (404)")
        assert p.inner_text(".msg.err") == ("未找到链路 'nope'" if zh else "trace 'nope' not found")
        p.goto(f"{portal.url}/no-such-page?lang={lang}")
        assert p.inner_text(".msg.err") == ("未找到" if zh else "Not Found")
    finally:
        page.close()


LINES_PER_CELL = """sel => [...document.querySelectorAll(sel)].map(td => {
  const r = document.createRange(); r.selectNodeContents(td);
  return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size;
})"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_judgements_table_keeps_names_and_numbers_whole_at_1440_px(
    browser: Browser, portal: Portal, lang: str
) -> None:
    tid = ("d7" if lang == "en" else "d8") * 16
    long_reason = (
        "mean support 0.40 over 6 sentence(s), 4 below 0.70; least supported (0.10): "
        + "The refund is paid to the original card within five working days of the return arriving. " * 4
    )
    result = _trace(tid)
    j = result.judgements[0].model_copy(update={"reason": long_reason, "score": 0.0, "passed": False})
    precision = j.model_copy(
        update={"judge": "context_precision", "reason": "0 of 1 retrieved chunks useful (ranks none)"}
    )
    seed(portal.db_url, [result.model_copy(update={"judgements": (j, precision)})])
    page = PortalPage(browser, portal, 1440, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        p = page.page
        page.goto(f"/traces/{tid}?lang={lang}")
        for cell in ("td[data-label]:nth-child(1)", "td:nth-child(3)", "td:nth-child(4)", "td:nth-child(7)",
                     "td:nth-child(8)"):  # fmt: skip
            assert p.evaluate(LINES_PER_CELL, f"#judgements tbody {cell}") == [1, 1], cell
        assert [el.inner_text() for el in p.query_selector_all("#judgements tbody td:nth-child(3)")] == [
            "0.00",
            "0.00",
        ]
        assert (
            p.evaluate(LINES_PER_CELL, "#judgements tr[data-judge=faithfulness] td.reason-col")[0] > 1
        )  # it wraps
        assert page.no_horizontal_scroll()
    finally:
        page.close()
