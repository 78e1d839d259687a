"""With RAGPULSE_API_TOKEN the UI asks for the token once (cookie session) and every form carries a CSRF token
bound to that session."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser

from portal_browser import PortalPage
from portal_testutil import Portal, started_portal

pytestmark = pytest.mark.integration

TOKEN = "ui-token-123"


@pytest.fixture(scope="module")
def locked() -> Iterator[Portal]:
    with started_portal(RAGPULSE_API_TOKEN=TOKEN) as p:
        yield p


def test_browser_signs_in_once_and_creates_a_test_set(browser: Browser, locked: Portal) -> None:
    page = PortalPage(browser, locked, 1280, 900)
    try:
        p = page.page
        page.goto("/test-sets")
        p.wait_for_url(re.compile(r"/login\?next="))
        p.fill("input[name=token]", "wrong")
        p.click("form[action='/login'] button")
        assert "Wrong token." in p.inner_text("main")
        p.fill("input[name=token]", TOKEN)
        p.click("form[action='/login'] button")
        p.wait_for_url("**/test-sets")
        p.fill("#create-test-set input[name=name]", "locked-set")
        p.click("#create-test-set button")
        p.wait_for_url("**/test-sets/locked-set*")
        page.goto("/traffic")  # the session cookie holds
        assert p.inner_text("h1") == "Live traffic"
    finally:
        page.close()
    with locked.client(TOKEN) as c:
        assert c.get("/api/v1/test-sets/locked-set").status_code == 200


def test_forms_need_the_session_and_the_csrf_token(locked: Portal) -> None:
    with httpx.Client(base_url=locked.url, follow_redirects=False) as c:
        r = c.get("/test-sets")
        assert r.status_code == 303
        assert r.headers["location"].startswith("/login")
        login = c.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        assert csrf is not None
        assert c.post("/login", data={"token": TOKEN, "next": "/"}).status_code == 403  # no CSRF field
        r = c.post("/login", data={"token": TOKEN, "next": "/test-sets", "csrf_token": csrf.group(1)})
        assert r.status_code == 303
        assert c.get("/test-sets").status_code == 200
        r = c.post("/test-sets", data={"name": "no-csrf"})
        assert r.status_code == 403
        # the token of the login page was bound to the pre-login cookie: the session has its own
        r = c.post("/test-sets", data={"name": "pre-login-csrf", "csrf_token": csrf.group(1)})
        assert r.status_code == 403
        fresh = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/test-sets").text)
        assert fresh is not None
        assert fresh.group(1) != csrf.group(1)
        r = c.post("/test-sets", data={"name": "with-csrf", "csrf_token": fresh.group(1)})
        assert r.status_code == 303
        c.cookies.delete("ragpulse_session")
        assert (
            c.post("/test-sets", data={"name": "x", "csrf_token": fresh.group(1)}).status_code == 303
        )  # → login
        assert c.get("/api/v1/test-sets").status_code == 401


def test_sign_out_only_when_signed_in(browser: Browser, locked: Portal) -> None:
    page = PortalPage(browser, locked, 1280, 900)
    try:
        p = page.page
        page.goto("/login")
        assert p.query_selector("form[action='/logout']") is None
        assert "Sign out" not in p.inner_text("header")
        p.fill("input[name=token]", TOKEN)
        p.click("form[action='/login'] button")
        p.wait_for_url("**/test-sets")  # / → /test-sets
        assert p.inner_text("form[action='/logout'] button") == "Sign out"
        p.click("form[action='/logout'] button")
        p.wait_for_url("**/login")
        assert p.query_selector("form[action='/logout']") is None
    finally:
        page.close()
