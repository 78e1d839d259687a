"""The one time parser of the API and the UI (``ragpulse.query``): Grafana's epoch milliseconds and relative
times, and a span ``since`` measured back from ``until`` so that changing the window of a Grafana link never
makes "since after until" (issue 30, item 3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ragpulse.errors import BadRequest
from ragpulse.query import bounds, parse_time, source_scope, window

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def test_epoch_milliseconds_and_grafana_relative_times() -> None:
    assert parse_time("1764921600000") == datetime(2025, 12, 5, 8, 0, tzinfo=UTC)
    assert parse_time("1764921600123") == datetime(2025, 12, 5, 8, 0, 0, 123000, tzinfo=UTC)
    assert parse_time("now-6h", now=NOW) == NOW - timedelta(hours=6)
    assert parse_time("now", now=NOW) == NOW
    assert parse_time("2026-12-01T10:00:00Z") == datetime(2026, 12, 1, 10, tzinfo=UTC)
    with pytest.raises(BadRequest, match="invalid time '12345'"):
        parse_time("12345")
    with pytest.raises(BadRequest, match="invalid time 'now-6x'"):
        parse_time("now-6x")


def test_a_span_since_is_measured_back_from_until() -> None:
    until = "1764921600000"  # a Grafana link's end, a year ago
    start, end = window("1h", until, timedelta(hours=24))
    assert (start, end) == (datetime(2025, 12, 5, 7, 0, tzinfo=UTC), datetime(2025, 12, 5, 8, 0, tzinfo=UTC))
    assert bounds("2h", None)[1] is None
    since, _ = bounds("1764918000000", until)
    assert since == datetime(2025, 12, 5, 7, 0, tzinfo=UTC)
    with pytest.raises(BadRequest, match="since must be before until"):
        window("1764925200000", until, timedelta(hours=24))


def test_source_choices() -> None:
    assert source_scope(None).excluded == ("replay", "api")
    assert source_scope("live").excluded == ("replay", "api")
    assert source_scope("live").no_runs  # replay --via traces carry a run id, whatever their source
    assert source_scope("all").model_dump() == {"only": None, "excluded": (), "no_runs": False}
    assert source_scope("otlp").model_dump() == {"only": "otlp", "excluded": (), "no_runs": False}
    assert source_scope("replay").model_dump() == {"only": "replay", "excluded": (), "no_runs": False}
    assert source_scope(None, run_id="r1").model_dump() == {"only": None, "excluded": (), "no_runs": False}
    assert source_scope(None, include_api=True).model_dump() == {
        "only": None,
        "excluded": (),
        "no_runs": False,
    }
    with pytest.raises(BadRequest, match="unknown source 'mqtt': one of live, kafka, otlp, replay, api, all"):
        source_scope("mqtt")
