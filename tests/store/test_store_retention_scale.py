"""Retention at scale (issue 15 item 6): prune by time in chunks keeps exactly the newer rows (judgements,
judgement history, run links, shadow judgements), migration 170 upgrades a populated store, and the portal's
rewritten queries give the results of the queries they replace."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

import ragpulse.store.postgres as pg
from ragpulse.export.otel_setup import SCORE_BUCKETS
from ragpulse.model import JudgementStatus, Source
from ragpulse.store.migrate import load_migrations, migrate
from ragpulse.store.portal import TraceQuery
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f
from testsupport import pg_url_with


async def _fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def _counts(url: str) -> dict[str, int]:
    rows = await _fetch(
        url,
        """SELECT (SELECT count(*) FROM traces) AS traces, (SELECT count(*) FROM judgements) AS judgements,
                  (SELECT count(*) FROM judgement_history) AS history, (SELECT count(*) FROM run_cases) AS run_cases,
                  (SELECT count(*) FROM run_judgements) AS pinned, (SELECT count(*) FROM shadow_judgements) AS shadows,
                  (SELECT count(*) FROM dead_letters) AS dead_letters""",
    )
    return {k: int(v) for k, v in dict(rows[0]).items()}


async def test_prune_in_chunks_removes_exactly_the_old_rows(
    store: PostgresStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg, "PRUNE_CHUNK", 2)  # 7 old traces → 4 chunks, two of them with equal received_at
    now = datetime.now(UTC)
    old, older, new = now - timedelta(days=8), now - timedelta(days=30), now - timedelta(days=6)
    ages = {f"old{i}": (older if i < 3 else old) for i in range(7)} | {f"new{i}": new for i in range(5)}
    results = [
        f.result(f.trace(tid, run_id="r1", test_case_id=tid), f.ok(), f.ok("keyword", 1.0), received_at=at)
        for tid, at in sorted(ages.items())
    ]
    await store.write_results(results)
    # new content for old1 and new1: their faithfulness and keyword judgements move to judgement_history
    await store.write_results(
        [
            f.result(
                f.trace(tid, run_id="r1", test_case_id=tid, question="Changed?"), f.ok(), f.ok("keyword", 1.0)
            )
            for tid in ("old1", "new1")
        ]
    )
    for tid in ("old0", "old5", "new0"):
        await store.write_shadow_judgements(tid, "helpdesk", [f.ok(version="v2")])
    await store.write_dead_letter("kafka", "bad", b"x", {})
    conn = await asyncpg.connect(store_url)
    try:  # shadows and dead letters age by their own created_at
        await conn.execute(
            "UPDATE shadow_judgements SET created_at = $1 WHERE trace_id IN ('old0', 'old5')", old
        )
        await conn.execute("UPDATE dead_letters SET created_at = $1", older)
    finally:
        await conn.close()
    assert await _counts(store_url) == {
        "traces": 12,
        "judgements": 24,
        "history": 4,
        "run_cases": 12,
        "pinned": 24,
        "shadows": 3,
        "dead_letters": 1,
    }

    assert await store.prune(timedelta(days=7)) == 7

    assert await _counts(store_url) == {
        "traces": 5,
        "judgements": 10,
        "history": 2,
        "run_cases": 5,
        "pinned": 10,
        "shadows": 1,
        "dead_letters": 0,
    }
    kept = await _fetch(store_url, "SELECT DISTINCT trace_id FROM judgement_history ORDER BY 1")
    assert [r["trace_id"] for r in kept] == ["new1"]
    left = await _fetch(
        store_url,
        """SELECT trace_id FROM traces UNION ALL SELECT trace_id FROM judgements
           UNION ALL SELECT trace_id FROM run_cases UNION ALL SELECT trace_id FROM shadow_judgements
           UNION ALL SELECT trace_id FROM run_judgements""",
    )
    assert {r["trace_id"] for r in left} == {f"new{i}" for i in range(5)}
    assert await store.prune(timedelta(days=7)) == 0
    assert await store.prune(timedelta(days=5)) == 5
    # a shadow judgement ages by its own created_at (written now), not by its trace's
    assert await _counts(store_url) == {
        "traces": 0,
        "judgements": 0,
        "history": 0,
        "run_cases": 0,
        "pinned": 0,
        "shadows": 1,
        "dead_letters": 0,
    }


#: The score time series as it was computed before issue 15 (one ``date_bin`` GROUP BY over the window).
_OLD_TIMESERIES = """
SELECT judge, date_bin($3::interval, created_at, $1) AS bucket, count(*)::bigint AS total,
       count(*) FILTER (WHERE status = 'ok')::bigint AS ok,
       count(*) FILTER (WHERE passed)::bigint AS passed, avg(score) AS mean_score
FROM judgements
WHERE created_at >= $1 AND created_at < $2
  AND ($4::text IS NULL OR judge = $4) AND ($5::text IS NULL OR app = $5)
  AND ($6::text IS NULL OR source = $6)
  AND ($7::text IS NULL OR source IS DISTINCT FROM $7)
GROUP BY 1, 2 ORDER BY 1, 2
"""


async def test_timeseries_equals_the_date_bin_query(store: PostgresStore, store_url: str) -> None:
    base = datetime(2026, 3, 28, 22, 17, 31, 250_000, tzinfo=UTC)  # a DST weekend in Europe
    results = []
    for i in range(60):
        t = f.trace(
            f"t{i:03d}",
            app="a" if i % 3 else "b",
            source=Source.API if i % 7 == 0 else Source.KAFKA,
        )
        js = [f.ok(score=(i % 10) / 10), f.ok("keyword", 1.0)]
        if i % 5 == 0:
            js.append(f.not_ok("relevancy", JudgementStatus.ERROR, "judge_unavailable"))
        results.append(f.result(t, *js, received_at=base))
    await store.write_results(results)
    conn = await asyncpg.connect(store_url)
    try:  # one judgement every 37 minutes 13 s, across two days
        await conn.execute(
            """UPDATE judgements SET created_at = $1::timestamptz + (substr(trace_id, 2)::int * interval '2233 seconds')
                                                 + (length(judge) * interval '1 second')""",
            base,
        )
        cases = [
            (base, base + timedelta(days=2), timedelta(minutes=30), None, None, None, "api"),
            (
                base + timedelta(minutes=7),
                base + timedelta(hours=20),
                timedelta(hours=1),
                None,
                None,
                None,
                None,
            ),
            (base, base + timedelta(days=3), timedelta(days=1), "faithfulness", "a", None, None),
            (
                base - timedelta(hours=1),
                base + timedelta(days=2),
                timedelta(hours=6),
                None,
                None,
                "kafka",
                None,
            ),
            (
                base + timedelta(hours=3),
                base + timedelta(hours=3, seconds=1),
                timedelta(minutes=1),
                None,
                None,
                None,
                None,
            ),
            (base, base, timedelta(minutes=5), None, None, None, None),
        ]
        cases += [  # aligned to whole hours, longer than the data
            (
                base.replace(minute=0, second=0, microsecond=0),
                base + timedelta(days=3),
                timedelta(hours=3),
                None,
                None,
                None,
                None,
            ),
            (
                base - timedelta(days=1),
                base + timedelta(days=3),
                timedelta(hours=7),
                "keyword",
                None,
                None,
                "api",
            ),
        ]
        # no rollup yet; then everything rolled up (the interval's whole hours come from it); then the rollup
        # complete only up to base + 20 h (the hours after it come from judgements)
        compared = 0
        for phase in ("raw", "rollup", "partial rollup"):
            if phase == "rollup":
                assert await store.refresh_score_rollup(SCORE_BUCKETS) is not None
                assert await conn.fetchval("SELECT count(*) FROM judgement_rollup") > 0
            if phase == "partial rollup":
                cut = (base + timedelta(hours=20)).replace(minute=0, second=0, microsecond=0)
                await conn.execute("UPDATE judgement_rollup_state SET upto = $1", cut)
                await conn.execute("DELETE FROM judgement_rollup WHERE hour >= $1", cut)
            for since, until, step, judge, app, source, exclude in cases:
                old = [
                    dict(r)
                    for r in await conn.fetch(
                        _OLD_TIMESERIES, since, until, step, judge, app, source, exclude
                    )
                ]
                new = await store.score_timeseries(
                    since=since,
                    until=until,
                    interval=step,
                    judge=judge,
                    app=app,
                    source=source,
                    exclude_sources=(exclude,) if exclude else (),
                )
                compared += len(old)
                new = [
                    {k: v for k, v in r.items() if k != "errors"} for r in new
                ]  # a column the old one lacked
                assert [{**r, "mean_score": None} for r in new] == [{**r, "mean_score": None} for r in old], (
                    phase
                )
                assert [r["mean_score"] for r in new] == pytest.approx([r["mean_score"] for r in old]), phase
        assert compared == 3 * 224  # series points compared in each phase
        everything = await store.score_timeseries(
            since=base,
            until=base + timedelta(days=2),
            interval=timedelta(hours=12),
            judge=None,
            app=None,
            source=None,
            exclude_sources=(),
        )
        # judgement i at base + i × 2233 s: 20 of i < 20 in the first 12 h, 19 in the next (i = 20…38), …
        h = timedelta(hours=1)
        assert [(r["judge"], r["bucket"] - base, r["total"]) for r in everything] == [
            ("faithfulness", 0 * h, 20),
            ("faithfulness", 12 * h, 19),
            ("faithfulness", 24 * h, 20),
            ("faithfulness", 36 * h, 1),
            ("keyword", 0 * h, 20),
            ("keyword", 12 * h, 19),
            ("keyword", 24 * h, 20),
            ("keyword", 36 * h, 1),
            ("relevancy", 0 * h, 4),
            ("relevancy", 12 * h, 4),
            ("relevancy", 24 * h, 4),
        ]
    finally:
        await conn.close()


async def test_question_filter_reads_the_trigram_index(store: PostgresStore, store_url: str) -> None:
    questions = {
        "q1": "How do I configure feature 4242 of the product?",
        "q2": "How do I configure FEATURE 42420 of the product?",
        "q3": "What is 100% off_site?",
        "q4": "What is 100 percent offsite?",
        "q5": None,
    }
    await store.write_results([f.result(f.trace(k, question=v)) for k, v in questions.items()])
    index = await _fetch(
        store_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'traces_question_trgm_idx'"
    )
    assert [r["indexdef"] for r in index] == [
        "CREATE INDEX traces_question_trgm_idx ON public.traces USING gin (question gin_trgm_ops)"
    ]

    async def ids(q: str) -> list[str]:
        return sorted(r["trace_id"] for r in await store.list_trace_rows(TraceQuery(q=q), 50))

    assert await ids("feature 4242") == ["q1", "q2"]
    assert await ids("feature 4242 ") == ["q1"]
    assert await ids("100% off_") == ["q3"]
    assert await ids("of") == ["q1", "q2", "q3", "q4"]
    conn = await asyncpg.connect(store_url)
    try:  # the planner can answer the filter from the index (forced here: 5 rows would be scanned anyway)
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                "EXPLAIN SELECT trace_id FROM traces WHERE question ILIKE '%feature 4242%'"
            )
        )
        assert "traces_question_trgm_idx" in plan
    finally:
        await conn.close()


async def test_migration_170_upgrades_a_populated_store(store_url: str) -> None:
    conn = await asyncpg.connect(store_url)
    try:
        await conn.execute(
            """CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
                   checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for mig in load_migrations():
            if mig.version < 170:
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    mig.version,
                    mig.name,
                    mig.checksum,
                )
        await conn.execute(
            """INSERT INTO traces (trace_id, question, source, outcome, received_at)
               SELECT 't' || i, 'question number ' || i, 'kafka', 'evaluated', now() - i * interval '1 hour'
               FROM generate_series(1, 2000) AS i"""
        )
        await conn.execute(
            """INSERT INTO judgements (trace_id, judge, version, backend, score, passed, status, created_at)
               SELECT trace_id, 'keyword', 'v1', 'heuristic', 1, true, 'ok', received_at FROM traces"""
        )
        assert await migrate(conn) == [v.version for v in load_migrations() if v.version >= 170]
        assert await conn.fetchval("SELECT count(*) FROM traces") == 2000
        assert await conn.fetchval("SELECT count(*) FROM judgements") == 2000
        assert await conn.fetchval("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'") == "pg_trgm"
        await conn.execute("SET enable_seqscan = off")
        hits = await conn.fetch(
            "SELECT trace_id FROM traces WHERE question ILIKE '%number 1999%' ORDER BY trace_id"
        )
        assert [r["trace_id"] for r in hits] == ["t1999"]
    finally:
        await conn.close()
    store = await PostgresStore.connect(store_url, f.store_settings(store_url).store)
    try:
        assert await store.prune(timedelta(hours=1000.5)) == 1000
        assert await _counts(store_url) == {
            "traces": 1000,
            "judgements": 1000,
            "history": 0,
            "run_cases": 0,
            "pinned": 0,
            "shadows": 0,
            "dead_letters": 0,
        }
    finally:
        await store.close()


async def test_without_pg_trgm_the_migration_skips_the_index_and_q_still_works(pg_url: str) -> None:
    """A user who may not create extensions (not the database owner): migration 170 applies, builds no index, and
    the ``q`` filter answers by scanning."""
    role = f"ragpulse_limited_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(pg_url)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        await admin.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
        url = pg_url_with(pg_url, user=role)  # same server and database, TCP or socket
        store = await PostgresStore.connect(url, f.store_settings(url).store)
        try:
            await store.write_results(
                [
                    f.result(f.trace("q1", question="Feature 4242 please")),
                    f.result(f.trace("q2", question="other")),
                ]
            )
            rows = await store.list_trace_rows(TraceQuery(q="feature 42"), 50)
            assert [r["trace_id"] for r in rows] == ["q1"]
        finally:
            await store.close()
        assert await admin.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'") == 0
        assert (
            await admin.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'traces_question_trgm_idx'"
            )
            == 0
        )
        assert await admin.fetchval("SELECT max(version) FROM schema_migrations") >= 170
    finally:
        await admin.execute(f"DROP OWNED BY {role}")  # its tables here and its grants
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()


async def test_migration_170_finds_pg_trgm_outside_the_search_path(store_url: str) -> None:
    """pg_trgm already installed in its own schema (as managed PostgreSQL services do): the index names the
    operator class with that schema, and the filter uses it."""
    conn = await asyncpg.connect(store_url)
    try:
        await conn.execute("CREATE SCHEMA ext")
        await conn.execute("CREATE EXTENSION pg_trgm SCHEMA ext")
        store = await PostgresStore.connect(store_url, f.store_settings(store_url).store)
        try:
            await store.write_results([f.result(f.trace("q1", question="Feature 4242?"))])
            assert [r["trace_id"] for r in await store.list_trace_rows(TraceQuery(q="ture 42"), 50)] == ["q1"]
        finally:
            await store.close()
        assert (
            await conn.fetchval(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'traces_question_trgm_idx'"
            )
            == "CREATE INDEX traces_question_trgm_idx ON public.traces USING gin (question ext.gin_trgm_ops)"
        )
    finally:
        await conn.close()
