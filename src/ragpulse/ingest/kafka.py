"""Kafka source: consume trace events, feed the engine, commit offsets only after results are stored.

Delivery is at least once: a message's offset is committed only after the engine acknowledged its stored
result (or after it went to the dead-letter topic); the store's upsert makes redeliveries harmless, so the
visible result is exactly once. Flow per message:

1. each poll batch is decoded (:func:`~ragpulse.ingest.events.parse_event` → a trace, or a rejection reason)
   and its traces are handed once to the sink's optional ``prefetch`` (the engine's one-query lookup of
   judgements already final for their content: a redelivery is not judged again); any other exception while
   decoding one message (a bug) dead-letters it with reason ``internal_error: <exception type>`` and is logged
   once (``kafka_message_failed``) — the consume loop goes on;
2. a rejected message is produced to the dead-letter topic (``<topic>.dlq`` unless ``kafka.dlq_topic``) with
   headers ``ragpulse.dlq.reason``, ``ragpulse.dlq.topic``, ``ragpulse.dlq.partition``, ``ragpulse.dlq.offset``
   (plus the original key, value and headers) and counted on ``ragpulse_traces_rejected{source="kafka"}``;
3. a trace is submitted to the sink; its offset is done when the sink calls the ack. A trace that the engine
   failed for good (``ok=False``) is dead-lettered with reason ``not_stored: <store error>`` so the partition moves on.

OTLP topics (``kafka.topic_encodings``: ``otlp_proto`` / ``otlp_json``, consumed in addition to
``kafka.topics``) carry ``TracesData`` as the OpenTelemetry Collector's Kafka exporter publishes it: a message is
decoded to spans, which are assembled across messages (:mod:`ragpulse.ingest.kafka_otlp`); a message is done
once every trace it carried spans for is stored or dead-lettered, so spans still in assembly hold the commit. On
revocation (and on stop) the traces still in assembly are dropped and their messages are not committed: they are
redelivered to the partition's next owner. An undecodable OTLP message is dead-lettered with reason
``malformed_otlp: …``; a message with a trace that cannot be mapped with ``unmappable``.

Back-pressure: while ``sink.has_room()`` is false every assigned partition is paused (the consumer keeps
polling, so it stays in the group) and resumed once there is room; memory is bounded by one fetch batch
plus the engine's queue. On partition revocation the source waits briefly for in-flight traces of the revoked
partitions and commits what is done. Consumer lag (high-water mark − next offset to commit, refreshed about once
a second, from the brokers' end offsets while paused) is exported as the observable gauge
``ragpulse_kafka_consumer_lag`` (attributes ``topic``, ``partition``). Received traces are
counted by the engine on ``ragpulse_traces_received{source="kafka"}`` when they are submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.structs import TopicPartition
from opentelemetry.metrics import CallbackOptions, Observation

from ragpulse import telemetry
from ragpulse.aio import cancel_and_wait
from ragpulse.config import KafkaSettings, OtlpSettings
from ragpulse.errors import IngestError, RagpulseError
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.kafka_client import client_options, dlq_topic_for
from ragpulse.ingest.kafka_otlp import OTLP_ENCODINGS, HeldMessage, KafkaOtlp, decode_otlp_message
from ragpulse.ingest.offsets import OffsetTracker
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.logging import get_logger
from ragpulse.model import Trace, TraceResult
from ragpulse.protocols import DeadLetterSink, TraceSink, not_stored_reason

__all__ = ["DLQ_HEADERS", "KafkaSource"]

log = get_logger("ragpulse.ingest.kafka")

#: Header names set on dead-lettered messages.
DLQ_HEADERS = (
    "ragpulse.dlq.reason",
    "ragpulse.dlq.topic",
    "ragpulse.dlq.partition",
    "ragpulse.dlq.offset",
)

_SOURCES: weakref.WeakSet[KafkaSource] = weakref.WeakSet()

#: Longest wait for the brokers' end offsets when refreshing the lag of paused partitions, seconds.
LAG_QUERY_TIMEOUT_S = 2.0
#: Seconds between two broker probes (``connected`` / ``/readyz``), and how long a probe may take.
BROKER_PROBE_INTERVAL_S = 2.0
BROKER_PROBE_TIMEOUT_S = 3.0
#: Longest wait for an offset commit in the consume loop, seconds (then it is retried at the next interval).
COMMIT_TIMEOUT_S = 10.0
#: The final commit on stop gets what is left of the shutdown deadline, but at least this many seconds.
FINAL_COMMIT_MIN_S = 1.0
#: Longest wait for the consumer or the dead-letter producer to close on stop, seconds.
CLOSE_TIMEOUT_S = 5.0


def _observe_lag(_: CallbackOptions) -> Iterable[Observation]:
    for src in list(_SOURCES):
        for (topic, partition), lag in list(src.lag.items()):
            yield Observation(lag, {"topic": topic, "partition": partition})


CONSUMER_LAG = telemetry.meter.create_observable_gauge(
    "ragpulse_kafka_consumer_lag",
    callbacks=[_observe_lag],
    unit="{message}",
    description="Kafka messages not yet judged and stored: high-water mark minus next offset to commit",
)


@dataclass(slots=True)
class _Polled:
    """A polled record, decoded: ``trace`` (an event) or ``spans`` (OTLP), or the dead-letter ``reason``/``code``."""

    rec: ConsumerRecord[bytes, bytes]
    trace: Trace | None
    reason: str | None
    code: str | None
    spans: list[SpanData] | None = None


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._source._on_revoked(frozenset(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._source._on_assigned(frozenset(assigned))


class KafkaSource:
    """Consumes trace events from ``settings.topics`` in consumer group ``settings.group_id``.

    Use as an async context manager (``async with KafkaSource(settings.kafka, engine) as src``); the consume
    loop runs in a background task until :meth:`stop`.

    Args:
        settings: the ``kafka`` section (see :mod:`ragpulse.ingest.kafka_client`); ``bootstrap_servers`` must
            be set.
        shutdown_deadline_s: default drain deadline of :meth:`stop` (the ``engine.shutdown_deadline_s`` setting).
        log_text: the ``log.text`` setting: dead-letter reasons may quote the bad value.
        otlp: the ``otlp`` section: how spans of OTLP topics (``topic_encodings``) are assembled into traces.
        own_service: the ``export.service_name`` setting; OTLP spans of that service are ignored.
        sink: the engine (a :class:`~ragpulse.protocols.TraceSink`).
        dead_letters: also keep every dead letter here (the store's ``dead_letters`` table), beside the
            dead-letter topic.
        client_id: Kafka client id.
        commit_interval_s: how often finished offsets are committed, seconds.
        max_batch: most records taken from one poll (bounds memory).
        revoke_wait_s: how long a revocation waits for in-flight traces of the revoked partitions, seconds.

    Raises:
        ConfigError: on construction, for missing/invalid Kafka settings.
        IngestError: from :meth:`start` when the brokers cannot be reached.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        sink: TraceSink,
        *,
        shutdown_deadline_s: float = 30.0,
        log_text: bool = False,
        otlp: OtlpSettings | None = None,
        own_service: str = "ragpulse",
        dead_letters: DeadLetterSink | None = None,
        client_id: str = "ragpulse",
        commit_interval_s: float = 1.0,
        max_batch: int = 500,
        revoke_wait_s: float = 10.0,
    ) -> None:
        self._settings = settings
        self._shutdown_deadline_s = shutdown_deadline_s
        self._log_text = log_text
        self._own_service = own_service
        self._dead_letters = dead_letters
        self._sink = sink
        self._opts = client_options(settings)
        self._client_id = client_id
        self._commit_interval_s = commit_interval_s
        self._max_batch = max_batch
        self._revoke_wait_s = revoke_wait_s
        self._tracker = OffsetTracker()
        #: OTLP topics and their encodings; the assembly of their spans (``None`` without OTLP topics).
        self._encodings = {t: e for t, e in settings.topic_encodings.items() if e in OTLP_ENCODINGS}
        self._otlp = KafkaOtlp(otlp or OtlpSettings()) if self._encodings else None
        self._otlp_task: asyncio.Task[None] | None = None
        self._pending: deque[_Polled] = deque()
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._paused = False
        self._connected = False
        self._broker_ok = True
        self._probe: asyncio.Task[None] | None = None
        self._last_commit = 0.0
        self._progress = asyncio.Event()
        #: ``{(topic, partition): lag}`` as last computed (messages).
        self.lag: dict[tuple[str, int], int] = {}
        #: Counters: ``received`` (valid traces), ``dead_lettered``, ``committed`` (commit calls), ``paused``;
        #: ``otlp_dropped``: OTLP messages whose traces were dropped from assembly (revocation, stop), not committed.
        self.stats: dict[str, int] = {
            "received": 0,
            "dead_lettered": 0,
            "committed": 0,
            "paused": 0,
            "otlp_dropped": 0,
        }

    # -- life cycle ------------------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """True while the consumer is started, its loop is running and the brokers answered the last probe
        (a metadata request every :data:`BROKER_PROBE_INTERVAL_S`; for ``/readyz``)."""
        return self._connected and self._broker_ok and self._task is not None and not self._task.done()

    async def _probe_brokers(self) -> None:
        """Keep :attr:`connected` following the broker connection: a metadata request every
        :data:`BROKER_PROBE_INTERVAL_S`, failed after :data:`BROKER_PROBE_TIMEOUT_S`."""
        assert self._consumer is not None
        while not self._stopping:
            try:
                async with asyncio.timeout(BROKER_PROBE_TIMEOUT_S):
                    await self._consumer.topics()
                ok = True
            except (KafkaError, TimeoutError, OSError):
                ok = False
            if ok != self._broker_ok:
                if ok:
                    log.info("kafka_brokers_reachable")
                else:
                    log.warning("kafka_brokers_unreachable", bootstrap=self._settings.bootstrap_servers)
                self._broker_ok = ok
            await asyncio.sleep(BROKER_PROBE_INTERVAL_S)

    @property
    def ready(self) -> bool:
        """:class:`~ragpulse.protocols.Source` readiness: :attr:`connected`."""
        return self.connected

    async def aclose(self) -> None:
        """:class:`~ragpulse.protocols.Source` close: :meth:`stop` with the default deadline."""
        await self.stop()

    async def start(self) -> None:
        """Connect the consumer and the dead-letter producer and start the consume loop.

        Raises:
            IngestError: the brokers cannot be reached (``retriable=True``).
        """
        if self._consumer is not None:
            raise RuntimeError("KafkaSource already started")
        s = self._settings
        fetch = max(1024 * 1024, s.max_message_bytes + 64 * 1024)
        self._consumer = AIOKafkaConsumer(
            client_id=self._client_id,
            group_id=s.group_id,
            enable_auto_commit=False,
            auto_offset_reset=s.auto_offset_reset,
            max_partition_fetch_bytes=fetch,
            **self._opts,
        )
        self._producer = AIOKafkaProducer(
            client_id=f"{self._client_id}-dlq",
            acks="all",
            max_request_size=max(fetch, 16 * 1024 * 1024),
            **self._opts,
        )
        try:
            await self._producer.start()
            await self._consumer.start()
        except KafkaError as e:
            await self._close_clients()
            raise IngestError(f"cannot connect to Kafka at {s.bootstrap_servers}: {e}", retriable=True) from e
        topics = list(dict.fromkeys([*s.topics, *s.topic_encodings]))
        self._consumer.subscribe(topics, listener=_Rebalance(self))
        self._connected = True
        _SOURCES.add(self)
        self._task = asyncio.create_task(self._run(), name="ragpulse-kafka")
        if self._otlp is not None:
            self._otlp_task = asyncio.create_task(self._release_otlp(self._otlp), name="ragpulse-kafka-otlp")
        self._probe = asyncio.create_task(self._probe_brokers(), name="ragpulse-kafka-probe")
        log.info("kafka_started", topics=topics, group=s.group_id, otlp_topics=sorted(self._encodings))

    async def stop(self, deadline_s: float | None = None) -> None:
        """Stop consuming, wait for in-flight traces (up to ``deadline_s``, default ``shutdown_deadline_s``),
        commit what is done and leave the group. Idempotent. Records read but not handed to the engine are
        not committed and will be redelivered."""
        if self._stopping:
            return
        self._stopping = True
        deadline = time.monotonic() + (deadline_s if deadline_s is not None else self._shutdown_deadline_s)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=2.0)
            except (TimeoutError, asyncio.CancelledError):
                await cancel_and_wait(self._task, swallow_errors=True)
            except Exception:
                log.exception("kafka_loop_failed")
        for aux in (self._probe, self._otlp_task):
            if aux is not None:
                await cancel_and_wait(aux)
        self._pending.clear()
        self._drop_otlp(None)  # traces still in assembly: their messages stay uncommitted and are redelivered
        await self._wait_in_flight(None, deadline - time.monotonic())
        if self._tracker.in_flight():
            log.warning("kafka_stop_in_flight", in_flight=self._tracker.in_flight())
        # The final commit gets what is left of the deadline (at least a moment): with the brokers gone it is
        # skipped rather than waited for — uncommitted offsets are redelivered anyway.
        await self._commit(force=True, timeout_s=max(FINAL_COMMIT_MIN_S, deadline - time.monotonic()))
        self._connected = False
        _SOURCES.discard(self)
        await self._close_clients()
        log.info("kafka_stopped", committed=self.stats["committed"])

    async def _close_clients(self) -> None:
        for client in (self._consumer, self._producer):
            if client is not None:
                try:  # leaving the group / flushing needs the brokers: bounded when they are gone
                    async with asyncio.timeout(CLOSE_TIMEOUT_S):
                        await client.stop()
                except TimeoutError:
                    log.warning(
                        "kafka_close_timeout", client=type(client).__name__, timeout_s=CLOSE_TIMEOUT_S
                    )
                except asyncio.CancelledError:
                    # aiokafka's consumer.stop() lets its fetcher's CancelledError escape when the brokers are
                    # gone; only a cancellation of this task itself goes on up
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise
                    log.debug("kafka_close_failed", client=type(client).__name__, error="CancelledError")
                except Exception as e:
                    log.debug("kafka_close_failed", client=type(client).__name__, error=str(e))

    async def __aenter__(self) -> KafkaSource:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- consume loop ----------------------------------------------------------------------------------------
    async def wait_failed(self) -> BaseException:
        """Wait until the consume loop ends on its own (not through :meth:`stop`) and return why.

        ``ragpulse serve`` races this against its stop signal so that a dead consumer stops the process
        (and its orchestrator restarts it) instead of idling while looking alive.
        """
        assert self._task is not None, "not started"
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            if not self._task.cancelled():
                raise
            return RuntimeError("Kafka consume loop was cancelled")
        except Exception as e:
            return e
        return RuntimeError("Kafka consume loop ended")

    async def _run(self) -> None:
        try:
            await self._loop()
        except Exception:
            log.exception("kafka_loop_failed")
            raise

    async def _loop(self) -> None:
        assert self._consumer is not None
        c = self._consumer
        while not self._stopping:
            try:
                if self._pending and self._has_room():
                    self._resume()
                    await self._feed()
                elif self._pending:
                    self._pause()
                    await self._extend(await c.getmany(timeout_ms=100))
                else:
                    self._resume()
                    await self._extend(await c.getmany(timeout_ms=500, max_records=self._max_batch))
                await self._commit()
            except asyncio.CancelledError:
                raise
            except KafkaError as e:
                log.warning("kafka_error", error=str(e))
                await asyncio.sleep(1.0)

    def _has_room(self) -> bool:
        return self._sink.has_room() and (self._otlp is None or not self._otlp.saturated)

    async def _extend(self, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> None:
        """Decode a poll batch and tell the sink about its traces once (``prefetch``: the engine looks up
        their final judgements in one store query, so a redelivery of judged content is not judged again)."""
        polled = [self._decode(rec) for records in batch.values() for rec in records]
        if not polled:
            return
        prefetch = getattr(self._sink, "prefetch", None)
        traces = [p.trace for p in polled if p.trace is not None]
        if prefetch is not None and traces:
            await prefetch(traces)
        self._pending.extend(polled)

    def _pause(self) -> None:
        assert self._consumer is not None
        parts = self._consumer.assignment()
        if parts:
            self._consumer.pause(*parts)
        if not self._paused:
            self._paused = True
            self.stats["paused"] += 1
            log.debug("kafka_paused", partitions=len(parts))

    def _resume(self) -> None:
        if self._paused:
            assert self._consumer is not None
            self._consumer.resume(*self._consumer.assignment())
            self._paused = False
            log.debug("kafka_resumed")

    def _decode(self, rec: ConsumerRecord[bytes, bytes]) -> _Polled:
        """Parse one record: a trace or OTLP spans, or the dead-letter reason and code (never raises)."""
        encoding = self._encodings.get(rec.topic)
        try:
            if encoding is not None:
                spans = decode_otlp_message(
                    rec.value, encoding, self._own_service, self._settings.max_message_bytes
                )
                return _Polled(rec, None, None, None, spans)
            trace = parse_event(
                rec.value,
                max_bytes=self._settings.max_message_bytes,
                log_text=self._log_text,
            )
        except EventRejected as e:
            return _Polled(rec, None, e.reason, e.code)
        except IngestError as e:  # OTLP only
            return _Polled(rec, None, f"malformed_otlp: {e}", "malformed")
        except Exception as e:  # a bug for one message must not stop the partition (or crash-loop serve)
            log.error(
                "kafka_message_failed",
                error_type=type(e).__name__,
                topic=rec.topic,
                partition=rec.partition,
                offset=rec.offset,
                exc_info=True,
            )
            return _Polled(rec, None, f"internal_error: {type(e).__name__}", "internal_error")
        return _Polled(rec, trace, None, None)

    async def _feed(self) -> None:
        assert self._consumer is not None
        assigned = self._consumer.assignment()
        while self._pending and not self._stopping and self._has_room():
            polled = self._pending.popleft()
            rec = polled.rec
            tp = TopicPartition(rec.topic, rec.partition)
            if tp not in assigned:
                continue  # revoked meanwhile: the new owner reads it
            self._tracker.add(tp, rec.offset)
            if polled.spans is not None:
                assert self._otlp is not None
                if not self._otlp.take(rec, tp, polled.spans):
                    self._tracker.done(tp, rec.offset)  # nothing of it held (empty, late spans only)
                continue
            if polled.trace is None:
                await self._dead_letter(
                    rec, polled.reason or "internal_error", polled.code or "internal_error"
                )
                self._tracker.done(tp, rec.offset)
                continue
            self.stats["received"] += 1
            await self._sink.submit(polled.trace, ack=self._ack_for(rec))

    def _ack_for(self, rec: ConsumerRecord[bytes, bytes]) -> Any:
        tp = TopicPartition(rec.topic, rec.partition)

        async def ack(result: TraceResult, ok: bool) -> None:
            if not ok:
                await self._dead_letter(rec, not_stored_reason(), "not_stored")
            self._tracker.done(tp, rec.offset)
            self._progress.set()

        return ack

    # -- OTLP topics -----------------------------------------------------------------------------------------
    async def _release_otlp(self, otlp: KafkaOtlp, tick_s: float = 0.05) -> None:
        """Submit the traces the assembler releases, each with an ack that finishes its messages."""
        prefetch = getattr(self._sink, "prefetch", None)
        while not self._stopping:
            released = otlp.release_due()
            traces = [t for _, t in released if t is not None]
            if prefetch is not None and traces:
                await prefetch(traces)
            for tid, trace in released:
                if trace is None:
                    await self._finish(
                        otlp.resolve(tid, "unmappable: the spans could not be mapped", "unmappable")
                    )
                    continue
                self.stats["received"] += 1
                try:
                    await self._sink.submit(trace, ack=self._otlp_ack(otlp, tid))
                except Exception as e:  # the engine refused it (closing): its messages stay uncommitted
                    log.error("kafka_otlp_submit_failed", trace_id=tid, error=f"{type(e).__name__}: {e}")
            await asyncio.sleep(tick_s)

    def _otlp_ack(self, otlp: KafkaOtlp, tid: str) -> Any:
        async def ack(result: TraceResult, ok: bool) -> None:
            if ok:
                await self._finish(otlp.resolve(tid))
            else:
                await self._finish(otlp.resolve(tid, not_stored_reason(), "not_stored"))

        return ack

    async def _finish(self, msgs: list[HeldMessage]) -> None:
        """Messages whose traces are all stored or failed: dead-letter those with a failed trace, mark done."""
        for msg in msgs:
            if msg.reason is not None:
                await self._dead_letter(msg.rec, msg.reason, msg.code or "internal_error")
            self._tracker.done(msg.tp, msg.rec.offset)
        if msgs:
            self._progress.set()

    def _drop_otlp(self, tps: frozenset[TopicPartition] | None) -> None:
        """Drop traces in assembly with spans in ``tps`` (default all); their messages are never committed here."""
        if self._otlp is None:
            return
        msgs = self._otlp.drop(tps)
        for msg in msgs:
            self._tracker.abandon(msg.tp, msg.rec.offset)
        if msgs:
            self.stats["otlp_dropped"] += len(msgs)
            log.info("kafka_otlp_assembly_dropped", messages=len(msgs))

    async def _wait_in_flight(self, tps: frozenset[TopicPartition] | None, wait_s: float) -> None:
        """Wait until no trace of ``tps`` (default: all) is in flight, at most ``wait_s`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, wait_s)):
                while self._tracker.in_flight(tps):
                    self._progress.clear()
                    await self._progress.wait()

    async def _dead_letter(self, rec: ConsumerRecord[bytes, bytes], reason: str, code: str) -> None:
        """Produce ``rec`` to the dead-letter topic, retrying until it is accepted or the source stops."""
        assert self._producer is not None
        topic = dlq_topic_for(self._settings, rec.topic)
        headers = [*list(rec.headers or ()), *self._dlq_headers(rec, reason)]
        value = rec.value
        delay = 0.2
        while True:
            try:
                await self._producer.send_and_wait(topic, value=value, key=rec.key, headers=headers)
                break
            except MessageSizeTooLargeError:
                limit = self._settings.max_message_bytes
                value = (value or b"")[:limit]
                headers = [*headers, ("ragpulse.dlq.truncated", b"true")]
            except KafkaError as e:
                if self._stopping:
                    raise IngestError(f"dead-letter produce to {topic} failed: {e}", retriable=True) from e
                log.warning("kafka_dlq_retry", topic=topic, error=str(e))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.stats["dead_lettered"] += 1
        telemetry.TRACES_REJECTED.add(1, {"source": "kafka", "reason": code})
        await self._keep_dead_letter(rec, reason, code, topic)
        log.warning(
            "kafka_dead_lettered",
            reason=reason,
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            dlq=topic,
        )

    async def _keep_dead_letter(
        self, rec: ConsumerRecord[bytes, bytes], reason: str, code: str, dlq: str
    ) -> None:
        """Also write the dead letter to the store's table (the topic already holds it: a failure is logged)."""
        if self._dead_letters is None:
            return
        meta = {
            "topic": rec.topic,
            "partition": rec.partition,
            "offset": rec.offset,
            "code": code,
            "dlq_topic": dlq,
            "key": rec.key.decode("utf-8", "replace") if rec.key else None,
        }
        try:
            await self._dead_letters.write_dead_letter("kafka", reason, rec.value or b"", meta)
        except RagpulseError as e:
            log.warning("kafka_dead_letter_not_stored", error=str(e), topic=rec.topic, offset=rec.offset)

    @staticmethod
    def _dlq_headers(rec: ConsumerRecord[bytes, bytes], reason: str) -> list[tuple[str, bytes]]:
        vals = (reason, rec.topic, str(rec.partition), str(rec.offset))
        return [(k, v.encode("utf-8")) for k, v in zip(DLQ_HEADERS, vals, strict=True)]

    # -- commits, rebalances, lag ----------------------------------------------------------------------------
    async def _commit(
        self,
        *,
        force: bool = False,
        tps: frozenset[TopicPartition] | None = None,
        timeout_s: float = COMMIT_TIMEOUT_S,
    ) -> None:
        now = time.monotonic()
        if not force and now - self._last_commit < self._commit_interval_s:
            return
        self._last_commit = now
        assert self._consumer is not None
        offsets = self._tracker.to_commit(tps)
        if offsets:
            try:
                async with asyncio.timeout(timeout_s):  # aiokafka waits for a coordinator without limit
                    await self._consumer.commit(offsets)
            except TimeoutError:
                log.warning("kafka_commit_skipped", reason="timeout", timeout_s=round(timeout_s, 1),
                            partitions=len(offsets))  # fmt: skip
            except KafkaError as e:
                log.warning("kafka_commit_failed", error=str(e), partitions=len(offsets))
            else:
                self._tracker.mark_committed(offsets)
                self.stats["committed"] += 1
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LAG_QUERY_TIMEOUT_S * 2):
                await self._update_lag()

    async def _update_lag(self) -> None:
        """Recompute :attr:`lag`: high-water mark minus the oldest unfinished offset.

        The high-water mark comes from fetch responses; while partitions are paused (no fetches) it is asked
        from the brokers (end offsets), so the gauge stays current during back-pressure."""
        assert self._consumer is not None
        lag: dict[tuple[str, int], int] = {}
        assigned = self._consumer.assignment()
        ends: dict[TopicPartition, int] = {}
        if self._paused and assigned:
            # Paused partitions are not fetched, so fetch responses no longer carry their high-water marks: ask
            # the brokers (ListOffsets), or the gauge would freeze exactly when the backlog grows.
            try:
                async with asyncio.timeout(LAG_QUERY_TIMEOUT_S):
                    ends = await self._consumer.end_offsets(list(assigned))
            except (KafkaError, TimeoutError) as e:
                log.debug("kafka_end_offsets_failed", error=str(e))
        held: dict[TopicPartition, int] = {}
        for polled in self._pending:
            rec = polled.rec
            tp = TopicPartition(rec.topic, rec.partition)
            held[tp] = min(held.get(tp, rec.offset), rec.offset)
        for tp in assigned:
            hw = max((h for h in (self._consumer.highwater(tp), ends.get(tp)) if h is not None), default=None)
            if hw is None:
                continue
            p = self._tracker.get(tp)
            base: int | None = None
            if p is not None:
                base = p.first_pending if p.first_pending is not None else p.committable
            if base is None:  # nothing of tp handed to the engine yet: read but held records count as lag
                base = held.get(tp)
            if base is None:
                try:
                    base = await self._consumer.position(tp)
                except KafkaError:
                    continue
            lag[(tp.topic, tp.partition)] = max(0, hw - base)
        self.lag = lag

    async def _on_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        if not revoked:
            return
        self._pending = deque(
            p for p in self._pending if TopicPartition(p.rec.topic, p.rec.partition) not in revoked
        )
        self._drop_otlp(revoked)
        await self._wait_in_flight(revoked, self._revoke_wait_s)
        await self._commit(force=True, tps=revoked)
        self._tracker.forget(revoked)
        for tp in revoked:
            self.lag.pop((tp.topic, tp.partition), None)
        log.info("kafka_partitions_revoked", partitions=sorted(f"{t.topic}-{t.partition}" for t in revoked))

    def _on_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        if self._paused and assigned and self._consumer is not None:
            self._consumer.pause(*assigned)
        log.info("kafka_partitions_assigned", partitions=sorted(f"{t.topic}-{t.partition}" for t in assigned))
