"""Kafka event and timestamp rules at their edges, where the mutation run (docs/dev/testing.md) found no test
looking: fields carried both ways, documents from parallel id/context lists, time zones, the plausibility
window's ends and the epoch-unit boundaries."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from ragpulse.errors import IngestError
from ragpulse.ingest.events import parse_event, trace_to_event
from ragpulse.ingest.kafka_otlp import decode_otlp_message
from ragpulse.ingest.otlp.decode import decode_json, decompress
from ragpulse.ingest.timestamps import (
    EARLIEST,
    MAX_AHEAD,
    epoch_to_datetime,
    is_plausible,
    minus_latency,
    plausible_times,
)
from ragpulse.model import Document, Trace

RECEIVED = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _parse(**event: object) -> Trace:
    return parse_event(json.dumps({"traceId": "t-1", **event}).encode(), received_at=RECEIVED)


@pytest.mark.parametrize("style", ["camel", "snake"])
def test_span_id_and_not_evaluable_are_carried(style: str) -> None:
    keys = ("spanId", "notEvaluable") if style == "camel" else ("span_id", "not_evaluable")
    t = _parse(**{keys[0]: "00f067aa0ba902b7", keys[1]: "rag_endpoint_failed: HTTP 500"})
    assert (t.span_id, t.not_evaluable) == ("00f067aa0ba902b7", "rag_endpoint_failed: HTTP 500")


def test_an_event_written_from_a_trace_reads_back_as_that_trace() -> None:
    trace = Trace(
        trace_id="t-9",
        span_id="00f067aa0ba902b7",
        question="Q?",
        answer="A.",
        context="the whole context",
        not_evaluable="rag_endpoint_failed: HTTP 500",
        documents=(
            Document(id="d1", content="c1", rank=0),
            Document(content="c2", metadata={"k": "v"}, rank=1),
        ),
    )
    event = trace_to_event(trace)
    assert event["spanId"] == "00f067aa0ba902b7"
    assert event["context"] == "the whole context"
    assert event["notEvaluable"] == "rag_endpoint_failed: HTTP 500"
    assert event["documents"] == [{"id": "d1", "content": "c1"}, {"content": "c2", "metadata": {"k": "v"}}]
    back = parse_event(json.dumps(event).encode(), received_at=RECEIVED)
    assert (back.span_id, back.context, back.not_evaluable) == (
        trace.span_id,
        trace.context,
        trace.not_evaluable,
    )
    assert [(d.id, d.content, d.metadata) for d in back.documents] == [
        ("d1", "c1", {}),
        (None, "c2", {"k": "v"}),
    ]


def test_documents_from_parallel_lists_of_unequal_length() -> None:
    t = _parse(retrievedDocIds=["d1", None, "d3"], contexts=["c1", None])
    assert [(d.id, d.content, d.rank) for d in t.documents] == [("d1", "c1", 0), (None, "", 1), ("d3", "", 2)]
    t = _parse(retrieved_doc_ids=["d1"], contexts=["c1", "c2"])
    assert [(d.id, d.content) for d in t.documents] == [("d1", "c1"), (None, "c2")]
    t = _parse(documents=[{"id": 7, "text": "from text"}, {"content": None}])
    assert [(d.id, d.content) for d in t.documents] == [("7", "from text"), (None, "")]


def test_an_error_object_without_type_or_message_is_kept_as_its_json() -> None:
    assert _parse(error={"详情": "数据库超时"}).error == '{"详情": "数据库超时"}'
    long = _parse(error={"detail": "x" * 500}).error
    assert long is not None
    assert len(long) == 200


def test_timestamps_without_a_zone_are_utc_and_others_are_converted() -> None:
    assert _parse(timestamp="2026-12-04T10:00:00").end_time == datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    got = _parse(timestamp="2026-12-04T11:00:00+01:00").end_time
    assert got == datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    assert got is not None
    assert got.utcoffset() == timedelta(0)


def test_plausibility_window_includes_both_ends() -> None:
    assert is_plausible(EARLIEST, RECEIVED)
    assert not is_plausible(EARLIEST - timedelta(microseconds=1), RECEIVED)
    assert is_plausible(RECEIVED + MAX_AHEAD, RECEIVED)
    assert not is_plausible(RECEIVED + MAX_AHEAD + timedelta(microseconds=1), RECEIVED)
    # naive times are UTC, and a receive time at the end of the calendar does not overflow
    assert is_plausible(datetime(2026, 12, 4), datetime(2026, 12, 4))
    assert not is_plausible(datetime(1999, 12, 31), RECEIVED)
    assert is_plausible(datetime(2026, 12, 4, tzinfo=UTC), datetime(9999, 12, 31, 23, tzinfo=UTC))


def test_only_a_replaced_time_is_derived_from_the_latency() -> None:
    end = RECEIVED - timedelta(minutes=1)
    bad_start = datetime(1990, 1, 1, tzinfo=UTC)
    assert plausible_times(bad_start, end, RECEIVED, 2.0) == (end - timedelta(seconds=2), end, True)
    assert plausible_times(None, end, RECEIVED, 2.0) == (None, end, False)  # missing is not replaced
    assert plausible_times(bad_start, end, RECEIVED, None) == (None, end, True)


@pytest.mark.parametrize(
    ("latency", "start"),
    [
        (0.0, RECEIVED),
        (1.5, RECEIVED - timedelta(seconds=1.5)),
        (-1.0, None),
        (math.inf, None),
        (math.nan, None),
        (None, None),
    ],
)
def test_minus_latency(latency: float | None, start: datetime | None) -> None:
    assert minus_latency(RECEIVED, latency) == start


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1e11 - 1, 1e11 - 1),  # the largest value read as seconds
        (1e11, 1e8),  # from here on: milliseconds
        (1e14, 1e8),  # microseconds
        (1e17, 1e8),  # nanoseconds
        (-1e11, -1e8),
    ],
)
def test_epoch_unit_boundaries(value: float, seconds: float) -> None:
    assert epoch_to_datetime(value) == datetime.fromtimestamp(seconds, tz=UTC)


def test_an_empty_kafka_otlp_message_is_rejected_by_name() -> None:
    for value in (b"", None):
        with pytest.raises(IngestError, match=r"^empty message$"):
            decode_otlp_message(value, "otlp_json", "ragpulse", 1024)


@pytest.mark.parametrize("encoding", [None, "", "identity", " IDENTITY "])
def test_identity_encodings_pass_the_body_through(encoding: str | None) -> None:
    assert decompress(b"body", encoding, 4) == b"body"


LINK_TID = "4bf92f3577b34da6a3ce929d0e0e4736"
LINK_SID = "00f067aa0ba902b7"


@pytest.mark.parametrize("style", ["camel", "snake"])
def test_otlp_json_links_events_and_schema_urls(style: str) -> None:
    """Link ids in hex are read as ids, an event time out of ``fixed64``'s range is unset (the span is kept),
    and schema URLs are read in either key style."""
    schema, tun = ("schemaUrl", "timeUnixNano") if style == "camel" else ("schema_url", "time_unix_nano")
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "s",
        "links": [{"traceId": LINK_TID, "spanId": LINK_SID}],
        "events": [
            {"name": "ok", tun: "1764590000000000000"},
            {"name": "negative", tun: "-5"},
            {"name": "too big", tun: str(2**64)},
            {"name": "largest", tun: str(2**64 - 1)},
            {"name": "float", tun: 1.5e18},
        ],
    }
    doc = {
        "resourceSpans": [
            {schema: "https://r.example/1", "scopeSpans": [{schema: "https://s.example/2", "spans": [span]}]}
        ]
    }
    result = decode_json(json.dumps(doc))
    assert result.rejected_spans == 0, result.errors
    (rs,) = result.request.resource_spans
    assert (rs.schema_url, rs.scope_spans[0].schema_url) == ("https://r.example/1", "https://s.example/2")
    (got,) = rs.scope_spans[0].spans
    assert [(link.trace_id.hex(), link.span_id.hex()) for link in got.links] == [(LINK_TID, LINK_SID)]
    assert [(e.name, e.time_unix_nano) for e in got.events] == [
        ("ok", 1764590000000000000),
        ("negative", 0),
        ("too big", 0),
        ("largest", 2**64 - 1),
        ("float", 1500000000000000000),
    ]


def test_a_span_that_cannot_be_read_is_rejected_by_name_and_the_rest_kept() -> None:
    good = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "good"}
    doc = {
        "resourceSpans": [{"scopeSpans": [{"spans": [{**good, "spanId": "0" * 16, "name": "zero"}, good]}]}]
    }
    result = decode_json(json.dumps(doc))
    assert result.rejected_spans == 1
    assert result.errors == ["span 'zero': missing or all-zero spanId"]
    assert [s.name for s in result.request.resource_spans[0].scope_spans[0].spans] == ["good"]
