"""Regenerate the portal screenshots in ``docs/img`` (:data:`portal_tour.SCREENSHOTS`).

    .venv/bin/python tests/web/screenshots.py            # into docs/img
    .venv/bin/python tests/web/screenshots.py OUT_DIR    # somewhere else

Starts ``ragpulse serve`` on a private PostgreSQL database (as the browser tests do: PostgreSQL on
127.0.0.1:5432), fills it with :func:`portal_tour.seed_tour`, and photographs each page with Debian's Chromium
(browser time zone UTC, so the pictures do not depend on the machine). The browser suite calls
:func:`take_screenshots` too, so the script keeps working.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # run as a script: the test helpers' imports as under pytest
    sys.path[:0] = [str(TESTS), str(TESTS.parent / "src")]

from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from portal_browser import CHROMIUM, CHROMIUM_ARGS, PortalPage  # noqa: E402
from portal_testutil import Portal, started_portal  # noqa: E402
from web.portal_tour import DOCS_IMG, SCREENSHOTS, Tour, seed_tour  # noqa: E402


def take_screenshots(browser: Browser, portal: Portal, tour: Tour, out_dir: Path) -> list[Path]:
    """Photograph every :data:`SCREENSHOTS` page of ``tour`` into ``out_dir``; returns the files written.

    Raises:
        AssertionError: a page answered other than 200, logged a console error, or loaded from another host.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in SCREENSHOTS:
        page = PortalPage(browser, portal, shot.width, shot.height, timezone="UTC")
        try:
            path = tour.pages[shot.page]
            resp = page.page.goto(f"{portal.url}{path}{'&' if '?' in path else '?'}lang={shot.lang}")
            assert resp is not None
            assert resp.status == 200, (shot.file, resp.status)
            page.page.wait_for_load_state("networkidle")
            target = out_dir / shot.file
            page.page.screenshot(path=str(target), full_page=False)
            assert page.console_errors == [], page.console_errors
            written.append(target)
        finally:
            page.close()
    return written


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else DOCS_IMG
    with started_portal() as portal, sync_playwright() as pw:
        tour = seed_tour(portal)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for path in take_screenshots(browser, portal, tour, out_dir):
                print(path)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
