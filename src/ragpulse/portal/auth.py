"""Access to the portal: the bearer token of ``/api/v1``, the UI's sessions, CSRF tokens and the failed-attempt
limit.

- No token configured (``RAGPULSE_API_TOKEN`` unset): everything is open (``serve`` allows that only on a
  loopback address unless ``RAGPULSE_API_ALLOW_ANONYMOUS=true``).
- Token configured: every ``/api/v1`` call needs ``Authorization: Bearer <token>`` — none → 401, a wrong one →
  403. The UI asks for the token once (``/login``) and keeps a **session**: the cookie holds 32 random bytes;
  PostgreSQL holds their sha256, an HMAC of the token keyed with them (a changed token ends every session) and
  the expiry (:data:`SESSION_TTL_S` after sign-in). "Sign out" deletes the row, so the cookie is dead on every
  replica. A ``GET`` under ``/api/v1`` also accepts the session (the docs page). From a trusted proxy
  (``RAGPULSE_API_TRUSTED_PROXIES``) the UI also accepts ``Authorization: Bearer`` (single sign-on).
- **CSRF**: every UI form carries ``csrf_token`` = HMAC-SHA256(the database's portal key, the session cookie —
  or, without a session, a random ``ragpulse_csrf`` cookie). A cookie set by another site on the same host or a
  sibling domain ("cookie tossing") cannot come with a matching token: the key never leaves the server. Under
  HTTPS both cookies carry the ``__Host-`` prefix and ``Secure``.
- **Failed attempts** (a wrong token at ``/login``, in ``Authorization``): :class:`FailureLimiter`, keyed on
  the client address (``X-Forwarded-For`` from a trusted proxy, else the socket's peer). Every refused attempt
  (a wrong token, or none on ``/api/v1``) is recorded by :func:`ragpulse.authcheck.refused`: one WARNING line
  ``auth_failed`` (client and where, never the token) and ``ragpulse_auth_refused_total{listener="portal"}``.
  Tokens are compared by :func:`ragpulse.authcheck.token_matches` (constant time), the one comparison of
  every listener.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection

from ragpulse.authcheck import refused, token_matches
from ragpulse.portal.context import PortalContext

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "SESSION_TTL_S",
    "Access",
    "FailureLimiter",
    "auth_state",
    "check_csrf",
    "client_address",
    "cookie_name",
    "csrf_binding",
    "csrf_token_for",
    "get_ctx",
    "require_token",
    "session_ok",
]

SESSION_COOKIE = "ragpulse_session"
CSRF_COOKIE = "ragpulse_csrf"
#: Lifetime of a UI session, seconds (12 h: a working day; sign in again after).
SESSION_TTL_S = 12 * 3600

_bearer = HTTPBearer(auto_error=False, description="RAGPULSE_API_TOKEN, when the server sets one")


def cookie_name(conn: HTTPConnection, base: str) -> str:
    """``base`` with the ``__Host-`` prefix when ``conn`` came over HTTPS (directly or as a trusted proxy says)."""
    return f"__Host-{base}" if conn.url.scheme == "https" else base


def get_ctx(request: Request) -> PortalContext:
    """The :class:`PortalContext` of the app serving ``request``."""
    ctx: PortalContext = request.app.state.ctx
    return ctx


def _id_hash(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode()).digest()


def _token_mac(cookie: str, token: str) -> bytes:
    return hmac.new(cookie.encode(), token.encode(), hashlib.sha256).digest()


class FailureLimiter:
    """At most ``max_failures`` failed sign-in/bearer attempts per client address in ``window_s`` seconds.

    Counts are per process (each replica limits on its own). At most ``max_clients`` addresses are tracked
    (the oldest is forgotten first).
    """

    def __init__(self, max_failures: int = 10, window_s: float = 60.0, max_clients: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_clients = max_clients
        self._clock = time.monotonic
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str) -> deque[float]:
        q = self._failures.get(client)
        if q is None:
            return deque()
        cutoff = self._clock() - self.window_s
        while q and q[0] <= cutoff:
            q.popleft()
        if not q:
            del self._failures[client]
        return q

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again (rounded up), or ``None`` when it may try now."""
        q = self._recent(client)
        if len(q) < self.max_failures:
            return None
        return max(1, int(q[0] + self.window_s - self._clock()) + 1)

    def failed(self, client: str, where: str) -> None:
        """Record a failed attempt of ``client`` at ``where`` (``login``, ``bearer``, ``proxy_bearer``): counted
        here and by :func:`ragpulse.authcheck.refused` (the metric and the log line)."""
        q = self._failures.setdefault(client, deque())
        self._failures.move_to_end(client)
        q.append(self._clock())
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)
        refused("portal", "wrong", where=where, client=client, failures=len(q), window_s=self.window_s)

    def check(self, client: str) -> None:
        """Raise 429 with ``Retry-After`` when ``client`` has used up its attempts."""
        wait = self.retry_after(client)
        if wait is not None:
            raise HTTPException(
                429, f"too many failed attempts: try again in {wait} s", {"Retry-After": str(wait)}
            )


#: The cookie holding the name a reviewer typed (a browser-session cookie: typed once per session).
REVIEWER_COOKIE = "ragpulse_reviewer"


def trusted_reviewer(conn: HTTPConnection, header: str | None) -> str | None:
    """The reviewer named by the single-sign-on proxy: the request header ``header`` (``api.reviewer_header``),
    read only when the request came from a trusted proxy (``api.trusted_proxies``); else ``None``."""
    if not header or not conn.scope.get("ragpulse.via_proxy"):
        return None
    value = conn.headers.get(header, "").strip()
    return value or None


def client_address(conn: HTTPConnection) -> str:
    """The client's address (as a trusted proxy reports it, else the socket's peer)."""
    return conn.client.host if conn.client is not None else "unknown"


class Access:
    """The portal's sessions, CSRF key and failure limiter (one per app).

    Attributes:
        limiter: the failed-attempt limit.
    """

    def __init__(self, ctx: PortalContext) -> None:
        self.ctx = ctx
        self.limiter = FailureLimiter()
        self._key: bytes | None = None

    async def key(self) -> bytes:
        """The database's portal key (read once, then cached)."""
        if self._key is None:
            self._key = await self.ctx.store.portal_key(secrets.token_bytes(32))
        return self._key

    @property
    def key_now(self) -> bytes:
        """The key after :meth:`key` was awaited (the portal's middleware does it for every request)."""
        if self._key is None:
            raise RuntimeError("the portal key is not loaded yet")
        return self._key

    async def start_session(self) -> str:
        """Store a new session; return the cookie value (32 random bytes, URL-safe base64)."""
        token = self.ctx.options.token
        assert token is not None
        cookie = secrets.token_urlsafe(32)
        expires = datetime.now(UTC) + timedelta(seconds=SESSION_TTL_S)
        await self.ctx.store.create_portal_session(_id_hash(cookie), _token_mac(cookie, token), expires)
        return cookie

    async def session_valid(self, cookie: str) -> bool:
        """True when ``cookie`` names an unexpired session made with the current token."""
        token = self.ctx.options.token
        if token is None or not cookie or len(cookie) > 200:
            return False
        mac = await self.ctx.store.portal_session_mac(_id_hash(cookie))
        return mac is not None and hmac.compare_digest(mac, _token_mac(cookie, token))

    async def end_session(self, cookie: str) -> None:
        """Sign-out: delete the session (on every replica at once)."""
        if cookie:
            await self.ctx.store.delete_portal_session(_id_hash(cookie))


def auth_state(conn: HTTPConnection) -> str | None:
    """How the request was authenticated (set by the portal's middleware): ``none`` (no token configured),
    ``session``, ``bearer`` (from a trusted proxy), or ``None`` (not authenticated)."""
    state: str | None = conn.scope.get("ragpulse.auth")
    return state


def session_ok(conn: HTTPConnection) -> bool:
    """True when the UI may serve ``conn``: no token configured, a valid session, or a trusted proxy's bearer."""
    return auth_state(conn) is not None


def csrf_binding(conn: HTTPConnection) -> str | None:
    """What the CSRF token is bound to: the valid session's cookie, else the ``ragpulse_csrf`` cookie."""
    if auth_state(conn) == "session":
        return conn.cookies.get(cookie_name(conn, SESSION_COOKIE))
    return conn.cookies.get(cookie_name(conn, CSRF_COOKIE)) or None


def csrf_token_for(key: bytes, binding: str) -> str:
    """The CSRF token of ``binding`` (HMAC-SHA256 with the portal key, hex)."""
    return hmac.new(key, b"ragpulse-csrf|" + binding.encode(), hashlib.sha256).hexdigest()


def check_csrf(request: Request, access: Access, submitted: str | None) -> None:
    """Refuse (403) a UI write whose form field / ``X-CSRF-Token`` header does not match its binding."""
    binding = csrf_binding(request)
    given = submitted or request.headers.get("x-csrf-token")
    if (
        binding is None
        or not given
        or not hmac.compare_digest(given.encode(), csrf_token_for(access.key_now, binding).encode())
    ):
        raise HTTPException(403, "CSRF check failed: reload the page and try again")


async def require_token(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ctx: Annotated[PortalContext, Depends(get_ctx)],
) -> None:
    """Dependency of every ``/api/v1`` route: 401 without a token, 403 with a wrong one, 429 after too many
    wrong ones from the client's address."""
    token = ctx.options.token
    if token is None:
        return
    if creds is None or not creds.credentials:
        if request.method == "GET" and auth_state(request) == "session":
            return
        refused("portal", "missing", where="bearer", client=client_address(request))
        raise HTTPException(
            401, "missing bearer token (Authorization: Bearer …)", {"WWW-Authenticate": "Bearer"}
        )
    access: Access = request.app.state.access
    client = client_address(request)
    access.limiter.check(client)
    if creds.scheme.lower() != "bearer" or not token_matches(creds.credentials.strip(), token):
        access.limiter.failed(client, "bearer")
        raise HTTPException(403, "wrong bearer token")
