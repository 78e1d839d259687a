"""The long-running sidecar behind ``ragpulse serve``: its assembly, readiness and shutdown.

Start order: exporters (metrics SDK) → store → HTTP port (``/healthz``, ``/readyz``, ``/metrics`` on
``http.address``) → judges → engine → the portal (through the adapter's hook: the portal lives above this
layer) → OTLP receivers (unless both ``otlp`` addresses are empty) → Kafka source (when
``kafka.bootstrap_servers`` is set) → retention (:func:`ragpulse.store.retention.retention_loop`, when
``store.retention_days`` is set, every ``store.retention_interval_s``). One ``ready`` log line when every
enabled source listens or is connected.

Every source is a :class:`~ragpulse.protocols.Source`: ``/readyz`` asks each its ``ready``; serve waits for the
stop signal or for any source's ``wait_failed``; both sources keep what they reject in the store's
``dead_letters`` table (Kafka also in its dead-letter topic).

A stop (SIGTERM/SIGINT, or ``stop`` set) drains in reverse order: Kafka stops reading, waits for in-flight traces
and commits; the OTLP receivers stop accepting and flush held traces; the engine drains
(``engine.shutdown_deadline_s``); the judges' clients and the store close; exporters flush. A source that died
raises :class:`~ragpulse.errors.SourceFailedError` after that drain (exit 3 at the CLI's boundary, so an
orchestrator restarts the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack
from typing import Any, Protocol

from ragpulse.aio import cancel_and_wait
from ragpulse.asgi_server import ListenerLimits, set_default_limits
from ragpulse.config import Settings
from ragpulse.errors import SourceFailedError
from ragpulse.judges.selection import open_judges
from ragpulse.logging import get_logger
from ragpulse.protocols import Judge, Source, TraceSink
from ragpulse.sidecar.background import start_background
from ragpulse.sidecar.health import Check, HealthServer
from ragpulse.store.postgres import PostgresStore

__all__ = ["PortalHook", "run_serve"]


class _Listening(Protocol):
    @property
    def port(self) -> int | None: ...


#: ``serve``'s portal hook: ``(stack, settings, store=…, judges=…, engine=…)`` → a started portal (with its
#: ``port``) whose stop ``stack`` owns, or ``None`` when it is off (:func:`ragpulse.portal.server.open_portal`).
PortalHook = Callable[..., Awaitable[_Listening | None]]


@contextlib.contextmanager
def _steady_gc() -> Iterator[None]:
    """While serving, the objects made at start-up (modules, settings, judges, clients) are moved out of the
    collector's generations (``gc.freeze``), so collections no longer walk them. Measured on the offline Kafka
    path (bench/kafka_cpu.py): the collector's share fell from ~0.06 to ~0.025 ms CPU per trace, RSS unchanged
    (a larger young generation saved ~0.01 ms more but held ~50 MB more under a backlog, so the thresholds
    stay Python's). Undone on exit (``serve`` may run inside a longer process, e.g. tests)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _log() -> Any:
    # Resolved at call time: the CLI configures logging after this module is imported.
    return get_logger("ragpulse.serve")


async def _wait_stop_or_failure(
    stop: asyncio.Event, sources: Mapping[str, Source]
) -> tuple[str, BaseException] | None:
    """Wait for the stop signal, or for a source to die; ``(name, error)`` of the first that died."""
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    failing: dict[asyncio.Future[Any], str] = {
        asyncio.ensure_future(src.wait_failed()): name for name, src in sources.items()
    }
    try:
        done, _ = await asyncio.wait({stopping, *failing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (stopping, *failing):
            t.cancel()
    if stop.is_set():
        return None
    first = next(t for t in done if t in failing)
    error: BaseException = first.result()
    return failing[first], error


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def _initial_series(
    settings: Settings, judges: Mapping[str, Judge], sources: Mapping[str, Source], exporters: Any
) -> None:
    """Create the labelled metric series known now at 0 (:func:`ragpulse.telemetry.initialise_series`): the
    judges' (those calling a judge model: ``backend`` ``llm``; cascades), every trace source, the rejection
    reasons of the running Kafka/OTLP sources (and the OTLP intake's own counters), the evaluation-event kinds of
    the exporters, the models of the app price table (``export.model_prices``), the refused-authentication
    series of the listeners that require a token (portal with ``api.token``, OTLP with ``otlp.token``)."""
    from ragpulse import telemetry
    from ragpulse.authcheck import REASONS
    from ragpulse.ingest.events import KAFKA_REJECT_REASONS
    from ragpulse.ingest.otlp.intake import OTLP_REJECT_REASONS
    from ragpulse.judges.cascade import CascadeJudge
    from ragpulse.judges.model.concurrency import CONGESTION_SIGNALS
    from ragpulse.model import Backend
    from ragpulse.model import Source as TraceSource

    rejected: dict[str, tuple[str, ...]] = {}
    more: list[tuple[Any, dict[str, str]]] = []
    if "kafka" in sources:
        rejected["kafka"] = KAFKA_REJECT_REASONS
    if "otlp" in sources or "kafka" in sources:  # OTLP topics of the Kafka source reject as otlp too
        from ragpulse.ingest.otlp.assembly import NOT_TAKEN_REASONS, SPANS_NOT_TAKEN
        from ragpulse.ingest.otlp.intake import OWN_SPANS_IGNORED

        rejected["otlp"] = OTLP_REJECT_REASONS
        more += [(SPANS_NOT_TAKEN, {"reason": r}) for r in NOT_TAKEN_REASONS]
        more.append((OWN_SPANS_IGNORED, {}))
    listeners: list[str] = ["portal"] if settings.api.token is not None else []
    if "otlp" in sources and settings.otlp.token is not None:
        listeners += ["otlp_http", "otlp_grpc"]
    more += [(telemetry.AUTH_REFUSED, {"listener": li, "reason": r}) for li in listeners for r in REASONS]
    n = telemetry.initialise_series(
        judges,
        model_judges=[
            n for n, j in judges.items() if j.backend is Backend.LLM or isinstance(j, CascadeJudge)
        ],
        cascade_judges=[n for n, j in judges.items() if isinstance(j, CascadeJudge)],
        sources=[s.value for s in TraceSource],
        rejected=rejected,
        signals=CONGESTION_SIGNALS,
        event_kinds=[k for e in exporters if isinstance(k := getattr(e, "kind", None), str)],
        priced_models=settings.export.model_prices,
        more=more,
    )
    _log().debug("metric_series_initialised", series=n)


async def _open_sources(
    stack: AsyncExitStack,
    settings: Settings,
    engine: TraceSink,
    store: PostgresStore,
    extra: Mapping[str, Source],
) -> dict[str, Source]:
    """Start the enabled sources, then ``extra``; ``stack`` closes them (``aclose``) in reverse order."""
    wanted: dict[str, Source] = {}
    deadline = settings.engine.shutdown_deadline_s
    if settings.otlp.grpc_address.strip() or settings.otlp.http_address.strip():
        from ragpulse.ingest.otlp import OtlpReceivers

        wanted["otlp"] = OtlpReceivers(
            settings.otlp,
            engine,
            own_service=settings.export.service_name,
            shutdown_deadline_s=deadline,
            dead_letters=store,
            pending=store,
            allowed_hosts=settings.http.allowed_hosts,
        )
    if settings.kafka.bootstrap_servers:
        from ragpulse.ingest.kafka import KafkaSource

        wanted["kafka"] = KafkaSource(
            settings.kafka,
            engine,
            shutdown_deadline_s=deadline,
            log_text=settings.log.text,
            otlp=settings.otlp,
            own_service=settings.export.service_name,
            dead_letters=store,
        )
    wanted.update(extra)
    sources: dict[str, Source] = {}
    for name, src in wanted.items():
        stack.push_async_callback(src.aclose)  # also after a failed start: closing is idempotent
        await src.start()
        sources[name] = src
    return sources


async def run_serve(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    portal: PortalHook | None = None,
    sources: Mapping[str, Source] | None = None,
    on_stopping: Callable[[], None] | None = None,
) -> None:
    """Run the sidecar until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is not given).

    Args:
        settings: every section is used.
        stop: set it to stop; ``None`` installs SIGTERM/SIGINT handlers that set one.
        portal: starts the portal (REST API and web UI) on its own listener; ``None``: no portal.
        sources: more sources to run beside the configured ones (an embedding application's own input),
            started after them and checked and closed the same way.
        on_stopping: called once when the stop begins (before the drain); the CLI arms its exit deadline
            there (``ragpulse.cli.serve_cmd``).

    Raises:
        ConfigError: invalid settings, unknown judges, or an address that cannot be bound.
        StoreError: the database cannot be reached at start-up.
        IngestError: the Kafka brokers cannot be reached at start-up.
        SourceFailedError: a source died while serving (after the drain).
    """
    from ragpulse.engine import Engine
    from ragpulse.export import build_exporters, metrics_asgi_app, shutdown_exporters
    from ragpulse.store import open_store
    from ragpulse.store.retention import retention_loop

    if stop is None:
        stop = asyncio.Event()
        _install_signals(stop)
    set_default_limits(
        ListenerLimits(
            header_timeout_s=settings.http.header_timeout_s, max_connections=settings.http.max_connections
        )
    )
    exporters = build_exporters(
        settings.export, redact_text=settings.store.redact_text, live_quality_only=True
    )
    extra = dict(sources or {})
    running_sources: dict[str, Source] = {}
    stopping = False
    failure: tuple[str, BaseException] | None = None
    store: PostgresStore | None = None

    async def store_ok() -> bool:
        return store is not None and bool(await store.ping())

    async def running() -> bool:
        return not stopping

    def source_check(name: str) -> Check:
        async def check() -> bool:
            src = running_sources.get(name)
            return src is not None and src.ready

        return check

    checks: dict[str, Check] = {"store": store_ok, "running": running}
    if settings.otlp.grpc_address.strip() or settings.otlp.http_address.strip():
        checks["otlp"] = source_check("otlp")
    if settings.kafka.bootstrap_servers:
        checks["kafka"] = source_check("kafka")
    for name in extra:
        checks[name] = source_check(name)

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
                            if "otlp" in checks
                            else {}
                        ),
                    },
                    allowed_hosts=settings.http.allowed_hosts,
                )
            )
            # closed by the stack; the daily token budget is kept in the store (shared by replicas)
            judges: Mapping[str, Judge] = await open_judges(stack, settings, None, ledger=store)
            engine = await stack.enter_async_context(
                Engine(
                    judges,
                    store,
                    settings.engine,
                    exporters,
                    routes=settings.judge.routes,
                    redelivering=True,
                    history_turns=settings.judge.history_turns,
                )
            )
            await start_background(stack, settings, store, judges)  # corrected pass rates, results stream
            started = (
                await portal(stack, settings, store=store, judges=judges, engine=engine)
                if portal is not None
                else None
            )
            running_sources.update(await _open_sources(stack, settings, engine, store, extra))
            _initial_series(settings, judges, running_sources, exporters)
            retention: asyncio.Task[None] | None = None
            if settings.store.retention_days:
                retention = asyncio.create_task(
                    retention_loop(store, settings.store), name="ragpulse-retention"
                )
            _log().info(
                "ready",
                http_port=http.port,
                api_port=started.port if started is not None else None,
                otlp_grpc=settings.otlp.grpc_address or None,
                otlp_http=settings.otlp.http_address or None,
                kafka_topics=list(settings.kafka.topics) if "kafka" in running_sources else None,
                judges=sorted(judges),
            )
            with _steady_gc():
                failure = await _wait_stop_or_failure(stop, running_sources)
            stopping = True
            if on_stopping is not None:
                on_stopping()
            if failure is not None:
                _log().error("source_failed", source=failure[0], error=str(failure[1]))
            _log().info("stopping", deadline_s=settings.engine.shutdown_deadline_s)
            if retention is not None:
                await cancel_and_wait(retention)
    finally:
        shutdown_exporters(exporters)
    if failure is not None:
        raise SourceFailedError(*failure)
    _log().info("stopped")
