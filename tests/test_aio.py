"""ragpulse.aio.cancel_and_wait: the one way a task is stopped at shutdown."""

from __future__ import annotations

import asyncio

import pytest

from ragpulse.aio import cancel_and_wait


async def test_the_task_has_finished_when_it_returns() -> None:
    steps: list[str] = []

    async def worker() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # cleanup that awaits still runs before cancel_and_wait returns
            steps.append("cleaned up")

    task = asyncio.create_task(worker())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()
    assert steps == ["cleaned up"]


async def test_an_error_while_stopping_propagates_unless_swallowed() -> None:
    async def failing() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            raise RuntimeError("flush failed")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="flush failed"):
        await cancel_and_wait(task)
    quiet = asyncio.create_task(failing())
    await asyncio.sleep(0)
    await cancel_and_wait(quiet, swallow_errors=True)
    assert quiet.done()
    assert isinstance(quiet.exception(), RuntimeError)


async def test_a_finished_task_is_left_as_it_was() -> None:
    async def quick() -> int:
        return 7

    task = asyncio.create_task(quick())
    await task
    await cancel_and_wait(task)
    assert task.result() == 7
