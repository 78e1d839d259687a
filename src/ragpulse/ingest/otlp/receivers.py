"""The OTLP source: gRPC and HTTP receivers plus the assembler task, as one async context manager.

::

    async with OtlpReceivers(settings, engine) as otlp:
        assert otlp.ready
        ...  # traces flow into engine.submit

- gRPC listens on ``settings.otlp_grpc_address`` (``host:port``; default ``127.0.0.1:4317``), HTTP on
  ``settings.otlp_http_address`` (default ``127.0.0.1:4318``); an empty address disables that receiver and
  port ``0`` picks a free port (see :attr:`OtlpReceivers.grpc_port` / :attr:`OtlpReceivers.http_port`).
- Requests larger than ``settings.otlp_max_request_bytes`` answer 413 / ``RESOURCE_EXHAUSTED``.
- Handlers only decode and hand spans to the :class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`; a
  background task releases finished traces and awaits ``sink.submit`` (engine back-pressure never holds an
  OTLP response).
- While ``otlp_max_pending_traces`` traces are held, requests are refused with HTTP 503 (``Retry-After``) /
  gRPC ``UNAVAILABLE``, which OTLP exporters retry.
- With a ``pending`` store (``serve`` passes the PostgreSQL store) every trace is recorded there before the
  receiver answers 200 (:mod:`ragpulse.ingest.otlp.journal`) and deleted once its result is stored; on start
  the pending traces are read back and judged. On exit the receivers stop accepting and held traces simply
  stay pending (no flush, so the shutdown deadline holds).
- Without a ``pending`` store, on exit every held trace is flushed to the sink (traces without a root flagged
  ``incomplete``).

Metrics: ``ragpulse_traces_received{source=otlp}`` per trace handed to the sink,
``ragpulse_traces_rejected{source=otlp,reason}`` per rejected span or request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Self

import grpc

from ragpulse.asgi_server import EmbeddedAsgiServer, parse_address
from ragpulse.config import Settings
from ragpulse.errors import ConfigError, IngestError
from ragpulse.ingest.otlp.assembly import Clock, TraceAssembler
from ragpulse.ingest.otlp.conventions import ConventionMapper, TraceBuilder
from ragpulse.ingest.otlp.decode import decode_protobuf
from ragpulse.ingest.otlp.grpc_service import TraceServiceReceiver, add_receiver
from ragpulse.ingest.otlp.http_app import build_http_app
from ragpulse.ingest.otlp.intake import OtlpIntake
from ragpulse.ingest.otlp.journal import PendingJournal
from ragpulse.ingest.otlp.spans import request_to_spans
from ragpulse.logging import get_logger
from ragpulse.protocols import PendingStore, TraceSink

__all__ = ["OtlpReceivers", "parse_address"]

log = get_logger(__name__)


class OtlpReceivers:
    """gRPC + HTTP OTLP trace receivers feeding ``sink`` (see the module docstring).

    Args:
        settings: ``otlp_*`` settings and ``service_name``.
        sink: the engine (or any :class:`~ragpulse.protocols.TraceSink`).
        mappers: convention mappers replacing the defaults.
        clock: monotonic clock for the assembler (tests).
        pending: durable store for accepted traces (at-least-once across restarts); ``None`` keeps them in
            memory only.

    Raises:
        ConfigError: (on enter) an invalid address or ``otlp_attributes``, or a port that cannot be bound.
    """

    def __init__(
        self,
        settings: Settings,
        sink: TraceSink,
        *,
        mappers: Sequence[ConventionMapper] | None = None,
        clock: Clock = time.monotonic,
        pending: PendingStore | None = None,
    ) -> None:
        self._settings = settings
        self._sink = sink
        self.journal = PendingJournal(pending) if pending is not None else None
        self.assembler = TraceAssembler(
            settings, TraceBuilder(settings, mappers), clock=clock, journal=self.journal
        )
        self.intake = OtlpIntake(self.assembler, settings.service_name, self.journal)
        self._grpc: grpc.aio.Server | None = None
        self._http: EmbeddedAsgiServer | None = None
        self._assembler_task: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self.grpc_port: int | None = None
        self.http_port: int | None = None

    @property
    def ready(self) -> bool:
        """True once every enabled receiver is listening (and until exit)."""
        if not self._started or self._closed:
            return False
        http_ok = self._http is None or self._http.serving
        return http_ok and (self._assembler_task is not None and not self._assembler_task.done())

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Bind and start the enabled receivers and the assembler task.

        Raises:
            RuntimeError: already started.
            ConfigError: bad address or the port cannot be bound.
        """
        if self._started:
            raise RuntimeError("OtlpReceivers already started")
        self._started = True
        s = self._settings
        try:
            if self.journal is not None:
                await self._resume(self.journal)
            self._assembler_task = asyncio.create_task(self.assembler.run(self._sink), name="otlp-assembler")
            if s.otlp_grpc_address.strip():
                await self._start_grpc(s.otlp_grpc_address)
            if s.otlp_http_address.strip():
                await self._start_http(s.otlp_http_address)
        except BaseException:
            await self.close()
            raise

    async def _resume(self, journal: PendingJournal) -> None:
        """Read the traces accepted before the last stop back into the assembler (released as usual)."""
        rows = await journal.load()
        resumed = 0
        for tid, payload in rows:
            try:
                spans = request_to_spans(decode_protobuf(payload).request, self._settings.service_name).spans
            except IngestError:
                await journal.dead_letter(tid, "unreadable")
                continue
            self.assembler.commit(self.assembler.plan(spans, resumed=True))
            resumed += 1
        if rows:
            log.info("otlp_pending_resumed", traces=resumed)

    async def _start_grpc(self, address: str) -> None:
        host, port = parse_address(address)
        limit = self._settings.otlp_max_request_bytes
        server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)]
        )
        add_receiver(server, TraceServiceReceiver(self.intake))
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(target)
        except RuntimeError as e:
            raise ConfigError(f"cannot listen for OTLP/gRPC on {address}: {e}") from e
        if not bound:
            raise ConfigError(f"cannot listen for OTLP/gRPC on {address}")
        await server.start()
        self._grpc = server
        self.grpc_port = bound
        log.info("otlp_grpc_listening", address=f"{host}:{bound}")

    async def _start_http(self, address: str) -> None:
        app = build_http_app(self.intake, self._settings.otlp_max_request_bytes)
        self._http = EmbeddedAsgiServer(app, address, what="OTLP/HTTP", task_name="otlp-http")
        await self._http.start()
        self.http_port = self._http.port
        log.info("otlp_http_listening", address=f"{self._http.host}:{self.http_port}")

    async def close(self) -> None:
        """Stop accepting, flush held traces to the sink, stop the assembler. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._grpc is not None:
            await self._grpc.stop(grace=1.0)
        if self._http is not None:
            await self._http.stop()
        if self._assembler_task is not None:
            self.assembler.stop()
            # With a journal nothing needs flushing (held traces stay pending): do not wait on a blocked submit.
            wait = 1.0 if self.journal is not None else self._settings.shutdown_deadline_s
            try:
                await asyncio.wait_for(self._assembler_task, timeout=wait)
            except TimeoutError:
                if self.journal is None:
                    log.warning("otlp_flush_timeout", pending=self.assembler.pending_traces)
        log.info(
            "otlp_receivers_stopped",
            spans_accepted=self.intake.spans_accepted,
            spans_rejected=self.intake.spans_rejected,
            traces_submitted=self.assembler.stats.submitted,
        )
