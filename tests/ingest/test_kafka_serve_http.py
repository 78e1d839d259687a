"""The serve HTTP port over a real socket: /healthz, /readyz (checks, timeouts, 503), /metrics."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ragpulse.asgi_server import parse_address
from ragpulse.errors import ConfigError
from ragpulse.export import metrics_asgi_app
from ragpulse.sidecar.health import HealthServer


@pytest.mark.integration  # slow check (three health listeners started and stopped, a 0.2 s check timeout, ~1.1 s): the integration lane, docs/dev/testing.md
async def test_health_ready_and_metrics_over_http() -> None:
    state = {"kafka": False}

    async def store() -> bool:
        return True

    async def kafka() -> bool:
        return state["kafka"]

    async def broken() -> bool:
        raise RuntimeError("boom")

    async def slow() -> bool:
        await asyncio.sleep(10)
        return True

    async with HealthServer("127.0.0.1:0", {"store": store, "kafka": kafka}, metrics_asgi_app()) as srv:
        assert srv.port
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.port}") as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
            r = await http.get("/readyz")
            assert r.status_code == 503
            assert r.json() == {"status": "not_ready", "checks": {"store": True, "kafka": False}}
            state["kafka"] = True
            r = await http.get("/readyz")
            assert r.status_code == 200
            assert r.json()["status"] == "ready"
            m = await http.get("/metrics")
            assert m.status_code == 200
            assert "# TYPE" in m.text
            assert m.headers["content-type"].startswith("text/plain")
    async with (
        HealthServer("127.0.0.1:0", {"broken": broken}) as srv,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.port}") as http,
    ):
        assert (await http.get("/readyz")).json()["checks"] == {"broken": False}
        assert (await http.get("/metrics")).status_code == 404
    import ragpulse.sidecar.health as mod

    old = mod.CHECK_TIMEOUT_S
    mod.CHECK_TIMEOUT_S = 0.2
    try:
        async with (
            HealthServer("127.0.0.1:0", {"slow": slow}) as srv,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.port}") as http,
        ):
            r = await http.get("/readyz")
            assert r.status_code == 503
            assert r.json()["checks"] == {"slow": False}
    finally:
        mod.CHECK_TIMEOUT_S = old


async def test_port_in_use_is_a_config_error() -> None:
    async with HealthServer("127.0.0.1:0", {}) as srv:
        with pytest.raises(ConfigError, match="cannot listen"):
            async with HealthServer(f"127.0.0.1:{srv.port}", {}):
                pass


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:4318") == ("::1", 4318)
    assert parse_address(":9464") == ("0.0.0.0", 9464)
    for bad in ("9464", "host:", "host:99999", "host:x"):
        with pytest.raises(ConfigError):
            parse_address(bad)
