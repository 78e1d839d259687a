"""The compare page shows the comparison's ``warning`` about the cases (different test sets, no shared case) as
the API returns it and the CLI prints it, in English and Chinese (real PostgreSQL)."""

from __future__ import annotations

import asyncio
import html

import httpx
import pytest

from ragpulse.config import Settings
from ragpulse.model import TestCase, TestSet
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.runs.replay import run_replay
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge


def _set(name: str, ids: range) -> TestSet:
    return TestSet(
        name=name, cases=tuple(TestCase(id=f"c{i}", question=f"q{i}", answer=f"a{i}") for i in ids)
    )


async def _seed(url: str) -> None:
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    judges = {"keyword": ScriptedJudge("keyword", lambda t: 0.9)}
    try:
        await run_replay(_set("set-a", range(3)), judges=judges, store=store, settings=s, run_id="ra")
        await run_replay(_set("set-b", range(1, 5)), judges=judges, store=store, settings=s, run_id="rb")
        await run_replay(_set("set-c", range(10, 12)), judges=judges, store=store, settings=s, run_id="rc")
    finally:
        await store.close()


async def _get(url: str, path: str) -> httpx.Response:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get(path)
    finally:
        await store.close()


@pytest.fixture
def seeded(pg_url: str) -> str:
    asyncio.run(_seed(pg_url))
    return pg_url


def _warning(page: httpx.Response) -> str:
    assert page.status_code == 200, page.text
    start = page.text.index('id="cases-differ"')
    return html.unescape(page.text[page.text.index(">", start) + 1 : page.text.index("</p>", start)])


def test_compare_page_shows_the_cases_warning(seeded: str) -> None:
    api = asyncio.run(_get(seeded, "/api/v1/run-comparisons?a=ra&b=rb")).json()
    assert api["warning"].startswith("runs ra and rb replayed different test sets (set-a and set-b)")
    assert (api["cases_differ"], api["shared_cases"], api["cases_only_a"], api["cases_only_b"]) == (
        True,
        2,
        1,
        2,
    )

    en = _warning(asyncio.run(_get(seeded, "/runs/compare?a=ra&b=rb&lang=en")))
    assert en == (
        "Runs ra and rb replayed different test sets (set-a and set-b): comparing the 2 shared case(s) only "
        "(1 only in ra, 2 only in rb)."
    )
    zh = _warning(asyncio.run(_get(seeded, "/runs/compare?a=ra&b=rb&lang=zh")))
    assert (
        zh
        == "运行 ra 和 rb 回放了不同的测试集（set-a 和 set-b）：仅对比 2 个共同用例（1 个仅在 ra 中，2 个仅在 rb 中）。"
    )

    none = _warning(asyncio.run(_get(seeded, "/runs/compare?a=ra&b=rc&lang=en")))
    assert none.startswith("No shared cases: runs ra and rc replayed different test sets (set-a and set-c)")
    assert "nothing to compare" in none
    none_zh = _warning(asyncio.run(_get(seeded, "/runs/compare?a=ra&b=rc&lang=zh")))
    assert none_zh.startswith("没有共同用例：")

    same = asyncio.run(_get(seeded, "/runs/compare?a=ra&b=ra&lang=en"))
    assert 'id="cases-differ"' not in same.text
