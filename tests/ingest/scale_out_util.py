"""Scale-out run shared by the test and ``bench/scale_out.py``: N ``ragpulse serve`` processes in one consumer
group on one topic (real tansu, real PostgreSQL), one SIGKILLed mid-stream; counts lost and duplicated
judgements and measures the rebalance time."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg

from ingest.kafka_testutil import committed, create_topic, event, produce
from ingest.serve_testutil import ServeProcess, db_counts
from testsupport import free_port, wait_until

__all__ = ["ScaleOutResult", "run_scale_out"]


@dataclass
class ScaleOutResult:
    """``lost``: traces without all their judgements; ``duplicated``: judgements stored more than once for one
    (trace, judge, version) or replaced by a second judging (rows in ``judgement_history``); ``rebalance_s``:
    from the SIGKILL until the survivors together own every partition again; ``drain_s``: from the SIGKILL until
    every trace is stored and every offset committed; ``load_avg``: 1-minute load average at the end."""

    processes: int
    partitions: int
    traces: int
    stored_at_kill: int
    lost: int
    duplicated: int
    rebalance_s: float
    drain_s: float
    load_avg: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _env(bootstrap: str, topic: str, pg_url: str, group: str, judges: str) -> dict[str, str]:
    return {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "RAGPULSE_KAFKA_TOPICS": topic,
        "RAGPULSE_KAFKA_GROUP_ID": group,
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{free_port()}",
        "RAGPULSE_API_ADDRESS": "",
        "RAGPULSE_JUDGE_ENABLED": judges,
        "RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S": "20",
        "RAGPULSE_LOG_LEVEL": "INFO",
    }


def _owned(proc: ServeProcess, since: int, topic: str) -> set[int]:
    """Partitions of ``topic`` that ``proc`` was last assigned, counting only log lines from index ``since``."""
    owned: set[int] | None = None
    for e in proc.logs[since:]:
        if e.get("event") == "kafka_partitions_assigned":
            owned = {
                int(p.rsplit("-", 1)[1]) for p in e.get("partitions", []) if p.rsplit("-", 1)[0] == topic
            }
        elif e.get("event") == "kafka_partitions_revoked":
            owned = set()
    return owned or set()


async def run_scale_out(
    bootstrap: str,
    pg_url: str,
    *,
    processes: int,
    traces: int,
    partitions: int = 8,
    kill_fraction: float = 0.3,
    judges: str = "keyword,relevancy",
    procs: list[ServeProcess] | None = None,
) -> ScaleOutResult:
    """Produce ``traces`` events, start ``processes`` serve processes in one group, SIGKILL the first once
    ``kill_fraction`` of the traces are stored, wait for everything to be stored and committed, stop the rest.

    ``procs`` collects the processes started (so a caller can kill leftovers on failure).
    """
    started: list[ServeProcess] = procs if procs is not None else []
    topic = f"scale-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    n_judges = len(judges.split(","))
    await create_topic(bootstrap, topic, partitions)
    await produce(bootstrap, topic, (event(i) for i in range(traces)))
    for _ in range(processes):
        p = ServeProcess(_env(bootstrap, topic, pg_url, group, judges))
        started.append(p)
        await asyncio.to_thread(p.start)

    async def stored(k: int) -> bool:
        return bool((await db_counts(pg_url))["traces"] >= k)

    await wait_until(
        lambda: stored(int(traces * kill_fraction)), 300, "traces stored before the kill", interval_s=0.1
    )
    victim, survivors = started[0], started[1:processes]
    marks = [len(p.logs) for p in survivors]
    killed_at = time.monotonic()
    victim.kill()
    at_kill = (await db_counts(pg_url))["traces"]

    async def rebalanced() -> bool:
        owned: set[int] = set()
        for p, mark in zip(survivors, marks, strict=True):
            owned |= _owned(p, mark, topic)
        return owned == set(range(partitions))

    await wait_until(rebalanced, 120, "the survivors owning every partition", interval_s=0.05)
    rebalance_s = time.monotonic() - killed_at

    async def drained() -> bool:
        c = await committed(bootstrap, group, topic, partitions)
        return bool(await stored(traces)) and sum(v or 0 for v in c.values()) == traces

    await wait_until(drained, 600, "every trace stored and committed", interval_s=0.25)
    drain_s = time.monotonic() - killed_at
    counts = await db_counts(pg_url)
    conn = await asyncpg.connect(pg_url)
    try:
        replaced = int(await conn.fetchval("SELECT count(*) FROM judgement_history"))
    finally:
        await conn.close()
    ids = {f"trace-{i:06d}" for i in range(traces)}
    per = counts["per_trace"]
    lost = sum(1 for t in ids if per.get(t, 0) < n_judges)
    duplicated = sum(max(0, n - n_judges) for n in per.values()) + replaced
    for p in survivors:
        await asyncio.to_thread(p.terminate)
    return ScaleOutResult(
        processes=processes,
        partitions=partitions,
        traces=traces,
        stored_at_kill=at_kill,
        lost=lost,
        duplicated=duplicated,
        rebalance_s=round(rebalance_s, 2),
        drain_s=round(drain_s, 2),
        load_avg=round(os.getloadavg()[0], 2),
    )
