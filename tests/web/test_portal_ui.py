"""The portal in a real browser: test sets and cases, import with a bad row, Live traffic → Trace with the
unsupported sentence highlighted, copy to test set, Chinese, 390 px phones. Every page loads nothing from
another host (checked by the ``page``/``phone`` fixtures)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

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

ANSWER = "Refunds take five days. Shipping is free on Mars."


def _failing_trace(tid: str) -> TraceResult:
    claims = [
        {"text": "Refunds take five days.", "start": 0, "end": 23, "verdict": "supported"},
        {"text": "Shipping is free on Mars.", "start": 24, "end": 49, "verdict": "unsupported"},
    ]
    return TraceResult(
        trace=Trace(
            trace_id=tid,
            app="ui-shop",
            scenario="refunds",
            question="How long do refunds take?",
            documents=(Document(id="policy-7", content="Refunds are paid within five days.", rank=0),),
            answer=ANSWER,
            source=Source.OTLP,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=(
            Judgement(
                judge="faithfulness",
                version="v-ui",
                backend=Backend.LLM,
                model="judge-m",
                score=0.5,
                passed=False,
                threshold=0.8,
                status=JudgementStatus.OK,
                reason="1/2 claims supported",
                flags=JudgementFlags.model_validate({"decided_by": "claims", "claims": claims}),
                prompt_tokens=120,
                completion_tokens=30,
                latency_s=0.4,
            ),
        ),
        received_at=datetime.now(UTC),
    )


def test_create_test_set_add_edit_delete_case_and_import(page: PortalPage, portal: Portal) -> None:
    p = page.page
    page.goto("/test-sets")
    p.fill("#create-test-set input[name=name]", "ui-faq")
    p.fill("#create-test-set input[name=knowledge_base]", "kb-ui")
    p.click("#create-test-set button")
    p.wait_for_url("**/test-sets/ui-faq*")
    assert "No cases yet" in p.inner_text("main")
    p.fill("#add-case input[name=id]", "c1")
    p.fill("#add-case input[name=question]", "How long is the warranty?")
    p.fill("#add-case input[name=keywords]", "two, years")
    p.click("#add-case button")
    p.wait_for_selector("#cases tr[data-case=c1]")
    p.click("#cases tr[data-case=c1] a")
    p.fill("#edit-case input[name=expected_answer]", "Two years.")
    p.click("#edit-case button")
    p.wait_for_selector("#cases tr[data-case=c1]")
    assert "Two years." in p.inner_text("#cases tr[data-case=c1]")
    jsonl = (
        '{"id": "c2", "question": "Q2"}\n{"id": "c3", "question": ["bad"]}\n{"id": "c4", "question": "Q4"}'
    )
    p.fill("#import-form textarea[name=text]", jsonl)
    p.click("#import-form button")
    p.wait_for_selector("#import-result")
    assert "2 new" in p.inner_text("#import-result")
    row = p.inner_text("#rejected tbody tr")
    assert row.startswith("2")
    assert "question must be a string" in row
    assert [r.get_attribute("data-case") for r in p.query_selector_all("#cases tbody tr")] == [
        "c1",
        "c2",
        "c4",
    ]
    p.once("dialog", lambda d: d.accept())
    p.click("#cases tr[data-case=c4] button.danger")
    p.wait_for_selector("#cases tr[data-case=c4]", state="detached")
    with portal.client() as c:  # what the UI wrote is what the API (and the CLI) read
        cases = c.get("/api/v1/test-sets/ui-faq/cases").json()["items"]
    assert cases == [
        {
            "id": "c1",
            "question": "How long is the warranty?",
            "expected_answer": "Two years.",
            "keywords": ["two", "years"],
        },
        {"id": "c2", "question": "Q2"},
    ]
    page.goto("/test-sets?kb=kb-ui")
    assert p.query_selector("#test-sets tr[data-name=ui-faq]") is not None
    p.once("dialog", lambda d: d.dismiss())
    p.click("#test-sets tr[data-name=ui-faq] button.danger")
    assert p.query_selector("#test-sets tr[data-name=ui-faq]") is not None  # dismissed: still there


def test_live_traffic_to_trace_with_highlight_and_copy(page: PortalPage, portal: Portal) -> None:
    tid = "ab" * 16
    seed(portal.db_url, [_failing_trace(tid)])
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "regressions"})
    p = page.page
    page.goto("/traffic?since=1h&app=ui-shop&judge=faithfulness&outcome=fail")
    assert p.query_selector("svg.hist[data-judge=faithfulness]") is not None
    p.click(f"#traces tr[data-trace='{tid}'] td a >> nth=1")
    p.wait_for_url(f"**/traces/{tid}")
    marks = p.query_selector_all("#answer mark.unsupported")
    assert [m.inner_text() for m in marks] == ["Shipping is free on Mars."]
    assert p.inner_text("#answer") == ANSWER
    judgement = p.inner_text("#judgements tr[data-judge=faithfulness]")
    assert "1/2 claims supported" in judgement
    assert "judge-m" in judgement
    assert "150" in judgement  # tokens
    assert "policy-7" in p.inner_text("#documents")
    assert p.inner_text("#copy-form button") == "Copy"
    p.select_option("#copy-form select[name=test_set]", "regressions")
    p.fill("#copy-form input[name=case_id]", "mars")
    p.click("#copy-form button")
    p.wait_for_selector("text=Copied to test set regressions as case mars.")
    with portal.client() as c:
        case = c.get("/api/v1/test-sets/regressions/cases/mars").json()
    assert case["answer"] == ANSWER
    assert case["contexts"] == ["Refunds are paid within five days."]


def test_switch_to_chinese_and_accept_language(page: PortalPage, browser: object, portal: Portal) -> None:
    p = page.page
    page.goto("/test-sets")
    assert p.inner_text("nav").split() == [
        "Test",
        "sets",
        "Run",
        "evaluation",
        "Run",
        "history",
        "Live",
        "traffic",
        "Review",
    ]
    p.click("#lang-switch")
    p.wait_for_url("**lang=zh*")
    assert "测试集" in p.inner_text("nav")
    page.goto("/traffic")  # the cookie keeps the choice
    assert "实时流量" in p.inner_text("h1")
    assert p.get_attribute("html", "lang") == "zh-CN"
    page.goto("/traffic?lang=en")
    assert p.inner_text("h1") == "Live traffic"


def test_accept_language_zh(browser: object, portal: Portal) -> None:
    from playwright.sync_api import Browser

    assert isinstance(browser, Browser)
    zh = PortalPage(browser, portal, 1280, 900, locale="zh-CN")
    try:
        zh.goto("/test-sets")
        assert zh.page.inner_text("h1") == "测试集"
    finally:
        zh.close()


def test_phone_width_has_no_horizontal_scroll(phone: PortalPage, portal: Portal) -> None:
    tid = "cd" * 16
    seed(portal.db_url, [_failing_trace(tid)])
    with portal.client() as c:
        c.post(
            "/api/v1/test-sets",
            json={"name": "phone-set", "knowledge_base": "a-rather-long-knowledge-base-name"},
        )
        c.post("/api/v1/test-sets/phone-set/cases", json={"id": "p1", "question": "A long question " * 10})
    for path in (
        "/test-sets",
        "/test-sets/phone-set",
        "/traffic?since=1h",
        f"/traces/{tid}",
        "/test-sets?lang=zh",
    ):
        phone.goto(path)
        assert phone.no_horizontal_scroll(), path


def test_run_evaluation_history_drawer_and_compare(page: PortalPage, portal: Portal) -> None:
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "ui-runs", "knowledge_base": "kb-runs"})
        for i in range(6):
            c.post(
                "/api/v1/test-sets/ui-runs/cases",
                json={
                    "id": f"r{i}",
                    "question": "What colour is the sky?",
                    "answer": "The sky is blue." if i % 2 == 0 else "Bananas are yellow.",
                    "contexts": ["On a clear day the sky is blue."],
                    "keywords": ["blue"],
                },
            )
    p = page.page
    run_ids = []
    for n in (1, 2):
        page.goto("/runs/new?test_set=ui-runs")
        p.select_option("#run-form select[name=test_set]", "ui-runs")
        p.fill("#run-form input[name=run_id]", f"ui-run-{n}")
        p.fill("#run-form input[name=threshold_keyword]", "0.5" if n == 1 else "0.9")
        p.fill("#run-form textarea[name=fail_under]", "pass_rate=0.4")
        p.click("#run-form button")
        p.wait_for_url(f"**/runs/ui-run-{n}")
        p.wait_for_selector("#run-live[data-status=completed]", timeout=60_000)  # live progress until done
        assert "keyword" in p.inner_text("#averages")
        assert "r1" in p.inner_text("#failing")  # the off-topic answers fail
        run_ids.append(f"ui-run-{n}")
    page.goto("/runs")
    p.click("#runs tr[data-run=ui-run-1] a.drawer-link")
    p.wait_for_selector("#run-drawer #drawer-cases tr[data-case=r0]")
    assert "keyword" in p.inner_text("#drawer-cases tr[data-case=r0]")
    p.click("#close-drawer")
    for rid in run_ids:
        p.check(f"#runs tr[data-run={rid}] input[type=checkbox]")
    p.click("#compare-btn")
    p.wait_for_selector("#deltas")
    assert p.query_selector("#deltas tr[data-metric=pass_rate]") is not None
    assert p.inner_text("h1 code >> nth=0") == "ui-run-1"  # older run is A, newer is B
    assert p.inner_text("h1 code >> nth=1") == "ui-run-2"
    with portal.client() as c:
        assert c.get("/api/v1/runs/ui-run-1").json()["request"]["thresholds"] == {"keyword": 0.5}


def test_trace_page_shows_each_claim_cause_in_english_and_chinese(portal: Portal) -> None:
    """A failing judgement whose unsupported claims were attributed (issue 14 §1): the claims table names
    each cause, and the reference context behind a retrieval miss (no browser needed: the page is HTML)."""
    tid = "c7" * 16
    claims = [
        {"text": "Refunds take five days.", "start": 0, "end": 23, "verdict": "unsupported", "evidence": None,
         "cause": "retrieval_miss", "reference": {"source": "labelled_contexts", "index": 1, "doc_id": "policy-9"}},
        {"text": "Shipping is free on Mars.", "start": 24, "end": 49, "verdict": "unsupported", "evidence": None,
         "cause": "generation_error", "reference": None},
    ]  # fmt: skip
    attribution = {"retrieval_misses": 1, "generation_errors": 1, "undecided": 0, "reason": None}
    base = _failing_trace(tid)
    j = base.judgements[0].model_copy(
        update={"flags": JudgementFlags.model_validate({"claims": claims, "attribution": attribution})}
    )
    seed(portal.db_url, [base.model_copy(update={"judgements": (j,)})])
    with portal.client() as c:
        en = c.get(f"/traces/{tid}?lang=en").text
        zh = c.get(f"/traces/{tid}?lang=zh").text

    def row(html: str, cause: str) -> str:
        start = html.index(f'data-cause="{cause}"')
        return html[start : html.index("</tr>", start)]

    assert "Retrieval miss: a relevant document that was not retrieved supports it" in row(
        en, "retrieval_miss"
    )
    assert "(Reference context 2 · policy-9)" in row(en, "retrieval_miss")
    assert "Generation error: no relevant document supports it" in row(en, "generation_error")
    assert "检索遗漏：未被检索到的相关文档支持该论断" in row(zh, "retrieval_miss")
    assert "生成错误：没有相关文档支持该论断" in row(zh, "generation_error")
    assert "Shipping is free on Mars." in row(zh, "generation_error")


def test_trace_page_lists_the_claims_of_the_newest_version_once(portal: Portal) -> None:
    """Two stored faithfulness versions (a re-judge): the claims table shows the newest one's claims once,
    with its version, and says one older version is stored; evidence ranks count from 1."""
    tid = "c8" * 16
    base = _failing_trace(tid)
    old, new = (
        base.model_copy(update={"judgements": (base.judgements[0].model_copy(update={"version": v}),)})
        for v in ("zz-old", "aa-new")
    )
    seed(portal.db_url, [old])
    seed(portal.db_url, [new])
    with portal.client() as c:
        en = c.get(f"/traces/{tid}?lang=en").text
        zh = c.get(f"/traces/{tid}?lang=zh").text
    table = en[en.index('id="claims"') : en.index("</table>", en.index('id="claims"'))]
    assert table.count("Shipping is free on Mars.") == 1
    assert "<code>aa-new</code>" in table
    assert "zz-old" not in table
    assert "faithfulness: claims of the newest version shown; 1 older version(s) stored." in en
    assert "faithfulness：显示最新版本的论断；另存有 1 个旧版本。" in zh
    assert '<td data-label="Rank">1</td>' in en  # documents: stored rank 0, shown from 1


def test_trace_page_cuts_long_texts_and_links_to_the_whole_trace(portal: Portal) -> None:
    """Texts over 20,000 characters are cut on the trace page with a note saying how much is shown and a link to
    ``?full=1``, which shows them whole; a highlight inside the cut stays, one beyond it is not drawn; a long
    expected answer is not copied into the copy form (the form then copies the trace's own)."""
    tid = "c9" * 16
    head = "Shipping is free on Mars. "  # 26 characters, an unsupported claim at 0..25
    answer = head + "x" * 49_974  # 50,000 characters
    expected, doc = "e" * 30_000, "d" * 25_000
    base = _failing_trace(tid)
    claims = [
        {"text": "Shipping is free on Mars.", "start": 0, "end": 25, "verdict": "unsupported"},
        {"text": "x" * 10, "start": 30_000, "end": 30_010, "verdict": "unsupported"},
    ]
    j = base.judgements[0].model_copy(update={"flags": JudgementFlags.model_validate({"claims": claims})})
    trace = base.trace.model_copy(
        update={
            "answer": answer,
            "expected_answer": expected,
            "documents": (Document(id="long-doc", content=doc, rank=0),),
        }
    )
    seed(portal.db_url, [base.model_copy(update={"trace": trace, "judgements": (j,)})])
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "long-texts"})  # so the page has its copy form
        en = c.get(f"/traces/{tid}?lang=en").text
        zh = c.get(f"/traces/{tid}?lang=zh").text
        full = c.get(f"/traces/{tid}?full=1&lang=en").text

    def answer_html(html: str) -> str:
        start = html.index('id="answer">') + len('id="answer">')
        return html[start : html.index("</div>", start)]

    shown = answer_html(en)
    assert shown == '<mark class="unsupported">Shipping is free on Mars.</mark> ' + "x" * 19_974
    assert "Showing the first 20,000 of 50,000 characters." in en
    assert "Showing the first 20,000 of 30,000 characters." in en  # the expected answer
    assert "Showing the first 20,000 of 25,000 characters." in en  # the document
    assert en.count(f'<a href="/traces/{tid}?full=1">Show the whole trace</a>') == 3
    assert "e" * 20_001 not in en
    assert "d" * 20_001 not in en
    assert 'name="expected_answer" placeholder="' + "e" * 80 + '…"' in en
    assert len(en) < 80_000
    assert "仅显示前 20,000 个字符（共 50,000 个）。" in zh
    assert "显示完整链路" in zh

    assert "Showing the first" not in full
    whole = answer_html(full)
    assert whole.count('<mark class="unsupported">') == 2  # both claims drawn on the whole answer
    assert '<mark class="unsupported">' + "x" * 10 + "</mark>" in whole
    assert whole.replace('<mark class="unsupported">', "").replace("</mark>", "") == answer
    assert expected in full
    assert doc in full


def test_query_notices_are_known_codes_only(portal: Portal) -> None:
    """``?err=``/``?msg=`` show a known notice code, translated; free text in the URL is never reflected."""
    with portal.client() as c:
        bait = "<b>Your session expired: call +1-555-0100</b>"
        for key in ("err", "msg"):
            page = c.get("/test-sets", params={key: bait}).text
            assert "555-0100" not in page
            assert 'role="alert"' not in page
            assert 'role="status"' not in page
        page = c.get("/runs", params={"err": "compare_help", "lang": "zh"}).text
        assert '<div class="msg err" role="alert">选择两次运行进行对比。</div>' in page
        page = c.get("/test-sets", params={"msg": "saved", "lang": "en"}).text
        assert '<div class="msg" role="status">Saved.</div>' in page
        # a form error is carried to the page the POST redirects to in the signed flash cookie, not in the URL
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/test-sets").text)
        assert csrf is not None
        r = c.post("/test-sets", data={"name": "bad/name", "csrf_token": csrf.group(1)})
        assert (r.status_code, r.headers["location"]) == (303, "/test-sets")
        page = c.get("/test-sets").text
        assert "invalid test set name &#39;bad/name&#39;: it contains &#39;/&#39;" in page
        assert 'name="name" required maxlength="128" value="bad/name"' in page  # what was typed stays
        again = c.get("/test-sets").text  # shown once
    assert "invalid test set name" not in again


def test_favicon_is_served_by_the_portal(page: PortalPage, portal: Portal) -> None:
    with portal.client() as c:
        for path in ("/favicon.ico", "/static/favicon.svg"):
            r = c.get(path)
            assert (r.status_code, r.headers["content-type"]) == (200, "image/svg+xml"), path
            assert r.text.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    page.goto("/test-sets")
    assert page.page.get_attribute("link[rel=icon]", "href") == "/static/favicon.svg"
    loaded = page.page.evaluate(
        "fetch(document.querySelector('link[rel=icon]').href).then(r => [r.status, r.url])"
    )
    assert loaded == [200, portal.url + "/static/favicon.svg"]


def test_reason_codes_are_shown_as_labels_with_the_code(page: PortalPage, portal: Portal) -> None:
    tid = "ef" * 16
    base = _failing_trace(tid)
    skipped = base.judgements[0].model_copy(
        update={
            "judge": "relevancy",
            "status": JudgementStatus.SKIPPED,
            "score": None,
            "passed": None,
            "reason": "over_budget: 2000000 tokens used today",
            "flags": JudgementFlags(),
        }
    )
    seed(portal.db_url, [base.model_copy(update={"judgements": (*base.judgements, skipped)})])
    p = page.page
    page.goto(f"/traces/{tid}")
    cell = p.query_selector("#judgements tr[data-judge=relevancy] span.reason")
    assert cell is not None
    assert cell.get_attribute("title") == "over_budget"
    assert p.inner_text("#judgements tr[data-judge=relevancy] td[data-label=Reason]") == (
        "Daily token budget used up over_budget: 2000000 tokens used today"
    )
    page.goto(f"/traces/{tid}?lang=zh")
    assert (
        p.inner_text("#judgements tr[data-judge=relevancy] span.reason") == "当日令牌预算已用完 over_budget"
    )


def test_run_page_counts_retrieval_misses_and_generation_errors(portal: Portal) -> None:
    """A run started through the API (the portal's offline judges) on cases with reference contexts: the run
    page shows the report's claim-cause counts in English and Chinese."""
    refunds, shipping = (
        "Refunds are paid within 30 days of purchase.",
        "Orders ship from Rotterdam in two days.",
    )
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "ui-causes"})
        for cid, answer, refs in (
            (
                "miss",
                "Refunds are paid within 30 days. Orders ship from Rotterdam in two days.",
                [refunds, shipping],
            ),
            ("gen", "Refunds are paid within 30 days. The shop opened in 1990.", [refunds]),
        ):
            case = {"id": cid, "question": "How do refunds work?", "answer": answer, "contexts": [refunds]}
            res = c.post("/api/v1/test-sets/ui-causes/cases", json={**case, "reference_contexts": refs})
            assert res.status_code < 300, res.text
        res = c.post(
            "/api/v1/runs",
            json={"test_set": "ui-causes", "run_id": "ui-causes-1", "judges": ["faithfulness"]},
        )
        assert res.status_code == 202, res.text
        deadline = time.monotonic() + 60
        while (run := c.get("/api/v1/runs/ui-causes-1").json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
        report = run["report"]
        assert (report["retrieval_misses"], report["generation_errors"]) == (1, 1)
        en = c.get("/runs/ui-causes-1?lang=en").text
        zh = c.get("/runs/ui-causes-1?lang=zh").text
    assert 'retrieval misses)</span><span id="retrieval-misses">1</span>' in en
    assert 'generation errors)</span><span id="generation-errors">1</span>' in en
    assert '（检索遗漏）</span><span id="retrieval-misses">1</span>' in zh


def test_run_page_pages_through_more_than_200_failing_cases(portal: Portal, tmp_path: Path) -> None:
    """A run with 205 failing cases: the run page says it shows 200 of 205 and links to the next page, which
    holds the other 5 (English and Chinese)."""
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"m{i:03d}", "question": "q?", "answer": "nothing", "keywords": ["zebra"]})
            + "\n"
            for i in range(205)
        ),
        "utf-8",
    )
    # a process of its own: the browser tests' Playwright holds an event loop in this thread
    env = {**os.environ, "RAGPULSE_STORE_DATABASE_URL": portal.db_url, "RAGPULSE_CONFIG": ""}
    cmd = [
        sys.executable,
        "-m",
        "ragpulse",
        "replay",
        str(path),
        "--run-id",
        "ui-many",
        "--judges",
        "keyword",
    ]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    with portal.client() as c:
        first = c.get("/runs/ui-many?lang=en").text
        assert first.count('href="/traces/') == 200
        more = re.search(r'<p id="failing-more"[^>]*>(.*?)</p>', first, re.S)
        assert more is not None
        assert "Showing 200 of 205 failing cases." in more.group(1)
        nxt = re.search(r'href="(/runs/ui-many\?failing_cursor=[^"]+)"', more.group(1))
        assert nxt is not None
        second = c.get(nxt.group(1) + "&lang=zh").text
    assert re.findall(r'<a href="/traces/[0-9a-f]+">(m\d+)</a>', second) == [f"m{i}" for i in range(200, 205)]
    assert "共 205 个失败的用例，此页显示 5 个。" in second
    assert "failing_cursor" not in second.split('id="failing-more"')[1].split("</p>")[0]
