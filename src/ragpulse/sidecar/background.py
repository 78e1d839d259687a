"""``serve``'s periodic background work beside the sources: corrected pass rates and the results stream.

:func:`start_background` starts the tasks and registers their cancellation on the caller's exit stack, so they
stop with the rest of ``serve`` (the results stream's producer is flushed and closed after its task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Protocol

from ragpulse.aio import cancel_and_wait
from ragpulse.calibration.live import CorrectedStore, run_corrected_loop
from ragpulse.config import Settings
from ragpulse.logging import get_logger
from ragpulse.protocols import Judge
from ragpulse.sidecar.results_stream import OutboxStore, run_results_stream

__all__ = ["BackgroundStore", "start_background"]

_log = get_logger("ragpulse.serve.background")


class BackgroundStore(CorrectedStore, OutboxStore, Protocol):
    """What the background tasks need from the store (``PostgresStore``)."""


async def start_background(
    stack: AsyncExitStack, settings: Settings, store: BackgroundStore, judges: Mapping[str, Judge]
) -> list[asyncio.Task[None]]:
    """Start the corrected-pass-rate loop (always) and the results stream (when ``kafka.results_topic`` is set;
    the store must then have been opened with its outbox on). Returns the tasks; ``stack`` cancels them."""
    versions = {name: judge.version for name, judge in judges.items()}
    tasks = [
        asyncio.create_task(
            run_corrected_loop(
                store, versions, settings.export.corrected_window_s, settings.export.corrected_interval_s
            ),
            name="ragpulse-corrected-pass-rates",
        )
    ]
    topic = settings.kafka.results_topic
    if topic:
        from aiokafka import AIOKafkaProducer

        from ragpulse.ingest.kafka_client import client_options

        producer = AIOKafkaProducer(**client_options(settings.kafka), acks="all", linger_ms=20)
        await producer.start()
        stack.push_async_callback(producer.stop)
        tasks.append(
            asyncio.create_task(
                run_results_stream(store, producer, topic, prices=settings.export.model_prices),
                name="ragpulse-results",
            )
        )
        _log.info("results_stream_started", topic=topic)
    for task in tasks:
        stack.push_async_callback(cancel_and_wait, task)
    return tasks
