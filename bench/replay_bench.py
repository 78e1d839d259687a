"""Replay benchmark (not a test): throughput, CPU and memory of ``ragpulse replay``'s pipeline.

Two workloads, both through the real engine and the real PostgreSQL store:

``engine``   N synthetic traces (default 10,000) through the engine alone: two instant scripted judges and
             the in-memory store, so only the engine's and replay's own CPU is measured.
``offline``  N synthetic traces (default 10,000) judged by the offline heuristic judges (relevancy,
             faithfulness, keyword): traces/s, CPU ms per trace, peak RSS.
``llm``      N synthetic traces (default 1,000) judged by the LLM relevancy + faithfulness judges in their
             default modes against the scripted OpenAI-compatible server (``ragpulse.testing.openai_server``),
             run in a **separate process** with a fixed latency per request (default 200 ms): traces/s, CPU ms
             per trace of ragpulse's own process, judge requests per trace, prompt characters per trace
             (and characters / 4 as a token estimate).

Synthetic traces: an English question, 3–5 retrieved chunks of ~150 words, an answer of 2–3 sentences taken
from the chunks (plus an invented one on every third trace), an expected answer and 3 keywords. Seeded: the
same arguments give the same traces.

The database: ``--database-url`` if given (``memory``: the in-memory fake store, to see the pipeline without
PostgreSQL), else a private database created on the test server
(``RAGPULSE_TEST_PG_ADMIN_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``) and dropped at
the end.

Usage::

    python bench/replay_bench.py offline --traces 10000
    python bench/replay_bench.py llm --traces 1000 --latency 0.2
    python bench/replay_bench.py all --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges
from ragpulse.logging import configure_logging
from ragpulse.model import TestCase, TestSet
from ragpulse.runs.replay import run_replay
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import MemoryStore

ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

_WORDS = (
    "policy claim expense receipt manager approval portal deadline travel hotel invoice refund order "
    "shipment warehouse delay carrier customer account payment ledger finance quarter budget team "
    "employee leave annual sick parental request calendar holiday region office contract vendor audit "
    "report summary process review threshold limit currency exchange rate submit attach reject escalate "
    "notify email system record update status ticket support service level agreement days weeks hours "
    "working business standard express international domestic tracking number address return label "
    "damage replacement credit note tax deduction allowance mileage meal lodging airfare booking agent"
).split()


_FUNCTION_WORDS = "the of and to a in is for on with by that at be it as are or from this an not".split()


def _sentence(rng: random.Random, n: int) -> str:
    # About 45 % function words, like English prose: ~5.5 characters per word with its space.
    words = [rng.choice(_FUNCTION_WORDS if rng.random() < 0.45 else _WORDS) for _ in range(n)]
    return (" ".join(words)).capitalize() + "."


def synth_test_set(n: int, seed: int = 7) -> TestSet:
    """``n`` synthetic cases with 3–5 chunks of ~150 words each (see the module docstring)."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        chunks = []
        for _ in range(rng.randint(3, 5)):
            sentences = [_sentence(rng, rng.randint(12, 18)) for _ in range(10)]
            chunks.append(" ".join(sentences))
        first = chunks[0].split(". ")
        answer_parts = [s.rstrip(".") + "." for s in first[: rng.randint(2, 3)]]
        if i % 3 == 2:
            answer_parts.append(_sentence(rng, 14))  # not in any chunk
        answer = " ".join(answer_parts)
        q_words = answer.split()[:8]
        cases.append(
            TestCase(
                id=f"b{i:05d}",
                question="What does the policy say about " + " ".join(q_words).lower().rstrip(".") + "?",
                expected_answer=answer_parts[0],
                keywords=tuple(w.strip(".").lower() for w in q_words[:3]),
                answer=answer,
                contexts=tuple(chunks),
                doc_ids=tuple(f"doc-{i}-{k}" for k in range(len(chunks))),
            )
        )
    return TestSet(name="bench", cases=tuple(cases))


@asynccontextmanager
async def database(url: str | None) -> AsyncIterator[str]:
    """``url`` itself (``memory``: the in-memory store), or a private database on the admin server created
    for the run and dropped after."""
    if url:
        yield url
        return
    name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield ADMIN_URL.rpartition("/")[0] + "/" + name
    finally:
        conn = await asyncpg.connect(ADMIN_URL)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _TimedStore:
    """Wraps the store to add up the wall time of ``write_results`` (seconds)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.write_s = 0.0
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def write_results(self, results: Any) -> Any:
        t = time.perf_counter()
        try:
            return await self.inner.write_results(results)
        finally:
            self.write_s += time.perf_counter() - t
            self.writes += 1


async def _replay(ts: TestSet, settings: Settings, names: list[str], url: str) -> dict[str, Any]:
    from ragpulse.judges.model.client import LLMClient

    client = LLMClient(settings) if settings.judge.uses_llm else None
    judges = build_judges(settings, names, client=client)
    inner: Any = MemoryStore() if url == "memory" else await PostgresStore.connect(url, settings.store)
    store = _TimedStore(inner)
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        report = await run_replay(ts, judges=judges, store=store, settings=settings)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        await store.inner.close()
        if client is not None:
            await client.aclose()
    n = len(ts.cases)
    return {
        "traces": n,
        "judges": names,
        "wall_s": round(wall, 2),
        "traces_per_s": round(n / wall, 1),
        "cpu_ms_per_trace": round(cpu * 1000 / n, 2),
        "store_writes": store.writes,
        "store_write_s": round(store.write_s, 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "chars_per_chunk": round(
            sum(len(c) for x in ts.cases for c in x.contexts) / sum(len(x.contexts) for x in ts.cases)
        ),
        "pass_rate": report.pass_rate,
        "coverage": report.coverage,
        "counts": report.counts.model_dump(by_alias=True),
    }


def _engine_settings(args: argparse.Namespace, **kw: Any) -> Settings:
    if getattr(args, "service_defaults", False):  # the service's own engine defaults, nothing tuned
        return Settings(log_level="WARNING", **kw)
    return Settings(
        engine_workers=args.workers,
        engine_queue_size=max(1000, args.workers * 4),
        engine_batch_size=args.batch_size,
        engine_writers=args.writers,
        log_level="WARNING",
        **kw,
    )


async def bench_offline(args: argparse.Namespace) -> dict[str, Any]:
    """The offline-judges workload."""
    ts = synth_test_set(args.traces, args.seed)
    rss_before = _rss_mb()
    async with database(args.database_url) as url:
        settings = _engine_settings(args, store_database_url=url)
        out = await _replay(ts, settings, ["relevancy", "faithfulness", "keyword"], url)
    out["peak_rss_mb"] = round(_rss_mb(), 1)
    out["rss_before_run_mb"] = round(rss_before, 1)
    return out


async def bench_engine(args: argparse.Namespace) -> dict[str, Any]:
    """The engine's own cost: two instant scripted judges and the in-memory store (no I/O at all)."""
    from ragpulse.testing.fakes import ScriptedJudge

    ts = synth_test_set(args.traces, args.seed)
    settings = _engine_settings(args)
    judges = {n: ScriptedJudge(n, 0.9) for n in ("relevancy", "faithfulness")}
    store = MemoryStore()
    cpu0, t0 = time.process_time(), time.perf_counter()
    await run_replay(ts, judges=judges, store=store, settings=settings)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    n = len(ts.cases)
    return {
        "traces": n,
        "wall_s": round(wall, 2),
        "traces_per_s": round(n / wall, 1),
        "cpu_ms_per_trace": round(cpu * 1000 / n, 3),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


_MOCK = r"""
import json, sys
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer
latency = float(sys.argv[1])
stats = {"requests": 0, "prompt_chars": 0}
def responder(req):
    stats["requests"] += 1
    text = req.prompt_text
    stats["prompt_chars"] += len(text)
    if '"claims"' in text:
        body = json.dumps({"claims": [{"claim": "c1", "supported": True}, {"claim": "c2", "supported": True},
                                      {"claim": "c3", "supported": False}]})
    else:
        body = "YES\nThe answer addresses the question."
    return Reply(content=body, delay_s=latency)
with ScriptedOpenAIServer(responder) as server:
    print(server.base_url, flush=True)
    for line in sys.stdin:
        if line.strip() == "stats":
            print(json.dumps(dict(stats, max_in_flight=server.max_in_flight)), flush=True)
"""


async def _bench_llm(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    ts = synth_test_set(args.traces, args.seed)
    async with database(args.database_url) as url:
        settings = _engine_settings(
            args,
            store_database_url=url,
            judge_model="bench-mock",
            judge_base_url=base_url,
            judge_api_key="bench",
            **(
                {}
                if args.service_defaults
                else {"judge_max_concurrency": args.llm_concurrency, "judge_adaptive_concurrency": False}
            ),
        )
        return await _replay(ts, settings, ["relevancy", "faithfulness"], url)


def bench_llm(args: argparse.Namespace) -> dict[str, Any]:
    """The LLM-judges workload against the scripted server in a child process."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _MOCK, str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        base_url = proc.stdout.readline().strip()
        out = asyncio.run(_bench_llm(args, base_url))
        proc.stdin.write("stats\n")
        proc.stdin.flush()
        stats = json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    n = args.traces
    chars = stats["prompt_chars"] / n
    out.update(
        latency_s=args.latency,
        requests_per_trace=round(stats["requests"] / n, 2),
        prompt_chars_per_trace=round(chars),
        prompt_tokens_per_trace_est=round(chars / 4),
        server_max_in_flight=stats["max_in_flight"],
        peak_rss_mb=round(_rss_mb(), 1),
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload", choices=["offline", "llm", "llm-defaults", "engine", "all"])
    p.add_argument("--traces", type=int, default=None, help="default: 10000 offline, 1000 llm")
    p.add_argument("--latency", type=float, default=0.2, help="mock model latency per request, seconds")
    p.add_argument("--workers", type=int, default=64, help="engine_workers")
    p.add_argument("--batch-size", type=int, default=200, help="engine_batch_size")
    p.add_argument("--writers", type=int, default=2, help="engine_writers")
    p.add_argument("--llm-concurrency", type=int, default=128, help="judge_max_concurrency")
    p.add_argument("--database-url", default=None, help="PostgreSQL URL, or 'memory' for the in-memory store")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print results as JSON")
    args = p.parse_args(argv)
    configure_logging("WARNING", json=True)
    results: dict[str, Any] = {}
    for w in ("offline", "llm") if args.workload == "all" else (args.workload,):
        a = argparse.Namespace(**vars(args))
        a.traces = args.traces or (1000 if w.startswith("llm") else 10000)
        a.service_defaults = False
        if w == "llm":
            results[w] = bench_llm(a)
        elif w == "llm-defaults":
            # the same workload twice in one invocation: hand-tuned (fixed limits) and the service defaults
            # (adaptive judge concurrency); the claim is the ratio
            tuned = bench_llm(a)
            a.service_defaults = True
            defaults = bench_llm(a)
            results[w] = {
                "hand_tuned_traces_per_s": tuned["traces_per_s"],
                "defaults_traces_per_s": defaults["traces_per_s"],
                "ratio": round(defaults["traces_per_s"] / tuned["traces_per_s"], 2),
                "defaults_server_max_in_flight": defaults["server_max_in_flight"],
                "defaults_cpu_ms_per_trace": defaults["cpu_ms_per_trace"],
                "hand_tuned_cpu_ms_per_trace": tuned["cpu_ms_per_trace"],
                "load_avg_1m": defaults["load_avg_1m"],
            }
        else:
            results[w] = asyncio.run(bench_offline(a) if w == "offline" else bench_engine(a))
        if not args.json:
            print(f"{w}: " + ", ".join(f"{k}={v}" for k, v in results[w].items()), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
