"""asyncio helpers shared by every layer."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any], *, swallow_errors: bool = False) -> None:
    """Cancel ``task`` and wait until it has finished, so nothing of it runs after the caller goes on.

    The task's ``CancelledError`` is swallowed; an exception it raised while stopping propagates unless
    ``swallow_errors`` (for tasks whose failure was already logged or does not matter at shutdown). As with
    ``contextlib.suppress(asyncio.CancelledError)``, which this replaces, a cancellation of the caller that arrives
    during the wait is swallowed too: the callers are shutdown paths that go on stopping either way.
    """
    task.cancel()
    errors: tuple[type[BaseException], ...] = (
        (asyncio.CancelledError, Exception) if swallow_errors else (asyncio.CancelledError,)
    )
    with contextlib.suppress(*errors):
        await task
