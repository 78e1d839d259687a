"""``serve`` asks every source through the ``Source`` protocol: readiness for ``/readyz``, and a source that dies
stops serve with ``SourceFailedError`` (exit 3) after the drain; a clean stop closes every source once."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ragpulse.cli._common import EXIT_RUNTIME, exit_code_for
from ragpulse.config import Settings
from ragpulse.errors import SourceFailedError
from ragpulse.sidecar.serve import run_serve
from testsupport import free_port


class ToySource:
    """A :class:`~ragpulse.protocols.Source` a test drives: ready after start, dies when told."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.closed = 0
        self._dead: asyncio.Future[BaseException] | None = None

    async def start(self) -> None:
        self._dead = asyncio.get_running_loop().create_future()
        self.started.set()

    @property
    def ready(self) -> bool:
        return self._dead is not None and not self._dead.done() and not self.closed

    async def wait_failed(self) -> BaseException:
        assert self._dead is not None
        return await asyncio.shield(self._dead)

    def die(self, error: BaseException) -> None:
        assert self._dead is not None
        self._dead.set_result(error)

    async def aclose(self) -> None:
        self.closed += 1


def _settings(pg_url: str, port: int) -> Settings:
    return Settings(
        store_database_url=pg_url,
        store_pool_max=2,
        http_address=f"127.0.0.1:{port}",
        otlp_grpc_address="",
        otlp_http_address="",
        judge_enabled=["keyword"],
        engine_shutdown_deadline_s=5,
    )


async def _readyz(port: int) -> tuple[int, dict[str, bool]]:
    async with httpx.AsyncClient() as http:
        r = await http.get(f"http://127.0.0.1:{port}/readyz")
    return r.status_code, r.json()["checks"]


async def test_readiness_comes_from_the_source_and_a_dead_source_ends_serve_with_exit_3(pg_url: str) -> None:
    port = free_port()
    toy = ToySource()
    serving = asyncio.create_task(run_serve(_settings(pg_url, port), asyncio.Event(), sources={"toy": toy}))
    await asyncio.wait_for(toy.started.wait(), 60)
    async with asyncio.timeout(30):
        while (await _readyz(port))[0] != 200:  # noqa: ASYNC110 - the HTTP port answers from another task
            await asyncio.sleep(0.05)
    assert await _readyz(port) == (200, {"store": True, "running": True, "toy": True})
    toy.die(RuntimeError("broker gone"))
    with pytest.raises(SourceFailedError, match=r"^toy source failed: broker gone$") as err:
        await asyncio.wait_for(serving, 60)
    assert err.value.source == "toy"
    assert exit_code_for(err.value) == EXIT_RUNTIME
    assert toy.closed == 1


async def test_a_clean_stop_closes_every_source_once(pg_url: str) -> None:
    port = free_port()
    toy = ToySource()
    stop = asyncio.Event()
    serving = asyncio.create_task(run_serve(_settings(pg_url, port), stop, sources={"toy": toy}))
    await asyncio.wait_for(toy.started.wait(), 60)
    stop.set()
    await asyncio.wait_for(serving, 60)
    assert toy.closed == 1
