"""Publish traces into ragpulse's own sources: Kafka events or OTLP/HTTP spans (``ragpulse send``, replay).

- :func:`publish_kafka` produces raw JSON event lines to a topic, keyed by their trace id, and waits until the
  brokers acknowledged every message (``acks=all``); a message refused for its size is reported and skipped.
- :func:`publish_otlp` posts traces as OpenInference spans (protobuf, ``POST /v1/traces``) to an OTLP/HTTP
  endpoint, in batches.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from ragpulse.config import KafkaSettings, OtlpSettings
from ragpulse.errors import IngestError
from ragpulse.ingest.kafka_client import client_options
from ragpulse.model import Trace
from ragpulse.textclean import clean_text, decode_utf8

__all__ = ["SkipCallback", "event_key", "otlp_traces_url", "publish_kafka", "publish_otlp"]


def event_key(value: bytes) -> bytes | None:
    """The message key for a JSON event: its ``traceId``/``trace_id`` as UTF-8, or ``None`` if unreadable.

    Read leniently like the consumer does (:mod:`ragpulse.textclean`): a lone surrogate or a cut UTF-8 character
    in the id becomes U+FFFD, so the key is the id the consumer will store.
    """
    try:
        ev = json.loads(decode_utf8(value))
    except (ValueError, RecursionError):  # sent as is, unkeyed: the consumer dead-letters it
        return None
    if not isinstance(ev, dict):
        return None
    tid = ev.get("traceId", ev.get("trace_id"))
    if not isinstance(tid, str | int) or isinstance(tid, bool) or not str(tid).strip():
        return None
    return clean_text(str(tid)).encode("utf-8")


#: ``on_skip(index, reason)``: told about a value that was not sent (0-based position in ``values``).
SkipCallback = Callable[[int, str], None]


async def publish_kafka(
    settings: KafkaSettings,
    values: Iterable[bytes],
    topic: str | None = None,
    on_skip: SkipCallback | None = None,
) -> int:
    """Produce every value to ``topic`` (default: the first of ``kafka_topics``); return how many were sent.

    Messages are keyed by trace id (:func:`event_key`) so redeliveries of one trace share a partition. A value
    the brokers refuse for itself (``MessageSizeTooLargeError``: larger than the producer's or the broker's
    limit) is reported to ``on_skip(index, reason)`` and the rest is sent.

    Raises:
        ConfigError: no bootstrap servers configured.
        IngestError: the brokers could not be reached or failed for another reason.
    """
    target = topic or settings.topics[0]
    producer = AIOKafkaProducer(
        client_id="ragpulse-send",
        acks="all",
        linger_ms=10,
        max_request_size=max(settings.max_message_bytes + 64 * 1024, 1024 * 1024),
        **client_options(settings),
    )
    n = 0

    def skip(index: int, e: KafkaError) -> None:
        if on_skip is None:
            raise IngestError(f"Kafka refused message {index + 1}: {e}")
        on_skip(index, f"too_large: {type(e).__name__}")

    async def settle(pending: list[tuple[int, asyncio.Future[Any]]]) -> int:
        ok = 0
        for index, fut in pending:
            try:
                await fut
                ok += 1
            except MessageSizeTooLargeError as e:  # the broker's own limit
                skip(index, e)
        pending.clear()
        return ok

    try:
        await producer.start()
        pending: list[tuple[int, asyncio.Future[Any]]] = []
        for index, value in enumerate(values):
            try:
                pending.append((index, await producer.send(target, value, key=event_key(value))))
            except MessageSizeTooLargeError as e:  # over the producer's max_request_size
                skip(index, e)
                continue
            if len(pending) >= 1000:
                n += await settle(pending)
        n += await settle(pending)
    except KafkaError as e:
        raise IngestError(
            f"publishing to Kafka topic {target} failed after {n} messages: {e}", retriable=True
        ) from e
    finally:
        await producer.stop()
    return n


def otlp_traces_url(settings: OtlpSettings, endpoint: str | None = None) -> str:
    """``endpoint`` (a base URL or a full ``…/v1/traces`` URL), else ``http://<otlp_http_address>/v1/traces``.

    Raises:
        ConfigError: no endpoint given and the OTLP/HTTP receiver is turned off.
    """
    from ragpulse.errors import ConfigError

    if endpoint:
        base = endpoint.rstrip("/")
        return base if base.endswith("/v1/traces") else f"{base}/v1/traces"
    if not settings.http_address.strip():
        raise ConfigError("otlp_http_address is empty; pass an OTLP/HTTP endpoint")
    return f"http://{settings.http_address.strip()}/v1/traces"


async def publish_otlp(
    settings: OtlpSettings, traces: Sequence[Trace], endpoint: str | None = None, *, batch_size: int = 50
) -> int:
    """Send ``traces`` as OpenInference spans to an OTLP/HTTP receiver through
    :class:`~ragpulse.ingest.otlp.client.OtlpTraceClient` (the one OTLP sender); return how many were sent.

    Each request holds up to ``batch_size`` traces; ``settings.token`` (``RAGPULSE_OTLP_TOKEN``) is sent as the
    bearer token when set.

    Raises:
        IngestError: the receiver is unreachable or answered with an HTTP error (body in the message).
    """
    from ragpulse.ingest.otlp.client import OtlpTraceClient

    url = otlp_traces_url(settings, endpoint)
    token = settings.token.get_secret_value() if settings.token is not None else None
    sent = 0
    async with OtlpTraceClient(url, timeout_s=30.0, token=token) as client:
        for i in range(0, len(traces), batch_size):
            batch = traces[i : i + batch_size]
            await client.send(batch)
            sent += len(batch)
    return sent
