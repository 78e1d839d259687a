"""``runs compare --score-drop`` (issue 30 item 8): a judge's score drop inside a case that failed in both runs is
a regression, in the CLI (text and ``--json``), the REST API and the compare page, against real PostgreSQL.

Run A and run B replay five cases with two scripted judges (pass at 0.5):

| case | relevancy A → B | faithfulness A → B | verdict A → B | listed |
|---|---|---|---|---|
| c0 | 0.9 → 0.9 | 0.8 → 0.8 | pass → pass | — |
| c1 | 0.45 → 0.3 | 0.8 → 0.8 | fail → fail | score drop (relevancy −0.15) |
| c2 | 0.45 → 0.4 | 0.8 → 0.2 | fail → fail | score drop (faithfulness −0.6; relevancy −0.05 is under 0.1) |
| c3 | 0.3 → 0.3 | 0.8 → 0.8 | fail → fail | — (nothing dropped) |
| c4 | 0.9 → 0.2 | 0.8 → 0.8 | pass → fail | pass → fail |
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.model import TestCase, TestSet
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.runs.replay import run_replay
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge

_A = {"relevancy": [0.9, 0.45, 0.45, 0.3, 0.9], "faithfulness": [0.8] * 5}
_B = {"relevancy": [0.9, 0.3, 0.4, 0.3, 0.2], "faithfulness": [0.8, 0.8, 0.2, 0.8, 0.8]}


def _judges(scores: dict[str, list[float]]) -> dict[str, Any]:
    def by_case(name: str) -> Any:
        return lambda t: scores[name][int((t.question or "q9")[1:])]

    return {name: ScriptedJudge(name, by_case(name)) for name in scores}


async def _seed(url: str) -> None:
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    ts = TestSet(
        name="drops", cases=tuple(TestCase(id=f"c{i}", question=f"q{i}", answer=f"a{i}") for i in range(5))
    )
    try:
        for run_id, scores in (("A", _A), ("B", _B)):
            await run_replay(ts, judges=_judges(scores), store=store, settings=s, run_id=run_id)
    finally:
        await store.close()


@pytest.fixture
def seeded(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    asyncio.run(_seed(pg_url))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    return pg_url


def _drops(doc: dict[str, Any]) -> list[tuple[str, dict[str, tuple[float, float, float]]]]:
    return [
        (d["case_id"], {j: (v["a"], v["b"], v["delta"]) for j, v in d["judges"].items()})
        for d in doc["score_drops"]
    ]


def test_cli_lists_score_drops_in_cases_that_failed_in_both_runs(seeded: str) -> None:
    res = CliRunner().invoke(app, ["runs", "compare", "A", "B", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["score_drop"] == 0.1  # the documented default
    assert [f["case_id"] for f in doc["pass_to_fail"]] == ["c4"]
    assert doc["fail_to_pass"] == []
    assert _drops(doc) == [
        ("c1", {"relevancy": (0.45, 0.3, -0.15)}),
        ("c2", {"faithfulness": (0.8, 0.2, -0.6)}),
    ]
    assert doc["score_drops"][1]["reason_b"] == "faithfulness: scripted 0.20; relevancy: scripted 0.40"

    only_big = json.loads(
        CliRunner().invoke(app, ["runs", "compare", "A", "B", "--score-drop", "0.5", "--json"]).stdout
    )
    assert (only_big["score_drop"], _drops(only_big)) == (0.5, [("c2", {"faithfulness": (0.8, 0.2, -0.6)})])
    fine = json.loads(
        CliRunner().invoke(app, ["runs", "compare", "A", "B", "--score-drop", "0.05", "--json"]).stdout
    )
    assert _drops(fine) == [
        ("c1", {"relevancy": (0.45, 0.3, -0.15)}),
        ("c2", {"relevancy": (0.45, 0.4, -0.05), "faithfulness": (0.8, 0.2, -0.6)}),
    ]

    text = CliRunner().invoke(app, ["runs", "compare", "A", "B"])
    assert text.exit_code == 0, text.output
    assert "pass → fail: 1 case(s)" in text.stdout
    assert "score drop ≥ 0.1 (failed in both runs): 2 case(s)" in text.stdout
    assert "relevancy 0.450 → 0.300" in text.stdout
    assert "faithfulness 0.800 → 0.200" in text.stdout

    for bad in ("0", "1.5", "-0.1"):
        res = CliRunner().invoke(app, ["runs", "compare", "A", "B", "--score-drop", bad])
        assert res.exit_code == 2, (bad, res.output)
        assert "score drop must be > 0 and ≤ 1" in res.output


async def _portal_get(url: str, path: str) -> httpx.Response:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get(path)
    finally:
        await store.close()


def test_api_and_compare_page_list_score_drops(seeded: str) -> None:
    r = asyncio.run(_portal_get(seeded, "/api/v1/run-comparisons?a=A&b=B"))
    assert r.status_code == 200, r.text
    assert _drops(r.json()) == [
        ("c1", {"relevancy": (0.45, 0.3, -0.15)}),
        ("c2", {"faithfulness": (0.8, 0.2, -0.6)}),
    ]
    r = asyncio.run(_portal_get(seeded, "/api/v1/run-comparisons?a=A&b=B&score_drop=0.5"))
    assert [d["case_id"] for d in r.json()["score_drops"]] == ["c2"]
    assert asyncio.run(_portal_get(seeded, "/api/v1/run-comparisons?a=A&b=B&score_drop=0")).status_code == 422

    for lang, heading in (
        ("en", "Score drops in cases that failed in both runs"),
        ("zh", "两次运行均失败且评分下降的用例"),
    ):
        page = asyncio.run(_portal_get(seeded, f"/runs/compare?a=A&b=B&lang={lang}"))
        assert page.status_code == 200, page.text
        html = page.text
        assert f"{heading} (≥ 0.1)" in html
        section = html[html.index('id="score-drops"') :]
        assert [c for c in ("c1", "c2", "c3", "c4") if f'data-case="{c}"' in section] == ["c1", "c2"]
        assert (
            '<span class="pill fail" data-judge="relevancy">relevancy 0.45 → 0.30 (-0.150)</span>' in section
        )
    page = asyncio.run(_portal_get(seeded, "/runs/compare?a=A&b=B&score_drop=0.7"))
    assert 'id="no-score-drops"' in page.text
    assert "(≥ 0.7)" in page.text
    # the page's own form sets the threshold (a GET of the same page)
    assert '<input type="number" name="score_drop" min="0.01" max="1" step="0.01" value="0.7">' in page.text
    assert '<input type="hidden" name="a" value="A"><input type="hidden" name="b" value="B">' in page.text
