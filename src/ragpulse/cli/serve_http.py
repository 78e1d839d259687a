"""The HTTP port of ``ragpulse serve``: ``/healthz``, ``/readyz`` and ``/metrics`` (FastAPI on uvicorn).

- ``GET /healthz`` – liveness: 200 ``{"status": "ok"}`` while the process serves requests.
- ``GET /readyz`` – readiness: 200 ``{"status": "ready", "checks": {...}}`` when every check passes, else 503
  ``{"status": "not_ready", "checks": {...}}``. Checks are async callables returning ``bool`` (``store``:
  the database answers; ``otlp``/``kafka``: the source listens / is connected; ``running``: not shutting down).
- ``/metrics`` – the Prometheus exposition of :mod:`ragpulse.export` (mounted ASGI app).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import Any, Self

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from ragpulse.errors import ConfigError
from ragpulse.logging import get_logger

__all__ = ["HealthServer", "build_health_app", "parse_address"]


#: A readiness check: returns True when the component is ready (must not raise).
Check = Callable[[], Awaitable[bool]]

#: Seconds a single readiness check may take before it counts as failed.
CHECK_TIMEOUT_S = 3.0


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:9464``) into ``(host, port)``.

    Raises:
        ConfigError: no port, or the port is not an integer in 0–65535.
    """
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"invalid address {address!r}: expected host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


async def _run_check(check: Check) -> bool:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return bool(await check())
    except Exception:
        return False


class _AsgiEndpoint:
    """Wraps a function-style ASGI app so Starlette routes to it as an ASGI app (not a request handler)."""

    def __init__(self, asgi: Any) -> None:
        self._asgi = asgi

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._asgi(scope, receive, send)


def build_health_app(checks: Mapping[str, Check], metrics_app: Any | None = None) -> FastAPI:
    """Return the FastAPI app with ``/healthz``, ``/readyz`` and (when given) ``/metrics``."""
    app = FastAPI(title="ragpulse", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        names = list(checks)
        results = await asyncio.gather(*(_run_check(checks[n]) for n in names))
        state = dict(zip(names, results, strict=True))
        ready = all(results)
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": state}, status_code=200 if ready else 503
        )

    if metrics_app is not None:
        # A route (not a mount) so that ``/metrics`` answers directly instead of redirecting to ``/metrics/``.
        app.router.add_route("/metrics", _AsgiEndpoint(metrics_app), include_in_schema=False)  # type: ignore[arg-type]
    return app


class _Server(uvicorn.Server):
    """uvicorn server that leaves signal handling to ``ragpulse serve``."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HealthServer:
    """Serves :func:`build_health_app` on ``address`` (``host:port``; port 0 picks a free port).

    An async context manager: entering binds and starts serving (``port`` then holds the bound port),
    leaving stops it.

    Raises:
        ConfigError: (on enter) bad address or the port cannot be bound.
    """

    def __init__(self, address: str, checks: Mapping[str, Check], metrics_app: Any | None = None) -> None:
        self._address = address
        self._app = build_health_app(checks, metrics_app)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port: int | None = None

    async def __aenter__(self) -> Self:
        host, port = parse_address(self._address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.create_server((host, port), family=family)
        except OSError as e:
            raise ConfigError(f"cannot listen for HTTP on {self._address}: {e}") from e
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self._app, lifespan="off", access_log=False, log_level="warning", log_config=None
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="ragpulse-http")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise ConfigError(f"HTTP server on {self._address} stopped during start-up")
            await asyncio.sleep(0.01)
        get_logger("ragpulse.serve.http").info("http_listening", address=f"{host}:{self.port}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._task
