"""Outcome filters of the trace list (issue 30 item 2), API and UI, against real PostgreSQL.

``outcome`` without ``judge`` means "any judge has that outcome" (it answered 422 in the API and was ignored in
the UI); ``abstained`` (a judgement skipped because the answer declined to answer) is an outcome of its own,
apart from the other skips.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from ragpulse.config import Settings
from ragpulse.judges import error, ok, skipped
from ragpulse.model import Backend, Judgement, Source, Trace, TraceOutcome, TraceResult
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.store import PostgresStore

#: trace name → its judgements (relevancy R, faithfulness F; pass at 0.5).
_H = Backend.HEURISTIC


def _ok(judge: str, score: float) -> Judgement:
    return ok(
        judge=judge, version=f"{judge}/v1", backend=_H, score=score, threshold=0.5, reason=f"{judge} {score}"
    )


def _skip(judge: str, reason: str) -> Judgement:
    return skipped(judge=judge, version=f"{judge}/v1", backend=_H, reason=reason)


TRACES: dict[str, tuple[Judgement, ...]] = {
    "pass": (_ok("relevancy", 0.9), _ok("faithfulness", 0.8)),
    "fail_f": (_ok("relevancy", 0.9), _ok("faithfulness", 0.2)),
    "fail_r": (_ok("relevancy", 0.1),),
    "abstained": (_skip("relevancy", "abstained"), _skip("faithfulness", "abstained")),
    "skipped": (_skip("relevancy", "no_reference"),),
    "error": (
        error(judge="relevancy", version="relevancy/v1", backend=_H, reason="judge_unavailable: HTTP 500"),
    ),
}
IDS = {name: f"{i + 1:032x}" for i, name in enumerate(TRACES)}
NAMES = {v: k for k, v in IDS.items()}


async def _seed(store: PostgresStore) -> None:
    await store.write_results(
        [
            TraceResult(
                trace=Trace(
                    trace_id=IDS[name],
                    app="shop",
                    question=f"question {name}",
                    answer="a",
                    source=Source.KAFKA,
                ),
                outcome=TraceOutcome.EVALUATED,
                judgements=js,
            )
            for name, js in TRACES.items()
        ]
    )


async def _requests(url: str, paths: list[str]) -> list[httpx.Response]:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        await _seed(store)
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return [await c.get(p) for p in paths]
    finally:
        await store.close()


def _names(r: httpx.Response) -> set[str]:
    assert r.status_code == 200, r.text
    return {NAMES[item["trace_id"]] for item in r.json()["items"]}


def _page_names(r: httpx.Response) -> set[str]:
    assert r.status_code == 200, r.text
    return {name for name, tid in IDS.items() if tid in r.text}


def test_outcome_without_judge_means_any_judge_in_api_and_ui(pg_url: str) -> None:
    api = "/api/v1/traces?"
    paths = [
        api + "outcome=fail",
        api + "outcome=fail&judge=relevancy",
        api + "outcome=fail&judge=faithfulness",
        api + "outcome=pass",
        api + "outcome=abstained",
        api + "outcome=skipped",
        api + "outcome=error",
        api + "max_score=0.3",
        api + "outcome=abstained&judge=faithfulness",
        api + "outcome=bogus",
        api,
        "/traffic?outcome=fail",
        "/traffic?outcome=abstained&lang=zh",
        "/traffic?outcome=skipped",
        "/traffic?outcome=bogus",
    ]
    got: list[Any] = asyncio.run(_requests(pg_url, paths))
    (fail, fail_r, fail_f, passed, abst, skip, err, low, abst_f, bogus, every) = got[:11]
    assert _names(fail) == {"fail_f", "fail_r"}  # any judge failed: was 422 "outcome … need judge"
    assert _names(fail_r) == {"fail_r"}
    assert _names(fail_f) == {"fail_f"}
    assert _names(passed) == {"pass", "fail_f"}  # any judge passed
    assert _names(abst) == {"abstained"}
    assert _names(skip) == {"skipped"}  # the other skips, abstentions apart
    assert _names(err) == {"error"}
    assert _names(low) == {"fail_f", "fail_r"}  # a score ≤ 0.3 by any judge
    assert _names(abst_f) == {"abstained"}
    assert bogus.status_code == 422
    listed = {NAMES[i["trace_id"]]: i["judgements"] for i in every.json()["items"]}
    assert [j["reason_code"] for j in listed["abstained"]] == ["abstained", "abstained"]
    assert [j["reason_code"] for j in listed["pass"]] == [None, None]

    ui_fail, ui_abst_zh, ui_skip, ui_bogus = got[11:]
    assert _page_names(ui_fail) == {"fail_f", "fail_r"}  # the UI used to ignore outcome without a judge
    assert 'value="fail" selected' in ui_fail.text
    assert _page_names(ui_abst_zh) == {"abstained"}
    assert '<option value="abstained" selected>拒答</option>' in ui_abst_zh.text
    assert '<span class="pill abstained">relevancy' in ui_abst_zh.text
    assert _page_names(ui_skip) == {"skipped"}
    # an unknown outcome is refused as on the API: 422, the reason in the page's language (the client
    # kept lang=zh from the request before), and no trace listed under a filter that was not applied
    assert ui_bogus.status_code == 422
    assert '<div class="msg err" role="alert">outcome: &#39;bogus&#39; 不是以下之一' in ui_bogus.text
    assert {name for name, tid in IDS.items() if tid in ui_bogus.text} == set()


async def _stats(url: str) -> tuple[Any, Any, Any]:
    from datetime import UTC, datetime, timedelta

    from ragpulse.export.otel_setup import SCORE_BUCKETS
    from ragpulse.portal import stats

    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        await _seed(store)
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        since, until = hour - timedelta(hours=1), hour + timedelta(hours=1)
        raw = await stats.score_stats(store, since=since, until=until)  # nothing rolled up yet
        await store.refresh_score_rollup(SCORE_BUCKETS, margin=-timedelta(hours=1))  # this hour too
        rolled = await stats.score_stats(store, since=since, until=until)
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            api = (await c.get("/api/v1/stats/scores", params={"since": "1h"})).json()
        return raw, rolled, api
    finally:
        await store.close()


def test_score_statistics_count_abstentions_apart(pg_url: str) -> None:
    raw, rolled, api = asyncio.run(_stats(pg_url))
    for got in (raw, rolled):  # read from judgements, and from the hourly rollup
        counts = {s.judge: (s.passed, s.failed, s.errors, s.abstained, s.skipped) for s in got}
        assert counts == {"faithfulness": (1, 1, 0, 1, 0), "relevancy": (2, 1, 1, 1, 1)}
    items = {s["judge"]: s for s in api["items"]}
    assert (items["relevancy"]["abstained"], items["relevancy"]["skipped"]) == (1, 1)
