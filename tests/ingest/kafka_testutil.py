"""Helpers for Kafka tests: topic creation, producing, reading a topic back, committed offsets, a sink."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition

from ragpulse.model import Trace, TraceOutcome, TraceResult
from ragpulse.protocols import AckCallback
from testsupport import KAFKA_ATTEMPT_S
from testsupport import committed as committed  # re-exported: the Kafka tests import their helpers from here

REPO = Path(__file__).resolve().parents[2]


async def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        async with asyncio.timeout(2 * KAFKA_ATTEMPT_S):
            await admin.start()
            await admin.create_topics([NewTopic(name, partitions, 1)])
    except TimeoutError:
        raise AssertionError(f"the broker did not create topic {name} in {2 * KAFKA_ATTEMPT_S} s") from None
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, values: Iterable[bytes], *, keys: Iterable[bytes | None] | None = None
) -> int:
    """Produce ``values`` (keyed by ``keys`` or round-robin); returns how many were sent."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=16 * 1024 * 1024, linger_ms=5)
    await p.start()
    n = 0
    try:
        futs = []
        key_list = list(keys) if keys is not None else None
        for i, v in enumerate(values):
            k = key_list[i] if key_list is not None else str(i).encode()
            futs.append(await p.send(topic, v, key=k))
            n += 1
        await p.flush()
        for f in futs:
            await f
    finally:
        await p.stop()
    return n


def event(i: int, **extra: Any) -> bytes:
    """A valid trace event numbered ``i``."""
    ev = {
        "traceId": f"trace-{i:06d}",
        "question": f"How many days of leave in plan {i}?",
        "contexts": [f"Plan {i} grants {i % 30} days of leave."],
        "retrievedDocIds": [f"doc-{i}"],
        "answer": f"{i % 30} days.",
        "app": "hr-assistant",
    }
    ev.update(extra)
    return json.dumps(ev).encode()


async def read_topic(
    bootstrap: str, topic: str, expect: int, wait_s: float = 20.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read ``expect`` records of ``topic`` from the beginning (no group)."""
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None)
    await c.start()
    out: list[ConsumerRecord[bytes, bytes]] = []
    try:
        async with asyncio.timeout(wait_s):
            while len(out) < expect:
                batch = await c.getmany(timeout_ms=300)
                for recs in batch.values():
                    out.extend(recs)
    finally:
        await c.stop()
    return out


async def end_offsets(bootstrap: str, topic: str, partitions: int = 3) -> dict[int, int]:
    """The brokers' end offsets (ListOffsets latest) of ``topic``, per partition."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: off for tp, off in (await c.end_offsets(tps)).items()}
    finally:
        with contextlib.suppress(asyncio.CancelledError):  # aiokafka's group-less close may raise it
            await c.stop()


class RecordingSink:
    """A :class:`~ragpulse.protocols.TraceSink` with a bounded queue and one worker that acknowledges.

    Stands in for the engine where a test is about the source alone: records every trace it acknowledged.
    ``hold`` (an Event) blocks the worker while cleared; ``fail_ids`` are acknowledged with ``ok=False``.
    """

    def __init__(
        self, capacity: int = 100, *, fail_ids: set[str] | None = None, delay_s: float = 0.0
    ) -> None:
        self.queue: asyncio.Queue[tuple[Trace, AckCallback | None]] = asyncio.Queue(capacity)
        self.acked: list[Trace] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.fail_ids = fail_ids or set()
        self.max_qsize = 0
        self.delay_s = delay_s
        self._task = asyncio.create_task(self._work())

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        await self.queue.put((trace, ack))
        self.max_qsize = max(self.max_qsize, self.queue.qsize())

    def has_room(self) -> bool:
        return not self.queue.full()

    async def _work(self) -> None:
        while True:
            trace, ack = await self.queue.get()
            await self.hold.wait()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            ok = trace.trace_id not in self.fail_ids
            if ok:
                self.acked.append(trace)
            if ack is not None:
                await ack(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED), ok)

    def counts(self) -> Counter[str]:
        return Counter(t.trace_id for t in self.acked)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
