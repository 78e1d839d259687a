"""Peak memory and wall time of ``ragpulse replay`` and ``ragpulse runs show`` on a large test set (issue 13).

Generates a JSONL test set of ``--cases`` cases (question, 3 contexts of ~400 characters, a recorded answer,
an expected answer, 3 keywords: ~1.5 KB per case, ~150 MB for 100,000), then runs real CLI processes against the
PostgreSQL at ``--database-url`` (default: a private database on 127.0.0.1:5432, dropped afterwards):

1. ``ragpulse replay FILE --judges keyword --json`` (stdout to a file, its size reported);
2. ``ragpulse runs show RUN --json``;
3. ``ragpulse runs show RUN`` (text).

4. in this process: the first page of ``runs show`` (the stored report plus 200 case rows, what the text output
   prints after the interpreter has started) and a page in the middle (keyset), each timed 3 times.

With ``--compare``, a second run of the same test set whose answers changed (every 10th answer loses its
keywords, every 7th gets all of them: cases flip both ways; the test set is stored again under its name, so both
runs share case ids and positions) is replayed and these are measured as well:

5. ``ragpulse runs compare A B --json`` and 6. ``ragpulse runs compare A B`` (text);
7. ``ragpulse gate B --min pass_rate=0.5 --junit FILE``.

``--compare-only`` runs 5–7 alone on runs already in ``--database-url`` (e.g. to measure another checkout's
code on the same runs: ``PYTHONPATH=<checkout>/src``).

For 1–3 and 5–7: wall time (s), the child's CPU time (user + system, s) and peak RSS (MB, ``wait4`` rusage
``ru_maxrss``), and the load average when it ended. Usage::

    PYTHONPATH=src python bench/replay_scale.py --cases 100000 [--compare]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

WORDS = (
    "policy leave annual claim expense approval manager travel receipt deadline payroll benefit insurance "
    "contract notice overtime holiday report budget invoice refund training security access laptop badge"
).split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_cases(path: Path, n: int, seed: int = 0, *, changed: bool = False) -> None:
    """The test set; ``changed``: the same cases with other answers (every 10th without its keywords, every 7th
    with all of them)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            contexts = [_text(rng, 60) for _ in range(3)]
            kws = rng.sample(WORDS, 3)
            answer = contexts[0][:200] + " " + " ".join(kws[:2])
            if changed and i % 10 == 0:
                answer = "I could not find that in the documents."
            elif changed and i % 7 == 0:
                answer = contexts[0][:200] + " " + " ".join(kws)
            row = {
                "id": f"c{i:06d}",
                "question": f"What does the {kws[0]} {kws[1]} rule say? {_text(rng, 8)}",
                "contexts": contexts,
                "answer": answer,
                "expected_answer": _text(rng, 20),
                "keywords": kws,
                "app": "bench",
            }
            fh.write(json.dumps(row) + "\n")


def run(cmd: list[str], env: dict[str, str], out: Path) -> tuple[int, float, float, float]:
    """Run ``cmd`` with stdout to ``out``; return (exit code, wall seconds, peak RSS MB, CPU seconds of the
    child: user + system)."""
    started = time.perf_counter()
    with out.open("wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.stderr.write(err.decode(errors="replace")[-3000:])
    return proc.returncode, wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


async def first_page(url: str, run_id: str, cases: int) -> None:
    """Time ``runs show``'s reads in process: the report and the first page of case rows, then a keyset page in
    the middle of the run (ms, 3 times each)."""
    from ragpulse.config import Settings
    from ragpulse.runs.reports import case_rows_page
    from ragpulse.runs.stored import run_report
    from ragpulse.store import PostgresStore

    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        for label, after in (("first page", None), ("middle page", (cases // 2, ""))):
            times = []
            for _ in range(3):
                t = time.perf_counter()
                report = await run_report(store, run_id)
                rows, _ = await case_rows_page(store, report, after=after, limit=200)
                times.append((time.perf_counter() - t) * 1000)
            print(
                f"in process: report + {label} ({len(rows)} rows): "
                + ", ".join(f"{x:.0f}" for x in times)
                + " ms"
            )
    finally:
        await store.close()


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--workdir", default=None, help="where the JSONL and outputs go (default: a temp dir)")
    ap.add_argument("--show-only", action="store_true", help="skip the replay (the run is in --database-url)")
    ap.add_argument(
        "--compare", action="store_true", help="also replay a changed run; time compare and JUnit"
    )
    ap.add_argument(
        "--compare-only", action="store_true", help="only compare and JUnit (both runs are in --database-url)"
    )
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ragpulse-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = work / f"scale_{args.cases}.jsonl"
    if not cases.exists():
        write_cases(cases, args.cases)
    changed = work / "changed" / cases.name  # same file name: the same test set name
    if args.compare and not changed.exists():
        changed.parent.mkdir(exist_ok=True)
        write_cases(changed, args.cases, changed=True)
    db_name = None
    url = args.database_url
    if url is None:
        db_name = f"ragpulse_bench_{uuid.uuid4().hex[:8]}"
        asyncio.run(_admin(f'CREATE DATABASE "{db_name}"'))
        url = f"postgresql://postgres@127.0.0.1:5432/{db_name}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(RAGPULSE_STORE_DATABASE_URL=url, RAGPULSE_LOG_LEVEL="WARNING")
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1] / "src"))
    exe = [sys.executable, "-m", "ragpulse"]
    run_id = f"scale-{args.cases}"
    run_b = f"{run_id}-changed"
    try:
        load = os.getloadavg()[0]
        print(f"cases={args.cases} file={cases.stat().st_size / 1e6:.1f} MB load1={load:.2f}")
        replay = [*exe, "replay", str(cases), "--judges", "keyword", "--run-id", run_id, "--json"]
        steps = [
            ("replay --json", replay),
            ("runs show --json", [*exe, "runs", "show", run_id, "--json"]),
            ("runs show (text)", [*exe, "runs", "show", run_id]),
            ("gate --json", [*exe, "gate", run_id, "--min", "pass_rate=0.5", "--json"]),
        ]
        if args.show_only:
            steps = steps[1:]
        compare = [
            ("runs compare --json", [*exe, "runs", "compare", run_id, run_b, "--json"]),
            ("runs compare (text)", [*exe, "runs", "compare", run_id, run_b]),
            (
                "gate --junit",
                [*exe, "gate", run_b, "--min", "pass_rate=0.5", "--junit", str(work / "junit.xml")],
            ),
        ]
        if args.compare_only:
            steps = compare
        elif args.compare:
            replay_b = [*exe, "replay", str(changed), "--judges", "keyword", "--run-id", run_b]
            steps += [("replay changed", [*replay_b, "--replace-test-set", "--json"]), *compare]
        for label, cmd in steps:
            out = work / f"{label.replace(' ', '_').replace('-', '')}.out"
            rc, wall, rss, cpu = run(cmd, env, out)
            print(
                f"{label:20s} rc={rc} wall={wall:7.1f} s  cpu={cpu:7.1f} s  peak RSS={rss:7.1f} MB  "
                f"stdout={out.stat().st_size / 1e6:.1f} MB  load1={os.getloadavg()[0]:.2f}"
            )
        if not args.compare_only:
            asyncio.run(first_page(url, run_id, args.cases))
    finally:
        if db_name:
            asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
