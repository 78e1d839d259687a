"""Judge-model client under faults (issue 27): adaptive concurrency vs fixed, storm recovery, ledger round trips.

Workloads, each against ``ragpulse.testing.openai_server`` (the scripted OpenAI-compatible server) in a child
process, so the client's process measures only itself:

- ``mixed``: a model with a fixed latency (default 50 ms, so the ceiling is concurrency / latency) of which 30 %
  of the replies are faults of seven kinds in turn — HTTP 500, HTTP 429 (``Retry-After`` 50 ms), a stall
  (1 s), an HTML body, a reply without ``choices``, empty content, a non-UTF-8 body. The same calls run with
  the adaptive limit (service defaults) and with fixed limits of 16 … 256, in one process; printed: calls/s of
  each, the best fixed, and the adaptive run's ratio to it (goal ≥ 0.8), plus its decreases by signal.
- ``storm``: calm, then a 429 storm (half the requests, ``Retry-After`` 0.2 s) for ``--storm-s`` seconds, then
  calm again; printed: the limit before, at its lowest, and the time and number of calls from the end of the
  storm until the limit is back to 80 % of its pre-storm peak.
- ``ledger``: calls in flight against a 200 ms judge with the store as the token ledger and no budget
  (``judge_max_concurrency`` 256, adaptive off): the most calls the server saw at once. Runs on any checkout
  (only public API), so ``PYTHONPATH=<old checkout>/src python bench/judge_client.py ledger`` gives the before.

Every result carries the 1-minute load average at its end (``load_avg_1m``): above 2 on this 2-core machine
the client got only part of a core.

    python bench/judge_client.py mixed --calls 3000
    python bench/judge_client.py storm
    python bench/judge_client.py ledger --calls 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from replay_bench import database

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.model.client import LLMClient
from ragpulse.logging import configure_logging

_SERVER = r"""
import json, sys
from ragpulse.testing.openai_server import Phase, Reply, ScriptedOpenAIServer
mode, latency = sys.argv[1], float(sys.argv[2])
faults = [
    Reply("busy", status=500),
    Reply(status=429, retry_after=0.05),
    Reply("YES", delay_s=1.0),
    Reply(raw_body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    Reply(json_body={"id": "x", "object": "chat.completion"}),
    Reply(""),
    Reply("是的", encoding="gbk"),
]
count = [0]
def responder(req):
    i = count[0]
    count[0] += 1
    if mode == "mixed" and i % 10 < 3:
        return faults[(i // 10 * 3 + i % 10) % len(faults)]
    return Reply("YES")
with ScriptedOpenAIServer(responder) as server:
    server.set_schedule(Phase(latency_s=latency))
    print(server.base_url, flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "stats":
            print(json.dumps({"requests": server.request_count, "max_in_flight": server.max_in_flight}), flush=True)
        elif cmd[0] == "reset":
            server.reset(responder)
            server.set_schedule(Phase(latency_s=latency))
            print("ok", flush=True)
        elif cmd[0] == "storm":  # a storm of cmd[1] seconds from now, then calm
            server.set_schedule(Phase(duration_s=float(cmd[1]), latency_s=latency, rate_429=0.5,
                                      retry_after_s=0.2), Phase(latency_s=latency), seed=1)
            print(json.dumps({"storm_at": server.phase_started_at(0), "calm_at": server.phase_started_at(1)}),
                  flush=True)
"""


class Server:
    """The scripted server in a child process, driven by lines on its stdin."""

    def __init__(self, mode: str, latency_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, mode, str(latency_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _settings(base_url: str, **kw: Any) -> Settings:
    return Settings(judge_base_url=base_url, judge_model="bench", judge_api_key="k", judge_cache_size=0, **kw)


async def _drive(client: LLMClient, calls: int, workers: int, tick: Callable[[], None] | None = None) -> int:
    """``calls`` calls by ``workers`` callers (more than any limit); returns how many got an answer."""
    pending = iter(range(calls))
    answered = 0

    async def worker() -> None:
        nonlocal answered
        for i in pending:
            try:
                await client.complete(
                    judge="relevancy",
                    version="b",
                    messages=[{"role": "user", "content": f"Is {i} relevant?"}],
                )
                answered += 1
            except JudgeError:
                pass
            if tick is not None:
                tick()

    await asyncio.gather(*(worker() for _ in range(workers)))
    return answered


def _load() -> float:
    return round(os.getloadavg()[0], 2)


async def _timed(settings: Settings, calls: int, workers: int) -> dict[str, Any]:
    async with LLMClient(settings) as client:
        t0 = time.perf_counter()
        answered = await _drive(client, calls, workers)
        wall = time.perf_counter() - t0
        lim = client.concurrency
        out: dict[str, Any] = {
            "calls_per_s": round(calls / wall, 1),
            "answered": answered,
            "wall_s": round(wall, 2),
        }
        if lim is not None:  # (an older checkout has no per-signal counts)
            out["decreases"] = lim.decreases
            out["decreases_by_signal"] = dict(getattr(lim, "decreases_by_signal", {}))
            out["final_limit"] = lim.limit
        return out


def bench_mixed(args: argparse.Namespace) -> dict[str, Any]:
    server = Server("mixed", args.latency)
    try:
        results: dict[str, Any] = {}
        for c in args.fixed:
            server.ask("reset")
            s = _settings(server.base_url, judge_max_concurrency=c, judge_adaptive_concurrency=False)
            results[f"fixed_{c}"] = asyncio.run(_timed(s, args.calls, args.workers))
        server.ask("reset")
        results["adaptive"] = asyncio.run(_timed(_settings(server.base_url), args.calls, args.workers))
    finally:
        server.close()
    best = max((k for k in results if k.startswith("fixed_")), key=lambda k: results[k]["calls_per_s"])
    return {
        "latency_s": args.latency,
        "calls": args.calls,
        "fault_share": 0.3,
        "runs": results,
        "best_fixed": best,
        "adaptive_vs_best_fixed": round(results["adaptive"]["calls_per_s"] / results[best]["calls_per_s"], 2),
        "load_avg_1m": _load(),
    }


def bench_storm(args: argparse.Namespace) -> dict[str, Any]:
    server = Server("calm", args.latency)
    try:

        async def run() -> dict[str, Any]:
            async with LLMClient(_settings(server.base_url, judge_max_retries=30)) as client:
                samples: list[tuple[float, int]] = []

                def tick() -> None:
                    assert client.concurrency is not None
                    samples.append((time.monotonic(), client.concurrency.limit))

                warm = asyncio.create_task(_drive(client, args.calls, args.workers, tick))
                await asyncio.sleep(args.calm_s)  # the calm phase: time is the subject
                marks = json.loads(server.ask(f"storm {args.storm_s}"))
                await warm
                storm_at, calm_at = marks["storm_at"], marks["calm_at"]
                peak = max((v for t, v in samples if t < storm_at), default=0)
                low = min((v for t, v in samples if storm_at <= t <= calm_at + 0.5), default=0)
                after = [(t, v) for t, v in samples if t > calm_at]
                back = next(((i, t) for i, (t, v) in enumerate(after) if v >= 0.8 * peak), None)
                return {
                    "peak_before": peak,
                    "lowest_in_storm": low,
                    "recovered_to_80pct": back is not None,
                    "recovery_s": round(back[1] - calm_at, 2) if back else None,
                    "recovery_calls": back[0] if back else None,
                    "decreases": getattr(client.concurrency, "decreases", None),
                    "decreases_by_signal": dict(getattr(client.concurrency, "decreases_by_signal", {})),
                }

        out = asyncio.run(run())
    finally:
        server.close()
    out.update(latency_s=args.latency, storm_s=args.storm_s, load_avg_1m=_load())
    return out


def bench_ledger(args: argparse.Namespace) -> dict[str, Any]:
    from ragpulse.store.postgres import PostgresStore

    server = Server("calm", args.latency)
    try:

        async def run() -> dict[str, Any]:
            async with database(None) as url:
                store = await PostgresStore.connect(url)
                try:
                    s = _settings(
                        server.base_url, judge_max_concurrency=256, judge_adaptive_concurrency=False
                    )
                    async with LLMClient(s, ledger=store) as client:
                        t0 = time.perf_counter()
                        await _drive(client, args.calls, 512)
                        wall = time.perf_counter() - t0
                        trips = getattr(client, "ledger_calls", None)
                finally:
                    await store.close()
            return {"calls_per_s": round(args.calls / wall, 1), "ledger_round_trips": trips}

        out = asyncio.run(run())
        out.update(json.loads(server.ask("stats")))
    finally:
        server.close()
    out.update(configured_limit=256, latency_s=args.latency, calls=args.calls, load_avg_1m=_load())
    return out


WORKLOADS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "mixed": bench_mixed,
    "storm": bench_storm,
    "ledger": bench_ledger,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload", choices=sorted(WORKLOADS))
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--workers", type=int, default=512, help="concurrent callers (more than any limit)")
    p.add_argument("--latency", type=float, default=None, help="model latency, s (50 ms; ledger: 200 ms)")
    p.add_argument(
        "--fixed", type=int, nargs="+", default=[16, 32, 64, 128, 256], help="fixed limits (mixed)"
    )
    p.add_argument("--calm-s", type=float, default=3.0, help="storm: calm phase before the storm, s")
    p.add_argument("--storm-s", type=float, default=3.0, help="storm: length of the 429 storm, s")
    args = p.parse_args(argv)
    if args.latency is None:
        args.latency = 0.2 if args.workload == "ledger" else 0.05
    configure_logging("ERROR", json=True)
    run: Callable[[argparse.Namespace], dict[str, Any] | Awaitable[Any]] = WORKLOADS[args.workload]
    print(json.dumps(run(args), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
