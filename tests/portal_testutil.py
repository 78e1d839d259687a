"""A started ``ragpulse serve`` with the portal on a free port, its private database, and helpers to seed traces."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from ragpulse.config import Settings
from ragpulse.model import TraceResult
from ragpulse.store.postgres import PostgresStore
from testsupport import free_port, stop_process

REPO = Path(__file__).resolve().parents[1]
ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
RAGPULSE = str(REPO / ".venv" / "bin" / "ragpulse")


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion in a thread of its own (callers may be inside Playwright's event loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@contextmanager
def private_db() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(ADMIN_URL)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    run_async(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield ADMIN_URL.rpartition("/")[0] + "/" + name
    finally:
        run_async(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def base_env(db_url: str) -> dict[str, str]:
    """The environment of a ``ragpulse`` subprocess: no inherited ``RAGPULSE_*``/``OTEL_*``/``OPENAI_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    env.update(
        {
            "RAGPULSE_DATABASE_URL": db_url,
            "RAGPULSE_LOG_JSON": "true",
            "RAGPULSE_OTLP_GRPC_ADDRESS": "",
            "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        }
    )
    return env


@dataclass
class Portal:
    """A running ``ragpulse serve`` with the portal at :attr:`url`."""

    db_url: str
    env: dict[str, str]
    url: str = ""
    proc: subprocess.Popen[bytes] | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)

    def start(self, timeout: float = 90.0) -> None:
        port = free_port()
        self.env.setdefault("RAGPULSE_API_ADDRESS", f"127.0.0.1:{port}")
        self.env["RAGPULSE_HTTP_ADDRESS"] = f"127.0.0.1:{free_port()}"
        self.url = "http://" + self.env["RAGPULSE_API_ADDRESS"]
        self.proc = subprocess.Popen(
            [RAGPULSE, "serve"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while not any(e.get("event") == "ready" for e in self.logs):
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise RuntimeError(f"serve exited {self.proc.returncode}: {self.logs[-5:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve not ready: {self.logs[-5:]}")
            time.sleep(0.05)

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").strip()
            try:
                self.logs.append(json.loads(line))
            except ValueError:
                self.logs.append({"event": "_raw", "line": line})

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)


def seed(db_url: str, results: Sequence[TraceResult]) -> None:
    """Write ``results`` to the store at ``db_url`` (as the engine would), their judgements dated as their
    traces were received (as if judged right away)."""

    async def go() -> None:
        store = await PostgresStore.connect(db_url, Settings(database_url=db_url, database_pool_max=2).store)
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
