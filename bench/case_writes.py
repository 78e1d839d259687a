"""One-case writes and pages of a large stored test set through the portal's REST API (issue 25 item 2).

Starts ``ragpulse serve`` (portal only, offline judges) on a private database on 127.0.0.1:5432 (dropped
afterwards), imports ``--cases`` cases into one test set (JSONL, 1,000 per request: the import limit is the
upload size), then times ``--rounds`` of each: add one case (POST), edit one (PUT), delete one (DELETE), a
10-row page at the start and at the end of the set (GET with a cursor). Prints p50/p95/max in ms per operation
with ``nproc`` and the load average::

    PYTHONPATH=src python bench/case_writes.py --cases 90000 --rounds 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid

import httpx
from replay_scale import _admin  # admin SQL on the test server

from ragpulse.query import encode_cursor


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=90_000)
    ap.add_argument("--rounds", type=int, default=50)
    a = ap.parse_args()
    db = f"bench_cases_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f"CREATE DATABASE {db}"))
    url = f"postgresql://postgres@127.0.0.1:5432/{db}"
    api = f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    env.update(
        RAGPULSE_STORE_DATABASE_URL=url,
        RAGPULSE_API_ADDRESS=api,
        RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{_free_port()}",
        RAGPULSE_OTLP_GRPC_ADDRESS="",
        RAGPULSE_OTLP_HTTP_ADDRESS="",
        RAGPULSE_LOG_LEVEL="WARNING",
    )
    proc = subprocess.Popen([sys.executable, "-m", "ragpulse", "serve"], env=env, stderr=subprocess.DEVNULL)
    try:
        c = httpx.Client(base_url=f"http://{api}", timeout=600)
        for _ in range(600):
            try:
                if c.get("/api/v1/test-sets").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        c.post("/api/v1/test-sets", json={"name": "big"})
        started = time.perf_counter()
        for base in range(0, a.cases, 1000):
            rows = "\n".join(
                json.dumps(
                    {"id": f"c{i:06d}", "question": f"What is item {i}?", "expected_answer": f"Item {i}."}
                )
                for i in range(base, min(a.cases, base + 1000))
            )
            r = c.post(
                "/api/v1/test-sets/big/cases/import",
                content=rows,
                headers={"content-type": "application/x-ndjson"},
            )
            assert r.status_code == 200, r.text
        imported = time.perf_counter() - started
        count = c.get("/api/v1/test-sets/big").json()["case_count"]
        assert count == a.cases, count
        times: dict[str, list[float]] = {
            "add": [],
            "edit": [],
            "delete": [],
            "page_first": [],
            "page_deep": [],
        }

        def timed(op: str, method: str, path: str, **kw: object) -> None:
            t0 = time.perf_counter()
            resp = c.request(method, path, **kw)  # type: ignore[arg-type]  # json/params as given
            times[op].append((time.perf_counter() - t0) * 1000)
            assert resp.status_code < 300, (op, resp.status_code, resp.text[:200])

        cursor = encode_cursor(
            [a.cases - 100]
        )  # the page after position cases - 100: near the end of the set
        cases = "/api/v1/test-sets/big/cases"
        for k in range(a.rounds):
            timed("add", "POST", cases, json={"id": f"new-{k}", "question": "Q?"})
            timed("edit", "PUT", f"{cases}/c{k * 7:06d}", json={"question": "edited?"})
            timed("delete", "DELETE", f"{cases}/c{a.cases - 1 - k:06d}")
            timed("page_first", "GET", cases, params={"limit": 10})
            timed("page_deep", "GET", cases, params={"limit": 10, "cursor": cursor})
        print(f"nproc={os.cpu_count()} load={os.getloadavg()[0]:.1f} cases={a.cases} rounds={a.rounds}")
        print(f"import of {a.cases:,} cases in 1,000-case requests: {imported:.1f} s")
        print("op          p50_ms   p95_ms   max_ms")
        for op, v in times.items():
            print(f"{op:10s} {statistics.median(v):8.1f} {_pct(v, 0.95):8.1f} {max(v):8.1f}")
    finally:
        proc.terminate()
        proc.wait(30)
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))


if __name__ == "__main__":
    main()
