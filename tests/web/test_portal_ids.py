"""Issue 25 item 1 in a real browser: case ids and trace ids are data. Cases with ``/``, a literal ``%2F``,
non-ASCII and dots are added, edited and deleted through the UI; a stored traversal id deletes only its case;
a trace whose id looks like a portal path opens its own page from Live traffic."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg
import pytest

from portal_browser import PortalPage
from portal_testutil import Portal, seed
from ragpulse.model import Source, Trace, TraceOutcome, TraceResult
from testsupport import run_async

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser

IDS = ["a/b", "a%2Fb", "ü", "..x", "x.."]


def _row(case_id: str) -> str:
    return f"#cases tr[data-case={json.dumps(case_id, ensure_ascii=False)}]"


def test_ids_with_slash_percent_unicode_and_dots_are_added_edited_and_deleted_in_the_ui(
    page: PortalPage, portal: Portal
) -> None:
    with portal.client() as c:
        assert c.post("/api/v1/test-sets", json={"name": "ui-ids"}).status_code == 201
        assert c.post("/api/v1/test-sets", json={"name": "ui-ids-2"}).status_code == 201
        c.post("/api/v1/test-sets/ui-ids-2/cases", json={"id": "v1", "question": "other set's case?"})
    p = page.page
    page.goto("/test-sets/ui-ids")
    for cid in IDS:
        p.fill("#add-case input[name=id]", cid)
        p.fill("#add-case input[name=question]", f"Q {cid}?")
        p.click("#add-case button")
        p.wait_for_selector(_row(cid))
    for cid in IDS:
        p.click(f"{_row(cid)} a")
        p.wait_for_selector("#edit-case")
        p.fill("#edit-case input[name=expected_answer]", f"A {cid}")
        p.click("#edit-case button")
        p.wait_for_selector(_row(cid))
        assert f"A {cid}" in p.inner_text(_row(cid))
    with portal.client() as c:
        items = c.get("/api/v1/test-sets/ui-ids/cases").json()["items"]
    assert items == [{"id": cid, "question": f"Q {cid}?", "expected_answer": f"A {cid}"} for cid in IDS]
    for cid in IDS:
        p.once("dialog", lambda d: d.accept())
        p.click(f"{_row(cid)} button.danger")
        p.wait_for_selector(_row(cid), state="detached")
    with portal.client() as c:
        assert c.get("/api/v1/test-sets/ui-ids/cases").json()["items"] == []
        assert c.get("/api/v1/test-sets/ui-ids-2/cases/v1").json()["question"] == "other set's case?"
    # a traversal id typed into the form is refused with the reason, nothing stored
    p.fill("#add-case input[name=id]", "../../ui-ids-2/cases/v1")
    p.fill("#add-case input[name=question]", "Q?")
    p.click("#add-case button")
    p.wait_for_selector("text=has a '.' or '..' path segment")
    with portal.client() as c:
        assert c.get("/api/v1/test-sets/ui-ids").json()["case_count"] == 0


def test_a_stored_traversal_id_is_deleted_alone_from_the_ui(page: PortalPage, portal: Portal) -> None:
    """The issue's reproduction: Delete on case ``../../B`` of set A used to delete the whole set B."""
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "trav-ui-a"})
        c.post("/api/v1/test-sets", json={"name": "B"})
        c.post("/api/v1/test-sets/B/cases", json={"id": "b1", "question": "B's case?"})

    async def plant() -> None:  # stored before ids were checked
        conn = await asyncpg.connect(portal.db_url)
        try:
            await conn.execute(
                "INSERT INTO test_cases (test_set, case_id, position, question) VALUES ('trav-ui-a', '../../B', 0, 'Q?')"
            )
            await conn.execute("UPDATE test_sets SET case_count = 1 WHERE name = 'trav-ui-a'")
        finally:
            await conn.close()

    run_async(plant())
    p = page.page
    page.goto("/test-sets/trav-ui-a")
    p.once("dialog", lambda d: d.accept())
    p.click(f"{_row('../../B')} button.danger")
    p.wait_for_selector(_row("../../B"), state="detached")
    with portal.client() as c:
        assert c.get("/api/v1/test-sets/B").json()["case_count"] == 1
        assert c.get("/api/v1/test-sets/trav-ui-a").json()["case_count"] == 0


def test_a_path_like_trace_id_opens_its_own_trace_page_from_live_traffic(
    page: PortalPage, portal: Portal
) -> None:
    tid = "../test-sets/victim-set/delete?x="
    seed(
        portal.db_url,
        [
            TraceResult(
                trace=Trace(
                    trace_id=tid,
                    app="ids-app",
                    question="Which trace is this?",
                    answer="A.",
                    source=Source.OTLP,
                ),
                outcome=TraceOutcome.EVALUATED,
                judgements=(),
                received_at=datetime.now(UTC),
            )
        ],
    )
    p = page.page
    page.goto("/traffic?since=1h&app=ids-app")
    link = p.locator(f"#traces tr[data-trace={json.dumps(tid, ensure_ascii=False)}] td a").nth(1)
    assert link.get_attribute("href") == "/traces/..%2Ftest-sets%2Fvictim-set%2Fdelete%3Fx%3D"
    link.click()
    p.wait_for_selector("text=Which trace is this?")
    assert p.url.endswith("/traces/..%2Ftest-sets%2Fvictim-set%2Fdelete%3Fx%3D")


def test_a_chinese_test_set_name_is_created_and_opened_in_the_ui(page: PortalPage, portal: Portal) -> None:
    name = "人力资源 知识库"
    p = page.page
    page.goto("/test-sets")
    p.fill("#create-test-set input[name=name]", name)
    p.click("#create-test-set button")
    p.wait_for_selector("#add-case")
    assert p.url.endswith(
        "/test-sets/%E4%BA%BA%E5%8A%9B%E8%B5%84%E6%BA%90%20%E7%9F%A5%E8%AF%86%E5%BA%93?msg=created_msg"
    )
    p.fill("#add-case input[name=id]", "hr/leave-1")
    p.fill("#add-case input[name=question]", "年假有几天？")
    p.click("#add-case button")
    p.wait_for_selector(_row("hr/leave-1"))
    page.goto("/test-sets")
    p.click(f"#test-sets tr[data-name={json.dumps(name, ensure_ascii=False)}] a")
    p.wait_for_selector(_row("hr/leave-1"))
    with portal.client() as c:
        assert c.get("/api/v1/test-sets").json()["items"][0]["name"] == name
