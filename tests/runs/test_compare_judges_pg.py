"""``runs compare`` of runs that ran different judges, against real PostgreSQL: the CLI (text, ``--json``, exit
code), the REST API and the compare page (EN and ZH) compare on the judges both runs ran and say which they did
not share.

Run r1 replays four cases with relevancy, faithfulness and keyword; r2 with faithfulness and keyword only; r3
with relevancy only (scripted judges, pass at 0.5):

| case | relevancy r1 | faithfulness r1 → r2 | keyword r1 → r2 | verdict r1 → r2 (shared judges) | listed |
|---|---|---|---|---|---|
| c0 | 0.2 | 0.9 → 0.9 | 0.9 → 0.9 | pass → pass | — (r1 failed it on relevancy only) |
| c1 | 0.9 | 0.9 → 0.9 | 0.9 → 0.2 | pass → fail | pass → fail |
| c2 | 0.3 | 0.3 → 0.9 | 0.9 → 0.9 | fail → pass | fail → pass (reason in r1: faithfulness only) |
| c3 | 0.9 | 0.8 → 0.6 | 0.3 → 0.3 | fail → fail | score drop (faithfulness −0.2) |
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

_RUNS: dict[str, dict[str, list[float]]] = {
    "r1": {
        "relevancy": [0.2, 0.9, 0.3, 0.9],
        "faithfulness": [0.9, 0.9, 0.3, 0.8],
        "keyword": [0.9, 0.9, 0.9, 0.3],
    },
    "r2": {"faithfulness": [0.9, 0.9, 0.9, 0.6], "keyword": [0.9, 0.2, 0.9, 0.3]},
    "r3": {"relevancy": [0.9, 0.9, 0.9, 0.9]},
}

WARNING = "judges differ: relevancy only in r1; compared on faithfulness, keyword"


def _judges(scores: dict[str, list[float]]) -> dict[str, Any]:
    def by_case(name: str) -> Any:
        return lambda t: scores[name][int((t.question or "q9")[1:])]

    return {name: ScriptedJudge(name, by_case(name)) for name in scores}


async def _seed(url: str) -> None:
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    ts = TestSet(
        name="judge-sets",
        cases=tuple(TestCase(id=f"c{i}", question=f"q{i}", answer=f"a{i}") for i in range(4)),
    )
    try:
        for run_id, scores in _RUNS.items():
            await run_replay(ts, judges=_judges(scores), store=store, settings=s, run_id=run_id)
    finally:
        await store.close()


@pytest.fixture
def seeded(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    asyncio.run(_seed(pg_url))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    return pg_url


def _check(doc: dict[str, Any]) -> None:
    assert doc["warning"] == WARNING
    assert (doc["judges_compared"], doc["judges_only_a"], doc["judges_only_b"]) == (
        ["faithfulness", "keyword"],
        ["relevancy"],
        [],
    )
    assert [(f["case_id"], f["reason_a"], f["reason_b"]) for f in doc["pass_to_fail"]] == [
        ("c1", None, "keyword: scripted 0.20")
    ]
    assert [(f["case_id"], f["reason_a"], f["reason_b"]) for f in doc["fail_to_pass"]] == [
        ("c2", "faithfulness: scripted 0.30", None)
    ]
    assert [(d["case_id"], d["judges"]) for d in doc["score_drops"]] == [
        ("c3", {"faithfulness": {"a": 0.8, "b": 0.6, "delta": -0.2}})
    ]
    # over faithfulness and keyword: r1 passes c0, c1; r2 passes c0, c2 (the stored r1 report says 0.25)
    assert doc["metrics"]["pass_rate"] == {"a": 0.5, "b": 0.5, "delta": 0.0}
    assert doc["metrics"]["relevancy"] == {"a": 0.575, "b": None, "delta": None}


def test_cli_compares_runs_on_the_judges_both_ran(seeded: str) -> None:
    res = CliRunner().invoke(app, ["runs", "compare", "r1", "r2", "--json"])
    assert res.exit_code == 0, res.output
    _check(json.loads(res.stdout))
    assert f"warning: {WARNING}" in res.stderr

    text = CliRunner().invoke(app, ["runs", "compare", "r1", "r2"])
    assert text.exit_code == 0, text.output
    assert "compared on the judges both runs ran: faithfulness, keyword" in text.stdout
    assert "pass → fail: 1 case(s)" in text.stdout
    assert "fail → pass: 1 case(s)" in text.stdout
    assert "score drop ≥ 0.1 (failed in both runs): 1 case(s)" in text.stdout

    none = CliRunner().invoke(app, ["runs", "compare", "r2", "r3", "--json"])
    assert none.exit_code == 2, none.output
    doc = json.loads(none.stdout)
    assert doc["warning"] == (
        "no shared judges: runs r2 and r3 ran no judge in common (faithfulness, keyword only in r2; relevancy "
        "only in r3): nothing to compare"
    )
    assert doc["pass_to_fail"] == doc["fail_to_pass"] == doc["score_drops"] == []
    assert doc["metrics"]["pass_rate"] == {"a": None, "b": None, "delta": None}
    none_text = CliRunner().invoke(app, ["runs", "compare", "r2", "r3"])
    assert none_text.exit_code == 2
    assert "no shared judges: runs r2 and r3 ran no judge in common, nothing to compare" in none_text.stdout


async def _portal_get(url: str, path: str) -> httpx.Response:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get(path)
    finally:
        await store.close()


def test_api_and_compare_page_name_the_judges_not_shared(seeded: str) -> None:
    r = asyncio.run(_portal_get(seeded, "/api/v1/run-comparisons?a=r1&b=r2"))
    assert r.status_code == 200, r.text
    _check(r.json())

    for lang, text in (
        (
            "en",
            "The runs ran different judges (relevancy only in r1): cases are compared on the judges both ran: "
            "faithfulness, keyword.",
        ),
        (
            "zh",
            "两次运行使用的评估器不同（relevancy 仅在 r1 中运行）：仅按两次都运行的评估器对比用例：faithfulness, keyword。",
        ),
    ):
        page = asyncio.run(_portal_get(seeded, f"/runs/compare?a=r1&b=r2&lang={lang}"))
        assert page.status_code == 200, page.text
        assert (
            f'<p class="warning" id="judges-differ" data-compared="faithfulness,keyword">{text}</p>'
            in page.text
        )
        flips = page.text[
            page.text.index('id="flips"') : page.text.index("</table>", page.text.index('id="flips"'))
        ]
        assert [c for c in ("c0", "c1", "c2", "c3") if f'<td class="id">{c}</td>' in flips] == ["c1", "c2"]

    page = asyncio.run(_portal_get(seeded, "/runs/compare?a=r2&b=r3&lang=en"))
    assert (
        '<p class="warning" id="judges-differ" data-compared="">The runs ran no judge in common (faithfulness, '
        "keyword only in r2; relevancy only in r3): nothing to compare.</p>" in page.text
    )

    same = asyncio.run(_portal_get(seeded, "/runs/compare?a=r1&b=r1&lang=en"))
    assert 'id="judges-differ"' not in same.text
