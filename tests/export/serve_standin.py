"""A stand-in for ``ragpulse serve``, used by the end-to-end Prometheus test while ``serve`` is not on main.

It wires the real parts the way ``serve`` does, from the same ``RAGPULSE_*`` environment: the metrics SDK and
exporters (``build_exporters``), the judges (``build_judges``), the PostgreSQL store, the engine, the Kafka
source, and ``/metrics`` served by uvicorn on ``RAGPULSE_HTTP_ADDRESS``. Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal

import uvicorn
from fastapi import FastAPI

from ragpulse.config import load_settings
from ragpulse.engine import Engine
from ragpulse.export import build_exporters, metrics_asgi_app, shutdown_exporters
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.judges.registry import build_judges
from ragpulse.store import open_store


async def main() -> None:
    settings = load_settings()
    exporters = build_exporters(settings)
    judges = build_judges(settings)
    host, _, port = settings.http_address.rpartition(":")
    app = FastAPI()
    app.mount("/metrics", metrics_asgi_app())
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=int(port), log_level="warning"))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    http = asyncio.create_task(server.serve())
    try:
        async with (
            open_store(settings) as store,
            Engine(judges, store, settings, exporters) as engine,
            KafkaSource(settings, engine),
        ):
            await stop.wait()
    finally:
        server.should_exit = True
        await http
        shutdown_exporters(exporters)


if __name__ == "__main__":
    asyncio.run(main())
