"""CPU per trace of the offline Kafka path, by stage: ragpulse's process CPU and PostgreSQL's server CPU.

    PYTHONPATH=src python bench/kafka_cpu.py --events 20000 [--partitions 3] [--profile serve.prof]

Two measurements on the same events (``kafka_bench._event``: a question, 2 chunks of ~100 characters, a
one-sentence answer, 1 keyword) and the same code:

1. **End to end** (the total): a tansu broker, a private database on ``127.0.0.1:5432`` and a real
   ``ragpulse serve`` subprocess with the offline judges (relevancy, faithfulness, keyword) and service
   defaults drain a backlog of ``--events`` messages. Process CPU = utime + stime of the serve process
   (``/proc/<pid>/stat``, every thread) from ``ready`` until every trace is stored; PostgreSQL CPU = the same
   for every server process attached to the bench database (backends found in ``pg_stat_activity``, sampled
   every 0.5 s, autovacuum workers included; the bench's own monitoring connection excluded). The start-up
   (imports, migrations) is outside the window; the idle group join inside it costs a few ms in all.
2. **Stages in isolation** (the breakdown), in this process with ``time.process_time()`` on the same events:
   Kafka fetch (an ``AIOKafkaConsumer`` reading the topic with ``getmany`` batches of 500, the source's
   setting), decode (lenient UTF-8 + JSON + the event JSON Schema, ``ragpulse.ingest.events``), assembly
   (``trace_from_event`` → ``Trace``), store lookup (``final_judgements`` of each poll batch of 500: the
   engine's prefetch), judges (the three offline judges built like ``serve`` builds them, one trace after the
   other), store write (``PostgresStore.write_results`` in batches of ``engine.batch_size`` into a second,
   fresh database; PostgreSQL CPU of that database's backends alongside), metrics (the exporters'
   ``on_stored``), offset bookkeeping and commit (``OffsetTracker`` add/done per message + one
   ``consumer.commit`` per second of the end-to-end run). "engine, asyncio, rest" = end-to-end minus the
   stages: queues, tasks, acks, logging, the loop itself.

Prints one JSON object (``--json``) or a Markdown table, with the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pstats
import sys
import time
import uuid
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_bench

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.engine.engine import _Item
from ragpulse.export import build_exporters, shutdown_exporters
from ragpulse.ingest import events as ev
from ragpulse.ingest.offsets import OffsetTracker
from ragpulse.judges.selection import open_judges
from ragpulse.model import Trace, TraceResult
from ragpulse.store.postgres import PostgresStore

ADMIN_URL = kafka_bench.ADMIN_URL
JUDGES = "relevancy,faithfulness,keyword"
TICK = os.sysconf("SC_CLK_TCK")
MONITOR = "ragpulse-bench-monitor"


def proc_cpu(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), seconds; 0.0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of stat(5)


class PgCpu:
    """CPU of the PostgreSQL server processes attached to ``db`` (sampled, so backends that exit are kept)."""

    def __init__(self, db: str) -> None:
        self._conn: asyncpg.Connection[Any] | None = None
        self._db = db
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def _pids(self) -> list[int]:
        assert self._conn is not None
        rows = await self._conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name IS DISTINCT FROM $2",
            self._db,
            MONITOR,
        )
        return [int(r["pid"]) for r in rows]

    async def sample(self) -> None:
        for pid in await self._pids():
            cpu = proc_cpu(pid)
            if cpu:
                self._last[pid] = cpu

    async def start(self) -> None:
        self._conn = await asyncpg.connect(ADMIN_URL, server_settings={"application_name": MONITOR})
        await self.sample()
        self._start = dict(self._last)  # backends already there count from now, later ones from 0 (new)
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            with contextlib.suppress(Exception):
                await self.sample()

    async def stop(self) -> float:
        """CPU seconds used by the database's server processes since :meth:`start`."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.sample()
        assert self._conn is not None
        await self._conn.close()
        return sum(v - self._start.get(pid, 0.0) for pid, v in self._last.items())


async def create_db(admin: asyncpg.Connection[Any]) -> tuple[str, str]:
    name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    return name, ADMIN_URL.rpartition("/")[0] + "/" + name


async def end_to_end(
    args: argparse.Namespace, broker: kafka_bench.Broker, topic: str, url: str, db: str
) -> dict[str, Any]:
    env = {
        "RAGPULSE_STORE_DATABASE_URL": url,
        "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "RAGPULSE_KAFKA_TOPICS": topic,
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{kafka_bench._free_port()}",
        "RAGPULSE_JUDGE_ENABLED": JUDGES,
    }
    serve = kafka_bench.Serve(env, profile=args.profile)
    try:
        if not serve.ready.wait(180):
            raise RuntimeError("serve not ready")
        mon = await asyncpg.connect(url, server_settings={"application_name": MONITOR})
        try:
            pg = PgCpu(db)
            await pg.start()
            c0 = proc_cpu(serve.proc.pid)
            t0 = time.monotonic()
            while True:
                n = int(await mon.fetchval("SELECT count(*) FROM traces"))
                if n >= args.events:
                    break
                if time.monotonic() - t0 > args.limit:
                    raise RuntimeError(f"only {n} of {args.events} traces stored after {args.limit} s")
                await asyncio.sleep(0.5)
            wall = time.monotonic() - t0
            cpu = proc_cpu(serve.proc.pid) - c0
            pg_cpu = await pg.stop()
            span = await mon.fetchrow(
                "SELECT count(DISTINCT trace_id) AS n, extract(epoch FROM max(created_at) - min(created_at)) AS s "
                "FROM judgements"
            )
            assert span is not None  # an aggregate: one row
            judgements = int(await mon.fetchval("SELECT count(*) FROM judgements"))
            # one store write = one transaction = one now(): the number of writes
            writes = int(await mon.fetchval("SELECT count(DISTINCT created_at) FROM judgements"))
        finally:
            await mon.close()
        return {
            "ragpulse_ms": cpu / args.events * 1000,
            "postgres_ms": pg_cpu / args.events * 1000,
            "traces_per_s": round(span["n"] / float(span["s"]), 1) if span["s"] else None,
            "judgements": judgements,
            "traces_per_write": round(args.events / writes, 1) if writes else None,
            "wall_s": round(wall, 1),
            "rss_peak_mb": round(serve.rss_peak / 2**20, 1),
        }
    finally:
        serve.stop()


async def stages(
    args: argparse.Namespace, broker: kafka_bench.Broker, topic: str, url: str, db: str, commit_s: float
) -> dict[str, float]:
    n = args.events
    out: dict[str, float] = {}
    settings = Settings(
        store_database_url=url, judge_enabled=JUDGES.split(","), kafka_bootstrap_servers=broker.bootstrap
    )
    # Kafka fetch: read the whole topic as the source does (getmany, 500 records)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
        group_id=f"bench-{uuid.uuid4().hex[:6]}", max_partition_fetch_bytes=1024 * 1024 + 64 * 1024,
    )  # fmt: skip
    await consumer.start()
    values: list[bytes] = []
    recs: list[tuple[TopicPartition, int]] = []
    c0 = time.process_time()
    while len(values) < n:
        batch = await consumer.getmany(timeout_ms=500, max_records=500)
        for tp, rs in batch.items():
            for r in rs:
                values.append(r.value)
                recs.append((tp, r.offset))
    out["kafka fetch"] = time.process_time() - c0
    # commit: one offset commit costs …, the end-to-end run commits about once a second
    last = {tp: off + 1 for tp, off in recs}
    c0 = time.process_time()
    for _ in range(20):
        await consumer.commit(last)
    one_commit = (time.process_time() - c0) / 20
    await consumer.stop()
    tracker = OffsetTracker()
    c0 = time.process_time()
    for tp, off in recs:
        tracker.add(tp, off)
    for tp, off in recs:
        tracker.done(tp, off)
    tracker.to_commit(None)
    out["offsets + commit"] = time.process_time() - c0 + one_commit * commit_s
    # decode (lenient UTF-8, JSON, JSON Schema) + assembly (to Trace): parse_event; of which assembly alone:
    # trace_from_event on the same events already decoded
    limit = settings.kafka.max_message_bytes
    c0 = time.process_time()
    traces: list[Trace] = [ev.parse_event(v, max_bytes=limit) for v in values]
    out["decode + assembly (parse_event)"] = time.process_time() - c0
    decoded = [json.loads(v) for v in values]
    c0 = time.process_time()
    for e in decoded:
        ev.trace_from_event(e)
    assembly = time.process_time() - c0
    del decoded
    store = await PostgresStore.connect(url, settings.store)
    mon = await asyncpg.connect(url, server_settings={"application_name": MONITOR})
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, None, ledger=store)
        # the engine's prefetch: one lookup per poll batch
        pg = PgCpu(db)
        await pg.start()
        c0 = time.process_time()
        for i in range(0, n, 500):
            chunk = traces[i : i + 500]
            await store.final_judgements(list(dict.fromkeys((t.trace_id, t.content_hash) for t in chunk)))
        out["store lookup"] = time.process_time() - c0
        pg_lookup = await pg.stop()
        # judges, one trace after the other (what the engine's workers run)
        engine = Engine(judges, store, settings.engine)
        c0 = time.process_time()
        results: list[TraceResult] = []
        now = datetime.now(UTC)
        for t in traces:
            results.append(await engine._evaluate(_Item(t, None, now)))
        out["judges (engine evaluate)"] = time.process_time() - c0
        # store write: batches of engine.batch_size, fresh database
        pg = PgCpu(db)
        await pg.start()
        size = settings.engine.batch_size
        reports = []
        c0 = time.process_time()
        for i in range(0, n, size):
            reports.append(await store.write_results(results[i : i + size]))
        out["store write"] = time.process_time() - c0
        pg_write = await pg.stop()
        exporters = build_exporters(settings.export, redact_text=False)
        c0 = time.process_time()
        for i, rep in zip(range(0, n, size), reports, strict=True):
            items = [
                (r, [j for j in r.judgements if (r.trace.trace_id, j.judge, j.version) in rep.changed])
                for r in results[i : i + size]
            ]
            for x in exporters:  # as the engine does: once per batch when the exporter can, else per trace
                many = getattr(x, "on_stored_many", None)
                if many is not None:
                    many(items)
                else:
                    for r, changed in items:
                        x.on_stored(r, changed)
        out["metrics"] = time.process_time() - c0
        shutdown_exporters(exporters)
    await mon.close()
    await store.close()
    ms = {k: v / n * 1000 for k, v in out.items()}
    ms["(of which assembly)"] = assembly / n * 1000
    ms["pg: store lookup"] = pg_lookup / n * 1000
    ms["pg: store write"] = pg_write / n * 1000
    return ms


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    broker = kafka_bench.Broker()
    admin = await asyncpg.connect(ADMIN_URL)
    dbs: list[str] = []
    try:
        db1, url1 = await create_db(admin)
        dbs.append(db1)
        db2, url2 = await create_db(admin)
        dbs.append(db2)
        topic = "rag-traces-bench"
        ka = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await ka.start()
        await ka.create_topics([NewTopic(topic, args.partitions, 1)])
        await ka.close()
        events = kafka_bench.replay_events(args.events) if args.workload == "replay" else None
        await kafka_bench._produce(broker.bootstrap, topic, args.events, events=events)
        e2e = await end_to_end(args, broker, topic, url1, db1)
        commit_s = args.events / e2e["traces_per_s"] if e2e["traces_per_s"] else 0.0
        st = await stages(args, broker, topic, url2, db2, commit_s)
    finally:
        broker.close()
        for db in dbs:
            await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()
    py = {k: v for k, v in st.items() if not k.startswith("pg: ")}
    pg = {k[4:]: v for k, v in st.items() if k.startswith("pg: ")}
    py["engine, asyncio, rest"] = e2e["ragpulse_ms"] - sum(v for k, v in py.items() if not k.startswith("("))
    pg["rest"] = e2e["postgres_ms"] - sum(pg.values())
    return {
        "events": args.events,
        "workload": args.workload,
        "partitions": args.partitions,
        "end_to_end": e2e,
        "ragpulse_ms_per_trace": {k: round(v, 4) for k, v in py.items()},
        "postgres_ms_per_trace": {k: round(v, 4) for k, v in pg.items()},
        "total_ms_per_trace": round(e2e["ragpulse_ms"] + e2e["postgres_ms"], 3),
        "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def table(r: dict[str, Any]) -> str:
    e = r["end_to_end"]
    lines = ["| stage | ms CPU / trace |", "|---|---:|"]
    for k, v in r["ragpulse_ms_per_trace"].items():
        lines.append(f"| ragpulse: {k} | {v:.3f} |")
    lines.append(f"| **ragpulse total (serve process)** | **{e['ragpulse_ms']:.3f}** |")
    for k, v in r["postgres_ms_per_trace"].items():
        lines.append(f"| PostgreSQL: {k} | {v:.3f} |")
    lines.append(f"| **PostgreSQL total (bench database's backends)** | **{e['postgres_ms']:.3f}** |")
    lines.append(f"| **total** | **{r['total_ms_per_trace']:.3f}** |")
    lines.append("")
    lines.append(
        f"{r['events']} events ({r['workload']}), {r['partitions']} partitions: {e['traces_per_s']} traces/s, "
        f"{e['traces_per_write']} traces per store write, peak RSS {e['rss_peak_mb']} MB, load average (1 min) {r['loadavg_1m'][0]} → {r['loadavg_1m'][1]}"
    )
    return "\n".join(lines)


def print_profile(path: str, top: int = 40) -> None:
    st = pstats.Stats(path)
    st.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument(
        "--workload",
        choices=("small", "replay"),
        default="small",
        help="small: kafka_bench's events (2 chunks of ~100 characters); replay: replay_bench's traces "
        "(3-5 chunks of ~150 words, the dev bench)",
    )
    ap.add_argument("--limit", type=float, default=1800.0, help="give up waiting after this many seconds")
    ap.add_argument("--profile", default=None, help="run serve under cProfile, write the stats here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = asyncio.run(run(args))
    print(json.dumps(r) if args.json else table(r))
    if args.profile and Path(args.profile).exists():
        print_profile(args.profile)


if __name__ == "__main__":
    main()
