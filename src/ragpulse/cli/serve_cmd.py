"""``ragpulse serve``: the long-running sidecar.

Wires, in start order: exporters (metrics SDK) → judges → store → HTTP port (``/healthz``, ``/readyz``,
``/metrics`` on ``http_address``) → engine → OTLP receivers (unless both ``otlp_*_address`` are empty) →
Kafka source (when ``kafka_bootstrap_servers`` is set). Logs one ``ready`` line when every enabled source
listens or is connected. Runs the retention loop when ``retention_days`` is set.

SIGTERM/SIGINT start a graceful drain in reverse order: Kafka stops reading, waits for in-flight traces and
commits; the OTLP receivers stop accepting and flush held traces; the engine drains (``shutdown_deadline_s``);
the store closes. Exit codes (through the CLI's error boundary): 0 after a clean stop, 2 for a configuration
error (bad setting, an address that cannot be bound), 3 when the database or the Kafka brokers cannot be reached
at start-up or a Kafka consume loop died (so an orchestrator restarts the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import typer

from ragpulse.cli import _common, app
from ragpulse.cli.serve_http import Check, HealthServer
from ragpulse.config import Settings
from ragpulse.errors import IngestError, RagpulseError
from ragpulse.logging import get_logger
from ragpulse.services.background import start_background
from ragpulse.services.judges import open_judges

__all__ = ["run_serve", "serve"]


def _log() -> Any:
    # Resolved at call time: the CLI configures logging after this module is imported.
    return get_logger("ragpulse.serve")


#: Seconds between two retention passes.
RETENTION_INTERVAL_S = 3600.0


async def _retention_loop(store: Any, days: float) -> None:
    while True:
        try:
            n = await store.prune(timedelta(days=days))
            _log().info("retention_pruned", traces=n, older_than_days=days)
        except Exception as e:
            _log().warning("retention_failed", error=str(e))
        await asyncio.sleep(RETENTION_INTERVAL_S)


async def _wait_stop_or_failure(stop: asyncio.Event, kafka: Any) -> BaseException | None:
    """Wait for the stop signal, or for the Kafka consume loop to die (returns its error)."""
    if kafka is None:
        await stop.wait()
        return None
    waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(kafka.wait_failed())}
    done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()
    if stop.is_set():
        return None
    result: BaseException = next(iter(done)).result()
    return result


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


async def run_serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run the sidecar until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is not given).

    Raises:
        ConfigError: invalid settings, unknown judges, or an address that cannot be bound.
        StoreError: the database cannot be reached at start-up.
        IngestError: the Kafka brokers cannot be reached at start-up.
    """
    from ragpulse.api.server import open_portal
    from ragpulse.engine import Engine
    from ragpulse.export import build_exporters, metrics_asgi_app, shutdown_exporters
    from ragpulse.store import open_store

    if stop is None:
        stop = asyncio.Event()
        _install_signals(stop)
    exporters = build_exporters(settings.export, redact_text=settings.store.redact_text)
    sources: dict[str, Any] = {}
    stopping = False
    failure: BaseException | None = None

    async def store_ok() -> bool:
        return bool(await store.ping())

    async def running() -> bool:
        return not stopping

    def source_check(name: str) -> Check:
        async def check() -> bool:
            src = sources.get(name)
            return src is not None and bool(src.ready if name == "otlp" else src.connected)

        return check

    checks: dict[str, Check] = {"store": store_ok, "running": running}
    otlp_on = bool(settings.otlp.grpc_address.strip() or settings.otlp.http_address.strip())
    kafka_on = bool(settings.kafka.bootstrap_servers)
    if otlp_on:
        checks["otlp"] = source_check("otlp")
    if kafka_on:
        checks["kafka"] = source_check("kafka")

    try:
        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(open_store(settings.store))
            # judgements wait in the results stream's outbox only when the stream is on
            store.results_outbox = bool(settings.kafka.results_topic)
            http = await stack.enter_async_context(
                HealthServer(
                    settings.http.address,
                    checks,
                    metrics_asgi_app(),
                    info={
                        "database": await store.database_identity(),
                        **(
                            {"otlp_auth": "token" if settings.otlp.token is not None else "none"}
                            if otlp_on
                            else {}
                        ),
                    },
                )
            )
            # one shared LLM client, closed by the stack; the daily token budget is kept in the store (shared by replicas)
            judges = await open_judges(stack, settings, None, ledger=store)
            engine = await stack.enter_async_context(
                Engine(
                    judges,
                    store,
                    settings.engine,
                    exporters,
                    routes=settings.judge.routes,
                    redelivering=True,
                )
            )
            await start_background(stack, settings, store, judges)  # corrected pass rates, results stream
            # the portal (REST API + web UI) on its own listener; None when RAGPULSE_API_ADDRESS is empty
            portal = await open_portal(stack, settings, store=store, judges=judges, engine=engine)
            if otlp_on:
                from ragpulse.ingest.otlp import OtlpReceivers

                sources["otlp"] = await stack.enter_async_context(
                    OtlpReceivers(
                        settings.otlp,
                        engine,
                        own_service=settings.export.service_name,
                        shutdown_deadline_s=settings.engine.shutdown_deadline_s,
                        pending=store,
                    )
                )
            if kafka_on:
                from ragpulse.ingest.kafka import KafkaSource

                sources["kafka"] = await stack.enter_async_context(
                    KafkaSource(
                        settings.kafka,
                        engine,
                        shutdown_deadline_s=settings.engine.shutdown_deadline_s,
                        log_text=settings.log.text,
                        otlp=settings.otlp,
                        own_service=settings.export.service_name,
                    )
                )
            retention: asyncio.Task[None] | None = None
            if settings.store.retention_days:
                retention = asyncio.create_task(_retention_loop(store, settings.store.retention_days))
            _log().info(
                "ready",
                http_port=http.port,
                api_port=portal.port if portal is not None else None,
                otlp_grpc=settings.otlp.grpc_address or None,
                otlp_http=settings.otlp.http_address or None,
                kafka_topics=list(settings.kafka.topics) if kafka_on else None,
                judges=sorted(judges),
            )
            failure = await _wait_stop_or_failure(stop, sources.get("kafka"))
            stopping = True
            if failure is not None:
                _log().error("source_failed", source="kafka", error=str(failure))
            _log().info("stopping", deadline_s=settings.engine.shutdown_deadline_s)
            if retention is not None:
                retention.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await retention
    finally:
        shutdown_exporters(exporters)
    if failure is not None:
        raise IngestError(f"Kafka source failed: {failure}", retriable=True)
    _log().info("stopped")


@app.command()
def serve() -> None:
    """Run the online evaluation sidecar: OTLP receivers, Kafka consumer, engine, store, /healthz /readyz /metrics."""
    settings = _common.settings(service=True)
    try:
        asyncio.run(run_serve(settings))
    except RagpulseError as e:
        _log().error("serve_failed", error=str(e))
        raise  # one line and the exit code at the CLI's error boundary
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
