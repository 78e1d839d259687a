"""Forms in a real browser answer with POST-redirect-GET: after an error the form keeps what was chosen, a
reload or a language switch never re-posts nor answers 405; a run with no judge ticked is refused with the
message of the API and the CLI; every judge the CLI accepts can be ticked (issue 30, item 1)."""

from __future__ import annotations

import pytest

from portal_browser import PortalPage
from portal_testutil import Portal, cli
from ragpulse.judges.selection import NO_JUDGES

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser


def _two_sets(portal: Portal) -> None:
    with portal.client() as api:
        for name in ("form-a", "form-b"):
            api.post("/api/v1/test-sets", json={"name": name})
            api.post(f"/api/v1/test-sets/{name}/cases", json={"id": "c1", "question": "Q?", "answer": "A."})


def test_new_run_form_keeps_the_chosen_test_set_after_an_error_and_reload_is_safe(
    page: PortalPage, portal: Portal
) -> None:
    _two_sets(portal)
    p = page.page
    page.goto("/runs/new")
    ticks = {
        b.get_attribute("value"): b.is_checked()
        for b in p.query_selector_all("#judge-choices input[type=checkbox]")
    }
    # every judge `replay --judges` accepts; the ones serve runs by default are ticked
    assert ticks == {
        "answer_correctness": False,
        "context_precision": False,
        "context_recall": False,
        "context_relevance": False,
        "faithfulness": True,
        "keyword": True,
        "relevancy": True,
    }
    p.select_option("#run-form select[name=test_set]", "form-b")
    for box in p.query_selector_all("#judge-choices input[type=checkbox]"):
        box.uncheck()
    p.fill("#run-form input[name=threshold_keyword]", "0.4")
    p.click("#run-form button")
    p.wait_for_url("**/runs/new?test_set=form-b")
    assert p.inner_text("[role=alert]") == NO_JUDGES
    assert p.eval_on_selector("#run-form select[name=test_set]", "s => s.value") == "form-b"
    assert p.input_value("#run-form input[name=threshold_keyword]") == "0.4"
    assert [b.is_checked() for b in p.query_selector_all("#judge-choices input")] == [False] * 7
    resp = p.reload()  # a GET: no re-post, no 405; the error was shown once
    assert resp is not None
    assert resp.status == 200
    assert p.query_selector("[role=alert]") is None
    p.click("#lang-switch")
    p.wait_for_url("**lang=zh*")
    assert p.inner_text("h1") == "运行评估"
    p.click("#lang-switch")  # back to English for the rest
    # a retrieval judge alone is a valid choice
    p.select_option("#run-form select[name=test_set]", "form-a")
    for box in p.query_selector_all("#judge-choices input[type=checkbox]"):
        box.uncheck()
    p.check("#judge-choices input[value=context_precision]")
    p.click("#run-form button")
    p.wait_for_url("**/runs/form-a-*")
    with portal.client() as api:
        rid = p.url.rsplit("/", 1)[1]
        assert api.get(f"/api/v1/runs/{rid}").json()["request"]["judges"] == ["context_precision"]
    # the API and the CLI refuse "no judge" with the same words
    with portal.client() as api:
        r = api.post("/api/v1/runs", json={"test_set": "form-a", "judges": []})
        assert (r.status_code, r.json()["detail"]) == (422, NO_JUDGES)
    for args in (("replay", "--test-set", "form-a"), ("rejudge", "--since", "1h")):
        out = cli(portal.db_url, *args, "--judges", "")
        assert out.returncode == 2, (args, out.stderr)
        assert NO_JUDGES in " ".join((out.stderr + out.stdout).split()), args


def test_failed_posts_redirect_to_a_page_so_reload_and_language_switch_work(
    page: PortalPage, portal: Portal
) -> None:
    _two_sets(portal)
    p = page.page
    page.goto("/test-sets/form-a")
    p.fill("#add-case input[name=id]", "c1")  # exists already: refused
    p.fill("#add-case input[name=question]", "Typed question?")
    p.click("#add-case button")
    p.wait_for_url("**/test-sets/form-a")
    assert "c1" in p.inner_text("[role=alert]")
    assert p.input_value("#add-case input[name=question]") == "Typed question?"
    p.click("#lang-switch")
    p.wait_for_url("**/test-sets/form-a?lang=zh")
    assert p.inner_text("h1") == "form-a"
    p.click("#lang-switch")
    p.fill("#import-form textarea[name=text]", '{"id": "i1", "question": "Q1"}\n{"id": "i2"}')
    p.click("#import-form button")
    p.wait_for_url("**/test-sets/form-a")
    assert "1 new" in p.inner_text("#import-result")
    resp = p.reload()  # no second import
    assert resp is not None
    assert resp.status == 200
    assert p.query_selector("#import-result") is None
    with portal.client() as api:
        ids = [c["id"] for c in api.get("/api/v1/test-sets/form-a/cases").json()["items"]]
    assert ids == ["c1", "i1"]
    # a form whose test set went away meanwhile: back to the page it came from, with the error
    page.goto("/test-sets")
    with portal.client() as api:
        api.delete("/api/v1/test-sets/form-b")
    p.click("#test-sets tr[data-name=form-b] details summary")
    p.click("#test-sets tr[data-name=form-b] details button")
    p.wait_for_url("**/test-sets")
    assert "form-b" in p.inner_text("[role=alert]")
    resp = p.reload()
    assert resp is not None
    assert resp.status == 200
