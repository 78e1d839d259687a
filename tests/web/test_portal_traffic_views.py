"""Live traffic in a real browser (issue 30): the source filter with live traffic as the default (item 5), a
Grafana link's window in epoch milliseconds that can then be changed (item 3), times in the browser's zone with
UTC on hover in English and Chinese (item 3), and charts that show skipped and error counts, the judge's
threshold and a time axis (item 6)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser

from portal_browser import PortalPage
from portal_testutil import Portal, seed
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser

#: received 20 minutes ago, so every window below holds them
RECEIVED = (datetime.now(UTC) - timedelta(minutes=20)).replace(microsecond=0)


def _j(judge: str, status: JudgementStatus, score: float | None, reason: str) -> Judgement:
    return Judgement(
        judge=judge,
        version="v-traffic",
        backend=Backend.HEURISTIC,
        score=score,
        passed=None if score is None else score >= 0.5,
        threshold=0.5,
        status=status,
        reason=reason,
    )


def _result(n: int, source: Source, *judgements: Judgement) -> TraceResult:
    return TraceResult(
        trace=Trace(
            trace_id=f"{n:032x}",
            app="views-app",
            question=f"{source.value} question {n}?",
            answer="An answer.",
            source=source,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=judgements,
        received_at=RECEIVED,
    )


@pytest.fixture(scope="module")
def seeded(portal: Portal) -> Iterator[Portal]:
    ok = JudgementStatus.OK
    seed(
        portal.db_url,
        [
            _result(1, Source.KAFKA, _j("faithfulness", ok, 0.9, "1/1 claims supported")),
            _result(2, Source.OTLP, _j("faithfulness", JudgementStatus.SKIPPED, None, "no_context")),
            _result(
                3, Source.OTLP, _j("faithfulness", JudgementStatus.ERROR, None, "judge_unavailable: timeout")
            ),
            _result(4, Source.REPLAY, _j("faithfulness", ok, 0.1, "0/1 claims supported")),
            _result(5, Source.API, _j("faithfulness", ok, 0.2, "0/1 claims supported")),
        ],
    )
    yield portal


def _listed(page: PortalPage) -> list[str]:
    return [
        r.get_attribute("data-trace") or ""
        for r in page.page.query_selector_all("#traces tbody tr[data-trace]")
    ]


def test_source_filter_defaults_to_live_traffic_in_the_ui_and_the_api(
    page: PortalPage, seeded: Portal
) -> None:
    ids = {n: f"{n:032x}" for n in range(1, 6)}
    page.goto("/traffic?app=views-app")
    p = page.page
    assert p.eval_on_selector("#source-filter", "s => s.value") == "live"
    assert sorted(_listed(page)) == [ids[1], ids[2], ids[3]]
    assert (
        p.inner_text(".judge-hist[data-judge=faithfulness] .hist-counts")
        == "pass 1 · fail 0 · skipped 1 · errors 1"
    )
    for choice, expected in (("replay", [4]), ("api", [5]), ("kafka", [1]), ("all", [1, 2, 3, 4, 5])):
        p.select_option("#source-filter", choice)
        p.click("#traffic-filters button")
        p.wait_for_url(f"**source={choice}*")
        assert sorted(_listed(page)) == [ids[n] for n in expected], choice
    with seeded.client() as api:
        got = api.get("/api/v1/traces", params={"app": "views-app"}).json()["items"]
        assert sorted(t["trace_id"] for t in got) == [ids[1], ids[2], ids[3]]
        got = api.get("/api/v1/traces", params={"app": "views-app", "source": "api"}).json()["items"]
        assert [t["trace_id"] for t in got] == [ids[5]]
        stats = api.get("/api/v1/stats/scores", params={"app": "views-app"}).json()["items"]
        assert [(s["judge"], s["passed"], s["failed"], s["skipped"], s["errors"]) for s in stats] == [
            ("faithfulness", 1, 0, 1, 1)
        ]
        r = api.get("/api/v1/traces", params={"source": "mqtt"})
        assert r.status_code == 422
        assert r.json()["detail"] == "unknown source 'mqtt': one of live, kafka, otlp, replay, api, all"


def test_a_grafana_window_in_epoch_milliseconds_can_be_changed(page: PortalPage, seeded: Portal) -> None:
    p = page.page
    start = int((RECEIVED - timedelta(hours=3)).timestamp() * 1000)
    end = int((RECEIVED + timedelta(minutes=5)).timestamp() * 1000)
    resp = p.goto(f"{seeded.url}/traffic?from={start}&to={end}&app=views-app")
    assert resp is not None
    assert resp.status == 200
    assert len(_listed(page)) == 3
    shown = p.get_attribute("#window-shown time:last-of-type", "title")
    assert shown == datetime.fromtimestamp(end / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert p.input_value("#traffic-filters input[name=until]") == str(end)
    p.select_option("#traffic-filters select[name=since]", "1h")  # portal.js drops the link's end
    p.click("#traffic-filters button")
    p.wait_for_url("**since=1h*")
    assert "until=&" in p.url or "until=" not in p.url
    assert p.query_selector("[role=alert]") is None
    assert len(_listed(page)) == 3  # received 20 minutes ago: inside the last hour
    with seeded.client() as api:  # without the script: a span before the link's end, never a 422
        old_end = int((RECEIVED - timedelta(days=2)).timestamp() * 1000)
        r = api.get("/traffic", params={"since": "1h", "until": str(old_end), "app": "views-app"})
        assert r.status_code == 200
        assert 'id="traces"' not in r.text  # nothing received in that hour
        r = api.get("/api/v1/stats/timeseries", params={"since": "1h", "until": str(old_end)})
        assert r.status_code == 200
        assert (
            r.json()["since"]
            == (datetime.fromtimestamp(old_end / 1000, UTC) - timedelta(hours=1)).isoformat()
        )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_times_show_in_the_browser_zone_with_utc_on_hover(
    browser: Browser, seeded: Portal, lang: str
) -> None:
    page = PortalPage(browser, seeded, 1280, 900, timezone="Asia/Shanghai")
    try:
        page.goto(f"/traffic?app=views-app&lang={lang}")
        cell = page.page.locator(f"#traces tr[data-trace='{1:032x}'] time")
        assert cell.get_attribute("title") == RECEIVED.strftime("%Y-%m-%d %H:%M:%S UTC")
        local = RECEIVED + timedelta(hours=8)
        text = cell.inner_text()
        assert local.strftime("%H:%M:%S") in text
        assert re.search(r"GMT\+8|UTC\+8|CST", text), text
        assert f"{local.day:02d}" in text
        ticks = page.page.locator("svg.ts text.time-tick")
        assert ticks.count() == 5
        assert re.search(r"GMT\+8|UTC\+8|CST", ticks.nth(4).text_content() or "")
        assert page.console_errors == []
    finally:
        page.close()


def test_charts_show_threshold_errors_skipped_and_a_time_axis(page: PortalPage, seeded: Portal) -> None:
    with seeded.client() as api:
        judges = {j["name"]: j["threshold"] for j in api.get("/api/v1/judges").json()["items"]}
    page.goto("/traffic?app=views-app&lang=zh")
    p = page.page
    hist = "svg.hist[data-judge=faithfulness]"
    assert p.text_content(f"{hist} text.threshold") == f"阈值 {judges['faithfulness']:g}"
    assert (
        p.inner_text(".judge-hist[data-judge=faithfulness] .hist-counts")
        == "通过 1 · 未通过 0 · 跳过 1 · 错误 1"
    )
    assert p.text_content(".ts-legend li[data-judge=faithfulness]") == "faithfulness · 错误 1 · 跳过 1"
    assert p.locator("svg.ts rect.not-decided").count() == 1  # the interval with the skipped and the error
    assert p.locator("svg.ts text.time-tick").count() == 5


def test_chinese_trace_page_shows_ragpulse_reason_phrases_in_chinese(
    page: PortalPage, seeded: Portal
) -> None:
    page.goto(f"/traces/{1:032x}?lang=zh")
    assert page.page.inner_text("#judgements td[data-label=原因]") == "1/1 个论断有依据"
    page.goto(f"/traces/{1:032x}?lang=en")
    assert page.page.inner_text("#judgements td[data-label=Reason]") == "1/1 claims supported"


#: The rendered box and font size (CSS px on the screen: an SVG text's font size times the SVG's scale) of every
#: visible text of the time-series chart: its axis labels and its legend.
_TS_TEXTS = """() => [...document.querySelectorAll('svg.ts text, .ts-legend li')]
  .filter(el => getComputedStyle(el).display !== 'none' && el.getBoundingClientRect().width > 0)
  .map(el => {
    const r = el.getBoundingClientRect();
    const scale = el.getScreenCTM ? el.getScreenCTM().a : 1;
    return {text: el.textContent, legend: el.matches('.ts-legend li'), left: r.left, right: r.right,
            top: r.top, bottom: r.bottom, px: parseFloat(getComputedStyle(el).fontSize) * scale};
  })"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_time_series_at_390_px_keeps_its_labels_apart_and_its_legend_readable(
    browser: Browser, seeded: Portal, lang: str
) -> None:
    """At 390 px (a phone; labels in the browser's zone, Asia/Shanghai, the last one "12-05 16:20 GMT+8") no two
    axis labels of the pass-rate chart overlap, every one is at least 10 px (10.7; 5.6 before) and the legend's text at least 11 px;
    at 1440 px the five time labels are all shown."""
    page = PortalPage(browser, seeded, 390, 844, timezone="Asia/Shanghai")
    try:
        page.goto(f"/traffic?app=views-app&lang={lang}")
        texts = page.page.evaluate(_TS_TEXTS)
        axis = [t for t in texts if not t["legend"]]
        legend = [t for t in texts if t["legend"]]
        overlapping = [
            (a["text"], b["text"])
            for i, a in enumerate(axis)
            for b in axis[i + 1 :]
            if a["left"] < b["right"]
            and b["left"] < a["right"]
            and a["top"] < b["bottom"]
            and b["top"] < a["bottom"]
        ]
        assert overlapping == []
        assert len([t for t in axis if "%" not in t["text"]]) >= 3  # the time axis keeps a start, middle, end
        assert min(t["px"] for t in axis) >= 10, axis
        assert [t["text"].split(" ·")[0] for t in legend] == ["faithfulness"]
        assert min(t["px"] for t in legend) >= 11, legend
        assert page.no_horizontal_scroll()
    finally:
        page.close()
    wide = PortalPage(browser, seeded, 1440, 900, timezone="Asia/Shanghai")
    try:
        wide.goto(f"/traffic?app=views-app&lang={lang}")
        shown = [t for t in wide.page.evaluate(_TS_TEXTS) if not t["legend"] and "%" not in t["text"]]
        assert len(shown) == 5
    finally:
        wide.close()
