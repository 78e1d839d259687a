"""What every HTTP listener of ``serve`` checks before its app sees a request (portal, OTLP/HTTP, health/metrics).

- **Host allow-list** (:class:`HostGuard`, against DNS rebinding: a web page whose name re-resolves to the
  listener's address reaches it with its own name in ``Host``). On a loopback bind only loopback names
  (``localhost``, ``*.localhost``) and loopback addresses are accepted; on any other bind every IP literal and
  the loopback names. The configured names (``RAGPULSE_HTTP_ALLOWED_HOSTS``; ``*.example.com`` = any
  subdomain, ``*`` = any host) are accepted on both. Anything else → 421 with a one-line text. A request
  without ``Host`` (HTTP/1.0; no browser sends one) passes.
- **Cross-site requests** (:func:`cross_site`): the algorithm of Go's ``net/http.CrossOriginProtection``
  (Go 1.25): safe methods pass; with ``Sec-Fetch-Site`` only ``same-origin`` and ``none`` pass; without it a
  request with an ``Origin`` passes only when the origin's host equals ``Host``; a request with neither header
  (not a browser, or a very old one) passes.

Why not Starlette's ``TrustedHostMiddleware``: it cuts ``Host`` at the first ``:`` (so ``[::1]:9470`` is
``[``) and has no notion of "any IP literal".
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ragpulse.logging import get_logger

__all__ = [
    "REFUSAL_HEADERS",
    "SAFE_METHODS",
    "HostGuard",
    "cross_site",
    "host_allowed",
    "is_loopback",
    "split_host",
]

#: Methods that change nothing (RFC 9110 §9.2.1).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_log = get_logger(__name__)


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``*.localhost``, 127.0.0.0/8 and ``::1`` (brackets allowed)."""
    h = host.strip("[]").lower().rstrip(".")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None]:
    """``Host`` header value → (lower-case host without brackets or trailing dot, port or ``None``).

    ``[::1]:9470`` → ``("::1", 9470)``; ``example.com`` → ``("example.com", None)``; a malformed port gives
    port ``-1`` (never matches)."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        host, rest = (v[1:end], v[end + 1 :]) if end > 0 else (v, "")
        port_s = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    elif v.count(":") == 1:
        host, port_s = v.split(":")
    else:
        host, port_s = v, ""
    port = None if port_s == "" else (int(port_s) if port_s.isdigit() else -1)
    return host.rstrip("."), port


def _name_matches(host: str, pattern: str) -> bool:
    p = pattern.strip().lower().rstrip(".")
    if p == "*":
        return True
    if p.startswith("*."):
        return host.endswith(p[1:]) and len(host) > len(p) - 1
    return host == p.strip("[]")


def host_allowed(host_header: str | None, bind_host: str, allowed: Iterable[str]) -> bool:
    """Whether a request with ``Host: host_header`` may reach a listener bound to ``bind_host``.

    Args:
        host_header: the ``Host`` header (``None``: absent → allowed).
        bind_host: the listening host (``127.0.0.1``, ``0.0.0.0``, ``::``, a name).
        allowed: the configured host names or patterns (``RAGPULSE_HTTP_ALLOWED_HOSTS``).
    """
    if host_header is None:
        return True
    host, port = split_host(host_header)
    if port == -1 or not host:
        return False
    if any(_name_matches(host, p) for p in allowed):
        return True
    if is_loopback(host):
        return True
    return not is_loopback(bind_host) and _is_ip(host)


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def cross_site(method: str, headers: Mapping[str, str]) -> str | None:
    """Why a request is a cross-site state-changing request, or ``None`` when it may pass.

    Args:
        method: the HTTP method.
        headers: the request headers, names in lower case (Starlette's ``request.headers`` fits).

    Returns:
        ``None``, or a short reason for the 403 answer (``Sec-Fetch-Site: cross-site``, ``Origin …``)."""
    if method.upper() in SAFE_METHODS:
        return None
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site in ("same-origin", "none"):
            return None
        return f"Sec-Fetch-Site: {fetch_site[:40]}"
    origin = headers.get("origin")
    if origin is None:
        return None
    own = headers.get("host")
    parts = urlsplit(origin)
    if own is not None and parts.scheme in ("http", "https") and parts.netloc:
        o_host, o_port = split_host(parts.netloc)
        h_host, h_port = split_host(own)
        default = 443 if parts.scheme == "https" else 80
        if o_host == h_host and (o_port or default) == (h_port or default):
            return None
    return f"Origin {origin[:100]!r} is not this site"


#: Security headers of the 421 a foreign ``Host`` gets on every listener (the portal adds its own to its other
#: answers, :data:`ragpulse.portal.security.SECURITY_HEADERS`): nothing may be loaded, framed or sniffed.
REFUSAL_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


class HostGuard:
    """ASGI middleware: answers 421 to an HTTP request whose ``Host`` :func:`host_allowed` refuses.

    Args:
        app: the wrapped ASGI app.
        bind_host: the host the listener is bound to.
        allowed: configured host names/patterns.
        what: the listener's name in the refusal and the log line (``API``, ``HTTP``, ``OTLP/HTTP``).
    """

    #: Distinct refused hosts logged per listener (one WARNING each), so a flood makes no log flood.
    LOGGED_HOSTS = 100

    def __init__(self, app: Any, bind_host: str, allowed: Sequence[str], *, what: str) -> None:
        self.app = app
        self.bind_host = bind_host
        self.allowed = tuple(a for a in allowed if a.strip())
        self.what = what
        self._logged: set[str] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            host = _header(scope.get("headers", ()), b"host")
            if not host_allowed(host, self.bind_host, self.allowed):
                shown = (host or "")[:200]
                if shown not in self._logged and len(self._logged) < self.LOGGED_HOSTS:
                    self._logged.add(shown)
                    _log.warning("http_host_refused", listener=self.what, host=shown)
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                detail = f"host {shown!r} is not served here (add it to RAGPULSE_HTTP_ALLOWED_HOSTS)"
                if str(scope.get("path", "")).startswith("/api/"):  # the portal's API answers problem+json
                    ctype = b"application/problem+json"
                    body = json.dumps(
                        {
                            "type": "about:blank",
                            "title": "Misdirected Request",
                            "status": 421,
                            "detail": detail,
                        }
                    ).encode()
                else:
                    ctype, body = b"text/plain; charset=utf-8", (detail + "\n").encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 421,
                        "headers": [
                            (b"content-type", ctype),
                            (b"content-length", str(len(body)).encode()),
                            *REFUSAL_HEADERS,
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
