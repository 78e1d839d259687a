"""Benchmark of the portal's read queries on a large store (issue 12; the scale issue keeps this list fast; issue 31
adds the trace explorer's: text search, model and latency filters, deep pages, the review queue).

Fills a fresh database with N traces (default 1,000,000) generated in SQL with ``generate_series`` (the data
shape of ``write_results``; ANALYZE afterwards). The distribution (every choice a hash of the trace's number, so
it is the same on every run):

- received over the 30 days before now, evenly; 5 apps (``app-0`` … ``app-4``), 20 scenarios, 3 app models
  (``gpt-app-0`` … ``gpt-app-2``); latency 0.2–5.2 s, uniform in steps of 1 ms; sessions of 4 consecutive
  traces (``session-<n / 4>``);
- source: 2 % ``api``, a third of the rest ``kafka``, the others ``otlp``; 1 % not evaluable (no judgements);
- question: "How do I <verb> the <word> <word> …?" — 2 words of a 40-word product vocabulary (:data:`VOCAB`)
  plus the trace's number, 45–75 characters; answer: 1–8 sentences of 2 more vocabulary words each, 60–560
  characters, so a vocabulary word is in about 1 trace in 8 (question or answer);
- 3 judgements per evaluated trace (relevancy, faithfulness, keyword), threshold 0.7; 10 % of faithfulness
  judgements fail (score 0–0.59), 2 % of all judgements are errors; the others pass (0.7–1.0).

Then it times the service functions behind the API. ``--explorer`` (issue 31): the fixed list of
:func:`explorer_cases` — text search with 1, 2 and 3 words, each filter alone, 3 combined, a deep page (a cursor
15 days back), the review queue — each run 20 times after a warm-up: median, p95 and worst, milliseconds.
Without it: the older list (:func:`measure`, 5 runs: median and worst), which ``bench/retention.py`` reuses.

Usage::

    python bench/portal_queries.py --admin-url postgresql://postgres@127.0.0.1:5432/postgres [--traces 1000000]
        [--explorer] [--keep]

Not a timed test: results go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.portal import review, stats, traces
from ragpulse.query import encode_cursor
from ragpulse.store.postgres import PostgresStore

#: The product vocabulary of the generated questions and answers (40 words).
VOCAB = (
    "invoice export timeout refund shipping password account billing report dashboard webhook token quota "
    "upload download backup restore schedule calendar reminder payroll holiday contract warranty license "
    "printer scanner router firewall mailbox archive budget forecast ledger receipt voucher coupon discount "
    "subscription renewal"
).split()
_VOCAB_SQL = "ARRAY[" + ", ".join(f"'{w}'" for w in VOCAB) + "]"

FILL = f"""
INSERT INTO traces (trace_id, app, scenario, question, answer, documents, question_chars, answer_chars,
                    model, latency_s, session_id, source, outcome, received_at, updated_at)
SELECT lpad(to_hex(i), 32, '0'),
       'app-' || (i % 5),
       'scenario-' || (i % 20),
       x.question,
       x.answer,
       '[{{"id": "d1", "content": "Feature docs.", "rank": 0}}]'::jsonb,
       length(x.question), length(x.answer),
       'gpt-app-' || (abs(hashtext(i || 'm')) % 3),
       0.2 + (abs(hashtext(i || 'l')) % 5000) / 1000.0,
       'session-' || (i / 4),
       CASE WHEN i % 50 = 0 THEN 'api' WHEN i % 3 = 0 THEN 'kafka' ELSE 'otlp' END,
       CASE WHEN i % 100 = 0 THEN 'not_evaluable' ELSE 'evaluated' END,
       $2::timestamptz - ((i::double precision / $1) * interval '30 days'),
       now()
FROM generate_series($3::bigint, $4::bigint) AS i
CROSS JOIN LATERAL (
    SELECT 'How do I ' || (ARRAY['configure', 'reset', 'cancel', 'find'])[1 + abs(hashtext(i || 'v')) % 4]
           || ' the ' || v[1 + abs(hashtext(i || 'a')) % 40] || ' ' || v[1 + abs(hashtext(i || 'b')) % 40]
           || ' of item ' || i || '?' AS question,
           (SELECT string_agg('The ' || v[1 + abs(hashtext(i || 'c' || k)) % 40] || ' follows the '
                              || v[1 + abs(hashtext(i || 'd' || k)) % 40] || ' rule of section ' || k
                              || ', as the settings page explains.', ' ')
            FROM generate_series(1, 1 + abs(hashtext(i || 'n')) % 8) AS k) AS answer
    FROM (SELECT {_VOCAB_SQL} AS v) AS vocab
) AS x
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
           CASE WHEN name = 'faithfulness' AND (abs(hashtext(t.trace_id)) % 10) = 0
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


def explorer_cases(
    store: PostgresStore, now: datetime, deep: str, n: int
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The trace explorer's fixed query list (issue 31), each a first page of 50 through the service layer:
    text search with 1, 2 and 3 words (vocabulary words, each in about 1 trace in 8; the 3 words together in few),
    a word in no trace, every filter alone, three combinations, a deep page (``deep``: a keyset cursor 15 days
    back), the session filter and view (``n``: how many traces were loaded) and the review queue (failing/borderline/2 % random of the last 7 days, faithfulness v1)."""
    day = now - timedelta(days=1)
    f = traces.TraceFilters
    cases: dict[str, traces.TraceFilters] = {
        "text 1 word (invoice)": f(text="invoice"),
        "text 2 words (invoice export)": f(text="invoice export"),
        "text 3 words (invoice export timeout)": f(text="invoice export timeout"),
        "text in no trace (zeppelin)": f(text="zeppelin"),
        "q (question) feature": f(q="reset the printer"),
        "app": f(app="app-3"),
        "scenario": f(scenario="scenario-7"),
        "trace_outcome=not_evaluable": f(trace_outcome="not_evaluable"),
        "source=kafka": f(source="kafka"),
        "run_id (none match)": f(run_id="no-such-run"),
        "since 24h": f(since=day),
        "until 15 days ago": f(until=now - timedelta(days=15)),
        "judge faithfulness outcome=fail": f(judge="faithfulness", outcome="fail"),
        "judge faithfulness outcome=error": f(judge="faithfulness", outcome="error"),
        "judge faithfulness max_score=0.3": f(judge="faithfulness", max_score=0.3),
        "model=gpt-app-1": f(model="gpt-app-1"),
        "session": f(session=f"session-{n // 8}"),
        "min_latency_s=5.1 (2 %)": f(min_latency_s=5.1),
        "max_latency_s=0.25 (1 %)": f(max_latency_s=0.25),
        "combined: app + judge fail + 24h": f(app="app-1", judge="faithfulness", outcome="fail", since=day),
        "combined: text 2 words + model + latency ≥ 3 s": f(
            text="refund shipping", model="gpt-app-2", min_latency_s=3.0
        ),
        "combined: text + app + judge fail": f(
            text="warranty", app="app-2", judge="faithfulness", outcome="fail"
        ),
    }
    out: dict[str, Callable[[], Awaitable[Any]]] = {}
    for label, flt in cases.items():

        async def q(flt: traces.TraceFilters = flt) -> Any:
            return await traces.list_traces(store, flt, limit=50)

        out[label] = q

    async def deep_page() -> Any:
        return await traces.list_traces(store, f(), limit=50, cursor=deep)

    async def deep_text() -> Any:
        return await traces.list_traces(store, f(text="invoice"), limit=50, cursor=deep)

    async def session_view() -> Any:
        return await traces.get_session(store, f"session-{n // 5}")

    async def review_queue() -> Any:
        return await review.queue(store, {"faithfulness": "v1"}, since=now - timedelta(days=7), until=now,
                                  margin=0.1, share=0.02, limit=20)  # fmt: skip

    out["deep page (15 days back)"] = deep_page
    out["deep page with text 1 word"] = deep_text
    out["session view (4 turns)"] = session_view
    out["review queue (7 days, 20)"] = review_queue
    return out


async def measure_explorer(
    store: PostgresStore, conn: asyncpg.Connection[Any], now: datetime, runs: int = 20
) -> list[tuple[str, float, float, float]]:
    """Time :func:`explorer_cases`: ``(label, median ms, p95 ms, worst ms)`` of ``runs`` after a warm-up (p95:
    the value below which 95 % of the runs fall, nearest rank)."""
    row = await conn.fetchrow(
        "SELECT received_at, trace_id FROM traces WHERE received_at < $1 ORDER BY received_at DESC LIMIT 1",
        now - timedelta(days=15),
    )
    assert row is not None
    deep = encode_cursor([row["received_at"], row["trace_id"]])
    out = []
    n = await conn.fetchval("SELECT count(*) FROM traces")
    for label, fn in explorer_cases(store, now, deep, n).items():
        await fn()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await fn()
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        p95 = times[max(0, math.ceil(0.95 * len(times)) - 1)]
        out.append((label, statistics.median(times), p95, times[-1]))
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--traces", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the database")
    ap.add_argument("--explorer", action="store_true", help="the trace explorer's query list (p95 of 20)")
    ap.add_argument("--database", help="measure this database filled by an earlier --keep run (no fill)")
    args = ap.parse_args()
    name = args.database or f"ragpulse_bench_{uuid.uuid4().hex[:8]}"
    if not args.database:
        await _admin(args.admin_url, f'CREATE DATABASE "{name}"')
    url = args.admin_url.rpartition("/")[0] + "/" + name
    try:
        store = await PostgresStore.connect(url, Settings(store_database_url=url, store_pool_max=2).store)
        now = datetime.now(UTC)
        conn = await asyncpg.connect(url)
        try:
            if args.database:  # filled before: "now" is when it was filled
                now = await conn.fetchval("SELECT max(received_at) FROM traces") + timedelta(seconds=1)
            else:
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
        if not args.database:
            t0 = time.perf_counter()
            await stats.refresh_rollup(store)  # what serve's RollupRefresher does every minute
            print(f"hourly score rollup built in {time.perf_counter() - t0:.1f} s")
        if args.explorer:
            conn = await asyncpg.connect(url)
            try:
                load = os.getloadavg()
                explorer = await measure_explorer(store, conn, now)
                load_after = os.getloadavg()
            finally:
                await conn.close()
            await store.close()
            print(
                f"\nload average before {load[0]:.2f} {load[1]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}"
            )
            print(
                f"\n| query ({args.traces:,} traces, first page of 50) | median ms | p95 ms | worst of 20 ms |"
            )
            print("|---|---:|---:|---:|")
            for label, med, p95, worst in explorer:
                print(f"| {label} | {med:.1f} | {p95:.1f} | {worst:.1f} |")
            return
        rows = await measure(store, now)
        await store.close()
        print(f"\n| query ({args.traces:,} traces, 30 days, 3 judgements each) | median ms | worst of 5 ms |")
        print("|---|---:|---:|")
        for label, med, worst in rows:
            print(f"| {label} | {med:.1f} | {worst:.1f} |")
    finally:
        if not args.keep and not args.database:
            await _admin(args.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
