"""Browser tests of the portal: headless Chromium (Debian's ``chromium``) driven by Playwright for Python against
a started ``ragpulse serve``. Every request the browser makes must go to the portal (air-gap check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Request, sync_playwright
from playwright.sync_api import Page as PwPage

from portal_testutil import Portal, base_env, private_db

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    """``ragpulse serve`` with the portal (offline judges, no token)."""
    with private_db() as db:
        p = Portal(db, base_env(db))
        p.start()
        try:
            yield p
        finally:
            p.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (scripts/test.sh installs it)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class PortalPage:
    """A browser page on the portal that records every request to another host."""

    def __init__(
        self, browser: Browser, portal: Portal, width: int, height: int, locale: str = "en-US"
    ) -> None:
        self.portal = portal
        self.ctx = browser.new_context(viewport={"width": width, "height": height}, locale=locale)
        self.page: PwPage = self.ctx.new_page()
        self.foreign: list[str] = []
        host = urlsplit(portal.url).netloc

        def on_request(req: Request) -> None:
            parts = urlsplit(req.url)
            if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != host:
                self.foreign.append(req.url)

        self.page.on("request", on_request)

    def goto(self, path: str) -> None:
        self.page.goto(self.portal.url + path)

    def no_horizontal_scroll(self) -> bool:
        return bool(self.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))

    def close(self) -> None:
        self.ctx.close()
        assert self.foreign == [], f"requests to hosts other than the portal: {self.foreign}"


@pytest.fixture
def page(browser: Browser, portal: Portal) -> Iterator[PortalPage]:
    p = PortalPage(browser, portal, 1280, 900)
    yield p
    p.close()


@pytest.fixture
def phone(browser: Browser, portal: Portal) -> Iterator[PortalPage]:
    p = PortalPage(browser, portal, 390, 844)
    yield p
    p.close()
