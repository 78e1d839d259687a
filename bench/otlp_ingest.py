"""OTLP ingestion throughput: traces/s from OTLP/HTTP (protobuf) requests to traces handed to a sink.

Measures the receiver, decoding, assembly and convention mapping (no engine, no judges, no store):

    python bench/otlp_ingest.py --traces 20000 --batch 100 [--transport http|grpc] [--concurrency 4]
                                [--journal postgresql://…]

``--journal URL`` adds what ``serve`` does for durability: every accepted trace is recorded in PostgreSQL
(``pending_inputs``) before the answer and deleted once the sink acknowledges it (the sink acks at once).

Each trace is 2-3 OpenInference spans (``trace_to_openinference_spans``) with 3 documents of ~300 chars.
Prints traces/s, spans/s, and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time

from ragpulse.config import Settings
from ragpulse.ingest.otlp.client import OtlpTraceClient
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.model import Document, Trace, TraceOutcome, TraceResult
from ragpulse.protocols import AckCallback
from ragpulse.store import PostgresStore


class CountingSink:
    def __init__(self, target: int) -> None:
        self.n = 0
        self.done = asyncio.Event()
        self.target = target

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        if ack is not None:
            await ack(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED), True)
        self.n += 1
        if self.n >= self.target:
            self.done.set()

    def has_room(self) -> bool:
        return True


def make_traces(n: int) -> list[Trace]:
    body = "Employees may work remotely for up to two days per week during probation. " * 4
    return [
        Trace(
            trace_id=f"{i + 1:032x}",
            app="bench",
            question=f"How many remote days may I take in week {i}?",
            answer="Up to two days per week while on probation.",
            documents=[Document(id=f"doc-{i}-{k}", content=body, score=0.9 - k / 10) for k in range(3)],
            context="You are the HR assistant.",
            model="gpt-4o-mini",
            latency_s=1.2,
        )
        for i in range(n)
    ]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--transport", choices=["http", "grpc"], default="http")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--journal", default=None, help="PostgreSQL URL: record accepted traces as serve does")
    args = ap.parse_args()
    traces = make_traces(args.traces)
    batches = [traces[i : i + args.batch] for i in range(0, len(traces), args.batch)]
    settings = Settings(
        otlp_grpc_address="127.0.0.1:0",
        otlp_http_address="127.0.0.1:0",
        otlp_root_grace_s=0.0,
        otlp_max_pending_traces=max(10000, args.traces),
    )
    sink = CountingSink(args.traces)
    store = await PostgresStore.connect(args.journal, settings.store) if args.journal else None
    async with OtlpReceivers(settings.otlp, sink, pending=store) as r:
        port = r.http_port if args.transport == "http" else r.grpc_port
        queue: asyncio.Queue[list[Trace]] = asyncio.Queue()
        for b in batches:
            queue.put_nowait(b)

        async def worker() -> None:
            async with OtlpTraceClient(f"{args.transport}://127.0.0.1:{port}", timeout_s=60) as client:
                while not queue.empty():
                    await client.send(queue.get_nowait())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        await sink.done.wait()
        elapsed = time.perf_counter() - started
        spans = r.intake.spans_accepted
    if store is not None:
        await store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"transport={args.transport} traces={args.traces} batch={args.batch} "
        f"journal={'postgresql' if args.journal else 'none'} elapsed={elapsed:.2f}s traces/s={args.traces / elapsed:.0f} spans/s={spans / elapsed:.0f} "
        f"peak_rss={rss_mb:.0f}MiB (client and receiver in one process)"
    )


if __name__ == "__main__":
    asyncio.run(main())
