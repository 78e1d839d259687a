"""Bad input at the portal's edges answers a clear 404/422, never a 500 or the database's vague refusal: huge
time spans, NUL characters in ids and filters, bad items of a bulk copy, a lone surrogate as a test-set name,
and long ids cut in the error's detail."""

from __future__ import annotations

import pytest

from portal_testutil import Portal, problem_detail

HUGE = ["99999999999d", "999999d", "now-99999999999d", "now-999999d"]


@pytest.mark.parametrize("span", HUGE)
@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/api/v1/traces", "since"),
        ("/api/v1/traces", "until"),
        ("/api/v1/stats/scores", "since"),
        ("/api/v1/stats/timeseries", "since"),
        ("/api/v1/review/queue", "since"),
    ],
)
def test_a_huge_time_span_is_a_422(portal: Portal, path: str, param: str, span: str) -> None:
    with portal.client() as c:
        r = c.get(path, params={param: span})
    assert problem_detail(r, 422).startswith("invalid time span")


@pytest.mark.parametrize("interval", ["99999999999d", "99999999999w"])
def test_a_huge_interval_is_a_422(portal: Portal, interval: str) -> None:
    with portal.client() as c:
        r = c.get("/api/v1/stats/timeseries", params={"interval": interval})
    assert problem_detail(r, 422).startswith("invalid time span")


def test_an_until_before_year_1_plus_the_default_window_is_a_422(portal: Portal) -> None:
    with portal.client() as c:
        r = c.get("/api/v1/stats/scores", params={"until": "0001-01-01T00:00:00Z"})
    assert problem_detail(r, 422).startswith("invalid time")


@pytest.mark.parametrize("path", ["/review", "/traffic"])
@pytest.mark.parametrize("span", ["99999999999d", "999999d"])
def test_a_huge_time_span_on_the_ui_is_a_422_page(portal: Portal, path: str, span: str) -> None:
    with portal.client() as c:
        r = c.get(path, params={"since": span})
    assert r.status_code == 422, r.text[:300]
    assert "invalid time span" in r.text


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/api/v1/traces/%00", "trace"),
        ("/api/v1/traces/a%00b", "trace"),
        ("/api/v1/sessions/%00", "session"),
        ("/api/v1/runs/%00", "run"),
        ("/api/v1/test-sets/%00", "test set"),
        ("/api/v1/test-sets/x/cases/%00", "case"),
    ],
)
def test_an_id_with_nul_is_not_found(portal: Portal, path: str, what: str) -> None:
    with portal.client() as c:
        r = c.get(path)
    detail = problem_detail(r, 404)
    assert detail.startswith(f"{what} '"), detail
    assert "not found" in detail


def test_an_id_with_nul_on_the_ui_is_a_404_page(portal: Portal) -> None:
    with portal.client() as c:
        r = c.get("/traces/%00")
    assert r.status_code == 404
    assert "database" not in r.text


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/api/v1/traces", "app"),
        ("/api/v1/traces", "session"),
        ("/api/v1/dead-letters", "source"),
        ("/api/v1/stats/scores", "judge"),
    ],
)
def test_a_filter_with_nul_is_a_422_naming_the_parameter(portal: Portal, path: str, param: str) -> None:
    with portal.client() as c:
        r = c.get(f"{path}?{param}=a%00b")
    assert problem_detail(r, 422) == f"query parameter '{param}' contains a NUL character"


def test_a_filter_with_nul_on_the_ui_is_a_422_page(portal: Portal) -> None:
    with portal.client() as c:
        r = c.get("/traffic?app=%00")
    assert r.status_code == 422
    assert "contains a NUL character" in r.text


def test_bad_items_of_a_bulk_copy_are_rejected_one_by_one(portal: Portal) -> None:
    with portal.client() as c:
        assert c.post("/api/v1/test-sets", json={"name": "bulk-edges"}).status_code == 201
        r = c.post(
            "/api/v1/test-sets/bulk-edges/cases/from-traces",
            json={"traces": [{"trace_id": "\u0000"}, {"trace_id": "xss-1", "case_id": ".."}]},
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["created"] == []
    assert [x["trace_id"] for x in body["rejected"]] == ["\u0000", "xss-1"]
    assert body["rejected"][0]["reason"] == "trace '\\x00' not found"
    assert all("database" not in x["reason"] for x in body["rejected"])


def test_a_lone_surrogate_test_set_name_is_an_invalid_name(portal: Portal) -> None:
    with portal.client() as c:
        r = c.post(
            "/api/v1/test-sets",
            content=b'{"name": "\\ud800"}',
            headers={"content-type": "application/json"},
        )
    assert "invalid test set name" in problem_detail(r, 422)


@pytest.mark.parametrize(
    "path", ["/api/v1/traces/{}", "/api/v1/runs/{}", "/api/v1/sessions/{}", "/api/v1/test-sets/t/cases/{}"]
)
def test_a_404_cuts_a_long_id(portal: Portal, path: str) -> None:
    with portal.client() as c:
        r = c.get(path.format("x" * 20_000))
    detail = problem_detail(r, 404)
    assert len(detail) < 300, len(detail)
    assert len(r.content) < 2000


@pytest.mark.parametrize(
    ("path", "ctype"), [("/", "text/plain"), ("/api/v1/traces", "application/problem+json")]
)
def test_a_foreign_host_gets_421_with_the_security_headers(portal: Portal, path: str, ctype: str) -> None:
    with portal.client() as c:
        r = c.get(path, headers={"host": "evil.example"})
    assert r.status_code == 421
    assert r.headers["content-type"].startswith(ctype)
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
