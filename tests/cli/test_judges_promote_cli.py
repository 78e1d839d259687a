"""Promoting a shadow judge: ``judges promote`` prints the config change, then ``rejudge`` (and the engine) reuse
the stored ``ok`` shadow judgements of that version and content without a model call; old rows are kept."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from ragpulse.config import Settings, load_settings
from ragpulse.engine import Engine
from ragpulse.judges.registry import opened_judges
from ragpulse.model import Document, Source, Trace
from ragpulse.store import PostgresStore
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

runner = CliRunner()
DOCS = (Document(content="Orders ship within 3 days; refunds take 5 days."),)
SHADOWED = [f"{i:032x}" for i in range(1, 5)]  # judged by main and shadow (share 1.0), shadow ok
BROKEN = f"{5:032x}"  # the shadow's call failed: an error shadow row, judged again after the promotion
PLAIN = [f"{i:032x}" for i in range(6, 8)]  # judged before the shadow existed: no shadow row
CHANGED = f"{8:032x}"  # shadow ok, then the same trace id came back with another answer: stale content
CONTEXT_PROMPT = "retrieved CONTEXT"  # only the shadow's (with_context) prompt says this


def _trace(tid: str, answer: str | None = None) -> Trace:
    """A trace with an answer of its own (identical prompts would be answered from the client's cache)."""
    return Trace(
        trace_id=tid,
        app="shop",
        question="When does my order ship?",
        answer=answer or f"Your order ships in 3 days (ticket {int(tid, 16)}).",
        documents=DOCS,
        source=Source.KAFKA,
    )


def _env(pg_url: str, server: ScriptedOpenAIServer, config: Path) -> dict[str, str]:
    return {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_JUDGE_MODEL": "judge-test",
        "RAGPULSE_JUDGE_BASE_URL": server.base_url,
        "RAGPULSE_JUDGE_API_KEY": "sk-test",
        "RAGPULSE_JUDGE_MAX_RETRIES": "0",
        "RAGPULSE_CONFIG": str(config),
    }


async def _judge(settings: Settings, traces: list[Trace], *, prefetch: bool = False) -> Engine:
    store = await PostgresStore.connect(settings.store.database_url or "", settings.store)
    try:
        async with (
            opened_judges(settings, ["relevancy"], ledger=store) as judges,
            Engine(judges, store, settings.engine) as engine,
        ):
            if prefetch:
                await engine.prefetch(traces)
            for t in traces:
                await engine.submit(t)
            await engine.drain(30)
        return engine
    finally:
        await store.close()


async def _rows(pg_url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(pg_url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def test_promote_then_rejudge_reuses_stored_shadow_judgements(
    pg_url: str, openai_server: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadowed_cfg = tmp_path / "shadowed.yaml"
    shadowed_cfg.write_text(
        "judge_enabled: [relevancy]\njudge_options:\n  relevancy:\n    shadow: {mode: with_context, share: 1.0}\n",
        "utf-8",
    )
    plain_cfg = tmp_path / "plain.yaml"
    plain_cfg.write_text("judge_enabled: [relevancy]\n", "utf-8")
    env = _env(pg_url, openai_server, shadowed_cfg)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    openai_server.on(
        Reply(status=400, error_message="broken"), regex=f"{CONTEXT_PROMPT}[\\s\\S]*BROKEN", times=1
    )
    openai_server.on("NO\nThe answer contradicts the context.", contains=CONTEXT_PROMPT)
    openai_server.on("YES\nIt addresses the question.")

    shadowed = load_settings(shadowed_cfg)
    plain = load_settings(plain_cfg)
    asyncio.run(_judge(plain, [_trace(t) for t in PLAIN]))
    asyncio.run(
        _judge(shadowed, [_trace(t) for t in SHADOWED] + [_trace(BROKEN, "BROKEN: ships in 3 days.")])
    )
    asyncio.run(_judge(shadowed, [_trace(CHANGED)]))
    asyncio.run(_judge(plain, [_trace(CHANGED, "It ships in three days.")]))  # new content, same trace id
    assert openai_server.request_count == 2 * 6 + 3  # main + shadow for 6 traces, main only for 3
    main_version = asyncio.run(_rows(pg_url, "SELECT DISTINCT version FROM judgements"))[0]["version"]

    res = runner.invoke(_cli(), ["judges", "promote", "relevancy", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["main_version"] == main_version
    assert plan["options"] == {"mode": "with_context"}
    assert (plan["reusable"], plan["not_reusable"]) == (
        5,
        1,
    )  # CHANGED's row counts, but its content moved on
    assert plan["rejudge_command"].startswith("ragpulse rejudge --judges relevancy --since ")
    text = runner.invoke(_cli(), ["judges", "promote", "relevancy"])
    assert text.exit_code == 0, text.output
    assert "judge:\n  options:\n    relevancy:\n      mode: with_context" in text.stdout

    promoted_cfg = tmp_path / "promoted.yaml"
    promoted_cfg.write_text("judge_enabled: [relevancy]\n" + plan["config_yaml"], "utf-8")
    monkeypatch.setenv("RAGPULSE_CONFIG", str(promoted_cfg))
    before = openai_server.request_count
    res = runner.invoke(_cli(), ["rejudge", "--judges", "relevancy", "--since", "1h", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    calls = openai_server.requests[before:]
    # no model call for the 4 traces with a reusable shadow judgement; one each for the other 4
    assert len(calls) == 4
    assert all(CONTEXT_PROMPT in r.prompt_text for r in calls)
    assert summary["judges"]["relevancy"] == plan["shadow_version"]
    assert (summary["traces"], summary["stored"]) == (8, 8)
    assert summary["reused"] == {"relevancy": 4}
    assert summary["judged"] == {"relevancy": 4}

    rows = asyncio.run(
        _rows(
            pg_url,
            "SELECT j.trace_id, j.score, j.prompt_tokens, j.flags, s.score AS shadow_score,"
            " s.prompt_tokens AS shadow_tokens FROM judgements j LEFT JOIN shadow_judgements s"
            " ON s.trace_id = j.trace_id AND s.version = j.version WHERE j.version = $1 ORDER BY j.trace_id",
            plan["shadow_version"],
        )
    )
    assert len(rows) == 8
    reused = {r["trace_id"]: r for r in rows if json.loads(r["flags"]).get("reused_from") == "shadow"}
    assert sorted(reused) == SHADOWED
    for r in reused.values():
        flags = json.loads(r["flags"])
        assert (r["score"], r["prompt_tokens"]) == (r["shadow_score"], 0) == (0.0, 0)
        assert flags["shadow_cost"]["prompt_tokens"] == r["shadow_tokens"] > 0
        assert flags["shadow_cost"]["judged_at"]
    judged = [r for r in rows if r["trace_id"] not in reused]
    assert all(r["prompt_tokens"] > 0 and "reused_from" not in json.loads(r["flags"]) for r in judged)
    # the old main rows are kept beside the promoted ones; outcomes unchanged
    old = asyncio.run(_rows(pg_url, "SELECT count(*) AS n FROM judgements WHERE version = $1", main_version))
    assert old[0]["n"] == 8
    outcomes = asyncio.run(_rows(pg_url, "SELECT DISTINCT outcome FROM traces"))
    assert [r["outcome"] for r in outcomes] == ["evaluated"]

    # the trace view says which judgement was reused, and keeps both versions
    view = runner.invoke(_cli(), ["trace", SHADOWED[0]])
    assert view.exit_code == 0, view.output
    assert f"relevancy {plan['shadow_version']}: reused the shadow judgement of " in view.stdout
    assert main_version in view.stdout
    # a second rejudge of the same version judges nothing again and says so (issue 24 item 9) ...
    before = openai_server.request_count
    res = runner.invoke(_cli(), ["rejudge", "--judges", "relevancy", "--since", "1h"])
    assert res.exit_code == 0, res.output
    assert f"relevancy: 8 trace(s) already judged by {plan['shadow_version']}: not judged again" in res.stdout
    assert openai_server.request_count == before
    # ... and with --force the text summary says what was reused
    res = runner.invoke(_cli(), ["rejudge", "--judges", "relevancy", "--since", "1h", "--force"])
    assert res.exit_code == 0, res.output
    assert "reused stored shadow judgements (no model call): relevancy 4 reused, 4 judged" in res.stdout

    # judges compare after the promotion: no shadow configured any more is a usage error ...
    res = runner.invoke(_cli(), ["judges", "compare", "relevancy"])
    assert res.exit_code == 2
    assert "judge.options.relevancy has no shadow configuration" in res.output
    # ... and with the shadow configuration the main side is the old main version, not the reused copies
    monkeypatch.setenv("RAGPULSE_CONFIG", str(shadowed_cfg))
    res = runner.invoke(_cli(), ["judges", "compare", "relevancy", "--since", "1h", "--json"])
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert (cmp["main_versions"], cmp["shadow_versions"]) == ([main_version], [plan["shadow_version"]])
    # SHADOWED + CHANGED: main YES, shadow NO; BROKEN's shadow is an error (paired, not scored)
    assert (cmp["pairs"], cmp["scored"]) == (6, 5)
    assert cmp["confusion"] == {"both_pass": 0, "main_only": 5, "shadow_only": 0, "both_fail": 0}


async def _engine_reuse(pg_url: str, server: ScriptedOpenAIServer) -> tuple[Engine, Engine, int]:
    base = Settings(
        store_database_url=pg_url,
        judge_model="judge-test",
        judge_base_url=server.base_url,
        judge_api_key="sk-test",
        judge_max_retries=0,
    )
    shadowed = base.replaced(judge_options={"relevancy": {"shadow": {"mode": "with_context", "share": 1.0}}})
    promoted = base.replaced(judge_options={"relevancy": {"mode": "with_context"}})
    traces = [_trace(t) for t in SHADOWED]
    await _judge(shadowed, traces)
    before = server.request_count
    # a redelivery after the promotion (Kafka: prefetch per poll batch), then one without prefetch
    batch = await _judge(promoted, traces[:3], prefetch=True)
    single = await _judge(promoted, traces[3:])
    return batch, single, server.request_count - before


async def test_engine_reuses_shadow_judgements_with_and_without_prefetch(
    pg_url: str, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.on("NO\nContradicts.", contains=CONTEXT_PROMPT)
    openai_server.on("YES\nAddresses it.")
    batch, single, calls = await _engine_reuse(pg_url, openai_server)
    assert calls == 0
    assert (batch.stats.shadow_reused, single.stats.shadow_reused) == (3, 1)
    assert batch.stats.shadow_judgements == 0  # the promoted config has no shadow
    rows = await _rows(pg_url, "SELECT flags->>'reused_from' AS r, count(*) AS n FROM judgements GROUP BY 1")
    assert {r["r"]: r["n"] for r in rows} == {None: 4, "shadow": 4}


def test_promote_without_a_shadow_is_a_config_error(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("RAGPULSE_CONFIG", raising=False)
    res = runner.invoke(_cli(), ["judges", "promote", "relevancy"])
    assert res.exit_code == 2
    assert "judge.options.relevancy has no shadow configuration to promote" in res.output
    for command in ("promote", "compare"):
        res = runner.invoke(_cli(), ["judges", command, "nosuch"])
        assert res.exit_code == 2
        assert "unknown judge 'nosuch' (known judges: " in res.output
        assert "faithfulness" in res.output
        assert "no shadow configuration" not in res.output
    same = tmp_path / "same.yaml"
    same.write_text("judge_options:\n  relevancy:\n    shadow: {share: 0.5}\n", "utf-8")
    monkeypatch.setenv("RAGPULSE_CONFIG", str(same))
    res = runner.invoke(_cli(), ["judges", "compare", "relevancy"])
    assert res.exit_code == 2
    assert "judge.options.relevancy.shadow: same version as the main judge" in res.output


def _cli() -> Any:
    from ragpulse.cli import app

    return app


async def test_replaying_a_run_again_after_the_promotion_reuses_the_shadow(
    pg_url: str, openai_server: ScriptedOpenAIServer
) -> None:
    from ragpulse.model import TestCase, TestSet
    from ragpulse.runs.replay import run_replay

    openai_server.on("NO\nContradicts.", contains=CONTEXT_PROMPT)
    openai_server.on("YES\nAddresses it.")
    base = Settings(
        store_database_url=pg_url,
        judge_model="judge-test",
        judge_base_url=openai_server.base_url,
        judge_api_key="k",
    )
    shadowed = base.replaced(judge_options={"relevancy": {"shadow": {"mode": "with_context", "share": 1.0}}})
    promoted = base.replaced(judge_options={"relevancy": {"mode": "with_context"}})
    ts = TestSet(
        name="promo",
        cases=tuple(
            TestCase(
                id=f"c{i}", question="When does my order ship?", answer=f"In {i + 2} days.", contexts=("x",)
            )
            for i in range(3)
        ),
    )
    store = await PostgresStore.connect(pg_url, base.store)
    try:
        reports = []
        for settings in (shadowed, promoted):
            async with opened_judges(settings, ["relevancy"], ledger=store) as judges:
                before = openai_server.request_count
                report = await run_replay(
                    ts, judges=judges, store=store, settings=settings, run_id="r", replace_run=True
                )
                reports.append((report, openai_server.request_count - before))
    finally:
        await store.close()
    (first, first_calls), (again, again_calls) = reports
    assert (first_calls, again_calls) == (6, 0)  # main + shadow per case, then nothing: every case reused
    assert (first.pass_rate, again.pass_rate) == (1.0, 0.0)  # the run now has the shadow's verdicts
    rows = await _rows(
        pg_url, "SELECT flags->>'reused_from' AS r, passed, count(*) AS n FROM judgements GROUP BY 1, 2"
    )
    assert {(r["r"], r["passed"]): r["n"] for r in rows} == {(None, True): 3, ("shadow", False): 3}
