"""The results stream: every stored judgement published to a Kafka topic through the store's outbox.

The store writes new and replaced judgements with ``published_at`` NULL when the stream is on
(``PostgresStore.results_outbox``); :func:`run_results_stream` repeatedly takes a batch of them (locked, oldest
first), sends each as a JSON event keyed ``trace_id:judge:version`` (:mod:`ragpulse.export.results`), waits for
the broker's acknowledgements, and only then marks them published. Contract: **at least once** — a crash between
store and publish (or between publish and mark) republishes on restart; a redelivered trace whose judgements
are final writes nothing, so it republishes nothing. While the topic is unreachable judging goes on; the outbox
grows and catches up when the broker is back (retries with capped backoff).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ragpulse.export.results import encode_event, event_key, judgement_event
from ragpulse.logging import get_logger
from ragpulse.model import ModelPrice

__all__ = ["OutboxStore", "Producer", "publish_batch", "run_results_stream"]

_log = get_logger("ragpulse.serve.results_stream")


class OutboxStore(Protocol):
    """The store side of the stream (``PostgresStore``)."""

    async def publish_pending(
        self, publish: Callable[[list[dict[str, Any]]], Awaitable[None]], limit: int = 500
    ) -> int: ...


class Producer(Protocol):
    """The part of ``aiokafka.AIOKafkaProducer`` the stream uses."""

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None) -> Any: ...


async def publish_batch(
    producer: Producer,
    topic: str,
    rows: list[dict[str, Any]],
    prices: Mapping[str, ModelPrice] | None = None,
) -> None:
    """Send one event per row (the app's cost at ``prices``) and wait until the broker acknowledged all of them
    (raises otherwise)."""
    futures = []
    for row in rows:
        event = judgement_event(row, prices)
        futures.append(await producer.send(topic, value=encode_event(event), key=event_key(event)))
    await asyncio.gather(*futures)


async def run_results_stream(
    store: OutboxStore,
    producer: Producer,
    topic: str,
    *,
    batch: int = 500,
    idle_s: float = 0.5,
    max_backoff_s: float = 10.0,
    prices: Mapping[str, ModelPrice] | None = None,
) -> None:
    """Publish the outbox until cancelled: full batches back to back, ``idle_s`` pauses when it is empty,
    and a backoff doubling up to ``max_backoff_s`` while publishing or the store fails; ``prices``: the price
    table of the events' ``app_cost``."""
    backoff = idle_s
    while True:
        try:
            sent = await store.publish_pending(
                lambda rows: publish_batch(producer, topic, rows, prices), batch
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # broker or database down: judging goes on, the outbox waits
            _log.warning(
                "results_stream_failed", error=type(e).__name__, detail=str(e)[:200], retry_in_s=backoff
            )
            await asyncio.sleep(backoff)
            backoff = min(max_backoff_s, backoff * 2)
            continue
        backoff = idle_s
        if sent < batch:
            await asyncio.sleep(idle_s)
