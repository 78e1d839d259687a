"""Slow clients against every HTTP listener of ``ragpulse serve`` (issue 25 item 8).

Starts ``ragpulse serve`` (portal, OTLP/HTTP, health; offline judges) on a private database on 127.0.0.1:5432
(dropped afterwards) with ``--header-timeout`` and ``--max-connections``; for each listener in turn, two
processes of ``tests/portal/slow_client.py`` open ``--connections`` / 2 half-sent requests each, and while
they hold them ``/readyz``, ``/metrics`` and ``GET /api/v1/test-sets`` are timed ``--probes`` times each (a new
connection per probe). Prints the probes' p50/max in ms, how long the flood took, and when the last held
connection was closed, with ``nproc`` and the load average::

    PYTHONPATH=src python bench/slow_clients.py --connections 20000
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
from pathlib import Path

import httpx
from replay_scale import _admin  # admin SQL on the test server

SLOW = str(Path(__file__).resolve().parents[1] / "tests" / "portal" / "slow_client.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _probe(url: str) -> float:
    t0 = time.perf_counter()
    with httpx.Client(timeout=10) as c:
        assert c.get(url).status_code == 200, url
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20_000)
    ap.add_argument("--header-timeout", type=float, default=10.0)
    ap.add_argument("--max-connections", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=10)
    a = ap.parse_args()
    db = f"bench_slow_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f"CREATE DATABASE {db}"))
    ports = {"http": _free_port(), "api": _free_port(), "otlp": _free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    env.update(
        RAGPULSE_STORE_DATABASE_URL=f"postgresql://postgres@127.0.0.1:5432/{db}",
        RAGPULSE_API_ADDRESS=f"127.0.0.1:{ports['api']}",
        RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{ports['http']}",
        RAGPULSE_OTLP_HTTP_ADDRESS=f"127.0.0.1:{ports['otlp']}",
        RAGPULSE_OTLP_GRPC_ADDRESS="",
        RAGPULSE_HTTP_HEADER_TIMEOUT_S=str(a.header_timeout),
        RAGPULSE_HTTP_MAX_CONNECTIONS=str(a.max_connections),
        RAGPULSE_LOG_LEVEL="WARNING",
    )
    serve = subprocess.Popen([sys.executable, "-m", "ragpulse", "serve"], env=env, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1"
    urls = [
        f"{base}:{ports['http']}/readyz",
        f"{base}:{ports['http']}/metrics",
        f"{base}:{ports['api']}/api/v1/test-sets",
    ]
    try:
        for _ in range(600):
            try:
                if httpx.get(urls[0], timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        print(
            f"nproc={os.cpu_count()} load={os.getloadavg()[0]:.1f} connections={a.connections} "
            f"header_timeout_s={a.header_timeout} max_connections={a.max_connections}"
        )
        print("attacked  flood_s  probe          p50_ms   max_ms  last_closed_s")
        hold = a.header_timeout + 5
        for target, port in ports.items():
            t0 = time.perf_counter()
            slow = [
                subprocess.Popen(
                    [sys.executable, SLOW, "127.0.0.1", str(port), str(a.connections // 2), str(hold)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(2)
            ]
            for s in slow:
                assert s.stdout is not None
                json.loads(s.stdout.readline())
            flood = time.perf_counter() - t0
            probes = {u: [_probe(u) for _ in range(a.probes)] for u in urls}
            closed = 0.0
            for s in slow:
                assert s.stdout is not None
                for line in s.stdout:
                    row = json.loads(line)
                    if row["open"] == 0:
                        closed = max(closed, row["t"])
                        break
                s.kill()
                s.wait()
            for u, v in probes.items():
                what = u.split("/", 3)[3]
                print(
                    f"{target:8s} {flood:8.1f}  {what:14s} {statistics.median(v):7.1f} {max(v):8.1f}  {closed:6.1f}"
                )
    finally:
        serve.terminate()
        serve.wait(30)
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))


if __name__ == "__main__":
    main()
