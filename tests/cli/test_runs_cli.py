"""``ragpulse runs list|show|compare`` and ``ragpulse trace`` against real PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from rich.console import Console
from typer.testing import CliRunner

from ragpulse.cli import _render, app
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.model import RunRecord, RunStatus, TestCase, TestSet
from ragpulse.runs import case_trace_id
from ragpulse.runs.compare import RunComparison, compare_reports
from ragpulse.runs.replay import run_replay
from ragpulse.runs.reports import full_report
from ragpulse.runs.stored import parse_since, run_report
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge


async def _replay(ts: TestSet, **kw: Any) -> dict[str, Any]:
    """Replay and return the report's JSON form (the stored and ``--json`` shape these tests read)."""
    return (await run_replay(ts, **kw)).to_json()


def _ts() -> TestSet:
    return TestSet(
        name="cli-mini",
        cases=tuple(TestCase(id=f"c{i}", question=f"q{i}", answer=f"a{i}") for i in range(4)),
    )


async def _seed(url: str) -> None:
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    try:
        good = {"relevancy": ScriptedJudge("relevancy", 0.9)}
        await _replay(_ts(), judges=good, store=store, settings=s, run_id="base")
        worse = {
            "relevancy": ScriptedJudge("relevancy", lambda t: 0.1 if t.question in ("q1", "q2") else 0.9)
        }
        await _replay(_ts(), judges=worse, store=store, settings=s, run_id="cand")
    finally:
        await store.close()


@pytest.fixture
def seeded(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    asyncio.run(_seed(pg_url))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    return pg_url


def _json(args: list[str]) -> Any:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_runs_list_show_compare(seeded: str) -> None:
    runs = _json(["runs", "list", "--json"])
    assert {r["run_id"]: r["pass_rate"] for r in runs} == {"base": 1.0, "cand": 0.5}
    assert {r["status"] for r in runs} == {"completed"}

    shown = _json(["runs", "show", "cand", "--json"])
    assert "wall_until" not in shown  # a finished replay measured its own wall time
    assert shown["averages"]["relevancy"] == pytest.approx((0.9 * 2 + 0.1 * 2) / 4)
    rows = {c["case_id"]: c for c in shown["cases"]}
    assert rows["c1"]["passed"] is False
    assert rows["c1"]["reason"] == "relevancy: scripted 0.10"

    cmp = _json(["runs", "compare", "base", "cand", "--json"])
    assert cmp["metrics"]["pass_rate"] == {"a": 1.0, "b": 0.5, "delta": -0.5}
    assert cmp["metrics"]["relevancy"]["delta"] == pytest.approx(-0.4)
    assert [f["case_id"] for f in cmp["pass_to_fail"]] == ["c1", "c2"]
    assert cmp["fail_to_pass"] == []

    text = CliRunner().invoke(app, ["runs", "show", "cand"])
    assert text.exit_code == 0
    assert "c1" in text.stdout
    assert "scripted 0.10" in text.stdout
    text = CliRunner().invoke(app, ["runs", "compare", "base", "cand"])
    assert text.exit_code == 0
    assert "pass → fail: 2 case(s)" in text.stdout

    missing = CliRunner().invoke(app, ["runs", "show", "nope"])
    assert missing.exit_code == 2
    assert "no run 'nope'" in missing.output


def test_runs_compare_streams_what_it_printed_before(seeded: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON line and the text of ``runs compare`` (flipped cases spooled, the table printed a chunk at a
    time) are those of the comparison computed from both full reports and printed as one table."""

    async def in_memory(a: str, b: str) -> RunComparison:
        store = await PostgresStore.connect(seeded, Settings(store_database_url=seeded).store)
        try:
            full_a = await full_report(store, await run_report(store, a))
            return compare_reports(full_a, await full_report(store, await run_report(store, b)))
        finally:
            await store.close()

    want = {}
    for a, b in (("base", "cand"), ("cand", "base")):
        cmp = asyncio.run(in_memory(a, b))
        assert len(cmp.pass_to_fail) + len(cmp.fail_to_pass) == 2
        text = Console(file=io.StringIO(), width=200, highlight=False)
        _render.print_compare(cmp, text)  # 2 rows: one table, as before
        assert isinstance(text.file, io.StringIO)
        want[a, b] = (json.dumps(cmp.to_json(), ensure_ascii=False) + "\n", text.file.getvalue())
    monkeypatch.setattr(_render, "TABLE_CHUNK", 1)
    for pool in ("8", "1"):  # a pool of one connection: keyset pages instead of a cursor and look-ups
        monkeypatch.setenv("RAGPULSE_STORE_POOL_MAX", pool)
        for (a, b), (doc, text_out) in want.items():
            res = CliRunner().invoke(app, ["runs", "compare", a, b, "--json"])
            assert res.exit_code == 0, res.output
            assert res.stdout == doc
            res = CliRunner().invoke(app, ["runs", "compare", a, b])
            assert res.exit_code == 0, res.output
            assert res.stdout == text_out


def test_trace_json_lists_every_version(seeded: str) -> None:
    tid = case_trace_id("cand", "c1")
    doc = _json(["trace", tid.upper(), "--json"])
    assert doc["trace_id"] == tid
    assert doc["run_id"] == "cand"
    assert doc["test_case_id"] == "c1"
    assert doc["outcome"] == "evaluated"
    (j,) = doc["judgements"]
    assert {k: j[k] for k in ("judge", "score", "passed", "status", "reason", "backend")} == {
        "judge": "relevancy",
        "score": 0.1,
        "passed": False,
        "status": "ok",
        "reason": "scripted 0.10",
        "backend": "heuristic",
    }
    assert j["version"] == ScriptedJudge("relevancy").version
    text = CliRunner().invoke(app, ["trace", tid])
    assert text.exit_code == 0
    assert "scripted 0.10" in text.stdout
    assert CliRunner().invoke(app, ["trace", "0" * 32]).exit_code == 2


def test_parse_since() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert parse_since("24h", now=now) == now - timedelta(hours=24)
    assert parse_since("30m", now=now) == now - timedelta(minutes=30)
    assert parse_since("1.5d", now=now) == now - timedelta(hours=36)
    assert parse_since("2026-01-01T00:00:00") == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ConfigError):
        parse_since("yesterday")


def test_negative_or_zero_limits_are_usage_errors() -> None:
    """Checked before any store is opened: a negative LIMIT used to reach PostgreSQL and fail there."""
    runner = CliRunner()
    for args in (
        ["runs", "list", "--limit", "-1"],
        ["runs", "list", "--limit", "0"],
        ["rejudge", "--limit", "0"],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        assert "--limit" in res.output
        assert "store" not in res.output


def test_a_run_id_that_came_only_with_events_is_shown_and_gated(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragpulse.engine import Engine
    from ragpulse.model import Source, Trace

    async def seed() -> None:
        s = Settings(store_database_url=pg_url)
        store = await PostgresStore.connect(pg_url, s.store)
        try:
            async with Engine({"keyword": ScriptedJudge("keyword", 0.9)}, store, s.engine) as eng:
                for i, q in enumerate(["q1", "q2"]):
                    await eng.submit(
                        Trace(
                            trace_id=f"{i + 7:032x}",
                            question=q,
                            answer="a",
                            source=Source.KAFKA,
                            run_id="ev-run",
                            test_case_id=f"c{i}",
                        )
                    )
        finally:
            await store.close()

    asyncio.run(seed())
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    shown = CliRunner().invoke(app, ["runs", "show", "ev-run", "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert [c["case_id"] for c in report["cases"]] == ["c0", "c1"]
    assert report["pass_rate"] == 1.0
    assert report["status"] == "completed"
    gated = CliRunner().invoke(app, ["gate", "ev-run", "--min", "pass_rate=0.9"])
    assert gated.exit_code == 0, gated.output


def test_compare_without_shared_cases_prints_na_and_exits_2(seeded: str) -> None:
    async def other() -> None:
        s = Settings(store_database_url=seeded)
        store = await PostgresStore.connect(seeded, s.store)
        try:
            ts = TestSet(name="other-set", cases=(TestCase(id="x1", question="qx", answer="ax"),))
            judges = {"relevancy": ScriptedJudge("relevancy", 0.9)}
            await _replay(ts, judges=judges, store=store, settings=s, run_id="other")
        finally:
            await store.close()

    asyncio.run(other())
    res = CliRunner().invoke(app, ["runs", "compare", "base", "other", "--json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["shared_cases"] == 0
    assert doc["metrics"]["pass_rate"] == {"a": None, "b": None, "delta": None}
    assert doc["warning"].startswith("no shared cases: runs base and other replayed different test sets")
    text = CliRunner().invoke(app, ["runs", "compare", "base", "other"])
    assert text.exit_code == 2
    assert "no shared cases: runs base and other have no case in common" in text.stdout
    row = next(line for line in text.stdout.splitlines() if "pass_rate" in line)
    assert row.count("n/a") == 3  # run A, run B, delta
    assert "0.000" not in text.stdout


async def _ended_runs(url: str) -> None:
    """A failed run that ran 42.5 s (started → finished) and a killed one whose last heartbeat came 17.25 s after
    its start, an hour ago (stale: it reads as ``interrupted``)."""
    s = Settings(store_database_url=url)
    store = await PostgresStore.connect(url, s.store)
    try:
        await store.create_run(RunRecord(run_id="failed-1", test_set="cli-mini", status=RunStatus.RUNNING))
        await store.finish_run("failed-1", RunStatus.FAILED, {"error": "judge model unreachable"})
        await store.create_run(
            RunRecord(
                run_id="killed-1",
                test_set="cli-mini",
                status=RunStatus.RUNNING,
                owner_host="gone",
                owner_pid=1,
            )
        )
    finally:
        await store.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "UPDATE runs SET finished_at = started_at + interval '42.5 seconds' WHERE run_id = 'failed-1'"
        )
        await conn.execute(
            "UPDATE runs SET started_at = now() - interval '1 hour', "
            "heartbeat_at = now() - interval '1 hour' + interval '17.25 seconds' WHERE run_id = 'killed-1'"
        )
    finally:
        await conn.close()


def test_runs_show_gives_the_time_a_failed_or_interrupted_run_ran(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_ended_runs(pg_url))
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    failed = _json(["runs", "show", "failed-1", "--json"])
    assert (failed["status"], failed["wall_seconds"], failed["wall_until"]) == ("failed", 42.5, "finished")
    killed = _json(["runs", "show", "killed-1", "--json"])
    assert (killed["status"], killed["wall_seconds"], killed["wall_until"]) == (
        "interrupted",
        17.25,
        "last heartbeat",
    )
    text = CliRunner().invoke(app, ["runs", "show", "failed-1"])
    assert "ran 42.50 s (started → finished)" in text.stdout
    assert "wall 0.00 s" not in text.stdout
    text = CliRunner().invoke(app, ["runs", "show", "killed-1"])
    assert "ran 17.25 s (started → last heartbeat)" in text.stdout


def test_an_api_key_in_judge_options_is_a_config_error_for_every_command(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "ragpulse.yaml"
    cfg.write_text(
        "judge_options:\n"
        "  relevancy: {model: m, api_key: sk-leak-1}\n"
        "  faithfulness: {shadow: {model: m2, api_key: sk-leak-2}}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.setenv("RAGPULSE_CONFIG", str(cfg))
    res = CliRunner().invoke(app, ["runs", "list"])
    assert res.exit_code == 2
    assert "judge.options.relevancy.api_key: a key never goes in the configuration" in res.output
    assert "judge.options.faithfulness.shadow.api_key: a key never goes in the configuration" in res.output
    assert "sk-leak" not in res.output
    # a variable named by api_key_env is needed only by the commands that build that judge
    cfg.write_text(
        "judge_options:\n  relevancy: {model: m, api_key_env: RAGPULSE_TEST_UNSET_KEY}\n", encoding="utf-8"
    )
    monkeypatch.delenv("RAGPULSE_TEST_UNSET_KEY", raising=False)
    assert CliRunner().invoke(app, ["runs", "list"]).exit_code == 0
