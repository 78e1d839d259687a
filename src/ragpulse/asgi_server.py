"""ASGI apps served by uvicorn inside ``ragpulse serve``'s event loop (health/metrics port, OTLP/HTTP receiver,
portal).

Only the process that embeds the servers handles signals (uvicorn's own handlers are switched off), so one
SIGTERM drains the whole process in order.

Slow clients (:class:`ListenerLimits`, ``http.header_timeout_s`` / ``http.max_connections``): uvicorn has no
deadline for a new connection's request headers, so a client could hold any number of half-sent requests. Each
listener closes a connection whose first request's headers are not complete within ``header_timeout_s``
(later requests on a kept-alive connection are bounded by uvicorn's keep-alive timeout), and holds at most
``max_connections``: a new connection beyond it closes the oldest one still waiting for its headers (so one
client's thousands of half-sent requests never lock out a health check or an API call), or is closed itself
when every connection is busy with a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from ragpulse.errors import ConfigError
from ragpulse.httpguard import HostGuard

__all__ = ["EmbeddedAsgiServer", "ListenerLimits", "parse_address", "set_default_limits"]


@dataclass(frozen=True)
class ListenerLimits:
    """Per-listener limits against slow clients (module docstring).

    Attributes:
        header_timeout_s: seconds a new connection has to send its first request's headers.
        max_connections: connections held open at once.
    """

    header_timeout_s: float = 10.0
    max_connections: int = 1000


_defaults = ListenerLimits()


def set_default_limits(limits: ListenerLimits) -> None:
    """The limits of every :class:`EmbeddedAsgiServer` started from now on without its own (``serve`` sets them
    from the ``http`` section once, for the health, portal and OTLP/HTTP listeners alike)."""
    global _defaults
    _defaults = limits


def _guarded_protocol(limits: ListenerLimits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a header deadline and a connection cap for one listener."""
    waiting: dict[Any, None] = {}  # connections without a complete first request, oldest first
    base: Any = AutoHTTPProtocol

    class Guarded(base):  # type: ignore[misc]  # uvicorn's protocol class, chosen at run time
        _refused = False
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= limits.max_connections:
                if not waiting:  # every connection is busy with a request: this one waits for a free slot
                    self._refused = True
                    transport.abort()
                    return
                oldest = next(iter(waiting))
                oldest._drop()
            super().connection_made(transport)
            waiting[self] = None
            self._deadline = self.loop.call_later(limits.header_timeout_s, self._drop)

        def _drop(self) -> None:
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self.connections.discard(self)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.abort()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and self.cycle is not None:  # the first request's headers are in
                self._deadline.cancel()
                self._deadline = None
                waiting.pop(self, None)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

    return Guarded


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:4318``) into ``(host, port)``; an empty host is ``0.0.0.0``.

    Raises:
        ConfigError: no port, or the port is not an integer in 0–65535.
    """
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"invalid address {address!r}: expected host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def bind_error(what: str, address: str, setting: str | None, e: OSError) -> ConfigError:
    """The error for a listener that cannot bind: the real cause (``Address already in use``, …) and the
    setting that moves it, by its documented environment name (``RAGPULSE_HTTP_ADDRESS``, …)."""
    cause = os.strerror(e.errno) if e.errno else str(e)
    msg = f"cannot listen for {what} on {address}: {cause}"
    if e.errno == errno.EADDRINUSE:
        msg += " (another process listens there)"
    if setting:
        msg += f"; set {setting} to another host:port (port 0: any free port), or empty to turn it off"
    return ConfigError(msg)


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
        setting: the environment variable that sets ``address`` (named when the port cannot be bound).
        task_name: name of the asyncio task that runs uvicorn.
        ssl_certfile / ssl_keyfile: PEM certificate and key to serve HTTPS (both or neither).
        limits: header deadline and connection cap (default: those of :func:`set_default_limits`).
        allowed_hosts: host names the ``Host`` header may carry besides the loopback names and (on a
            non-loopback bind) IP literals (``RAGPULSE_HTTP_ALLOWED_HOSTS``; :class:`~ragpulse.httpguard.HostGuard`
            wraps every app served here). ``X-Forwarded-*`` headers are not read here (the portal reads them
            from its trusted proxies only).

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
        allowed_hosts: Sequence[str] = (),
        setting: str | None = None,
        limits: ListenerLimits | None = None,
    ) -> None:
        self._allowed_hosts = tuple(allowed_hosts)
        self._setting = setting
        self._ssl = (ssl_certfile, ssl_keyfile)
        self._limits = limits
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
            raise bind_error(self._what, self._address, self._setting, e) from e
        self.host, self.port = host, int(sock.getsockname()[1])
        config = uvicorn.Config(
            HostGuard(self._app, host, self._allowed_hosts, what=self._what),
            lifespan="off",
            access_log=False,
            log_level="warning",
            log_config=None,
            proxy_headers=False,
            ssl_certfile=self._ssl[0],
            ssl_keyfile=self._ssl[1],
            http=_guarded_protocol(self._limits or _defaults),
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
