"""Issue 26 over HTTP against a real ``ragpulse serve``: the Host allow-list on all three HTTP listeners (with
the shipped deployments' probes, scrapes and exports), cross-site write refusal, CSRF bound to the session,
security headers, sessions (expiry, sign-out on every replica), the failed-attempt limit behind a trusted
proxy, the single-sign-on proxy, the language link, bidirectional controls and the ``auth`` log line.
The browser-driven attacks are in ``tests/web/test_portal_security.py``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from ingest.serve_testutil import ServeProcess
from portal_testutil import Portal, base_env, started_portal
from ragpulse.httpguard import host_allowed
from sso_proxy import SsoProxy
from testsupport import free_port, private_db, run_async

pytestmark = pytest.mark.integration

TOKEN = "sec-token-0123456789"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OTLP_EMPTY = b'{"resourceSpans": []}'


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m is not None, html[:500]
    return m.group(1)


@pytest.fixture(scope="module")
def open_portal() -> Iterator[Portal]:
    """No token, loopback, with the OTLP/HTTP receiver on."""
    with started_portal(RAGPULSE_OTLP_HTTP_ADDRESS=f"127.0.0.1:{free_port()}") as p:
        yield p


@pytest.fixture(scope="module")
def locked() -> Iterator[Portal]:
    with started_portal(RAGPULSE_API_TOKEN=TOKEN) as p:
        yield p


def _sign_in(c: httpx.Client) -> str:
    """Sign ``c`` in; return its session cookie."""
    r = c.post("/login", data={"token": TOKEN, "next": "/", "csrf_token": _csrf(c.get("/login").text)})
    assert r.status_code == 303, r.text
    return str(c.cookies["ragpulse_session"])


# -- 1. DNS rebinding --------------------------------------------------------------------------------------------
def test_loopback_listeners_accept_only_loopback_names(open_portal: Portal) -> None:
    api_port = open_portal.url.rsplit(":", 1)[1]
    http = "http://" + open_portal.env["RAGPULSE_HTTP_ADDRESS"]
    otlp = "http://" + open_portal.env["RAGPULSE_OTLP_HTTP_ADDRESS"]
    with httpx.Client(timeout=30) as c:
        for method, url, body in (
            ("GET", open_portal.url + "/api/v1/test-sets", None),
            ("GET", http + "/metrics", None),
            ("GET", http + "/readyz", None),
            ("POST", otlp + "/v1/traces", OTLP_EMPTY),
        ):
            headers = {"content-type": "application/json"} if body else {}
            port = url.split(":")[2].split("/")[0]
            bad = c.request(method, url, content=body, headers={**headers, "Host": f"rebind.example:{port}"})
            assert bad.status_code == 421, (url, bad.text)
            assert "RAGPULSE_HTTP_ALLOWED_HOSTS" in bad.text
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"app.localhost:{port}"):
                ok = c.request(method, url, content=body, headers={**headers, "Host": host})
                assert ok.status_code == 200, (url, host, ok.text)
            # a LAN address of this machine is not a loopback name: refused on a loopback bind
            assert (
                c.request(method, url, content=body, headers={**headers, "Host": "10.1.2.3"}).status_code
                == 421
            )
        assert c.get(open_portal.url + "/test-sets", headers={"Host": f"[::1]:{api_port}"}).status_code == 200
    refused = {e["listener"] for e in open_portal.events("http_host_refused")}
    assert refused == {"API", "HTTP", "OTLP/HTTP"}


def _consumer_configmap() -> dict[str, str]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "consumer.yaml").read_text()) if d]
    data: dict[str, str] = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    return data


def _consumer_probes() -> list[str]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "consumer.yaml").read_text()) if d]
    c = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return [c[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")]


def test_shipped_deployments_keep_working_on_a_non_loopback_bind() -> None:
    """kubelet probes with the pod IP as Host, Prometheus by service name and by IP, an OTLP export to a DNS
    name and the portal under its ingress name, with the shipped consumer.yaml allow-list plus two names."""
    allowed = _consumer_configmap()["RAGPULSE_HTTP_ALLOWED_HOSTS"]
    http_port, otlp_port, api_port = free_port(), free_port(), free_port()
    with private_db() as db:
        env = base_env(db) | {
            "RAGPULSE_HTTP_ADDRESS": f"0.0.0.0:{http_port}",
            "RAGPULSE_OTLP_HTTP_ADDRESS": f"0.0.0.0:{otlp_port}",
            "RAGPULSE_API_ADDRESS": f"0.0.0.0:{api_port}",
            "RAGPULSE_API_TOKEN": TOKEN,
            "RAGPULSE_HTTP_ALLOWED_HOSTS": f"{allowed},ragpulse-otlp.observability.svc,ragpulse.example.com",
        }
        proc = ServeProcess(env)
        proc.start(90)
        try:
            with httpx.Client(timeout=30) as c:
                base = f"http://127.0.0.1:{http_port}"
                for path in _consumer_probes():  # the kubelet sends the pod IP
                    assert c.get(base + path, headers={"Host": f"10.42.0.17:{http_port}"}).status_code == 200
                for host in (
                    f"ragpulse-consumer:{http_port}",
                    f"10.42.0.17:{http_port}",
                    f"[fd00::17]:{http_port}",
                ):
                    r = c.get(base + "/metrics", headers={"Host": host})
                    assert r.status_code == 200, host
                    assert "ragpulse_" in r.text
                assert c.get(base + "/metrics", headers={"Host": "rebind.example"}).status_code == 421
                otlp = f"http://127.0.0.1:{otlp_port}/v1/traces"
                headers = {
                    "content-type": "application/json",
                    "Host": f"ragpulse-otlp.observability.svc:{otlp_port}",
                }
                assert c.post(otlp, content=OTLP_EMPTY, headers=headers).status_code == 200
                headers["Host"] = "rebind.example"
                assert c.post(otlp, content=OTLP_EMPTY, headers=headers).status_code == 421
                api = f"http://127.0.0.1:{api_port}/api/v1/test-sets"
                auth = {"Authorization": f"Bearer {TOKEN}"}
                assert c.get(api, headers=auth | {"Host": "ragpulse.example.com"}).status_code == 200
                assert c.get(api, headers=auth | {"Host": "evil.example.com"}).status_code == 421
        finally:
            proc.close()


def test_compose_allows_the_name_prometheus_scrapes() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    allowed = compose["services"]["ragpulse"]["environment"]["RAGPULSE_HTTP_ALLOWED_HOSTS"].split(",")
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert "ragpulse:9464" in targets
    assert all(host_allowed(t, "0.0.0.0", allowed) for t in targets)
    assert not host_allowed("rebind.example:9464", "0.0.0.0", allowed)


# -- 2. cross-site requests -----------------------------------------------------------------------------------
def test_cross_site_writes_are_refused_on_api_and_ui(open_portal: Portal) -> None:
    own = open_portal.url
    with httpx.Client(base_url=own, timeout=30, follow_redirects=False) as c:
        cancel = "/api/v1/runs/no-such-run/cancel"
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": "http://127.0.0.1:1"},  # another app on the same host
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site", "Origin": own},  # a sibling subdomain / another port
        ):
            r = c.post(cancel, headers=headers)
            assert r.status_code == 403, headers
            assert "cross-site request refused" in r.json()["detail"]
        for headers in ({}, {"Origin": own}, {"Sec-Fetch-Site": "same-origin", "Origin": own}):
            assert c.post(cancel, headers=headers).status_code == 404  # reached the handler: no such run
        # a body that a cross-site form can send without a preflight is not taken as JSON
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            r = c.post("/api/v1/test-sets", content=b'{"name": "form-made"}', headers={"content-type": ctype})
            assert r.status_code == 415, ctype
        assert c.get("/api/v1/test-sets/form-made").status_code == 404
        assert c.post("/api/v1/test-sets", json={"name": "json-made"}).status_code == 201
        # a UI form with a valid CSRF token, posted from another site
        csrf = _csrf(c.get("/test-sets").text)
        r = c.post(
            "/test-sets", data={"name": "ui-x", "csrf_token": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert r.status_code == 403
        assert (
            c.post(
                "/test-sets", data={"name": "ui-ok", "csrf_token": csrf}, headers={"Origin": own}
            ).status_code
            == 303
        )
        assert c.get("/api/v1/test-sets/ui-x").status_code == 404
        assert c.get("/api/v1/test-sets/ui-ok").status_code == 200
    otlp = "http://" + open_portal.env["RAGPULSE_OTLP_HTTP_ADDRESS"] + "/v1/traces"
    with httpx.Client(timeout=30) as c:
        json_ct = {"content-type": "application/json"}
        assert (
            c.post(otlp, content=OTLP_EMPTY, headers=json_ct | {"Origin": "http://evil.example"}).status_code
            == 403
        )
        assert (
            c.post(otlp, content=OTLP_EMPTY, headers=json_ct | {"Sec-Fetch-Site": "cross-site"}).status_code
            == 403
        )
        assert c.post(otlp, content=OTLP_EMPTY, headers=json_ct).status_code == 200


# -- 3. CSRF bound to the session -----------------------------------------------------------------------------
def test_a_tossed_csrf_cookie_cannot_delete(locked: Portal) -> None:
    with locked.client(TOKEN) as api:
        assert api.post("/api/v1/test-sets", json={"name": "tossed"}).status_code == 201
    with httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as attacker:
        attacker_csrf = _csrf(attacker.get("/login").text)  # a valid pair for the attacker's own cookie
        attacker_cookie = attacker.cookies["ragpulse_csrf"]
    with httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as victim:
        _sign_in(victim)
        for cookie, token in (("known-value", "known-value"), (attacker_cookie, attacker_csrf)):
            victim.cookies.set("ragpulse_csrf", cookie)
            r = victim.post("/test-sets/tossed/delete", data={"csrf_token": token})
            assert r.status_code == 403, r.text
        own = _csrf(victim.get("/test-sets").text)
        assert own not in (attacker_csrf, "known-value")
    with locked.client(TOKEN) as api:
        assert api.get("/api/v1/test-sets/tossed").status_code == 200


# -- 4. headers ----------------------------------------------------------------------------------------------
def test_security_headers_and_no_inline_script_or_style(open_portal: Portal) -> None:
    with open_portal.client() as api:
        api.post("/api/v1/test-sets", json={"name": "hdr"})
        api.post("/api/v1/test-sets/hdr/cases", json={"id": "c1", "question": "Q?", "expected_answer": "A."})
    pages = [
        "/test-sets",
        "/test-sets/hdr",
        "/test-sets/hdr/cases/c1/edit",
        "/runs",
        "/runs/new",
        "/traffic",
        "/login",
        "/no-such-page",
        "/api/v1/docs",
    ]
    with httpx.Client(base_url=open_portal.url, timeout=30) as c:
        for path in [*pages, "/api/v1/test-sets"]:
            r = c.get(path)
            csp = r.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp, path
            assert "script-src 'self'" in csp
            assert "style-src 'self'" in csp
            assert "unsafe-inline" not in csp
            assert "unsafe-eval" not in csp
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["referrer-policy"] == "same-origin"
            assert r.headers["cache-control"] == "no-store", path
        for path in pages:
            html = c.get(path).text
            assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == [], path
            assert re.findall(r"\son[a-z]+\s*=", html) == [], path
            assert "style=" not in html, path
            assert "<style" not in html, path
        static = c.get("/static/portal.css")
        assert static.status_code == 200
        assert static.headers.get("cache-control") != "no-store"


def test_cookies_are_secure_with_the_host_prefix_under_https() -> None:
    with (
        started_portal(RAGPULSE_API_TOKEN=TOKEN, RAGPULSE_API_TRUSTED_PROXIES="127.0.0.1") as p,
        httpx.Client(base_url=p.url, timeout=30, follow_redirects=False) as c,
    ):
        https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
        r = c.get("/login", headers=https)
        set_cookie = r.headers["set-cookie"]
        assert set_cookie.startswith("__Host-ragpulse_csrf=")
        assert "; Secure" in set_cookie
        assert "Path=/" in set_cookie
        assert "HttpOnly" in set_cookie
        assert "Domain" not in set_cookie
        nonce = set_cookie.split(";")[0]  # httpx keeps a Secure cookie off plain http: sent by hand
        r = c.post(
            "/login",
            data={"token": TOKEN, "next": "/", "csrf_token": _csrf(r.text)},
            headers=https | {"Cookie": nonce},
        )
        assert r.status_code == 303
        session = r.headers["set-cookie"]
        assert session.startswith("__Host-ragpulse_session=")
        assert "; Secure" in session
        assert "SameSite=strict" in session
        assert "Max-Age=43200" in session
        plain = c.get("/login")  # plain http: no prefix (a browser would refuse Secure over http)
        assert plain.headers["set-cookie"].startswith("ragpulse_csrf=")


# -- 5. sessions and the failed-attempt limit -------------------------------------------------------------------
def _db_rows(db_url: str, sql: str, *args: Any) -> list[Any]:
    async def go() -> list[Any]:
        conn = await asyncpg.connect(db_url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    rows: list[Any] = run_async(go())
    return rows


def test_sessions_differ_expire_and_sign_out_on_every_replica(locked: Portal) -> None:
    env = dict(locked.env)
    env["RAGPULSE_API_ADDRESS"] = f"127.0.0.1:{free_port()}"
    second = Portal(locked.db_url, env)  # another replica on the same database and token
    second.start()
    try:
        with (
            httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as a,
            httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as b,
        ):
            sa, sb = _sign_in(a), _sign_in(b)
            assert sa != sb
            assert len(sa) >= 43
            rows = _db_rows(locked.db_url, "SELECT id_hash FROM portal_sessions")
            hashes = {bytes(r["id_hash"]) for r in rows}
            assert hashlib.sha256(sa.encode()).digest() in hashes  # the cookie value itself is not stored
            assert not any(sa.encode() in h for h in hashes)
            with httpx.Client(base_url=second.url, timeout=30, follow_redirects=False) as other:
                other.cookies.set("ragpulse_session", sa)
                assert other.get("/test-sets").status_code == 200  # valid on the other replica
                other.post("/logout", data={"csrf_token": _csrf(other.get("/test-sets").text)})
            r = a.get("/test-sets")  # signed out there → gone here too
            assert r.status_code == 303
            assert r.headers["location"].startswith("/login")
            a.cookies.set("ragpulse_session", sa)
            assert a.get("/api/v1/test-sets").status_code == 401
            assert b.get("/test-sets").status_code == 200  # the other browser's session lives on
            _db_rows(
                locked.db_url,
                "UPDATE portal_sessions SET expires_at = now() - interval '1 second' WHERE id_hash = $1",
                hashlib.sha256(sb.encode()).digest(),
            )
            r = b.get("/test-sets")  # expired
            assert r.status_code == 303
            assert r.headers["location"].startswith("/login")
    finally:
        second.stop()


def test_failed_attempts_are_limited_per_client_behind_the_sso_proxy() -> None:
    """Direct wrong tokens from one address are limited (429 + Retry-After, one log line each); requests that
    the SSO proxy forwards for another client pass, many of them, with the UI taking the proxy's bearer."""
    with (
        started_portal(RAGPULSE_API_TOKEN=TOKEN, RAGPULSE_API_TRUSTED_PROXIES="127.0.0.1") as p,
        SsoProxy(int(p.url.rsplit(":", 1)[1]), TOKEN) as proxy,
    ):
        with httpx.Client(base_url=p.url, timeout=30, follow_redirects=False) as c:
            csrf = _csrf(c.get("/login").text)
            for _ in range(5):
                r = c.post("/login", data={"token": "guess", "next": "/", "csrf_token": csrf})
                # back to the sign-in page (POST-redirect-GET), "Wrong token." in the flash cookie
                assert (r.status_code, r.headers["location"]) == (303, "/login?next=%2F")
            for _ in range(5):
                assert (
                    c.get("/api/v1/test-sets", headers={"Authorization": "Bearer guess"}).status_code == 403
                )
            limited = c.get("/api/v1/test-sets", headers={"Authorization": "Bearer guess"})
            assert limited.status_code == 429
            assert 1 <= int(limited.headers["retry-after"]) <= 61
            right = c.get("/api/v1/test-sets", headers={"Authorization": f"Bearer {TOKEN}"})
            assert right.status_code == 429  # locked out for the window, even with the right token
            assert c.post("/login", data={"token": TOKEN, "next": "/", "csrf_token": csrf}).status_code == 429
        failed = p.events("auth_failed")
        assert [e["where"] for e in failed] == ["login"] * 5 + ["bearer"] * 5
        assert {e["client"] for e in failed} == {"127.0.0.1"}
        assert not any(TOKEN in str(e) or "guess" in str(e) for e in p.logs)
        # people behind the SSO proxy come from another address (their browser's, in X-Forwarded-For)
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(
            base_url=proxy.url, transport=transport, timeout=30, follow_redirects=False
        ) as user:
            for _ in range(15):
                page = user.get("/test-sets")
                assert page.status_code == 200  # no /login: the UI takes the proxy's bearer
                assert user.get("/api/v1/test-sets").status_code == 200
            assert "Sign out" not in page.text  # nothing to sign out of: the proxy owns the sign-in
            r = user.post("/test-sets", data={"name": "via-sso", "csrf_token": _csrf(page.text)})
            assert r.status_code == 303
            r = user.post("/api/v1/runs/no-such-run/cancel", headers={"Origin": "http://evil.example"})
            assert r.status_code == 403  # the proxy authenticates every browser request: Origin decides
            assert user.get("/api/v1/test-sets/via-sso").status_code == 200
        assert set(proxy.forwarded_for) == {"127.0.0.2"}


def test_bearer_in_the_ui_only_from_a_trusted_proxy(locked: Portal) -> None:
    with httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as c:
        r = c.get("/test-sets", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 303
        assert r.headers["location"].startswith("/login")


# -- 6. the language link --------------------------------------------------------------------------------------
def test_language_link_is_query_only_on_a_double_slash_path(open_portal: Portal) -> None:
    with httpx.Client(timeout=30) as c:
        r = c.get(open_portal.url + "//evil.example/x?a=1")
        assert r.status_code == 404
        link = re.search(r'<a href="([^"]*)" id="lang-switch"', r.text)
        assert link is not None
        assert link.group(1) == "?a=1&amp;lang=zh"


# -- 7. bidirectional controls -----------------------------------------------------------------------------------
def test_bidi_controls_are_shown_by_name(open_portal: Portal) -> None:
    with open_portal.client() as api:
        api.post("/api/v1/test-sets", json={"name": "bidi"})
        r = api.post(
            "/api/v1/test-sets/bidi/cases", json={"id": "b1", "question": "pay \u202eSU 001\u202c now"}
        )
        assert r.status_code == 201
        html = api.get("/test-sets/bidi").text
    assert "\u202e" not in html
    assert "\u202c" not in html
    assert "<bdi>pay [U+202E]SU 001[U+202C] now</bdi>" in html


def test_bidi_controls_are_refused_in_case_ids(open_portal: Portal) -> None:
    with open_portal.client() as api:
        api.post("/api/v1/test-sets", json={"name": "bidi-ids"})
        r = api.post("/api/v1/test-sets/bidi-ids/cases", json={"id": "case-\u202e1-esac", "question": "Q?"})
        assert r.status_code == 422
        assert "bidirectional control" in r.json()["detail"]
        assert (
            api.put("/api/v1/test-sets/bidi-ids/cases/x\u2066y", json={"question": "Q?"}).status_code == 422
        )
        lines = '{"id": "ok-1", "question": "Q?"}\n{"id": "b\u2067d", "question": "Q?"}\n'
        r = api.post(
            "/api/v1/test-sets/bidi-ids/cases/import",
            content=lines.encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert r.status_code == 200
        body = r.json()
        assert body["created"] == [{"line": 1, "id": "ok-1"}]
        assert [p["line"] for p in body["rejected"]] == [2]
        assert "bidirectional control" in body["rejected"][0]["reason"]
        ids = [c["id"] for c in api.get("/api/v1/test-sets/bidi-ids/cases").json()["items"]]
        assert ids == ["ok-1"]


# -- 9. the auth log line --------------------------------------------------------------------------------------
def test_api_listening_says_whether_a_token_protects_it(open_portal: Portal, locked: Portal) -> None:
    assert [e["auth"] for e in open_portal.events("api_listening")] == ["none"]
    assert [e["auth"] for e in locked.events("api_listening")] == ["token"]
    assert "token" not in open_portal.events("api_listening")[0]


def test_a_new_token_ends_every_session(locked: Portal) -> None:
    env = dict(locked.env)
    env["RAGPULSE_API_ADDRESS"] = f"127.0.0.1:{free_port()}"
    env["RAGPULSE_API_TOKEN"] = "the-rotated-token"
    rotated = Portal(locked.db_url, env)  # the same database, after the token was changed
    rotated.start()
    try:
        with httpx.Client(base_url=locked.url, timeout=30, follow_redirects=False) as c:
            session = _sign_in(c)
            assert c.get("/test-sets").status_code == 200
        with httpx.Client(base_url=rotated.url, timeout=30, follow_redirects=False) as c:
            c.cookies.set("ragpulse_session", session)
            r = c.get("/test-sets")
            assert r.status_code == 303
            assert r.headers["location"].startswith("/login")
    finally:
        rotated.stop()
