"""Access to the portal: the bearer token of ``/api/v1`` and the UI's cookie session with CSRF protection.

- No token configured (``RAGPULSE_API_TOKEN`` unset): everything is open (``serve`` allows that only on a
  loopback address unless ``RAGPULSE_API_ALLOW_ANONYMOUS=true``).
- Token configured: every ``/api/v1`` call needs ``Authorization: Bearer <token>`` — none → 401, a wrong one →
  403. The UI asks for the token once (``/login``) and keeps a session cookie (an HMAC of the token, so changing
  the token ends every session); a ``GET`` under ``/api/v1`` also accepts that cookie (the docs page).
- Forms of the UI carry a CSRF token (double submit: a random cookie and the same value in the form field
  ``csrf_token`` or the ``X-CSRF-Token`` header) whether or not a token is configured.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from ragpulse.api.context import PortalContext

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "check_csrf",
    "get_ctx",
    "new_csrf_token",
    "require_token",
    "session_ok",
    "session_value",
]

SESSION_COOKIE = "ragpulse_session"
CSRF_COOKIE = "ragpulse_csrf"

_bearer = HTTPBearer(auto_error=False, description="RAGPULSE_API_TOKEN, when the server sets one")


def get_ctx(request: Request) -> PortalContext:
    """The :class:`PortalContext` of the app serving ``request``."""
    ctx: PortalContext = request.app.state.ctx
    return ctx


def session_value(token: str) -> str:
    """The session cookie's value for ``token`` (HMAC-SHA256, hex)."""
    return hmac.new(token.encode(), b"ragpulse-portal-session", hashlib.sha256).hexdigest()


def session_ok(request: Request, token: str | None) -> bool:
    """True when no token is configured or the request carries a valid session cookie."""
    if token is None:
        return True
    got = request.cookies.get(SESSION_COOKIE, "")
    return hmac.compare_digest(got.encode(), session_value(token).encode())


def token_matches(given: str, token: str) -> bool:
    """Constant-time comparison of a presented token with the configured one."""
    return hmac.compare_digest(given.encode(), token.encode())


async def require_token(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ctx: Annotated[PortalContext, Depends(get_ctx)],
) -> None:
    """Dependency of every ``/api/v1`` route: 401 without a token, 403 with a wrong one."""
    token = ctx.options.token
    if token is None:
        return
    if creds is None or not creds.credentials:
        if request.method == "GET" and session_ok(request, token):
            return
        raise HTTPException(
            401, "missing bearer token (Authorization: Bearer …)", {"WWW-Authenticate": "Bearer"}
        )
    if creds.scheme.lower() != "bearer" or not token_matches(creds.credentials.strip(), token):
        raise HTTPException(403, "wrong bearer token")


def new_csrf_token() -> str:
    """A fresh random CSRF token."""
    return secrets.token_urlsafe(24)


def check_csrf(request: Request, submitted: str | None) -> None:
    """Refuse (403) a UI write whose form/header token does not match the CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE)
    given = submitted or request.headers.get("x-csrf-token")
    if not cookie or not given or not hmac.compare_digest(cookie.encode(), given.encode()):
        raise HTTPException(403, "CSRF check failed: reload the page and try again")
