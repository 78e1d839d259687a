"""The portal's listener inside ``ragpulse serve`` (``RAGPULSE_API_ADDRESS``, default ``127.0.0.1:9470``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

from ragpulse.asgi_server import EmbeddedAsgiServer, parse_address
from ragpulse.config import Settings, env_name
from ragpulse.errors import ConfigError
from ragpulse.logging import get_logger
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.protocols import Judge, TraceSink
from ragpulse.store import PostgresStore

__all__ = ["PortalServer", "check_exposure", "is_loopback", "open_portal"]


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ``::1``."""
    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_exposure(options: ApiOptions) -> None:
    """Refuse an API on a non-loopback address without a token unless ``allow_anonymous`` (the API can
    delete data).

    Raises:
        ConfigError: one line naming the settings.
    """
    if not options.address.strip():
        return
    host, _ = parse_address(options.address)
    if options.token is None and not options.allow_anonymous and not is_loopback(host):
        raise ConfigError(
            f"the API listens on {options.address} (not loopback) without a token: set RAGPULSE_API_TOKEN, "
            "or RAGPULSE_API_ALLOW_ANONYMOUS=true to allow it on purpose"
        )


class PortalServer:
    """Serves the portal app of ``ctx`` on ``ctx.options.address``; an async context manager.

    Raises:
        ConfigError: (on enter) non-loopback without a token (see :func:`check_exposure`), a bad address or
            a port that cannot be bound.
    """

    def __init__(self, ctx: PortalContext) -> None:
        self.ctx = ctx
        self._server = EmbeddedAsgiServer(
            build_app(ctx),
            ctx.options.address,
            what="API",
            task_name="ragpulse-api",
            allowed_hosts=ctx.settings.http.allowed_hosts,
            setting=env_name("api", "address"),
        )
        self.port: int | None = None

    async def __aenter__(self) -> Self:
        check_exposure(self.ctx.options)
        await self._server.start()
        self.port = self._server.port
        get_logger("ragpulse.portal").info(
            "api_listening",
            address=f"{self._server.host}:{self.port}",
            auth="token" if self.ctx.options.token is not None else "none",
            trusted_proxies=list(self.ctx.options.trusted_proxies) or None,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._server.stop()


async def open_portal(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    store: PostgresStore,
    judges: Mapping[str, Judge],
    engine: TraceSink | None,
) -> PortalServer | None:
    """``serve``'s hook: start the portal on ``settings``' API address inside ``stack`` (stopped when the
    stack closes), with the worker of the run queue (:class:`~ragpulse.runs.queue.RunWorker`);
    ``None`` when the address is empty (portal off, and no portal run is executed by this process).

    Raises:
        ConfigError: see :class:`PortalServer`.
    """
    options = ApiOptions.from_settings(settings)
    if not options.address.strip():
        return None
    check_exposure(options)
    from ragpulse.portal.stats import RollupRefresher
    from ragpulse.runs.queue import RunWorker

    runs = await stack.enter_async_context(RunWorker(store, settings))
    await stack.enter_async_context(RollupRefresher(store))
    ctx = PortalContext(
        store=store,
        settings=settings,
        options=options,
        judges=judges,
        engine=engine,
        runs=runs,
        redact_text=settings.store.redact_text,
    )
    return await stack.enter_async_context(PortalServer(ctx))
