"""Issue 26, driven from a browser as an attacker would: a name rebound to 127.0.0.1, another app on the same
host (another port: same site) that frames the portal, posts forms to it and tosses cookies, a link built from a
``//host`` path, a session after sign-out, reversed text, and the documented single-sign-on proxy in front of a
real ``ragpulse serve``. HTTP-level checks of the same rules: ``tests/portal/test_portal_security_api.py``."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, sync_playwright

from portal_browser import CHROMIUM, CHROMIUM_ARGS
from portal_testutil import Portal, started_portal
from sso_proxy import SsoProxy

pytestmark = pytest.mark.integration

TOKEN = "browser-sec-token-42"


class OtherApp:
    """Another web app on the same host (127.0.0.1, another port): serves the pages it is given, each with the
    ``Set-Cookie`` header given in :attr:`cookies` (a cookie for the host, whatever the port: "cookie tossing")."""

    def __init__(self) -> None:
        pages: dict[str, str] = {}
        cookies: dict[str, str] = {}
        self.pages = pages
        self.cookies = cookies

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path, "not here").encode()
                self.send_response(200 if self.path in pages else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                if self.path in cookies:
                    self.send_header("Set-Cookie", cookies[self.path])
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def other_app() -> Iterator[OtherApp]:
    app = OtherApp()
    yield app
    app.close()


@pytest.fixture(scope="module")
def locked() -> Iterator[Portal]:
    with started_portal(RAGPULSE_API_TOKEN=TOKEN) as p:
        yield p


@pytest.fixture
def ctx(browser: Browser) -> Iterator[BrowserContext]:
    c = browser.new_context()
    yield c
    c.close()


def _sign_in(ctx: BrowserContext, portal: Portal) -> None:
    page = ctx.new_page()
    page.goto(portal.url + "/login")
    page.fill("input[name=token]", TOKEN)
    page.click("form[action='/login'] button")
    page.wait_for_url("**/test-sets")
    page.close()


def _auto_post(action: str, fields: dict[str, str]) -> str:
    """A page that posts a form to ``action`` as soon as it loads (no click needed)."""
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
    return (
        f'<!doctype html><form id="f" method="post" action="{action}">{inputs}</form>'
        "<script>document.getElementById('f').submit();</script>"
    )


# -- 1. a rebound name -----------------------------------------------------------------------------------------
def test_a_name_rebound_to_loopback_gets_nothing(portal: Portal) -> None:
    port = urlsplit(portal.url).port
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1"],
            headless=True,
        )
        try:
            page = b.new_page()
            for path in ("/test-sets", "/api/v1/test-sets", "/api/v1/traces"):
                resp = page.goto(f"http://rebind.test:{port}{path}")
                assert resp is not None
                assert resp.status == 421
                assert "is not served here" in page.inner_text("body")
            resp = page.goto(f"http://localhost:{port}/test-sets")  # the same server under a loopback name
            assert resp is not None
            assert resp.status == 200
        finally:
            b.close()


# -- 4. framing ------------------------------------------------------------------------------------------------
def test_another_app_cannot_frame_the_portal(
    ctx: BrowserContext, portal: Portal, other_app: OtherApp
) -> None:
    other_app.pages["/frame"] = f'<!doctype html><iframe id="victim" src="{portal.url}/test-sets"></iframe>'
    refused: list[str] = []
    page = ctx.new_page()
    page.on("console", lambda m: refused.append(m.text) if "frame-ancestors" in m.text else None)
    page.goto(other_app.url + "/frame")
    page.wait_for_load_state("load")
    for _ in range(100):  # the console message may come after "load"
        if refused:
            break
        page.wait_for_timeout(50)
    assert page.frame_locator("#victim").locator("#create-test-set").count() == 0
    assert len(refused) == 1
    assert "frame-ancestors 'none'" in refused[0]


def test_pages_run_under_the_csp_without_a_violation(ctx: BrowserContext, portal: Portal) -> None:
    with portal.client() as api:
        api.post("/api/v1/test-sets", json={"name": "csp-set"})
        api.post(
            "/api/v1/test-sets/csp-set/cases", json={"id": "c1", "question": "Q?", "expected_answer": "A."}
        )
    violations: list[str] = []

    def on_console(m: ConsoleMessage) -> None:
        if "Content Security Policy" in m.text or "Content-Security-Policy" in m.text:
            violations.append(m.text)

    page = ctx.new_page()
    page.on("console", on_console)
    for path in (
        "/test-sets",
        "/test-sets/csp-set",
        "/runs/new",
        "/runs",
        "/traffic",
        "/api/v1/docs",
        "/nope",
    ):
        page.goto(portal.url + path)
        page.wait_for_load_state("load")
    page.goto(portal.url + "/test-sets/csp-set")
    page.once("dialog", lambda d: d.dismiss())  # the confirmation (portal.js, data-confirm) still asks
    page.click("tr[data-case='c1'] form button")
    assert page.locator("tr[data-case='c1']").count() == 1
    page.once("dialog", lambda d: d.accept())
    page.click("tr[data-case='c1'] form button")
    page.wait_for_url("**/test-sets/csp-set?msg=deleted")
    assert page.locator("tr[data-case='c1']").count() == 0
    assert violations == []


# -- 2. and 3. forms from another app ------------------------------------------------------------------------------
def test_a_form_on_another_app_cannot_cancel_a_run(
    ctx: BrowserContext, portal: Portal, other_app: OtherApp
) -> None:
    other_app.pages["/cancel"] = _auto_post(f"{portal.url}/api/v1/runs/no-such-run/cancel", {})
    page = ctx.new_page()
    page.goto(other_app.url + "/cancel")
    page.wait_for_url(f"{portal.url}/api/v1/runs/no-such-run/cancel")
    body = page.inner_text("body")
    assert (
        "cross-site request refused (Sec-Fetch-Site: same-site)" in body
    )  # not "run not found": refused first


def test_a_tossed_csrf_cookie_and_a_form_cannot_delete_a_test_set(
    ctx: BrowserContext, locked: Portal, other_app: OtherApp
) -> None:
    with locked.client(TOKEN) as api:
        assert api.post("/api/v1/test-sets", json={"name": "keep-me"}).status_code == 201
    _sign_in(ctx, locked)
    other_app.pages["/toss"] = _auto_post(
        f"{locked.url}/test-sets/keep-me/delete", {"csrf_token": "known-value"}
    )
    other_app.cookies["/toss"] = "ragpulse_csrf=known-value; Path=/; HttpOnly; SameSite=Strict"
    page = ctx.new_page()
    page.goto(other_app.url + "/toss")
    page.wait_for_url(f"{locked.url}/test-sets/keep-me/delete")
    assert "cross-site request refused" in page.inner_text("body")
    assert any(c["name"] == "ragpulse_csrf" and c["value"] == "known-value" for c in ctx.cookies())
    # the same tossed cookie, posted from the portal's own page (as a script injected there would): refused too
    page.goto(locked.url + "/test-sets")
    page.evaluate(
        """() => { const f = document.querySelector("form[action='/test-sets/keep-me/delete']");
                   f.querySelector("input[name=csrf_token]").value = "known-value"; f.submit(); }"""
    )
    page.wait_for_load_state("load")
    assert "CSRF check failed" in page.inner_text("main")
    with locked.client(TOKEN) as api:
        assert api.get("/api/v1/test-sets/keep-me").status_code == 200


# -- 5. sign-out is real ---------------------------------------------------------------------------------------
def test_a_cookie_saved_before_sign_out_is_dead(browser: Browser, locked: Portal) -> None:
    first = browser.new_context()
    try:
        _sign_in(first, locked)
        saved = [c for c in first.cookies() if c["name"] == "ragpulse_session"]
        assert len(saved) == 1
        page = first.new_page()
        page.goto(locked.url + "/test-sets")
        page.click("form[action='/logout'] button")
        page.wait_for_url("**/login")
    finally:
        first.close()
    replay = browser.new_context()
    try:
        replay.add_cookies(saved)  # type: ignore[arg-type]  # Playwright's Cookie and SetCookieParam differ in optionality
        page = replay.new_page()
        page.goto(locked.url + "/test-sets")
        page.wait_for_url(re.compile(r"/login\?next=/test-sets$"))
        assert page.locator("input[name=token]").count() == 1
    finally:
        replay.close()


# -- 6. the language link ----------------------------------------------------------------------------------------
def test_the_language_switch_stays_on_the_portal(ctx: BrowserContext, portal: Portal) -> None:
    page = ctx.new_page()
    page.goto(portal.url + "//evil.example/x")
    page.click("#lang-switch")
    page.wait_for_url("**lang=zh")
    here = urlsplit(page.url)
    assert f"{here.scheme}://{here.netloc}" == portal.url
    assert here.path == "//evil.example/x"


# -- 7. reversed text ---------------------------------------------------------------------------------------------
def test_a_reversed_question_is_shown_with_its_controls(ctx: BrowserContext, portal: Portal) -> None:
    with portal.client() as api:
        api.post("/api/v1/test-sets", json={"name": "bidi-ui"})
        r = api.post(
            "/api/v1/test-sets/bidi-ui/cases", json={"id": "r1", "question": "delete \u202ecba\u202c?"}
        )
        assert r.status_code == 201
    page = ctx.new_page()
    page.goto(portal.url + "/test-sets/bidi-ui")
    assert page.inner_text("tr[data-case='r1'] td:nth-child(2)") == "delete [U+202E]cba[U+202C]?"


# -- 8. single sign-on --------------------------------------------------------------------------------------------
def test_the_sso_proxy_signs_people_in_and_cross_site_forms_stay_out(
    ctx: BrowserContext, other_app: OtherApp
) -> None:
    with (
        started_portal(RAGPULSE_API_TOKEN=TOKEN, RAGPULSE_API_TRUSTED_PROXIES="127.0.0.1") as p,
        SsoProxy(int(p.url.rsplit(":", 1)[1]), TOKEN) as proxy,
    ):
        page = ctx.new_page()
        page.goto(proxy.url + "/test-sets")
        assert urlsplit(page.url).path == "/test-sets"  # not sent to /login: the proxy's bearer counts
        page.fill("#create-test-set input[name=name]", "sso-made")
        page.click("#create-test-set button")
        page.wait_for_url("**/test-sets/sso-made*")
        assert page.locator("form[action='/logout']").count() == 0
        other_app.pages["/sso-cancel"] = _auto_post(f"{proxy.url}/api/v1/runs/no-such-run/cancel", {})
        page.goto(other_app.url + "/sso-cancel")
        page.wait_for_url(f"{proxy.url}/api/v1/runs/no-such-run/cancel")
        assert "cross-site request refused" in page.inner_text("body")
        with p.client(TOKEN) as api:
            assert api.get("/api/v1/test-sets/sso-made").status_code == 200
