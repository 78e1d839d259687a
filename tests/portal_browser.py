"""Browser helpers of the portal's browser tests: Debian's Chromium under Playwright, and a page that records
every request to a host other than the portal's (the air-gap check)."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Browser, ConsoleMessage, Request
from playwright.sync_api import Page as PwPage

from portal_testutil import Portal

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


class PortalPage:
    """A browser page on the portal that records every request to another host (:attr:`foreign`), every
    console error (:attr:`console_errors`, Content-Security-Policy violations among them) and every uncaught
    script error (:attr:`page_errors`). ``timezone``: the browser's time zone (IANA name), else the host's."""

    def __init__(
        self,
        browser: Browser,
        portal: Portal,
        width: int,
        height: int,
        locale: str = "en-US",
        timezone: str | None = None,
    ) -> None:
        self.portal = portal
        self.ctx = browser.new_context(
            viewport={"width": width, "height": height}, locale=locale, timezone_id=timezone
        )
        self.page: PwPage = self.ctx.new_page()
        self.foreign: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        host = urlsplit(portal.url).netloc

        def on_console(m: ConsoleMessage) -> None:
            if (
                m.type == "error"
                or "Content Security Policy" in m.text
                or "Content-Security-Policy" in m.text
            ):
                self.console_errors.append(f"{self.page.url}: {m.text}")

        self.page.on("console", on_console)
        self.page.on("pageerror", lambda e: self.page_errors.append(f"{self.page.url}: {e}"))

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
