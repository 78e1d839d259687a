"""Shadow promotion measurement (not a test): what re-judging the history costs with and without reusing the
stored shadow judgements of the promoted version.

Set-up: a private database on the test PostgreSQL (``RAGPULSE_TEST_PG_ADMIN_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``; dropped at the end) and the scripted OpenAI-compatible judge
server (``ragpulse.testing.openai_server.judge_responder``) in a child process, so its CPU is not counted here.
``--traces`` traces are judged by ``relevancy`` (mode ``question``) with a shadow (``mode: with_context``,
``share: 1.0``); then the shadow is promoted (main options ``{mode: with_context}``) and the history is re-judged
with :func:`ragpulse.runs.stored.rejudge` twice:

- ``reused``: the shadow rows are there: every judgement is copied, no model call;
- ``judged``: the promoted rows and the shadow rows deleted first: every judgement calls the model.

Per run: model requests, wall time and this process's CPU time (``time.process_time``: ragpulse — engine, store
client, judges; not PostgreSQL, not the model server) per trace. Also the start-up cost every engine pays now:
the one ``shadow_versions`` query, with and without reusable rows. The 1-minute load average is printed before
and after (the machine is shared; wall times move with it, CPU times much less).

Usage::

    python bench/shadow_reuse.py                 # 1,000 traces, markdown table
    python bench/shadow_reuse.py --traces 200 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.judges.registry import opened_judges
from ragpulse.logging import configure_logging
from ragpulse.model import Document, Source, Trace
from ragpulse.runs.stored import rejudge
from ragpulse.store import PostgresStore

ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
SERVER = """
import sys, time
from ragpulse.testing.openai_server import ScriptedOpenAIServer, judge_responder
with ScriptedOpenAIServer(judge_responder) as s:
    print(s.base_url, flush=True)
    sys.stdin.read()
"""
DOCS = (Document(content="Orders ship within 3 days; refunds take 5 days."),)


def _traces(n: int) -> list[Trace]:
    return [
        Trace(
            trace_id=f"{i + 1:032x}",
            app="shop",
            question="When does my order ship?",
            answer=f"Your order ships in 3 days (ticket {i}).",
            documents=DOCS,
            source=Source.KAFKA,
        )
        for i in range(n)
    ]


async def _seed(settings: Settings, store: PostgresStore, traces: list[Trace]) -> None:
    async with (
        opened_judges(settings, ["relevancy"], ledger=store) as judges,
        Engine(judges, store, settings.engine) as engine,
    ):
        for t in traces:
            await engine.submit(t)
        await engine.drain(None)


async def _rejudge(settings: Settings, store: PostgresStore, n: int) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    summary = await rejudge(
        settings, store, app=None, since=datetime.now(UTC) - timedelta(days=1), judge_names=["relevancy"]
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "traces": summary.traces,
        "reused": summary.reused.get("relevancy", 0),
        "judged": summary.judged.get("relevancy", 0),
        "wall_ms_per_trace": round(wall / n * 1000, 3),
        "cpu_ms_per_trace": round(cpu / n * 1000, 3),
    }


async def _start_query_ms(store: PostgresStore, version: str, expect: bool) -> float:
    """The fastest of 5 ``shadow_versions`` queries (the engine's one start-up lookup), milliseconds."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        found = await store.shadow_versions([("relevancy", version)])
        best = min(best, time.perf_counter() - t0)
        assert bool(found) is expect
    return round(best * 1000, 3)


async def run(n: int, base_url: str) -> dict[str, Any]:
    admin = await asyncpg.connect(ADMIN_URL)
    name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN_URL.rpartition("/")[0] + "/" + name
    load = [os.getloadavg()[0]]
    try:
        base = Settings(
            store_database_url=url, judge_model="judge-test", judge_base_url=base_url, judge_api_key="k"
        )
        shadowed = base.replaced(
            judge_options={"relevancy": {"shadow": {"mode": "with_context", "share": 1.0}}}
        )
        promoted = base.replaced(judge_options={"relevancy": {"mode": "with_context"}})
        store = await PostgresStore.connect(url, base.store)
        try:
            await _seed(shadowed, store, _traces(n))
            async with opened_judges(promoted, ["relevancy"]) as j:
                version = j["relevancy"].version
            out: dict[str, Any] = {"traces": n}
            out["start_query_ms_with_rows"] = await _start_query_ms(store, version, True)
            out["reused"] = await _rejudge(promoted, store, n)
            conn = await asyncpg.connect(url)
            try:
                await conn.execute("DELETE FROM judgements WHERE version = $1", version)
                await conn.execute("TRUNCATE shadow_judgements")
            finally:
                await conn.close()
            out["start_query_ms_without_rows"] = await _start_query_ms(store, version, False)
            out["judged"] = await _rejudge(promoted, store, n)
        finally:
            await store.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    load.append(os.getloadavg()[0])
    out["loadavg_1m"] = [round(x, 2) for x in load]
    return out


def table(r: dict[str, Any]) -> str:
    lines = [
        f"`python bench/shadow_reuse.py --traces {r['traces']}` (load average {r['loadavg_1m'][0]} → "
        f"{r['loadavg_1m'][1]}, 2 cores):",
        "",
        "| re-judge of the history | reused | judged (model calls) | CPU ms / trace (ragpulse) | wall ms / trace |",
        "|---|---|---|---|---|",
    ]
    for key, label in (("reused", "shadow rows reused"), ("judged", "no shadow rows: model called")):
        x = r[key]
        lines.append(
            f"| {label} | {x['reused']} | {x['judged']} | {x['cpu_ms_per_trace']} | {x['wall_ms_per_trace']} |"
        )
    lines += [
        "",
        f"Engine start-up lookup (`shadow_versions`, one query, fastest of 5): {r['start_query_ms_with_rows']} ms with "
        f"{r['traces']} reusable rows, {r['start_query_ms_without_rows']} ms with none.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", type=int, default=1000)
    p.add_argument("--json", action="store_true", help="print JSON instead of the markdown table")
    args = p.parse_args(argv)
    configure_logging("WARNING")
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        result = asyncio.run(run(args.traces, server.stdout.readline().strip()))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
