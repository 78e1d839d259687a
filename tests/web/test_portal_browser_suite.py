"""The browser suite (issue 30, "Done when"): every page of the portal, in English and Chinese, at 390 px and
1440 px, in Debian's Chromium. A page fails on a console error (Content-Security-Policy violations among them),
an uncaught script error, a request to another host, a critical axe-core finding, or a horizontal scroll bar.
The screenshot script (``screenshots.py``) runs here too, and every ``docs/img`` picture the docs show exists
and is one the script makes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser

from portal_browser import PortalPage
from portal_testutil import Portal
from web.portal_tour import DOCS_IMG, REPO, SCREENSHOTS, Tour, seed_tour
from web.screenshots import take_screenshots

_AXE = Axe()


@pytest.fixture(scope="module")
def tour(portal: Portal) -> Iterator[Tour]:
    yield seed_tour(portal)


def _with_lang(path: str, lang: str) -> str:
    return f"{path}{'&' if '?' in path else '?'}lang={lang}"


@pytest.mark.integration  # a started serve on PostgreSQL and a browser
@pytest.mark.parametrize("width", [390, 1440])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_is_clean_in_both_languages_and_widths(
    browser: Browser, portal: Portal, tour: Tour, lang: str, width: int
) -> None:
    page = PortalPage(browser, portal, width, 900)
    findings: dict[str, object] = {}
    try:
        for name, path in tour.pages.items():
            resp = page.page.goto(portal.url + _with_lang(path, lang))
            assert resp is not None
            assert resp.status == (404 if name == "not_found" else 200), (name, resp.status)
            page.page.wait_for_load_state("networkidle")
            if name == "not_found":  # the browser reports the 404 of the page itself; nothing else may
                page.console_errors[:] = [e for e in page.console_errors if "status of 404" not in e]
            critical = [
                (v["id"], [n["target"] for n in v["nodes"]][:3])
                for v in _AXE.run(page.page).response["violations"]
                if v["impact"] == "critical"
            ]
            if critical:
                findings[f"{name}: axe"] = critical
            if not page.no_horizontal_scroll():
                findings[f"{name}: scroll"] = page.page.evaluate("document.documentElement.scrollWidth")
            expected_lang = "zh-CN" if lang == "zh" else "en"
            if name != "api_docs":
                assert page.page.get_attribute("html", "lang") == expected_lang, name
        # the live parts: the run drawer (htmx) on the history page
        page.page.goto(portal.url + _with_lang(tour.pages["history"], lang))
        page.page.click(f"#runs tr[data-run={tour.runs[1]}] a.drawer-link")
        page.page.wait_for_selector("#run-drawer")
        page.page.click("#close-drawer")
        page.page.wait_for_selector("#run-drawer", state="detached")
        assert findings == {}
        assert page.console_errors == []
        assert page.page_errors == []
    finally:
        page.close()  # asserts that nothing was loaded from another host


@pytest.mark.integration  # a started serve on PostgreSQL and a browser
def test_the_screenshot_script_makes_every_docs_picture(
    browser: Browser, portal: Portal, tour: Tour, tmp_path: Path
) -> None:
    written = take_screenshots(browser, portal, tour, tmp_path)
    assert sorted(p.name for p in written) == sorted(s.file for s in SCREENSHOTS)
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 10_000  # a page, not a blank


_IMG = re.compile(r"(?:\]\(|src=\")(?:\.\./)*(?:docs/)?(img/[^)\"\s#?]+)")


def test_every_docs_picture_exists_and_is_made_by_the_script() -> None:
    """Each ``docs/img`` file that README.md or docs/**.md shows exists; each one there is a screenshot the
    script makes (so none goes stale) and is shown somewhere."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    shown = {m.group(1) for d in docs for m in _IMG.finditer(d.read_text(encoding="utf-8"))}
    assert shown, "no picture shown in the docs"
    missing = sorted(s for s in shown if not (REPO / "docs" / s).is_file())
    assert missing == []
    present = {f"img/{p.name}" for p in DOCS_IMG.iterdir() if p.suffix in (".png", ".svg", ".jpg")}
    assert present == {f"img/{s.file}" for s in SCREENSHOTS}
    assert present <= shown, sorted(present - shown)
