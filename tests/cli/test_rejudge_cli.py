"""``ragpulse rejudge``: stored traces re-evaluated with the current judge versions, old versions kept."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.model import Source, Trace
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge
from testsupport import scripted_judge_env


async def _seed(url: str) -> None:
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    try:
        async with Engine({"keyword": ScriptedJudge("keyword", 0.1)}, store, s.engine) as eng:
            for i, app_name in enumerate(["shop", "shop", "hr"]):
                await eng.submit(
                    Trace(
                        trace_id=f"{i:032x}",
                        app=app_name,
                        question="Where is my order?",
                        answer="Your order ships in 3 days.",
                        keywords=("order", "refund"),
                        source=Source.KAFKA,
                        end_time=datetime.now(UTC),
                    )
                )
    finally:
        await store.close()


def test_rejudge_app_since_keeps_old_versions(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_seed(pg_url))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    res = CliRunner().invoke(
        app, ["rejudge", "--app", "shop", "--since", "1h", "--judges", "keyword", "--json"]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert (summary["traces"], summary["stored"], summary["failed"]) == (2, 2, 0)
    # the real keyword judge: "order" found, "refund" not → 0.5 ≥ 0.3 → pass
    assert summary["counts"] == {"pass": 2, "fail": 0, "error": 0, "abstained": 0, "skipped": 0}
    new_version = summary["judges"]["keyword"]
    assert new_version != ScriptedJudge("keyword").version

    doc = json.loads(CliRunner().invoke(app, ["trace", f"{0:032x}", "--json"]).stdout)
    versions = {j["version"]: j["score"] for j in doc["judgements"]}
    assert versions == {ScriptedJudge("keyword").version: 0.1, new_version: 0.5}
    other = json.loads(CliRunner().invoke(app, ["trace", f"{2:032x}", "--json"]).stdout)
    assert [j["version"] for j in other["judgements"]] == [
        ScriptedJudge("keyword").version
    ]  # app hr untouched

    again = CliRunner().invoke(app, ["rejudge", "--app", "shop", "--since", "1h", "--judges", "keyword"])
    assert again.exit_code == 0
    assert "rejudged 2 trace(s)" in again.stdout
    bad = CliRunner().invoke(app, ["rejudge", "--since", "yesterday"])
    assert bad.exit_code == 2


def test_rejudge_with_the_judge_model_down_exits_3(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.testing.openai_server import ScriptedOpenAIServer

    asyncio.run(_seed(pg_url))
    with ScriptedOpenAIServer() as server:  # nothing scripted: every call answers HTTP 400
        for k, v in scripted_judge_env(server.base_url, RAGPULSE_STORE_DATABASE_URL=pg_url).items():
            monkeypatch.setenv(k, v)
        res = CliRunner().invoke(app, ["rejudge", "--since", "1h", "--judges", "relevancy", "--json"])
    assert res.exit_code == 3, res.output
    assert json.loads(res.stdout)["counts"] == {
        "pass": 0,
        "fail": 0,
        "error": 3,
        "abstained": 0,
        "skipped": 0,
    }
    assert "error: every judgement of the 3 re-judged trace(s) is an error" in res.stderr


async def _seed_good(url: str) -> None:
    """Three traces with a good (scored) relevancy judgement, as an earlier run with a working model left them."""
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    try:
        async with Engine({"relevancy": ScriptedJudge("relevancy", 0.9)}, store, s.engine) as eng:
            for i in range(3):
                await eng.submit(
                    Trace(
                        trace_id=f"{i + 10:032x}",
                        app="shop",
                        question="Where is my order?",
                        answer="Your order ships in 3 days.",
                        source=Source.KAFKA,
                        end_time=datetime.now(UTC),
                    )
                )
    finally:
        await store.close()


def test_rejudge_never_shadows_a_good_judgement_with_an_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragpulse.testing.openai_server import ScriptedOpenAIServer

    asyncio.run(_seed_good(pg_url))
    with ScriptedOpenAIServer() as server:  # nothing scripted: every call answers HTTP 400
        for k, v in scripted_judge_env(server.base_url, RAGPULSE_STORE_DATABASE_URL=pg_url).items():
            monkeypatch.setenv(k, v)
        res = CliRunner().invoke(app, ["rejudge", "--since", "1h", "--judges", "relevancy", "--json"])
    assert res.exit_code == 3, res.output  # every judgement an error: runtime failure
    summary = json.loads(res.stdout)
    # the errors were not stored, so they are not reported as results (issue 24 item 9)
    assert summary["counts"] == {"pass": 0, "fail": 0, "error": 0, "abstained": 0, "skipped": 0}
    assert summary["kept_good"] == 3
    for i in range(3):
        doc = json.loads(CliRunner().invoke(app, ["trace", f"{i + 10:032x}", "--json"]).stdout)
        # only the good judgement: no error version beside it to become the newest
        assert [(j["version"], j["status"], j["score"]) for j in doc["judgements"]] == [
            (ScriptedJudge("relevancy").version, "ok", 0.9)
        ]


def test_rejudge_of_an_unchanged_version_spends_nothing_unless_forced(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second rejudge with the same judge version makes no model call and says so; ``--force`` judges again."""
    from ragpulse.testing.openai_server import ScriptedOpenAIServer

    asyncio.run(_seed(pg_url))
    with ScriptedOpenAIServer() as server:
        server.on("YES\nIt answers.")
        for k, v in scripted_judge_env(server.base_url, RAGPULSE_STORE_DATABASE_URL=pg_url).items():
            monkeypatch.setenv(k, v)
        args = ["rejudge", "--since", "1h", "--judges", "relevancy"]
        first = CliRunner().invoke(app, [*args, "--json"])
        assert first.exit_code == 0, first.output
        one = json.loads(first.stdout)
        # the 3 seeded traces ask the same question with the same answer: one call, the client's cache the rest
        assert (one["counts"]["pass"], one["already_judged"], server.request_count) == (3, {}, 1)
        version = one["judges"]["relevancy"]

        again = CliRunner().invoke(app, args)
        assert again.exit_code == 0, again.output
        assert server.request_count == 1  # nothing spent
        assert (
            f"relevancy: 3 trace(s) already judged by {version}: not judged again, nothing spent "
            "(--force judges them again)"
        ) in again.stdout
        assert (
            "judgements pass 0 fail 0 error 0 skipped 0" in again.stdout
        )  # nothing printed it did not store

        forced = CliRunner().invoke(app, [*args, "--force", "--json"])
        assert forced.exit_code == 0, forced.output
        three = json.loads(forced.stdout)
        assert (three["counts"]["pass"], three["already_judged"], server.request_count) == (3, {}, 2)
    doc = json.loads(CliRunner().invoke(app, ["trace", f"{0:032x}", "--json"]).stdout)
    relevancy = [j for j in doc["judgements"] if j["version"] != ScriptedJudge("keyword").version]
    assert [(j["version"], j["score"]) for j in relevancy] == [(version, 1.0)]  # one judgement, re-written
