"""Timestamps (issue 11 item 5): epoch units by magnitude, the plausibility rule, and Kafka events using it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.timestamps import epoch_to_datetime, is_plausible, plausible_times

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
RECEIVED = datetime(2026, 3, 14, 12, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [1773489600, 1773489600.0, 1773489600000, 1773489600000000, 1773489600000000000],
    ids=["s", "s-float", "ms", "us", "ns"],
)
def test_epoch_unit_follows_magnitude(value: float) -> None:
    assert epoch_to_datetime(value) == NOON


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 10**400, 1e300, -1e300])
def test_unrepresentable_epoch_is_none(value: float) -> None:
    assert epoch_to_datetime(value) is None


def test_plausibility_bounds() -> None:
    assert is_plausible(datetime(2000, 1, 1, tzinfo=UTC), RECEIVED)
    assert not is_plausible(datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC), RECEIVED)
    assert is_plausible(RECEIVED + timedelta(days=1), RECEIVED)
    assert not is_plausible(RECEIVED + timedelta(days=1, seconds=1), RECEIVED)


def test_plausible_times_replaces_end_and_rebuilds_start() -> None:
    start, end, replaced = plausible_times(
        datetime(1970, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC), RECEIVED, 2.0
    )
    assert replaced is True
    assert end == RECEIVED
    assert start == RECEIVED - timedelta(seconds=2)
    assert plausible_times(None, None, RECEIVED) == (None, None, False)
    assert plausible_times(NOON, RECEIVED, RECEIVED) == (NOON, RECEIVED, False)


def _parse(**fields: Any) -> Any:
    return parse_event(json.dumps({"traceId": "t", **fields}).encode(), received_at=RECEIVED)


def test_epoch_seconds_event_is_not_read_as_milliseconds() -> None:
    t = _parse(timestamp=1773489600, latencyMs=1500)
    assert t.end_time == NOON
    assert t.start_time == NOON - timedelta(seconds=1.5)
    assert t.time_replaced is False


@pytest.mark.parametrize(
    "timestamp",
    [
        -1,
        0,
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "1999-12-31T23:59:59Z",
    ],
)
def test_implausible_event_time_is_replaced_by_receive_time(timestamp: Any) -> None:
    t = _parse(timestamp=timestamp, latencyMs=250)
    assert t.time_replaced is True
    assert t.end_time == RECEIVED
    assert t.start_time == RECEIVED - timedelta(seconds=0.25)


def test_more_than_a_day_ahead_is_replaced() -> None:
    ahead = RECEIVED + timedelta(days=1, minutes=1)
    t = _parse(timestamp=ahead.isoformat())
    assert t.time_replaced is True
    assert t.end_time == RECEIVED


@pytest.mark.parametrize("field", ["latencyMs", "latency_ms"])
@pytest.mark.parametrize("number", ["1e400", "-1e400"])
def test_latency_beyond_a_float_is_stored_as_unknown(field: str, number: str) -> None:
    """Issue 27 item 5: as docs/ingestion.md says (it used to be dead-lettered ``not_json``)."""
    raw = b'{"traceId": "t", "timestamp": 1773489600000, "' + field.encode() + b'": ' + number.encode() + b"}"
    t = parse_event(raw, received_at=RECEIVED)
    assert t.latency_s is None
    assert t.end_time == datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
    assert t.start_time is None


def test_timestamp_beyond_a_float_is_replaced_by_the_receive_time() -> None:
    t = parse_event(b'{"traceId": "t", "timestamp": 1e400, "latencyMs": 250}', received_at=RECEIVED)
    assert t.end_time == RECEIVED
    assert t.time_replaced is True


@pytest.mark.parametrize(
    "raw",
    [
        b'{"traceId": "t", "documents": [{"id": "d", "content": "c", "score": 1e400}]}',
        b'{"traceId": "t", "attributes": {"n": -1e400}}',
        b'{"traceId": "t", "latencyMs": NaN}',
    ],
)
def test_a_number_beyond_a_float_elsewhere_is_still_not_json(raw: bytes) -> None:
    with pytest.raises(EventRejected) as ei:
        parse_event(raw, received_at=RECEIVED)
    assert ei.value.code == "not_json"


@pytest.mark.parametrize(
    ("latency", "refused"),
    [
        ("1e300", "1e+297 s is above 86400 s (one day): latency unknown"),
        ("9" * 400, "inf s is not a finite number: latency unknown"),
        ("86400001", "86400.001 s is above 86400 s (one day): latency unknown"),
        ("-1", "-0.001 s is negative: latency unknown"),
    ],
    ids=["1e300", "400-digit", "a-day-and-1-ms", "negative"],
)
def test_implausible_latency_is_unknown_with_the_reason(latency: str, refused: str) -> None:
    """The one latency rule (``timestamps.plausible_latency``, as OTLP): 0 to one day, else unknown — never a
    latency of 1e297 s stored as is, never a trace dead-lettered for its latency."""
    raw = b'{"traceId": "t", "timestamp": 1773489600000, "latencyMs": ' + latency.encode() + b"}"
    t = parse_event(raw, received_at=RECEIVED)
    assert t.end_time == NOON
    assert t.latency_s is None
    assert t.start_time is None  # no start time from an unknown latency
    assert t.attributes == {"latency_refused": refused}


def test_a_day_of_latency_is_still_plausible() -> None:
    t = parse_event(
        b'{"traceId": "t", "timestamp": 1773489600000, "latencyMs": 86400000}', received_at=RECEIVED
    )
    assert t.latency_s == 86400.0
    assert t.start_time == NOON - timedelta(days=1)
    assert "latency_refused" not in t.attributes


def test_wrong_clock_keeps_the_latency_and_records_the_skew() -> None:
    """``timestamp`` 1 (1970-01-01T00:00:01Z, a producer whose clock was never set) with ``latencyMs`` 250:
    the end becomes the receive time, the latency stays and the skew is recorded (end minus receive time)."""
    t = parse_event(b'{"traceId": "t", "timestamp": 1, "latencyMs": 250}', received_at=RECEIVED)
    assert (t.end_time, t.latency_s, t.time_replaced) == (RECEIVED, 0.25, True)
    assert t.start_time == RECEIVED - timedelta(milliseconds=250)
    assert t.attributes == {"clock_skew_s": 1.0 - RECEIVED.timestamp()}


async def test_replaced_time_is_stored_with_its_flag(pg_url: str) -> None:
    from ragpulse.config import Settings
    from ragpulse.model import TraceOutcome, TraceResult
    from ragpulse.store import PostgresStore

    store = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        t = _parse(timestamp=1773489600 * 1000 * 1000 * 1000 * 10)  # year ~2532: more than a day ahead
        await store.write_results([TraceResult(trace=t, outcome=TraceOutcome.EVALUATED)])
        got = await store.get_trace("t")
        assert got is not None
        assert got.trace.time_replaced is True
        assert got.trace.end_time == RECEIVED  # not 1970, not 2532
    finally:
        await store.close()
