"""Browser tests of the portal: headless Chromium (Debian's ``chromium``) driven by Playwright for Python against
a started ``ragpulse serve``. Every request the browser makes must go to the portal (air-gap check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from portal_browser import CHROMIUM, CHROMIUM_ARGS, PortalPage
from portal_testutil import Portal, started_portal


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    """``ragpulse serve`` with the portal (offline judges, no token)."""
    with started_portal() as p:
        yield p


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
