"""The OTLP source: gRPC and HTTP receivers plus the assembler task, as one async context manager.

::

    async with OtlpReceivers(settings.otlp, engine, own_service=settings.export.service_name) as otlp:
        assert otlp.ready
        ...  # traces flow into engine.submit

- gRPC listens on ``settings.grpc_address`` (``host:port``; default ``127.0.0.1:4317``), HTTP on
  ``settings.http_address`` (default ``127.0.0.1:4318``); an empty address disables that receiver and
  port ``0`` picks a free port (see :attr:`OtlpReceivers.grpc_port` / :attr:`OtlpReceivers.http_port`).
- Requests larger than ``settings.max_request_bytes`` answer 413 / ``RESOURCE_EXHAUSTED``.
- Handlers only decode and hand spans to the :class:`~ragpulse.ingest.otlp.assembly.TraceAssembler`; a
  background task releases finished traces and awaits ``sink.submit`` (engine back-pressure never holds an
  OTLP response).
- While ``otlp_max_pending_traces`` traces are held, requests are refused with HTTP 503 (``Retry-After``) /
  gRPC ``UNAVAILABLE``, which OTLP exporters retry.
- Optional authentication and TLS: with ``otlp_token`` (``RAGPULSE_OTLP_TOKEN``) every request needs
  ``Authorization: Bearer <token>`` (HTTP; else 401) or the ``authorization`` metadata with the same value
  (gRPC; else ``UNAUTHENTICATED``); ``otlp_tls_cert_file`` / ``otlp_tls_key_file`` serve both over TLS.
  Listening on a non-loopback address without a token logs one ``otlp_receivers_unauthenticated`` warning
  at start (``serve`` reports ``"otlp_auth": "none"`` on ``/readyz``).
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
import ipaddress
import socket
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import grpc

from ragpulse.asgi_server import EmbeddedAsgiServer, bind_error, parse_address
from ragpulse.config import OtlpSettings, env_name
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
from ragpulse.protocols import DeadLetterSink, PendingStore, TraceSink

__all__ = ["OtlpReceivers"]

log = get_logger(__name__)


def _is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


#: Time a gRPC connection past ``otlp.grpc_max_connection_age_s`` has to finish its calls, milliseconds.
GRPC_AGE_GRACE_MS = 30_000


class OtlpReceivers:
    """gRPC + HTTP OTLP trace receivers feeding ``sink`` (see the module docstring).

    Args:
        settings: the ``otlp`` section.
        sink: the engine (or any :class:`~ragpulse.protocols.TraceSink`).
        own_service: the ``export.service_name`` setting; spans of that service are ignored.
        shutdown_deadline_s: how long closing waits for the assembler (the ``engine.shutdown_deadline_s`` setting).
        dead_letters: where rejected input is kept (undecodable requests, rejected spans; the store's
            ``dead_letters`` table).
        mappers: convention mappers replacing the defaults.
        clock: monotonic clock for the assembler (tests).
        pending: durable store for accepted traces (at-least-once across restarts); ``None`` keeps them in
            memory only.
        allowed_hosts: host names the OTLP/HTTP receiver accepts in ``Host`` besides loopback names and (on
            a non-loopback bind) IP literals (``RAGPULSE_HTTP_ALLOWED_HOSTS``, :mod:`ragpulse.httpguard`).

    Raises:
        ConfigError: (on enter) an invalid address or ``otlp_attributes``, or a port that cannot be bound.
    """

    def __init__(
        self,
        settings: OtlpSettings,
        sink: TraceSink,
        *,
        own_service: str = "ragpulse",
        shutdown_deadline_s: float = 30.0,
        dead_letters: DeadLetterSink | None = None,
        mappers: Sequence[ConventionMapper] | None = None,
        clock: Clock = time.monotonic,
        pending: PendingStore | None = None,
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self._allowed_hosts = tuple(allowed_hosts)
        self._settings = settings
        self._own_service = own_service
        self._shutdown_deadline_s = shutdown_deadline_s
        self._sink = sink
        self._token = settings.token.get_secret_value() if settings.token is not None else None
        self._tls: tuple[str, str] | None = (
            (str(settings.tls_cert_file), str(settings.tls_key_file))
            if settings.tls_cert_file is not None and settings.tls_key_file is not None
            else None
        )
        self._tls_pem: tuple[bytes, bytes] | None = None  # (certificate, key) PEM, read at start
        self.journal = PendingJournal(pending) if pending is not None else None
        self.assembler = TraceAssembler(
            settings, TraceBuilder(settings, mappers), clock=clock, journal=self.journal
        )
        self.intake = OtlpIntake(self.assembler, own_service, self.journal, dead_letters)
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

    @property
    def auth(self) -> str:
        """``token`` when the receivers require a bearer token, else ``none`` (reported on ``/readyz``)."""
        return "token" if self._token is not None else "none"

    def _exposed(self) -> list[str]:
        """The enabled receiver addresses that are not loopback-only."""
        out = []
        for address in (self._settings.grpc_address, self._settings.http_address):
            if address.strip():
                host, _ = parse_address(address)
                if not _is_loopback(host):
                    out.append(address.strip())
        return out

    def _check_tls(self) -> None:
        if self._tls is None:
            return
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(*self._tls)
            self._tls_pem = (Path(self._tls[0]).read_bytes(), Path(self._tls[1]).read_bytes())
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"cannot load the OTLP TLS certificate/key {self._tls}: {e}") from e

    async def start(self) -> None:
        """Bind and start the enabled receivers and the assembler task.

        Logs one warning when a receiver listens on a non-loopback address without a token.

        Raises:
            RuntimeError: already started.
            ConfigError: bad address, the port cannot be bound, or the TLS files cannot be loaded.
        """
        if self._started:
            raise RuntimeError("OtlpReceivers already started")
        self._started = True
        s = self._settings
        try:
            self._check_tls()
            exposed = self._exposed()
            if exposed and self._token is None:
                log.warning(
                    "otlp_receivers_unauthenticated",
                    addresses=exposed,
                    tls=self._tls is not None,
                    hint="anyone who can reach these addresses can submit traces; set RAGPULSE_OTLP_TOKEN",
                )
            if self.journal is not None:
                await self._resume(self.journal)
            self._assembler_task = asyncio.create_task(self.assembler.run(self._sink), name="otlp-assembler")
            if s.grpc_address.strip():
                await self._start_grpc(s.grpc_address)
            if s.http_address.strip():
                await self._start_http(s.http_address)
        except BaseException:
            await self.close()
            raise

    async def _resume(self, journal: PendingJournal) -> None:
        """Read the traces accepted before the last stop back into the assembler (released as usual)."""
        rows = await journal.load()
        resumed = 0
        for tid, payload in rows:
            try:
                spans = request_to_spans(decode_protobuf(payload).request, self._own_service).spans
            except IngestError:
                await journal.dead_letter(tid, "unreadable")
                continue
            self.assembler.commit(self.assembler.plan(spans, resumed=True))
            resumed += 1
        if rows:
            log.info("otlp_pending_resumed", traces=resumed)

    async def _start_grpc(self, address: str) -> None:
        host, port = parse_address(address)
        limit = self._settings.max_request_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.so_reuseport", 0),
                # slow or idle clients cannot hold a connection for ever (docs/portal.md, "Listeners")
                ("grpc.max_connection_idle_ms", int(self._settings.grpc_max_connection_idle_s * 1000)),
                ("grpc.max_connection_age_ms", int(self._settings.grpc_max_connection_age_s * 1000)),
                ("grpc.max_connection_age_grace_ms", GRPC_AGE_GRACE_MS),
            ]
        )
        add_receiver(server, TraceServiceReceiver(self.intake, self._token))
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if port:  # gRPC says only "Failed to bind … set GRPC_VERBOSITY=debug": find the real cause first
            try:
                socket.create_server(
                    (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
                ).close()
            except OSError as e:
                raise bind_error("OTLP/gRPC", address, env_name("otlp", "grpc_address"), e) from e
        try:
            if self._tls_pem is not None:
                cert, key = self._tls_pem
                bound = server.add_secure_port(target, grpc.ssl_server_credentials([(key, cert)]))
            else:
                bound = server.add_insecure_port(target)
        except RuntimeError as e:
            raise ConfigError(f"cannot listen for OTLP/gRPC on {address}: {e}") from e
        if not bound:
            raise ConfigError(f"cannot listen for OTLP/gRPC on {address}")
        await server.start()
        self._grpc = server
        self.grpc_port = bound
        log.info("otlp_grpc_listening", address=f"{host}:{bound}", tls=self._tls is not None, auth=self.auth)

    async def _start_http(self, address: str) -> None:
        app = build_http_app(self.intake, self._settings.max_request_bytes, self._token)
        cert, key = self._tls if self._tls is not None else (None, None)
        self._http = EmbeddedAsgiServer(
            app,
            address,
            what="OTLP/HTTP",
            task_name="otlp-http",
            ssl_certfile=cert,
            ssl_keyfile=key,
            allowed_hosts=self._allowed_hosts,
            setting=env_name("otlp", "http_address"),
        )
        await self._http.start()
        self.http_port = self._http.port
        log.info(
            "otlp_http_listening",
            address=f"{self._http.host}:{self.http_port}",
            tls=self._tls is not None,
            auth=self.auth,
        )

    async def wait_failed(self) -> BaseException:
        """:class:`~ragpulse.protocols.Source`: wait until the assembler task dies on its own; return why."""
        assert self._assembler_task is not None, "not started"
        try:
            await asyncio.shield(self._assembler_task)
        except asyncio.CancelledError:
            if not self._assembler_task.cancelled():
                raise
            return RuntimeError("OTLP assembler was cancelled")
        except Exception as e:
            return e
        if not self._closed:
            return RuntimeError("OTLP assembler ended")
        await asyncio.Event().wait()  # closed on purpose: never a failure
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """:class:`~ragpulse.protocols.Source` close: :meth:`close`."""
        await self.close()

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
            wait = 1.0 if self.journal is not None else self._shutdown_deadline_s
            try:
                await asyncio.wait_for(self._assembler_task, timeout=wait)
            except TimeoutError:
                if self.journal is None:
                    log.warning("otlp_flush_timeout", pending=self.assembler.pending_traces)
        await self.intake.flush_dead_letters()
        log.info(
            "otlp_receivers_stopped",
            spans_accepted=self.intake.spans_accepted,
            spans_rejected=self.intake.spans_rejected,
            traces_submitted=self.assembler.stats.submitted,
        )
