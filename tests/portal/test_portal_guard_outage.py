"""The portal's front door (:class:`~ragpulse.portal.security.PortalGuard`) reads the CSRF key and the session
from the database before any route runs; when the database is down that is a 503 problem+json (with the
security headers), not an ASGI traceback. A stand-in store that raises, served over httpx's ASGI transport."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest

from ragpulse.config import Settings
from ragpulse.errors import StoreError
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.store import PostgresStore


class _DownStore:
    """Every query fails as a lost connection would."""

    def __getattr__(self, name: str) -> Any:
        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise StoreError(f"{name}: connection refused")

        return fail


@pytest.mark.parametrize("path", ["/test-sets", "/api/v1/test-sets", "/login"])
async def test_database_down_is_503_at_the_front_door(path: str) -> None:
    ctx = PortalContext(
        store=cast(PostgresStore, _DownStore()), settings=Settings(), options=ApiOptions(token="t")
    )
    transport = httpx.ASGITransport(app=build_app(ctx))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", cookies={"ragpulse_session": "s"}
    ) as c:
        r = await c.get(path)
    assert r.status_code == 503
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == "the database is not available; try again"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
