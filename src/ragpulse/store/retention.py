"""Retention: periodically prune traces (and their judgements) older than ``settings.retention_days``.

``serve`` runs :func:`retention_loop` as a background task beside the engine::

    async with open_store(settings.store) as store:
        task = asyncio.create_task(retention_loop(store, settings.store))
        try:
            ...  # run the engine and sources
        finally:
            task.cancel()

With ``retention_days`` unset the loop returns at once (nothing is ever pruned). Otherwise it prunes right away,
then every ``settings.retention_interval_s`` seconds. Several replicas may run it: deletes are idempotent.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Protocol

from ragpulse.config import StoreSettings
from ragpulse.errors import StoreError
from ragpulse.logging import get_logger

__all__ = ["Prunable", "retention_loop"]

_log = get_logger(__name__)


class Prunable(Protocol):
    """Anything with the store's ``prune`` (``PostgresStore``)."""

    async def prune(self, older_than: timedelta) -> int: ...


async def retention_loop(store: Prunable, settings: StoreSettings) -> None:
    """Prune every ``settings.retention_interval_s`` seconds until cancelled.

    A failing prune (:class:`StoreError`) is logged and retried at the next interval; the loop never raises
    except ``CancelledError``. Returns immediately when ``settings.retention_days`` is ``None``.
    """
    if settings.retention_days is None:
        return
    older_than = timedelta(days=settings.retention_days)
    while True:
        try:
            n = await store.prune(older_than)
            _log.info("retention_pruned", traces=n, older_than_days=settings.retention_days)
        except StoreError as e:
            _log.warning("retention_prune_failed", error=str(e), retriable=e.retriable)
        await asyncio.sleep(settings.retention_interval_s)
