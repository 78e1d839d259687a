"""Access rules of the portal: the bearer token (401 missing, 403 wrong) and the refusal to serve the API on a
non-loopback address without a token."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from portal_testutil import RAGPULSE, base_env, started_portal
from ragpulse.errors import ConfigError
from ragpulse.portal.context import ApiOptions
from ragpulse.portal.server import check_exposure, is_loopback
from testsupport import free_port, private_db

TOKEN = "s3cret-token-for-tests"


@pytest.mark.integration
def test_token_missing_401_wrong_403_right_200() -> None:
    with started_portal(RAGPULSE_API_TOKEN=TOKEN) as p:
        with p.client() as c:
            r = c.get("/api/v1/test-sets")
            assert r.status_code == 401
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.headers["www-authenticate"] == "Bearer"
            assert c.get("/api/v1/openapi.json").status_code == 401
            assert c.post("/api/v1/test-sets", json={"name": "x"}).status_code == 401
        with p.client("wrong") as c:
            assert c.get("/api/v1/test-sets").status_code == 403
            assert c.delete("/api/v1/test-sets/x").status_code == 403
        with p.client(TOKEN) as c:
            assert c.get("/api/v1/test-sets").json() == {"items": [], "next_cursor": None}
            assert c.post("/api/v1/test-sets", json={"name": "x"}).status_code == 201
        assert not any(TOKEN in str(e) for e in p.logs)  # never logged
        # every refusal: one WARNING auth_failed (3 without a token, 2 with "wrong") and the counter by listener
        failed = p.events("auth_failed")
        assert [(e["listener"], e["reason"], e["where"]) for e in failed] == [
            ("portal", "missing", "bearer")
        ] * 3 + [("portal", "wrong", "bearer")] * 2
        assert not any({"token", "authorization", "credentials"} & e.keys() for e in failed)
        metrics = httpx.get("http://" + p.env["RAGPULSE_HTTP_ADDRESS"] + "/metrics").text
        assert 'ragpulse_auth_refused_total{listener="portal",reason="missing"} 3.0' in metrics
        assert 'ragpulse_auth_refused_total{listener="portal",reason="wrong"} 2.0' in metrics


@pytest.mark.integration
def test_serve_refuses_non_loopback_api_without_token() -> None:
    with private_db() as db:
        env = base_env(db)
        env["RAGPULSE_API_ADDRESS"] = f"0.0.0.0:{free_port()}"
        env["RAGPULSE_HTTP_ADDRESS"] = f"127.0.0.1:{free_port()}"
        r = subprocess.run(
            [RAGPULSE, "serve"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert r.returncode == 2
    assert "RAGPULSE_API_TOKEN" in r.stderr
    assert "RAGPULSE_API_ALLOW_ANONYMOUS" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("portal.example", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_check_exposure_rules() -> None:
    with pytest.raises(ConfigError, match="RAGPULSE_API_TOKEN"):
        check_exposure(ApiOptions(address="0.0.0.0:9470"))
    check_exposure(ApiOptions(address="0.0.0.0:9470", token="t"))
    check_exposure(ApiOptions(address="0.0.0.0:9470", allow_anonymous=True))
    check_exposure(ApiOptions(address="[::1]:9470"))
    check_exposure(ApiOptions(address=""))
