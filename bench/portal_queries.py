"""Benchmark of the portal's read queries on a large store (issue 12; the scale issue keeps this list fast).

Fills a fresh database with N traces (default 1,000,000) spread over 30 days, 3 judgements each (relevancy,
faithfulness, keyword; ~20 % of faithfulness judgements fail, 2 % error), 5 apps, generated in SQL with
``generate_series`` (the data shape of ``write_results``; ANALYZE afterwards), then times through the service
layer, each query run 5 times after a warm-up, reporting the median and the worst, milliseconds:

- the first page (50) of ``GET /api/v1/traces`` unfiltered and with each filter (app, scenario, trace_outcome,
  source, judge+outcome=fail, judge+max_score, since 24h, q);
- ``GET /api/v1/stats/scores`` for 24 h and 7 d, and ``stats/timeseries`` for 24 h.

Usage::

    python bench/portal_queries.py --admin-url postgresql://postgres@127.0.0.1:5432/postgres [--traces 1000000]
        [--keep]

Not a timed test: results go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.services import stats, traces
from ragpulse.store.postgres import PostgresStore

FILL = """
INSERT INTO traces (trace_id, app, scenario, question, answer, documents, question_chars, answer_chars,
                    source, outcome, received_at, updated_at)
SELECT lpad(to_hex(i), 32, '0'),
       'app-' || (i % 5),
       'scenario-' || (i % 20),
       'How do I configure feature ' || i || ' of the product?',
       'You configure feature ' || i || ' in the settings page. It is free.',
       '[{"id": "d1", "content": "Feature docs.", "rank": 0}]'::jsonb,
       40, 60,
       CASE WHEN i % 50 = 0 THEN 'api' WHEN i % 3 = 0 THEN 'kafka' ELSE 'otlp' END,
       CASE WHEN i % 100 = 0 THEN 'not_evaluable' ELSE 'evaluated' END,
       $2::timestamptz - ((i::double precision / $1) * interval '30 days'),
       now()
FROM generate_series($3::bigint, $4::bigint) AS i
"""

JUDGEMENTS = """
INSERT INTO judgements (trace_id, judge, version, app, backend, model, score, passed, threshold, status, reason,
                        flags, latency_s, prompt_tokens, completion_tokens, created_at, updated_at, source,
                        published_at)
SELECT t.trace_id, j.judge, 'v1', t.app, 'llm', 'judge-m',
       CASE WHEN j.err THEN NULL ELSE j.score END,
       CASE WHEN j.err THEN NULL ELSE j.score >= 0.7 END,
       0.7,
       CASE WHEN j.err THEN 'error' ELSE 'ok' END,
       CASE WHEN j.err THEN 'judge_unavailable: HTTP 503' ELSE 'ok' END,
       '{}'::jsonb, 0.3, 300, 20, t.received_at, t.received_at, t.source, t.received_at
FROM traces t
CROSS JOIN LATERAL (
    SELECT name AS judge,
           (abs(hashtext(t.trace_id || name)) % 100) < 2 AS err,
           CASE WHEN name = 'faithfulness' AND (abs(hashtext(t.trace_id)) % 5) = 0
                THEN (abs(hashtext(t.trace_id || 'f')) % 60) / 100.0
                ELSE 0.7 + (abs(hashtext(t.trace_id || name)) % 31) / 100.0 END AS score
    FROM unnest(ARRAY['relevancy', 'faithfulness', 'keyword']) AS name
) j
WHERE t.outcome = 'evaluated'
  AND t.trace_id BETWEEN lpad(to_hex($1::bigint), 32, '0') AND lpad(to_hex($2::bigint), 32, '0')
"""


async def fill(conn: asyncpg.Connection[Any], n: int, now: datetime, chunks: int = 1) -> None:
    """Insert ``n`` traces received over the 30 days before ``now`` and their judgements, in ``chunks``
    statements of each kind (newest first; the judgements of a chunk are made from its traces)."""
    step = -(-n // chunks)
    for first in range(1, n + 1, step):
        last = min(n, first + step - 1)
        await conn.execute(FILL, n, now, first, last)
        await conn.execute(JUDGEMENTS, first, last)
        if chunks > 1:
            print(f"  traces {first:,}–{last:,} loaded", flush=True)


async def _admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _time(fn: Callable[[], Awaitable[Any]], runs: int = 5) -> tuple[float, float]:
    await fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


async def measure(store: PostgresStore, now: datetime, runs: int = 5) -> list[tuple[str, float, float]]:
    """Time the portal's queries (data received up to ``now``): ``(label, median ms, worst ms)`` of ``runs``."""
    day = now - timedelta(days=1)
    cases: dict[str, traces.TraceFilters] = {
        "traces (no filter)": traces.TraceFilters(),
        "traces app": traces.TraceFilters(app="app-3"),
        "traces scenario": traces.TraceFilters(scenario="scenario-7"),
        "traces trace_outcome=not_evaluable": traces.TraceFilters(trace_outcome="not_evaluable"),
        "traces source=kafka": traces.TraceFilters(source="kafka"),
        "traces judge=faithfulness outcome=fail": traces.TraceFilters(judge="faithfulness", outcome="fail"),
        "traces judge=faithfulness outcome=error": traces.TraceFilters(judge="faithfulness", outcome="error"),
        "traces judge=faithfulness max_score=0.3": traces.TraceFilters(judge="faithfulness", max_score=0.3),
        "traces since=24h": traces.TraceFilters(since=day),
        "traces app + judge fail + 24h": traces.TraceFilters(
            app="app-1", judge="faithfulness", outcome="fail", since=day
        ),
        "traces run_id (none match)": traces.TraceFilters(run_id="no-such-run"),
        "traces q=feature 4242": traces.TraceFilters(q="feature 4242 "),
    }
    rows = []
    for label, f in cases.items():

        async def q(f: traces.TraceFilters = f) -> Any:
            return await traces.list_traces(store, f, limit=50)

        rows.append((label, *await _time(q, runs)))
    for span in (timedelta(hours=24), timedelta(days=7)):

        async def s(span: timedelta = span) -> Any:
            return await stats.score_stats(store, since=now - span, until=now)

        rows.append((f"stats/scores {span.days or 1}{'d' if span.days else ' d'}", *await _time(s, runs)))

    for span in (timedelta(hours=24), timedelta(days=7), timedelta(days=30)):

        async def ts(span: timedelta = span) -> Any:
            return await stats.timeseries(store, since=now - span, until=now)

        label = f"stats/timeseries {span.days or 24} {'d' if span.days else 'h'}"
        rows.append((label, *await _time(ts, runs)))
    return rows


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the database")
    args = ap.parse_args()
    name = f"ragpulse_bench_{uuid.uuid4().hex[:8]}"
    await _admin(args.admin_url, f'CREATE DATABASE "{name}"')
    url = args.admin_url.rpartition("/")[0] + "/" + name
    try:
        store = await PostgresStore.connect(url, Settings(database_url=url, database_pool_max=2).store)
        now = datetime.now(UTC)
        conn = await asyncpg.connect(url)
        try:
            t0 = time.perf_counter()
            await fill(conn, args.traces, now)
            await conn.execute("ANALYZE")
            n_j = await conn.fetchval("SELECT count(*) FROM judgements")
            size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
            print(
                f"filled {args.traces} traces, {n_j} judgements in {time.perf_counter() - t0:.0f} s ({size})"
            )
        finally:
            await conn.close()
        t0 = time.perf_counter()
        await stats.refresh_rollup(store)  # what serve's RollupRefresher does every minute
        print(f"hourly score rollup built in {time.perf_counter() - t0:.1f} s")
        rows = await measure(store, now)
        await store.close()
        print(f"\n| query ({args.traces:,} traces, 30 days, 3 judgements each) | median ms | worst of 5 ms |")
        print("|---|---:|---:|")
        for label, med, worst in rows:
            print(f"| {label} | {med:.1f} | {worst:.1f} |")
    finally:
        if not args.keep:
            await _admin(args.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
