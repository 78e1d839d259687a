"""Retention at scale (issue 15 item 6): pruning and the portal's queries on ~10 million judgements.

    python bench/retention.py load [--traces 3333334] [--admin-url URL]   # prints the database URL (kept)
    python bench/retention.py measure --url URL [--runs 5] [--prune-days 1] [--no-queries] [--no-prune]
    python bench/retention.py drop --url URL

``load`` creates a private database on the local PostgreSQL, migrates it and fills it like
``bench/portal_queries.py`` (traces over 30 days, 3 judgements each, in 30 chunks) plus the rows retention must
keep consistent: a superseded judgement in ``judgement_history`` for 1 % of the traces, a shadow judgement for
10 %, a run link for 5 %; then ``VACUUM ANALYZE`` and the hourly score rollup. The data's "now" is kept in the
table ``bench_meta`` so later measurements use the same windows.

``measure`` times the portal's queries (``portal_queries.measure``: median and worst of ``--runs`` after a
warm-up) and then ``PostgresStore.prune`` of the oldest ``--prune-days`` day(s): wall time, rows removed per
table (checked against counts taken before: exactly the rows older than the cut go, the rest stays), WAL bytes
written (``pg_current_wal_lsn``), and the latency of a concurrent writer (``write_results`` of 20 traces × 3
judgements in a loop) before and during the prune. Prints the 1-minute load average with each figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from portal_queries import fill, measure
from store_write import make_results

from ragpulse.config import Settings
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.portal import stats
from ragpulse.store.postgres import PostgresStore

EXTRAS = (
    """
INSERT INTO judgement_history (trace_id, judge, version, content_hash, app, backend, model, score, passed,
                               threshold, status, reason, source, created_at, updated_at, superseded_at)
SELECT j.trace_id, j.judge, j.version, 'sha256:old', j.app, j.backend, j.model, 0.5, false, 0.7, 'ok', 'old',
       j.source, j.created_at, j.updated_at, j.created_at + interval '1 minute'
FROM generate_series(1, $1::bigint, 100) AS i
JOIN judgements j ON j.trace_id = lpad(to_hex(i), 32, '0') AND j.judge = 'faithfulness' AND j.version = 'v1'
""",
    """
INSERT INTO shadow_judgements (trace_id, judge, version, app, backend, model, score, passed, threshold, status,
                               reason, created_at)
SELECT j.trace_id, j.judge, 'v2', j.app, j.backend, 'judge-small', j.score, j.passed, j.threshold, j.status,
       j.reason, j.created_at
FROM generate_series(10, $1::bigint, 10) AS i
JOIN judgements j ON j.trace_id = lpad(to_hex(i), 32, '0') AND j.judge = 'faithfulness' AND j.version = 'v1'
""",
    """
INSERT INTO run_cases (run_id, trace_id, test_case_id)
SELECT 'run-' || (i / 100000), lpad(to_hex(i), 32, '0'), 'case-' || i
FROM generate_series(20, $1::bigint, 20) AS i
""",
)

#: Rows older than the cut, per table (what a prune at ``$1`` must remove).
OLD_COUNTS = """
SELECT (SELECT count(*) FROM traces WHERE received_at < $1) AS traces,
       (SELECT count(*) FROM judgements j JOIN traces t USING (trace_id) WHERE t.received_at < $1) AS judgements,
       (SELECT count(*) FROM judgement_history h JOIN traces t USING (trace_id) WHERE t.received_at < $1)
           AS judgement_history,
       (SELECT count(*) FROM run_cases r JOIN traces t USING (trace_id) WHERE t.received_at < $1) AS run_cases,
       (SELECT count(*) FROM shadow_judgements WHERE created_at < $1) AS shadow_judgements
"""
TOTALS = """
SELECT (SELECT count(*) FROM traces) AS traces, (SELECT count(*) FROM judgements) AS judgements,
       (SELECT count(*) FROM judgement_history) AS judgement_history,
       (SELECT count(*) FROM run_cases) AS run_cases, (SELECT count(*) FROM shadow_judgements) AS shadow_judgements
"""


async def _one(conn: asyncpg.Connection[Any], sql: str, *args: Any) -> dict[str, Any]:
    """The single row of an aggregate query, as a dict."""
    row = await conn.fetchrow(sql, *args)
    assert row is not None
    return dict(row)


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _writer_batch(n: int) -> list[TraceResult]:
    out = []
    for _ in range(n):
        t = Trace(
            trace_id=uuid.uuid4().hex,
            app="app-w",
            question="How do I configure the writer?",
            answer="In the settings page.",
            source=Source.KAFKA,
        )
        js = tuple(
            Judgement(
                judge=name,
                version="v1",
                backend=Backend.LLM,
                model="m",
                score=0.9,
                passed=True,
                threshold=0.7,
                status=JudgementStatus.OK,
                reason="ok",
            )
            for name in ("relevancy", "faithfulness", "keyword")
        )
        out.append(TraceResult(trace=t, outcome=TraceOutcome.EVALUATED, judgements=js))
    return out


async def _writer(store: PostgresStore, stop: asyncio.Event, lat_ms: list[float]) -> None:
    while not stop.is_set():
        batch = _writer_batch(20)
        t0 = time.perf_counter()
        await store.write_results(batch)
        lat_ms.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.05)


def _lat(xs: list[float]) -> str:
    if not xs:
        return "-"
    s = sorted(xs)
    return f"{statistics.median(s):.0f} / {s[int(0.99 * (len(s) - 1))]:.0f} / {s[-1]:.0f}"


async def load(args: argparse.Namespace) -> None:
    name = f"ragpulse_retention_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    url = args.admin_url.rpartition("/")[0] + "/" + name
    print(f"database: {url}", flush=True)
    store = await PostgresStore.connect(url, Settings(store_database_url=url, store_pool_max=2).store)
    now = datetime.now(UTC)
    conn = await asyncpg.connect(url)
    try:
        t0 = time.perf_counter()
        await fill(conn, args.traces, now, chunks=30)
        print(f"traces and judgements in {time.perf_counter() - t0:.0f} s (load {_load()})", flush=True)
        t1 = time.perf_counter()
        for sql in EXTRAS:
            await conn.execute(sql, args.traces)
        await conn.execute("CREATE TABLE bench_meta (now timestamptz NOT NULL, traces bigint NOT NULL)")
        await conn.execute("INSERT INTO bench_meta VALUES ($1, $2)", now, args.traces)
        await conn.execute("VACUUM ANALYZE")
        print(f"extras + VACUUM ANALYZE in {time.perf_counter() - t1:.0f} s", flush=True)
        t1 = time.perf_counter()
        await stats.refresh_rollup(store)
        print(f"hourly rollup in {time.perf_counter() - t1:.0f} s", flush=True)
        print(await _one(conn, TOTALS))
        size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"loaded in {time.perf_counter() - t0:.0f} s, {size}, load {_load()}")
    finally:
        await conn.close()
        await store.close()


async def run_measure(args: argparse.Namespace) -> None:
    url = args.url
    store = await PostgresStore.connect(url, Settings(store_database_url=url, store_pool_max=4).store)
    conn = await asyncpg.connect(url)
    try:
        meta = await _one(conn, "SELECT now, traces FROM bench_meta")
        now, n = meta["now"], meta["traces"]
        totals = await _one(conn, TOTALS)
        print(f"data: {totals} (load {_load()})", flush=True)
        if not args.no_queries:
            await stats.refresh_rollup(store)
            rows = await measure(store, now, args.runs)
            print(f"\n| query ({totals['judgements']:,} judgements, load {_load()}) | median ms | worst ms |")
            print("|---|---:|---:|")
            for label, med, worst in rows:
                print(f"| {label} | {med:.1f} | {worst:.1f} |", flush=True)
        if args.no_prune:
            return
        print(
            "\n| prune of the oldest day | traces | judgements | wall s | WAL MiB | writer p50 / p99 / max ms "
            "(before → during) | rows check | load |"
        )
        print("|---|---:|---:|---:|---:|---|---|---|")
        for r in range(args.prune_rounds):
            legacy = args.legacy and r % 2 == 0
            print(await _prune_round(conn, store, n, args.prune_days, legacy), flush=True)
        if args.vacuum:
            t0 = time.perf_counter()
            await conn.execute("VACUUM judgements")
            print(f"VACUUM judgements after the prunes: {time.perf_counter() - t0:.1f} s (load {_load()})")
    finally:
        await conn.close()
        await store.close()


async def _legacy_prune(conn: asyncpg.Connection[Any], older_than: timedelta) -> int:
    """``PostgresStore.prune`` before issue 15 (the peer): chunks of 5,000 traces found by ``LIMIT`` without
    order, shadow judgements and dead letters in one statement each."""
    cutoff = await conn.fetchval("SELECT now() - $1::interval", older_than)
    total = 0
    while True:
        status = await conn.execute(
            "DELETE FROM traces WHERE trace_id IN (SELECT trace_id FROM traces WHERE received_at < $1 LIMIT $2)",
            cutoff,
            5000,
        )
        k = int(status.split()[-1])
        total += k
        if k < 5000:
            break
    await conn.execute("DELETE FROM dead_letters WHERE created_at < $1", cutoff)
    await conn.execute("DELETE FROM shadow_judgements WHERE created_at < $1", cutoff)
    return total


async def _prune_round(
    conn: asyncpg.Connection[Any], store: PostgresStore, n: int, days: float, legacy: bool
) -> str:
    """Prune the oldest ``days`` (legacy SQL or ``store.prune``) under a concurrent writer; one table row."""
    totals = await _one(conn, TOTALS)
    oldest = await conn.fetchval("SELECT min(received_at) FROM traces")
    # half-way between two traces, so the few ms between this and the prune's now() cannot move the cut
    cut = oldest + timedelta(days=days) + timedelta(days=30) / n / 2
    old = await _one(conn, OLD_COUNTS, cut)
    lat_idle: list[float] = []
    stop = asyncio.Event()
    w = asyncio.create_task(_writer(store, stop, lat_idle))
    await asyncio.sleep(5)
    stop.set()
    await w
    lat_prune: list[float] = []
    stop = asyncio.Event()
    w = asyncio.create_task(_writer(store, stop, lat_prune))
    lsn0 = await conn.fetchval("SELECT pg_current_wal_lsn()")
    older_than = await conn.fetchval("SELECT now() - $1::timestamptz", cut)
    la0 = _load()
    t0 = time.perf_counter()
    if legacy:
        async with store.pool.acquire() as c:
            pruned = await _legacy_prune(c, older_than)  # type: ignore[arg-type]
    else:
        pruned = await store.prune(older_than)
    wall = time.perf_counter() - t0
    stop.set()
    await w
    wal = await conn.fetchval("SELECT pg_current_wal_lsn() - $1::pg_lsn", lsn0)
    left = await _one(conn, OLD_COUNTS, cut)
    after = await _one(conn, TOTALS)
    written = (len(lat_idle) + len(lat_prune)) * 20
    expect = {k: totals[k] - old[k] for k in totals}
    expect["traces"] += written
    expect["judgements"] += 3 * written
    ok = all(v == 0 for v in left.values()) and after == expect and pruned == old["traces"]
    check = "exact" if ok else f"MISMATCH left {left} after {after} expected {expect}"
    return (
        f"| {'before (legacy SQL)' if legacy else 'store.prune'} | {pruned:,} | {old['judgements']:,} | {wall:.1f} "
        f"| {int(wal) / 2**20:.0f} | {_lat(lat_idle)} → {_lat(lat_prune)} | {check} | {la0} → {_load()} |"
    )


def _server_cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of the PostgreSQL backends ``pids`` (``/proc/<pid>/stat``; same host)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def writecost(args: argparse.Namespace) -> None:
    """Server CPU per stored trace with and without the trigram index of migration 170 (alternating rounds,
    each on a fresh database): ``write_results`` of ``--write-traces`` traces (a ~110-character question,
    4 documents, 3 judgements) in batches of 200."""
    words = "how can I configure the travel reimbursement policy for contractors working abroad in".split()
    print("| round | trigram index | traces/s | server CPU ms / trace | load |")
    print("|---|---|---:|---:|---|")
    for r in range(args.write_rounds * 2):
        with_index = r % 2 == 1
        name = f"ragpulse_writecost_{uuid.uuid4().hex[:8]}"
        admin = await asyncpg.connect(args.admin_url)
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = args.admin_url.rpartition("/")[0] + "/" + name
        try:
            store = await PostgresStore.connect(url, Settings(store_database_url=url, store_pool_max=1).store)
            try:
                if not with_index:
                    async with store.pool.acquire() as c:
                        await c.execute("DROP INDEX IF EXISTS traces_question_trgm_idx")
                results = [
                    x.model_copy(
                        update={
                            "trace": x.trace.model_copy(
                                update={
                                    "question": " ".join(words[(i + k) % len(words)] for k in range(14))
                                    + f" {i}?"
                                }
                            )
                        }
                    )
                    for i, x in enumerate(make_results(args.write_traces, 3, 0.0))
                ]
                async with store.pool.acquire() as c:
                    pid = c.get_server_pid()
                cpu0, la0, t0 = _server_cpu_s([pid]), _load(), time.perf_counter()
                for i in range(0, len(results), 200):
                    await store.write_results(results[i : i + 200])
                wall = time.perf_counter() - t0
                cpu = _server_cpu_s([pid]) - cpu0
                print(
                    f"| {r // 2 + 1} | {'yes' if with_index else 'no'} | {len(results) / wall:,.0f} "
                    f"| {cpu * 1000 / len(results):.3f} | {la0} → {_load()} |",
                    flush=True,
                )
            finally:
                await store.close()
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.close()


async def drop(args: argparse.Namespace) -> None:
    name = args.url.rpartition("/")[2]
    admin = await asyncpg.connect(args.admin_url)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=("load", "measure", "writecost", "drop"))
    ap.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--url")
    ap.add_argument("--traces", type=int, default=3_333_334)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prune-days", type=float, default=1.0)
    ap.add_argument(
        "--prune-rounds", type=int, default=2, help="prunes of the oldest --prune-days, one after another"
    )
    ap.add_argument(
        "--legacy", action="store_true", help="every other round runs the pre-issue-15 prune SQL (peer)"
    )
    ap.add_argument("--no-queries", action="store_true")
    ap.add_argument("--no-prune", action="store_true")
    ap.add_argument("--vacuum", action="store_true", help="VACUUM judgements after the prune, timed")
    ap.add_argument("--write-traces", type=int, default=20_000)
    ap.add_argument("--write-rounds", type=int, default=3)
    args = ap.parse_args()
    fn: Any = {"load": load, "measure": run_measure, "writecost": writecost, "drop": drop}[args.action]
    asyncio.run(fn(args))


if __name__ == "__main__":
    main()
