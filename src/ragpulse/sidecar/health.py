"""The HTTP port of ``ragpulse serve``: ``/healthz``, ``/readyz`` and ``/metrics`` (FastAPI on uvicorn).

- ``GET /healthz`` – liveness: 200 ``{"status": "ok"}`` while the process serves requests.
- ``GET /readyz`` – readiness: 200 ``{"status": "ready", "checks": {...}, "database": "<id>"}`` when every
  check passes, else 503 ``{"status": "not_ready", ...}``. Checks are async callables returning ``bool``
  (``store``: the database answers; ``otlp``/``kafka``: the source listens / is connected; ``running``: not
  shutting down). ``database`` is the store's identity (``PostgresStore.database_identity``), so
  ``replay --via`` can check that serve writes where the replay reads; other ``info`` entries are added as given.
- ``/metrics`` – the Prometheus exposition of :mod:`ragpulse.export` (mounted ASGI app).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from ragpulse.asgi_server import EmbeddedAsgiServer
from ragpulse.config import env_name
from ragpulse.logging import get_logger

__all__ = ["HealthServer", "build_health_app"]


#: A readiness check: returns True when the component is ready (must not raise).
Check = Callable[[], Awaitable[bool]]

#: Seconds a single readiness check may take before it counts as failed.
CHECK_TIMEOUT_S = 3.0


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


def build_health_app(
    checks: Mapping[str, Check], metrics_app: Any | None = None, info: Mapping[str, Any] | None = None
) -> FastAPI:
    """Return the FastAPI app with ``/healthz``, ``/readyz`` (plus the ``info`` entries) and (when given)
    ``/metrics``."""
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
            {**(info or {}), "status": "ready" if ready else "not_ready", "checks": state},
            status_code=200 if ready else 503,
        )

    if metrics_app is not None:
        # A route (not a mount) so that ``/metrics`` answers directly instead of redirecting to ``/metrics/``.
        app.router.add_route("/metrics", _AsgiEndpoint(metrics_app), include_in_schema=False)  # type: ignore[arg-type]
    return app


class HealthServer:
    """Serves :func:`build_health_app` on ``address`` (``host:port``; port 0 picks a free port); ``allowed_hosts``
    as in :class:`~ragpulse.asgi_server.EmbeddedAsgiServer` (``RAGPULSE_HTTP_ALLOWED_HOSTS``).

    An async context manager: entering binds and starts serving (``port`` then holds the bound port),
    leaving stops it.

    Raises:
        ConfigError: (on enter) bad address or the port cannot be bound.
    """

    def __init__(
        self,
        address: str,
        checks: Mapping[str, Check],
        metrics_app: Any | None = None,
        info: Mapping[str, Any] | None = None,
        *,
        allowed_hosts: Sequence[str] = (),
    ) -> None:
        self._server = EmbeddedAsgiServer(
            build_health_app(checks, metrics_app, info),
            address,
            what="HTTP",
            task_name="ragpulse-http",
            allowed_hosts=allowed_hosts,
            setting=env_name("http", "address"),
        )
        self.port: int | None = None

    async def __aenter__(self) -> Self:
        await self._server.start()
        self.port = self._server.port
        get_logger("ragpulse.serve.http").info("http_listening", address=f"{self._server.host}:{self.port}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._server.stop()
