"""ASGI apps served by uvicorn inside ``ragpulse serve``'s event loop (health/metrics port, OTLP/HTTP receiver).

Only the process that embeds the servers handles signals (uvicorn's own handlers are switched off), so one
SIGTERM drains the whole process in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator
from typing import Any

import uvicorn

from ragpulse.errors import ConfigError

__all__ = ["EmbeddedAsgiServer", "parse_address"]


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:4318``) into ``(host, port)``; an empty host is ``0.0.0.0``.

    Raises:
        ConfigError: no port, or the port is not an integer in 0–65535.
    """
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"invalid address {address!r}: expected host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Server(uvicorn.Server):
    """uvicorn server that leaves signal handling to the process that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class EmbeddedAsgiServer:
    """Serves ``app`` on ``address`` (``host:port``; port 0 picks a free port) in the running event loop.

    Args:
        app: the ASGI application.
        address: where to listen.
        what: the server's name in error messages (``HTTP``, ``OTLP/HTTP``).
        task_name: name of the asyncio task that runs uvicorn.
        ssl_certfile / ssl_keyfile: PEM certificate and key to serve HTTPS (both or neither).

    Attributes:
        host / port: the listening host and the bound port, once :meth:`start` returned.
    """

    def __init__(
        self,
        app: Any,
        address: str,
        *,
        what: str,
        task_name: str,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
    ) -> None:
        self._ssl = (ssl_certfile, ssl_keyfile)
        self._app = app
        self._address = address
        self._what = what
        self._task_name = task_name
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.host: str | None = None
        self.port: int | None = None

    async def start(self) -> None:
        """Bind and serve; returns once uvicorn has started.

        Raises:
            ConfigError: bad address, the port cannot be bound, or uvicorn stopped during start-up.
        """
        host, port = parse_address(self._address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.create_server((host, port), family=family)
        except OSError as e:
            raise ConfigError(f"cannot listen for {self._what} on {self._address}: {e}") from e
        self.host, self.port = host, int(sock.getsockname()[1])
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            access_log=False,
            log_level="warning",
            log_config=None,
            ssl_certfile=self._ssl[0],
            ssl_keyfile=self._ssl[1],
        )
        self._server = server = _Server(config)
        self._task = task = asyncio.create_task(server.serve(sockets=[sock]), name=self._task_name)
        while not server.started:
            if task.done():
                task.result()
                raise ConfigError(f"{self._what} server on {self._address} stopped during start-up")
            await asyncio.sleep(0.01)

    @property
    def serving(self) -> bool:
        """True once uvicorn has started, while its task still runs."""
        return (
            self._server is not None
            and self._server.started
            and self._task is not None
            and not self._task.done()
        )

    async def stop(self) -> None:
        """Ask uvicorn to exit and wait for it (idempotent; never raises except ``CancelledError``)."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._task
