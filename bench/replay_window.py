"""Where a batch replay's wall time goes (issue 27 item 7): the model-call window against the whole process.

Runs the real CLI, ``ragpulse replay FILE --judges relevancy,faithfulness --json``, as a child process against
the scripted OpenAI-compatible server (``ragpulse.testing.openai_server``, in another child process, a fixed
``--latency`` per request, default 200 ms, on loopback) and a private PostgreSQL database (created on
``RAGPULSE_TEST_PG_ADMIN_URL``, migrated before the timed run, dropped after), with the service defaults
(adaptive judge concurrency up to ``judge.max_concurrency`` = 256). The test set is ``--cases`` synthetic cases
(:func:`replay_bench.synth_test_set`: 3–5 chunks of ~150 words, an answer from the first chunk) as JSONL.

Measured (all times ``time.time()`` on this machine, seconds):

- ``wall_s``: the replay process from spawn to exit; ``cpu_s``: its user + system CPU (``RUSAGE_CHILDREN``);
  ``server_cpu_s``: the scripted server's CPU over the same run (it shares the machine's cores);
- ``window_s``: from the first model request's arrival at the server to the last reply's end; ``window_share``
  = window / wall (goal ≥ 0.5 at 1,000 cases);
- ``calls_per_trace`` = model requests / cases; ``physical_limit`` = max_concurrency / latency / calls per trace
  (traces/s, what the model server could take); ``traces_per_s`` = cases / wall; ``limit_share`` = traces/s /
  physical limit (goal ≥ 0.5);
- ``server_max_in_flight``: the most requests the server held at once;
- phases from the replay's own log (``--log-level INFO``, JSON lines with UTC timestamps): ``to_first_log_s``
  (spawn → first log line: interpreter, imports, settings), ``to_replay_started_s`` (→ ``replay_started``:
  store opened and migrations checked, run created), ``to_first_call_s`` (→ first model request),
  ``tail_s`` (last reply → ``replay_finished``), ``exit_s`` (``replay_finished`` → process exit: report
  printed, interpreter shut down);
- ``help_s``: median wall time of ``ragpulse replay --help`` over 5 runs (goal < 1 s).

``--profile FILE`` runs the replay under ``cProfile`` (read it with ``pstats``; it slows the run down a lot), or
with a ``.folded`` file name under the sampling profiler ``py-spy`` (``pip install py-spy``; collapsed stacks,
250 samples/s, little slow-down).

Usage::

    PYTHONPATH=src python bench/replay_window.py --cases 1000 [--latency 0.2] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_bench import database, synth_test_set

from ragpulse.config import Settings

_SERVER = r"""
import dataclasses, json, sys, threading, time
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer, judge_responder
latency = float(sys.argv[1])
lock = threading.Lock()
stats = {"requests": 0, "first_arrival": None, "last_end": None}
def responder(req):
    with lock:
        stats["requests"] += 1
        if stats["first_arrival"] is None:
            stats["first_arrival"] = time.time() - (time.monotonic() - req.received_at)
    return dataclasses.replace(judge_responder(req), delay_s=latency)
with ScriptedOpenAIServer(responder) as server:
    app = server._server.config.app
    @app.middleware("http")
    async def _stamp(request, call_next):
        response = await call_next(request)
        with lock:
            stats["last_end"] = time.time()
        return response
    print(server.base_url, flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "stats":
            print(json.dumps(dict(stats, max_in_flight=server.max_in_flight)), flush=True)
        elif cmd == "reset":
            server.reset(responder)
            with lock:
                stats.update(requests=0, first_arrival=None, last_end=None)
            print("{}", flush=True)
"""


def write_cases(path: Path, n: int, seed: int) -> None:
    """The synthetic test set as JSONL (one case per line)."""
    with path.open("w", encoding="utf-8") as fh:
        for c in synth_test_set(n, seed).cases:
            row = {
                "id": c.id,
                "question": c.question,
                "answer": c.answer,
                "contexts": list(c.contexts),
                "doc_ids": list(c.doc_ids),
                "expected_answer": c.expected_answer,
                "keywords": list(c.keywords or ()),
            }
            fh.write(json.dumps(row) + "\n")


def _ts(line: str) -> tuple[str, float] | None:
    try:
        rec = json.loads(line)
        return str(rec.get("event")), datetime.fromisoformat(rec["timestamp"]).timestamp()
    except (ValueError, KeyError, TypeError):
        return None


def timed(cmd: list[str], env: dict[str, str]) -> tuple[int, float, float, float, bytes, bytes]:
    """Run ``cmd``: (exit code, spawn time, wall s, CPU s of the child, stdout, stderr)."""
    started = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.time() - started
    usage = resource_usage_of_children()
    return proc.returncode, started, wall, usage, out, err


_last_children_cpu = 0.0


def resource_usage_of_children() -> float:
    """CPU seconds of children reaped since the last call (``RUSAGE_CHILDREN`` difference)."""
    import resource

    global _last_children_cpu
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = u.ru_utime + u.ru_stime
    delta, _last_children_cpu = total - _last_children_cpu, total
    return delta


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def help_time(env: dict[str, str], runs: int = 5) -> float:
    """Median wall seconds of ``ragpulse replay --help``."""
    times = []
    for _ in range(runs):
        code, _, wall, _, _, _ = timed([sys.executable, "-m", "ragpulse", "replay", "--help"], env)
        assert code == 0
        times.append(wall)
    return round(statistics.median(times), 3)


def one_run(
    path: Path,
    cases: int,
    env: dict[str, str],
    server: subprocess.Popen[str],
    latency: float,
    profile: str | None = None,
) -> dict[str, Any]:
    """One timed replay of ``path``; the server's counters are reset first."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write("reset\n")
    server.stdin.flush()
    server.stdout.readline()
    server_cpu = _proc_cpu_s(server.pid)
    prof = ["-m", "cProfile", "-o", profile] if profile and not profile.endswith(".folded") else []
    spy = ["py-spy", "record", "-r", "250", "-f", "raw", "-o", profile, "--"] if profile and not prof else []
    cmd = [*spy, sys.executable, *prof, "-m", "ragpulse", "--log-level", "INFO", "replay", str(path)]
    cmd += ["--judges", "relevancy,faithfulness", "--json"]
    code, started, wall, cpu, out, err = timed(cmd, env)
    if code not in (0, 1):
        sys.stderr.write(err.decode(errors="replace")[-3000:])
        raise SystemExit(f"replay exited {code}")
    server.stdin.write("stats\n")
    server.stdin.flush()
    stats = json.loads(server.stdout.readline())
    server_cpu = _proc_cpu_s(server.pid) - server_cpu
    events: dict[str, float] = {}
    first_log = None
    for line in err.decode(errors="replace").splitlines():
        got = _ts(line)
        if got is None:
            continue
        first_log = got[1] if first_log is None else first_log
        events.setdefault(got[0], got[1])
    text = out.decode(errors="replace")
    # py-spy may print before and after it
    report = json.JSONDecoder().raw_decode(text[text.find("{") :])[0] if "{" in text else {}
    first, last = stats["first_arrival"], stats["last_end"]
    window = last - first
    calls = stats["requests"] / cases
    limit = Settings().judge.max_concurrency / latency / calls
    end = started + wall
    return {
        "cases": cases,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "server_cpu_s": round(server_cpu, 2),
        "window_s": round(window, 2),
        "window_share": round(window / wall, 3),
        "calls_per_trace": round(calls, 2),
        "physical_limit": round(limit, 1),
        "traces_per_s": round(cases / wall, 1),
        "limit_share": round(cases / wall / limit, 3),
        "server_max_in_flight": stats["max_in_flight"],
        "to_first_log_s": round((first_log or end) - started, 2),
        "to_replay_started_s": round(events.get("replay_started", end) - started, 2),
        "to_first_call_s": round(first - started, 2),
        "tail_s": round(events.get("replay_finished", end) - last, 2),
        "exit_s": round(end - events.get("replay_finished", end), 2),
        "pass_rate": report.get("pass_rate"),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


async def _migrate(url: str) -> None:
    from ragpulse.store import PostgresStore

    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    await store.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--latency", type=float, default=0.2, help="scripted judge latency per request, seconds")
    p.add_argument("--repeat", type=int, default=1, help="timed replays (each a new run of the same set)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", default=None, help="run the replays under cProfile, writing this file")
    args = p.parse_args(argv)
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    results: dict[str, Any] = {}
    try:
        base_url = server.stdout.readline().strip()

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "window.jsonl"
            write_cases(path, args.cases, args.seed)
            env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
            env.update(
                RAGPULSE_JUDGE_MODEL="bench-mock",
                RAGPULSE_JUDGE_BASE_URL=base_url,
                RAGPULSE_JUDGE_API_KEY="bench",
                RAGPULSE_LOG_JSON="true",
            )
            results["help_s"] = help_time(env)
            resource_usage_of_children()

            async def runs() -> list[dict[str, Any]]:
                async with database(None) as url:
                    await _migrate(url)
                    env["RAGPULSE_STORE_DATABASE_URL"] = url
                    return [
                        await asyncio.to_thread(
                            one_run, path, args.cases, env, server, args.latency, args.profile
                        )
                        for _ in range(args.repeat)
                    ]

            results["runs"] = asyncio.run(runs())
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"help_s={results['help_s']}")
        for r in results["runs"]:
            print(", ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
