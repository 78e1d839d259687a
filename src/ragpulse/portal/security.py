"""The portal's front door (ASGI middleware :class:`PortalGuard`, outermost after the Host check of
:class:`~ragpulse.httpguard.HostGuard`), in order:

1. **Trusted proxies** (``RAGPULSE_API_TRUSTED_PROXIES``): from such a peer ``X-Forwarded-For`` and
   ``X-Forwarded-Proto`` name the client and the scheme (uvicorn's ``ProxyHeadersMiddleware``); from any other
   peer they are ignored.
2. **Cross-site writes**: a POST/PUT/PATCH/DELETE that :func:`ragpulse.httpguard.cross_site` calls cross-site
   (``Sec-Fetch-Site`` other than ``same-origin``/``none``, or an ``Origin`` of another host) → 403, on the UI
   and ``/api/v1`` alike (a body-less cancel too).
3. **JSON writes**: an ``/api/v1`` write with a body needs ``Content-Type: application/json`` (the import also
   takes ``application/x-ndjson`` and ``text/csv``) → else 415; a browser form cannot send these across sites
   without a CORS preflight, which the portal never grants.
4. **Who is asking**: a session cookie is looked up (:class:`~ragpulse.portal.auth.Access`), a trusted proxy's
   ``Authorization: Bearer`` is checked for UI pages; the result is ``scope["ragpulse.auth"]``
   (:func:`~ragpulse.portal.auth.auth_state`).
5. **Headers** on every answer: :data:`SECURITY_HEADERS` (a Content-Security-Policy without inline script or
   style and with ``frame-ancestors 'none'``, ``X-Frame-Options: DENY``, ``nosniff``,
   ``Referrer-Policy: same-origin``) and ``Cache-Control: no-store`` except on ``/static/`` files.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from ragpulse.authcheck import token_matches
from ragpulse.errors import StoreError
from ragpulse.httpguard import SAFE_METHODS, cross_site
from ragpulse.logging import get_logger
from ragpulse.portal.auth import (
    SESSION_COOKIE,
    Access,
    client_address,
    cookie_name,
)
from ragpulse.portal.context import PortalContext
from ragpulse.portal.problems import problem

__all__ = ["CSP", "SECURITY_HEADERS", "PortalGuard"]

#: The Content-Security-Policy of every answer: everything from the portal itself, no inline script or style
#: (htmx is vendored; its indicator style is switched off in ``base.html``), no plug-ins, no framing.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

#: Headers added to every answer of the portal.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)

_log = get_logger("ragpulse.portal")
_JSON_TYPES = frozenset({"application/json"})
_IMPORT_TYPES = frozenset({"application/json", "application/x-ndjson", "text/csv"})


def _has_body(conn: HTTPConnection) -> bool:
    length = conn.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in conn.headers


class PortalGuard:
    """The middleware described in the module docstring, around the portal's FastAPI app."""

    def __init__(self, app: ASGIApp, ctx: PortalContext, access: Access) -> None:
        self.app = app
        self.ctx = ctx
        self.access = access
        self.trusted = tuple(ipaddress.ip_network(n, strict=False) for n in ctx.options.trusted_proxies)
        self.inner: Any = self._guarded
        if self.trusted:  # uvicorn types its ASGI callables with its own (equivalent) protocols: Any here
            self.inner = ProxyHeadersMiddleware(self.inner, trusted_hosts=list(ctx.options.trusted_proxies))  # type: ignore[arg-type]

    def _trusted_peer(self, scope: Scope) -> bool:
        peer = scope.get("client")
        if not peer or not self.trusted:
            return False
        try:
            addr = ipaddress.ip_address(peer[0])
        except ValueError:
            return False
        return any(addr in net for net in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["ragpulse.via_proxy"] = self._trusted_peer(scope)
        await self.inner(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        no_store = not path.startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", [])) + list(SECURITY_HEADERS)
                if no_store:
                    headers = [(k, v) for k, v in headers if k.lower() != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        conn = HTTPConnection(scope)
        method = scope.get("method", "GET").upper()
        reason = cross_site(method, conn.headers)
        if reason is not None:
            resp = problem(403, f"cross-site request refused ({reason})")
            await resp(scope, receive, send_with_headers)
            return
        is_api = path.startswith("/api/")
        if is_api and method not in SAFE_METHODS and _has_body(conn):
            ctype = conn.headers.get("content-type", "").split(";")[0].strip().lower()
            wanted = _IMPORT_TYPES if path.endswith("/cases/import") else _JSON_TYPES
            if ctype not in wanted:
                resp = problem(415, f"Content-Type {ctype or '(none)'!r}: send {' or '.join(sorted(wanted))}")
                await resp(scope, receive, send_with_headers)
                return
        try:
            await self.access.key()
            scope["ragpulse.auth"] = await self._who(conn, is_api, path)
        except StoreError as e:  # the key or the session could not be read: an outage, as on every page
            _log.warning("api_store_error", path=path, error=str(e))
            resp = problem(503, "the database is not available; try again")
            await resp(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _who(self, conn: HTTPConnection, is_api: bool, path: str) -> str | None:
        token = self.ctx.options.token
        if token is None:
            return "none"
        if path.startswith("/static/") or path == "/favicon.ico":
            return None
        cookie = conn.cookies.get(cookie_name(conn, SESSION_COOKIE))
        if cookie and await self.access.session_valid(cookie):
            return "session"
        auth = conn.headers.get("authorization", "")
        if not is_api and conn.scope.get("ragpulse.via_proxy") and auth:
            scheme, _, given = auth.partition(" ")
            client = client_address(conn)
            if self.access.limiter.retry_after(client) is not None:
                return None
            if scheme.lower() == "bearer" and token_matches(given.strip(), token):
                return "bearer"
            self.access.limiter.failed(client, "proxy_bearer")
        return None
