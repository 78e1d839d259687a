"""The Host allow-list and the cross-site rule of every HTTP listener (:mod:`ragpulse.httpguard`), value by
value; the listeners themselves are tested in ``tests/portal/test_portal_security_api.py``."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import load_settings
from ragpulse.errors import ConfigError
from ragpulse.httpguard import cross_site, host_allowed, split_host


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("example.com", ("example.com", None)),
        ("Example.COM.:8080", ("example.com", 8080)),
        ("[::1]:9470", ("::1", 9470)),
        ("[::1]", ("::1", None)),
        ("127.0.0.1:x", ("127.0.0.1", -1)),
        ("[::1]x", ("::1", -1)),
        ("fe80::1", ("fe80::1", None)),  # unbracketed IPv6: no port
    ],
)
def test_split_host(value: str, expected: tuple[str, int | None]) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize(
    ("host", "bind", "allowed", "ok"),
    [
        ("127.0.0.1:9470", "127.0.0.1", [], True),
        ("localhost:9470", "127.0.0.1", [], True),
        ("app.localhost", "127.0.0.1", [], True),
        ("[::1]:9470", "::1", [], True),
        ("127.8.9.10", "127.0.0.1", [], True),
        ("rebind.example:9470", "127.0.0.1", [], False),
        ("10.0.0.5:9470", "127.0.0.1", [], False),  # another address of the host, on a loopback bind
        ("10.0.0.5:9464", "0.0.0.0", [], True),  # kubelet probe with the pod IP
        ("[fd00::5]:9464", "::", [], True),
        ("ragpulse-consumer:9464", "0.0.0.0", [], False),
        ("ragpulse-consumer:9464", "0.0.0.0", ["ragpulse-consumer"], True),
        ("RAGPULSE-consumer.:9464", "0.0.0.0", ["ragpulse-consumer"], True),
        ("x.ns.svc.cluster.local", "0.0.0.0", ["*.svc.cluster.local"], True),
        ("svc.cluster.local", "0.0.0.0", ["*.svc.cluster.local"], False),  # the pattern is for subdomains
        ("evilsvc.cluster.local", "0.0.0.0", ["*.svc.cluster.local"], False),
        ("portal.example.com", "127.0.0.1", ["portal.example.com"], True),  # a local proxy keeping Host
        ("anything.example", "0.0.0.0", ["*"], True),
        ("10.0.0.5:abc", "0.0.0.0", [], False),
        ("", "0.0.0.0", [], False),
        (None, "127.0.0.1", [], True),  # no Host: HTTP/1.0, never a browser
    ],
)
def test_host_allowed(host: str | None, bind: str, allowed: list[str], ok: bool) -> None:
    assert host_allowed(host, bind, allowed) is ok


@pytest.mark.parametrize(
    ("method", "headers", "reason"),
    [
        ("GET", {"sec-fetch-site": "cross-site"}, None),
        ("HEAD", {"origin": "http://evil.example"}, None),
        ("POST", {}, None),
        ("POST", {"sec-fetch-site": "same-origin"}, None),
        ("POST", {"sec-fetch-site": "none"}, None),
        ("POST", {"sec-fetch-site": "same-site"}, "Sec-Fetch-Site: same-site"),
        (
            "DELETE",
            {"sec-fetch-site": "cross-site", "origin": "http://p:1", "host": "p:1"},
            "Sec-Fetch-Site: cross-site",
        ),
        ("POST", {"origin": "http://p.example:9470", "host": "p.example:9470"}, None),
        ("POST", {"origin": "https://p.example", "host": "p.example"}, None),
        ("POST", {"origin": "https://p.example", "host": "p.example:443"}, None),
        (
            "POST",
            {"origin": "http://p.example:9471", "host": "p.example:9470"},
            "Origin 'http://p.example:9471' is not this site",
        ),
        ("PUT", {"origin": "null", "host": "p.example"}, "Origin 'null' is not this site"),
        (
            "PATCH",
            {"origin": "http://evil.example", "host": "p.example"},
            "Origin 'http://evil.example' is not this site",
        ),
        ("POST", {"origin": "http://p.example"}, "Origin 'http://p.example' is not this site"),  # no Host
    ],
)
def test_cross_site(method: str, headers: dict[str, str], reason: str | None) -> None:
    assert cross_site(method, headers) == reason


def test_the_two_settings_read_comma_lists_and_check_networks() -> None:
    s = load_settings(
        environ={
            "RAGPULSE_HTTP_ALLOWED_HOSTS": "ragpulse.example.com, *.svc.cluster.local",
            "RAGPULSE_API_TRUSTED_PROXIES": "10.0.0.0/8,127.0.0.1",
        }
    )
    assert s.http.allowed_hosts == ["ragpulse.example.com", "*.svc.cluster.local"]
    assert s.api.trusted_proxies == ["10.0.0.0/8", "127.0.0.1"]
    with pytest.raises(ConfigError, match=r"'ingress-controller' is not an IP address or network"):
        load_settings(environ={"RAGPULSE_API_TRUSTED_PROXIES": "10.0.0.0/8,ingress-controller"})


@pytest.mark.parametrize(
    ("path", "ctype"),
    [
        ("/", "text/plain; charset=utf-8"),
        ("/metrics", "text/plain; charset=utf-8"),
        ("/v1/traces", "text/plain; charset=utf-8"),
        ("/api/v1/traces", "application/problem+json"),
    ],
)
async def test_a_foreign_host_gets_421_with_the_security_headers(path: str, ctype: str) -> None:
    """Every listener (portal, metrics, OTLP HTTP) is wrapped in HostGuard: its 421 carries the security
    headers, and on the API a problem+json body."""
    import httpx

    from ragpulse.httpguard import HostGuard

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a foreign Host must not reach the app")

    guard = HostGuard(app, "127.0.0.1", [], what="test")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=guard), base_url="http://evil.example"
    ) as c:
        r = await c.get(path)
    assert r.status_code == 421
    assert r.headers["content-type"] == ctype
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "evil.example" in r.text
    if ctype == "application/problem+json":
        assert r.json()["status"] == 421
