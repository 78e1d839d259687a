"""The human review queue (issue 31 item 4): rules put traces in the queue; a reviewer (named by the trusted
single-sign-on header, else typed once per session) labels judgements agree/disagree by keyboard; the labels of
a judge's current version give the sensitivity, specificity and corrected pass rate that the portal shows and
``/metrics`` exports — equal to the values computed by hand (Rogan–Gladen). API and a real browser, EN and ZH."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest
from playwright.sync_api import Browser

from export.helpers import value
from portal_browser import PortalPage
from portal_testutil import Portal, seed, started_portal
from ragpulse.calibration.correction import CalibrationCounts, corrected_pass_rate
from ragpulse.model import Backend, Judgement, JudgementStatus, Source, Trace, TraceOutcome, TraceResult
from testsupport import run_async

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL and a browser

APP = "review-shop"


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    """``serve`` with the offline faithfulness judge, the corrected pass rates recomputed every second, no
    random share (the queue is exactly the failing and borderline judgements), a borderline margin of 0.05, and
    the loopback as the trusted proxy that names reviewers in ``X-Forwarded-User``."""
    with started_portal(
        RAGPULSE_JUDGE_ENABLED="faithfulness",
        RAGPULSE_EXPORT_CORRECTED_INTERVAL_S="1",
        RAGPULSE_API_REVIEW_SAMPLE_SHARE="0",
        RAGPULSE_API_REVIEW_BORDERLINE="0.05",
        RAGPULSE_API_TRUSTED_PROXIES="127.0.0.1",
        RAGPULSE_API_REVIEWER_HEADER="X-Forwarded-User",
    ) as p:
        yield p


def _version(portal: Portal) -> str:
    with portal.client() as c:
        (j,) = c.get("/api/v1/judges").json()["items"]
    assert j["name"] == "faithfulness"
    return str(j["version"])


def _result(i: int, version: str, score: float, app: str = APP, minutes_ago: float = 5) -> TraceResult:
    return TraceResult(
        trace=Trace(
            trace_id=f"{i:032x}",
            app=app,
            question=f"Question {i}?",
            answer=f"Answer {i}.",
            source=Source.OTLP,
        ),
        outcome=TraceOutcome.EVALUATED,
        judgements=(
            Judgement(
                judge="faithfulness",
                version=version,
                backend=Backend.HEURISTIC,
                score=score,
                passed=score >= 0.5,
                threshold=0.5,
                status=JudgementStatus.OK,
                reason=f"score {score}",
            ),
        ),
        received_at=datetime.now(UTC) - timedelta(minutes=minutes_ago),
    )


def _label(c: httpx.Client, i: int, version: str, verdict: str, **headers: str) -> httpx.Response:
    return c.post(
        "/api/v1/review/labels",
        json={"trace_id": f"{i:032x}", "judge": "faithfulness", "version": version, "verdict": verdict,
              "reviewer": "api-bot"},
        headers=headers,
    )  # fmt: skip


def test_fixed_labels_give_the_hand_computed_sensitivity_specificity_and_corrected_pass_rate(
    portal: Portal,
) -> None:
    v = _version(portal)
    # live traffic: 30 of 40 faithfulness judgements of the current version pass (observed 0.75)
    seed(portal.db_url, [_result(i, v, 0.9 if i < 30 else 0.1) for i in range(40)])
    with portal.client() as c:
        # judge passed 6: 5 agree (good, tp), 1 disagree (bad, fp); judge failed 4: 3 agree (tn), 1 disagree (fn)
        for i, verdict in [(0, "agree"), (1, "agree"), (2, "agree"), (3, "agree"), (4, "agree"), (5, "disagree"),
                           (30, "agree"), (31, "agree"), (32, "agree"), (33, "disagree")]:  # fmt: skip
            r = _label(c, i, v, verdict)
            assert r.status_code == 201, r.text
        (row,) = [a for a in c.get("/api/v1/review/agreement").json()["items"] if a["app"] == APP]
        html = c.get("/review?lang=en").text
    se, sp, observed = 5 / 6, 3 / 4, 30 / 40
    corrected = (observed + sp - 1) / (se + sp - 1)  # Rogan–Gladen by hand: 0.5 / 0.58333… = 6/7
    assert math.isclose(corrected, 6 / 7)
    assert (row["tp"], row["fp"], row["tn"], row["fn"], row["labels"]) == (5, 1, 3, 1, 10)
    assert math.isclose(row["sensitivity"], se)
    assert math.isclose(row["specificity"], sp)
    assert math.isclose(row["observed_pass_rate"], observed)
    assert math.isclose(row["corrected_pass_rate"], corrected)
    interval = corrected_pass_rate(30, 40, CalibrationCounts(tp=5, fn=1, tn=3, fp=1))
    assert interval is not None
    assert (row["corrected_lower"], row["corrected_upper"]) == (interval.lower, interval.upper)
    cells = html[html.index(f'data-app="{APP}"') :]
    cells = cells[: cells.index("</tr>")]
    assert '<td data-label="Sensitivity" class="sensitivity">0.8333</td>' in cells
    assert '<td data-label="Specificity" class="specificity">0.7500</td>' in cells
    assert '<td data-label="Pass rate (judge)" class="observed">0.7500</td>' in cells
    assert 'class="corrected">0.8571 ' in cells
    # the exported gauge holds the same figure once serve's loop (every second) has run after the last label
    metrics_url = "http://" + portal.env["RAGPULSE_HTTP_ADDRESS"] + "/metrics"
    labelled_at = time.monotonic()
    seen: list[float | None] = []
    while time.monotonic() < labelled_at + 30:
        seen.append(value(httpx.get(metrics_url).text, "ragpulse_judge_pass_rate_corrected",
                          judge="faithfulness", app=APP))  # fmt: skip
        if time.monotonic() > labelled_at + 2.5 and seen[-1] is not None:
            break
        time.sleep(0.5)
    assert seen[-1] is not None, seen
    assert math.isclose(seen[-1], corrected, rel_tol=1e-9), seen
    stale = value(httpx.get(metrics_url).text, "ragpulse_judge_calibration_stale", judge="faithfulness")
    assert stale == 0


def test_reviewer_from_the_trusted_header_and_refusals(portal: Portal) -> None:
    v = _version(portal)
    seed(portal.db_url, [_result(100, v, 0.1, app="review-api")])
    with portal.client() as c:
        by_header = _label(c, 100, v, "disagree", **{"X-Forwarded-User": "mei@example.com"})
        unknown = _label(c, 100, "no-such-version", "agree")
        nobody = c.post("/api/v1/review/labels", json={"trace_id": f"{100:032x}", "judge": "faithfulness",
                                                        "version": v, "verdict": "agree"})  # fmt: skip
        bad = c.post("/api/v1/review/labels", json={"trace_id": "x", "judge": "j", "version": "v",
                                                     "verdict": "maybe", "reviewer": "r"})  # fmt: skip
    assert by_header.status_code == 201
    body = by_header.json()
    assert (body["reviewer"], body["judge_passed"], body["label"], body["agree"]) == (
        "mei@example.com",
        False,
        True,
        False,
    )
    assert unknown.status_code == 404
    assert nobody.status_code == 422
    assert "reviewer name is needed" in nobody.json()["detail"]
    assert bad.status_code == 422


def test_queue_api_lists_failing_and_borderline_live_traces(portal: Portal) -> None:
    v = _version(portal)
    seed(
        portal.db_url,
        [
            _result(200, v, 0.1, app="review-q", minutes_ago=3),  # failing
            _result(201, v, 0.53, app="review-q", minutes_ago=2),  # borderline (margin 0.05)
            _result(202, v, 0.9, app="review-q", minutes_ago=1),  # neither (no random share)
        ],
    )
    with portal.client() as c:
        items = c.get("/api/v1/review/queue", params={"since": "1h", "limit": 200}).json()["items"]
    mine = [(it["trace_id"], it["judgements"][0]["reasons"]) for it in items if it["app"] == "review-q"]
    assert mine == [(f"{201:032x}", ["borderline"]), (f"{200:032x}", ["failing"])]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_review_by_keyboard_in_a_browser(browser: Browser, portal: Portal, lang: str) -> None:
    v = _version(portal)
    app = f"review-ui-{lang}"
    base = 300 if lang == "en" else 400
    seed(portal.db_url, [_result(base, v, 0.1, app=app, minutes_ago=0.2),
                         _result(base + 1, v, 0.52, app=app, minutes_ago=0.1)])  # fmt: skip
    page = PortalPage(browser, portal, 1280, 900, locale="zh-CN" if lang == "zh" else "en-US")
    try:
        p = page.page
        page.goto("/review?since=24h")
        p.fill("#reviewer-form input[name=reviewer]", "Li Wei")
        p.click("#reviewer-form button")
        p.wait_for_selector("#reviewer")
        assert "Li Wei" in p.inner_text("#reviewer")
        newest, older = f"{base + 1:032x}", f"{base:032x}"
        # the newest queued judgement is current; "d" disagrees with its pass (0.52 ≥ 0.5): human label fail
        first = f".review-trace[data-trace='{newest}'] .review-item"
        p.wait_for_selector(f"{first}.current")
        p.keyboard.press("d")
        p.wait_for_load_state("load")
        p.wait_for_selector(f".review-trace[data-trace='{older}'] .review-item.current")
        # the labelled trace left the queue; "a" agrees with the older one's fail
        assert p.query_selector(f".review-trace[data-trace='{newest}']") is None
        p.keyboard.press("a")
        p.wait_for_selector(f".review-trace[data-trace='{older}']", state="detached")
        page.goto("/review?since=24h")  # the name was typed once: this browser session keeps it
        assert p.query_selector("#reviewer-form") is None
        heading = "Agreement with reviewers" if lang == "en" else "与审核人的一致性"
        assert heading in p.inner_text("main")
        assert ("Review" if lang == "en" else "人工审核") in p.inner_text("nav")
    finally:
        page.close()
    with portal.client() as c:
        rows = c.get("/api/v1/review/queue", params={"since": "24h", "limit": 200}).json()["items"]
    assert not [it for it in rows if it["app"] == app]

    async def labels() -> list[tuple[str, bool, bool, str]]:
        conn = await asyncpg.connect(portal.db_url)
        try:
            got = await conn.fetch(
                "SELECT trace_id, judge_passed, label, reviewer FROM review_labels WHERE trace_id = ANY($1) "
                "ORDER BY trace_id",
                [older, newest],
            )
            return [(r["trace_id"], r["judge_passed"], r["label"], r["reviewer"]) for r in got]
        finally:
            await conn.close()

    assert run_async(labels()) == [(older, False, False, "Li Wei"), (newest, True, False, "Li Wei")]
