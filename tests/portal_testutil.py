"""A started ``ragpulse serve`` with the portal on a free port, its private database, and helpers to seed traces."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx

from ingest.serve_testutil import ServeProcess
from ragpulse.config import Settings
from ragpulse.model import TraceResult
from ragpulse.store.postgres import PostgresStore
from testsupport import free_port, private_db, run_async, stop_process

REPO = Path(__file__).resolve().parents[1]
RAGPULSE = str(REPO / ".venv" / "bin" / "ragpulse")


def base_env(db_url: str) -> dict[str, str]:
    """The environment of a ``ragpulse`` subprocess: no inherited ``RAGPULSE_*``/``OTEL_*``/``OPENAI_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    env.update(
        {
            "RAGPULSE_STORE_DATABASE_URL": db_url,
            "RAGPULSE_LOG_JSON": "true",
            "RAGPULSE_OTLP_GRPC_ADDRESS": "",
            "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        }
    )
    return env


class Portal(ServeProcess):
    """A running ``ragpulse serve`` (:class:`~ingest.serve_testutil.ServeProcess`, the one serve starter of the
    tests) with the portal at :attr:`url`, on the database ``db_url``."""

    def __init__(self, db_url: str, env: dict[str, str]) -> None:
        env = dict(env)
        env.setdefault("RAGPULSE_API_ADDRESS", f"127.0.0.1:{free_port()}")
        env["RAGPULSE_HTTP_ADDRESS"] = f"127.0.0.1:{free_port()}"
        super().__init__(env)
        self.db_url = db_url
        self.url = "http://" + self.env["RAGPULSE_API_ADDRESS"]

    def start(self, wait_ready_s: float = 90.0) -> None:
        super().start(wait_ready_s)

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL after 10 s."""
        if self.proc is not None:
            stop_process(self.proc)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)


@contextmanager
def started_portal(**env: str) -> Iterator[Portal]:
    """A started :class:`Portal` on a fresh private database with :func:`base_env` plus ``env`` (``RAGPULSE_*``
    overrides); stopped and the database dropped on exit."""
    with private_db() as db:
        p = Portal(db, {**base_env(db), **env})
        p.start()
        try:
            yield p
        finally:
            p.stop()


def problem_detail(r: httpx.Response, status: int) -> str:
    """The ``detail`` of ``r``, after checking that it is an RFC 9457 problem+json answer with ``status``."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status
    detail: str = body["detail"]
    assert detail
    return detail


def seed(db_url: str, results: Sequence[TraceResult]) -> None:
    """Write ``results`` to the store at ``db_url`` (as the engine would), their judgements dated as their
    traces were received (as if judged right away)."""

    async def go() -> None:
        store = await PostgresStore.connect(
            db_url, Settings(store_database_url=db_url, store_pool_max=2).store
        )
        try:
            await store.write_results(results)
        finally:
            await store.close()
        conn = await asyncpg.connect(db_url)
        try:
            await conn.execute(
                """UPDATE judgements j SET created_at = t.received_at FROM traces t
                   WHERE t.trace_id = j.trace_id AND t.trace_id = ANY($1::text[])""",
                [r.trace.trace_id for r in results],
            )
        finally:
            await conn.close()

    run_async(go())


def cli(db_url: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run the ``ragpulse`` CLI against ``db_url``."""
    return subprocess.run(
        [RAGPULSE, *args], env=base_env(db_url), capture_output=True, text=True, timeout=timeout, check=False
    )


def python() -> str:
    return sys.executable
