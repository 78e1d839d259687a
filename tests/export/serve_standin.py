"""A stand-in for ``ragpulse serve`` used by the end-to-end Prometheus test until ``serve`` is on main.

Wires the real parts as ``serve`` does — metrics SDK and exporters (``build_exporters``), the PostgreSQL store,
the engine, the Kafka source, and ``/metrics`` served by uvicorn — with scripted judges in place of the judge
registry. Run: ``python serve_standin.py PG_URL BOOTSTRAP TOPIC HTTP_PORT``; prints ``ready`` and runs until
SIGTERM.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sys

import uvicorn
from fastapi import FastAPI

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.export import build_exporters, metrics_asgi_app, shutdown_exporters
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.model import Backend, Trace
from ragpulse.store import open_store
from ragpulse.testing.fakes import ScriptedJudge


def _score(trace: Trace) -> float:
    return int(hashlib.sha256(trace.trace_id.encode()).hexdigest()[:4], 16) / 0xFFFF


async def main(pg_url: str, bootstrap: str, topic: str, port: int) -> None:
    settings = Settings(
        database_url=pg_url,
        kafka_bootstrap_servers=bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"g-{topic}",
        sampling_rate=0.8,
        http_address=f"127.0.0.1:{port}",
        otlp_grpc_address="",
        otlp_http_address="",
        engine_flush_interval_s=0.05,
    )
    exporters = build_exporters(settings)
    error_ids = [f"e2e-{i:06d}" for i in range(0, 5000, 7)]
    judges = {
        "faithfulness": ScriptedJudge(
            "faithfulness", _score, threshold=0.7, backend=Backend.LLM, tokens=(300, 40)
        ),
        "relevancy": ScriptedJudge("relevancy", 0.9, errors=error_ids, backend=Backend.LLM, tokens=(120, 10)),
        "keyword": ScriptedJudge("keyword", lambda t: None if t.trace_id.endswith("3") else 0.6),
    }
    app = FastAPI()
    app.mount("/metrics", metrics_asgi_app())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    http = asyncio.create_task(server.serve())
    try:
        async with (
            open_store(settings) as store,
            Engine(judges, store, settings, exporters) as engine,
            KafkaSource(settings, engine),
        ):
            print("ready", flush=True)
            await stop.wait()
    finally:
        server.should_exit = True
        await http
        shutdown_exporters(exporters)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
