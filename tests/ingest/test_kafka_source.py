"""KafkaSource against a real tansu broker: delivery, commits, dead letters, back-pressure, redelivery."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

import pytest

from ingest.kafka_testutil import (
    RecordingSink,
    committed,
    create_topic,
    end_offsets,
    event,
    produce,
    read_topic,
)
from ragpulse.config import Settings
from ragpulse.ingest.events import parse_event
from ragpulse.ingest.kafka import DLQ_HEADERS, KafkaSource, _observe_lag
from ragpulse.model import TraceOutcome, TraceResult
from ragpulse.protocols import STORE_FAILURE
from testsupport import wait_until


def _settings(bootstrap: str, topic: str, **kw: object) -> Settings:
    return Settings(
        kafka_bootstrap_servers=bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        engine_shutdown_deadline_s=5.0,
        **kw,
    )


async def _wait_for(cond: Callable[[], bool], wait_s: float = 30.0) -> None:
    await wait_until(cond, wait_s)


async def test_every_event_delivered_once_and_committed(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 3)
    n = 300
    await produce(kafka_bootstrap, topic, (event(i) for i in range(n)))
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink(50)
    src = KafkaSource(s.kafka, sink, commit_interval_s=0.2)
    async with src:
        await _wait_for(lambda: len(sink.acked) >= n)
        assert src.connected
    await sink.close()
    counts = sink.counts()
    assert len(counts) == n
    assert set(counts.values()) == {1}
    assert sink.acked[0].source.value == "kafka"
    offs = await committed(kafka_bootstrap, s.kafka.group_id, topic)
    assert sum(o or 0 for o in offs.values()) == n  # every partition committed to its end
    assert src.stats["received"] == n
    assert src.stats["dead_lettered"] == 0


async def test_poison_messages_dead_lettered_with_headers_rest_flow(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    big = json.dumps({"traceId": "big", "question": "q", "answer": "a", "context": "x" * 5000}).encode()
    values = [
        event(1),
        b'{"traceId": "broken", "question": ',
        b'{"question": "no id", "answer": "a"}',
        big,
        event(2),
        b'{"traceId": "no-question", "answer": "a"}',
    ]
    await produce(kafka_bootstrap, topic, values, keys=[b"k1", b"k2", b"k3", b"k4", b"k5", b"k6"])
    s = _settings(kafka_bootstrap, topic, kafka_max_message_bytes=2000)
    sink = RecordingSink()
    async with KafkaSource(s.kafka, sink, commit_interval_s=0.2) as src:
        await _wait_for(lambda: len(sink.acked) >= 3 and src.stats["dead_lettered"] >= 3)
    await sink.close()
    assert [t.trace_id for t in sink.acked] == ["trace-000001", "trace-000002", "no-question"]
    assert sink.acked[2].question is None  # not dead-lettered: the engine records it as not_evaluable
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 3)
    assert len(dlq) == 3
    got = []
    for rec in sorted(dlq, key=lambda r: int(dict(r.headers)["ragpulse.dlq.offset"])):
        h = {k: v.decode() for k, v in rec.headers}
        assert set(DLQ_HEADERS) <= set(h)
        assert h["ragpulse.dlq.topic"] == topic
        assert h["ragpulse.dlq.partition"] == "0"
        got.append(
            (int(h["ragpulse.dlq.offset"]), h["ragpulse.dlq.reason"].split(":")[0], rec.key, rec.value)
        )
    assert got == [
        (1, "not_json", b"k2", values[1]),
        (2, "schema", b"k3", values[2]),
        (3, "too_large", b"k4", big),
    ]
    reason = {
        int(dict(r.headers)["ragpulse.dlq.offset"]): dict(r.headers)["ragpulse.dlq.reason"] for r in dlq
    }
    assert reason[2] == b"schema: /: missing required field traceId (or trace_id)"
    assert reason[3] == f"too_large: {len(big)} bytes > 2000".encode()
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: 6}


async def test_backpressure_pauses_and_bounds_memory(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 2)
    n = 400
    await produce(kafka_bootstrap, topic, (event(i) for i in range(n)))
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink(10)
    sink.hold.clear()  # the "engine" is stuck: its queue fills up
    async with KafkaSource(s.kafka, sink, max_batch=50, commit_interval_s=0.2) as src:
        await _wait_for(lambda: src.stats["paused"] >= 1)
        await _wait_for(sink.queue.full)
        assert len(sink.acked) == 0
        assert len(src._pending) <= 50  # one poll batch at most is held besides the engine's queue
        await src._update_lag()
        assert sum(src.lag.values()) >= n - 60
        obs = list(_observe_lag(None))  # type: ignore[arg-type]
        assert {(o.attributes or {}).get("topic") for o in obs} == {topic}
        assert sum(o.value for o in obs) == sum(src.lag.values())
        sink.hold.set()
        await _wait_for(lambda: len(sink.acked) >= n)
        async with asyncio.timeout(30):  # the acknowledged offsets are committed every 0.2 s
            await src._update_lag()
            while sum(src.lag.values()) != 0:
                await asyncio.sleep(0.05)
                await src._update_lag()
    await sink.close()
    assert set(sink.counts().values()) == {1}
    assert len(sink.counts()) == n
    assert sink.max_qsize <= 10


async def test_unacked_traces_are_redelivered_after_restart(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, (event(i) for i in range(20)))
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink(5)
    src = KafkaSource(s.kafka, sink, commit_interval_s=0.1)
    await src.start()
    await _wait_for(lambda: len(sink.acked) >= 8)
    sink.hold.clear()  # stop acknowledging: what is in flight now is not stored
    await asyncio.sleep(0.3)
    done_first = len(sink.acked)
    await src.stop(deadline_s=0.5)
    await sink.close()
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: done_first}
    sink2 = RecordingSink(50)
    async with KafkaSource(s.kafka, sink2, commit_interval_s=0.1):
        await _wait_for(lambda: len(sink2.acked) >= 20 - done_first)
    await sink2.close()
    assert [t.trace_id for t in sink2.acked] == [f"trace-{i:06d}" for i in range(done_first, 20)]
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: 20}


async def test_failed_store_goes_to_dlq_as_not_stored(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, [event(1), event(2), event(3)])
    s = _settings(kafka_bootstrap, topic, kafka_dlq_topic=f"{topic}-dead")
    sink = RecordingSink(fail_ids={"trace-000002"})
    async with KafkaSource(s.kafka, sink, commit_interval_s=0.1) as src:
        await _wait_for(lambda: len(sink.acked) >= 2 and src.stats["dead_lettered"] >= 1)
    await sink.close()
    dlq = await read_topic(kafka_bootstrap, f"{topic}-dead", 1)
    h = dict(dlq[0].headers)
    assert h["ragpulse.dlq.reason"].startswith(b"not_stored")
    assert h["ragpulse.dlq.offset"] == b"1"
    assert json.loads(dlq[0].value)["traceId"] == "trace-000002"
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: 3}


class _StoreFailingSink(RecordingSink):
    """Fails ``fail_ids`` the way the engine does: the ack runs while STORE_FAILURE holds the store's error."""

    async def _work(self) -> None:
        while True:
            trace, ack = await self.queue.get()
            ok = trace.trace_id not in self.fail_ids
            if ok:
                self.acked.append(trace)
            token = STORE_FAILURE.set(
                None if ok else "write_results failed: OverflowError: value out of int32 range"
            )
            try:
                if ack is not None:
                    await ack(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED), ok)
            finally:
                STORE_FAILURE.reset(token)


async def test_not_stored_dead_letter_carries_the_store_errors_message(
    kafka_bootstrap: str, topic: str
) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, [event(1), event(2)])
    s = _settings(kafka_bootstrap, topic)
    sink = _StoreFailingSink(fail_ids={"trace-000001"})
    async with KafkaSource(s.kafka, sink, commit_interval_s=0.1) as src:
        await _wait_for(lambda: len(sink.acked) >= 1 and src.stats["dead_lettered"] >= 1)
    await sink.close()
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)
    reason = dict(dlq[0].headers)["ragpulse.dlq.reason"]
    assert reason == b"not_stored: write_results failed: OverflowError: value out of int32 range"
    assert [t.trace_id for t in sink.acked] == ["trace-000002"]  # the next message is not lost


@pytest.mark.slow
async def test_two_consumers_share_partitions(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 4)
    n = 400
    await produce(kafka_bootstrap, topic, (event(i) for i in range(n)))
    s = _settings(kafka_bootstrap, topic)
    a, b = RecordingSink(20), RecordingSink(20)
    async with KafkaSource(s.kafka, a, commit_interval_s=0.1), KafkaSource(s.kafka, b, commit_interval_s=0.1):
        await _wait_for(lambda: len(set(a.counts()) | set(b.counts())) >= n, wait_s=60)
    await a.close()
    await b.close()
    assert set(a.counts()) | set(b.counts()) == {f"trace-{i:06d}" for i in range(n)}
    assert sum((await committed(kafka_bootstrap, s.kafka.group_id, topic, 4)).values()) == n  # type: ignore[arg-type]


class _BrokenSink:
    async def submit(self, trace: object, ack: object = None) -> None:
        raise RuntimeError("engine exploded")

    def has_room(self) -> bool:
        return True


async def test_a_dead_consume_loop_is_reported(kafka_bootstrap: str, topic: str) -> None:
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, [event(1)])
    s = _settings(kafka_bootstrap, topic)
    src = KafkaSource(s.kafka, _BrokenSink())
    await src.start()
    try:
        err = await asyncio.wait_for(src.wait_failed(), 30)
        assert isinstance(err, RuntimeError)
        assert str(err) == "engine exploded"
        assert not src.connected
    finally:
        await src.stop(deadline_s=0.1)
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: None}


async def test_consumer_joining_mid_stream_takes_over_partitions_without_loss(
    kafka_bootstrap: str, topic: str
) -> None:
    await create_topic(kafka_bootstrap, topic, 4)
    n = 1500
    await produce(kafka_bootstrap, topic, (event(i) for i in range(n)))
    s = _settings(kafka_bootstrap, topic)
    a = RecordingSink(20, delay_s=0.002)
    b = RecordingSink(20, delay_s=0.002)
    src_a = KafkaSource(s.kafka, a, commit_interval_s=0.2)
    await src_a.start()
    await _wait_for(lambda: len(a.acked) >= 200)
    src_b = KafkaSource(s.kafka, b, commit_interval_s=0.2)
    await src_b.start()  # the group rebalances: A commits what is done for the partitions it gives up
    try:
        await _wait_for(lambda: len(set(a.counts()) | set(b.counts())) >= n, wait_s=90)
        await _wait_for(lambda: len(b.acked) > 0, wait_s=30)
    finally:
        await src_b.stop()
        await src_a.stop()
        await a.close()
        await b.close()
    both = a.counts() + b.counts()
    assert set(both) == {f"trace-{i:06d}" for i in range(n)}
    assert len(b.acked) > 0  # B really took partitions over
    # At least once: a trace may be seen twice only if it was in flight during the rebalance (≤ queue size).
    assert sum(c - 1 for c in both.values()) <= 20 * 4
    assert sum((await committed(kafka_bootstrap, s.kafka.group_id, topic, 4)).values()) == n  # type: ignore[arg-type]


async def test_deeply_nested_message_is_dead_lettered_and_the_stream_goes_on(
    kafka_bootstrap: str, topic: str
) -> None:
    """200 KB of nested arrays used to raise RecursionError out of the consume loop: a poison pill that
    stopped ``serve`` and, uncommitted, stopped it again after every restart."""
    await create_topic(kafka_bootstrap, topic, 1)
    deep = b"[" * 100_000 + b"]" * 100_000
    await produce(kafka_bootstrap, topic, [event(1), deep, event(2)])
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink()
    async with KafkaSource(s.kafka, sink, commit_interval_s=0.2) as src:
        await _wait_for(lambda: len(sink.acked) >= 2 and src.stats["dead_lettered"] >= 1)
        assert not src._task.done()  # type: ignore[union-attr]  # the consume loop is still alive
    await sink.close()
    assert [t.trace_id for t in sink.acked] == ["trace-000001", "trace-000002"]
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)
    assert dict(dlq[0].headers)["ragpulse.dlq.reason"] == b"too_deep: JSON nested deeper than 64 levels"
    assert dict(dlq[0].headers)["ragpulse.dlq.offset"] == b"1"
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: 3}


async def test_any_exception_from_one_message_is_dead_lettered_as_internal_error(
    kafka_bootstrap: str, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decoder bug (the OverflowError of issue 11 item 6, reproduced by a decoder that raises it for one
    message) dead-letters that message with reason internal_error; the loop commits past it and goes on."""
    import ragpulse.ingest.kafka as kafka_mod

    real = parse_event

    def buggy(value: bytes | None, **kw: object) -> object:
        if value and b"boom" in value:
            raise OverflowError("date value out of range")
        return real(value, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(kafka_mod, "parse_event", buggy)
    await create_topic(kafka_bootstrap, topic, 1)
    await produce(kafka_bootstrap, topic, [event(1), b'{"traceId": "boom"}', event(2)])
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink()
    async with KafkaSource(s.kafka, sink, commit_interval_s=0.2) as src:
        await _wait_for(lambda: len(sink.acked) >= 2 and src.stats["dead_lettered"] >= 1)
        assert src.connected
    await sink.close()
    assert [t.trace_id for t in sink.acked] == ["trace-000001", "trace-000002"]
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", 1)
    assert dict(dlq[0].headers)["ragpulse.dlq.reason"] == b"internal_error: OverflowError"
    assert (await committed(kafka_bootstrap, s.kafka.group_id, topic, 1)) == {0: 3}


async def test_consumer_lag_stays_current_while_paused(kafka_bootstrap: str, topic: str) -> None:
    """Issue 11 item 9: paused partitions are not fetched; the gauge used to freeze at the last fetch's
    high-water mark (1,446 while the real lag was ~5,600)."""
    await create_topic(kafka_bootstrap, topic, 2)
    await produce(kafka_bootstrap, topic, (event(i) for i in range(100)))
    s = _settings(kafka_bootstrap, topic)
    sink = RecordingSink(10)
    sink.hold.clear()  # nothing is ever acknowledged: the real lag is everything produced
    async with KafkaSource(s.kafka, sink, max_batch=50, commit_interval_s=0.2) as src:
        await _wait_for(lambda: src.stats["paused"] >= 1 and sum(src.lag.values()) == 100)
        await produce(kafka_bootstrap, topic, (event(i) for i in range(100, 2100)))  # while paused
        # The brokers' end offsets, as another client sees them. (tansu's memory storage answers ListOffsets
        # with the base offset of the last record batch, up to a batch short of the 2,100 messages; Kafka
        # answers the exact high-water mark. The gauge reports what the brokers say, as the lag alert expects.)
        ends = await end_offsets(kafka_bootstrap, topic, 2)
        assert sum(ends.values()) > 1900  # the frozen gauge said 100
        await _wait_for(lambda: sum(src.lag.values()) == sum(ends.values()))  # refreshed about once a second
        assert src._paused
        obs = list(_observe_lag(None))  # type: ignore[arg-type]
        by_partition = {dict(o.attributes or {}).get("partition"): o.value for o in obs
                        if dict(o.attributes or {}).get("topic") == topic}  # fmt: skip
        assert by_partition == ends
        sink.hold.set()
        await _wait_for(lambda: len(sink.acked) >= 2100, wait_s=60)
        await _wait_for(lambda: sum(src.lag.values()) == 0)
    await sink.close()
